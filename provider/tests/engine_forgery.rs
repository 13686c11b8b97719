//! Issue 17, finding 5, through the whole engine: forged message-layer
//! datagrams (an eager DATA, a rendezvous RTS) from unknown addresses, or
//! claiming a live peer's address without its session token, complete no
//! receive and take none; forged RTSs from many fake addresses turn the
//! target into no reflector (at most one small RESET per forged packet, no
//! CTS, no retries); the live session goes on unharmed.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use spray::msg::{CompKind, RecvFlags, RecvOp, SendOp};
use spray::rng::Rng;
use spray::time::Instant;
use spray::wire::msg::{MsgType, Repr as MsgRepr, HEADER_LEN as MSG_HEAD};
use spray::wire::srd::{Packet, PacketType, Repr, HEADER_LEN};
use spray::{Config, Engine, EpMode, PeerId};

type Node = Engine<Vec<u8>>;

fn engine(at: SocketAddr, nonce: u64) -> Node {
    let mut c = Config::new(EpMode::Rdm, at);
    c.nonce = nonce;
    Engine::new(c)
}

/// An SRD DATA packet carrying one message-layer datagram, as a forger
/// builds it: its own idea of nonce and token, PSN 0.
fn forged(
    port: u16,
    nonce: u64,
    token: u64,
    ty: MsgType,
    seq: u32,
    tag: u64,
    body: &[u8],
) -> Vec<u8> {
    let total = if ty == MsgType::Rts {
        1 << 20
    } else {
        body.len() as u64
    };
    let m = MsgRepr {
        ty,
        seq,
        total,
        offset: 0,
        tag: Some(tag),
        data: None,
    };
    let len = MSG_HEAD + body.len();
    let r = Repr {
        ty: PacketType::Data,
        flags: 0,
        path: 0,
        src_port: port,
        src_nonce: nonce,
        dst_token: token,
        psn: 0,
        psn_floor: 0,
        ack: None,
        payload_len: len as u16,
    };
    let mut b = vec![0u8; HEADER_LEN + len];
    r.emit(&mut b).unwrap();
    assert!(m.emit_into(&mut b[HEADER_LEN..]));
    b[HEADER_LEN + MSG_HEAD..].copy_from_slice(body);
    b
}

/// Carry every packet between the two engines at `now`; packets to any other
/// address are returned (what a forger's victims would receive).
fn carry(e: &mut [Node; 2], addrs: [SocketAddr; 2], now: Instant) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut buf = vec![0u8; 65536];
    let mut stray = Vec::new();
    for i in 0..2 {
        while let Some(t) = e[i].poll_transmit(now, &mut buf) {
            if t.dst == addrs[1 - i] {
                e[1 - i].handle_datagram(now, addrs[i], &buf[..t.len]);
            } else {
                stray.push((t.dst, buf[..t.len].to_vec()));
            }
        }
        e[i].handle_timeout(now);
    }
    stray
}

fn post_recv(e: &mut Node, ctx: u64, len: usize, tagged: bool) {
    e.post_recv(RecvOp {
        src: None,
        buf: vec![0u8; len],
        tag: tagged.then_some((0, u64::MAX)),
        context: ctx,
        flags: RecvFlags::default(),
        report: true,
    })
    .unwrap();
}

fn post_send(e: &mut Node, peer: PeerId, ctx: u64, data: Vec<u8>, tagged: bool) {
    e.post_send(SendOp {
        peer,
        buf: data,
        tag: tagged.then_some(ctx),
        data: None,
        context: ctx,
        report: true,
        delivery_complete: false,
        lazy: false,
    })
    .unwrap();
}

#[test]
fn forged_messages_complete_no_receive_and_reflect_nothing() {
    let addrs: [SocketAddr; 2] = [
        "198.18.0.1:7000".parse().unwrap(),
        "198.18.0.2:7000".parse().unwrap(),
    ];
    let mut e = [engine(addrs[0], 11), engine(addrs[1], 22)];
    let pb = e[0].peer(addrs[1]);
    let mut t = 1_000_000u64;
    let tick = |e: &mut [Node; 2], t: &mut u64| {
        *t += 10_000;
        carry(e, addrs, Instant::from_nanos(*t))
    };
    // A live session first (one message), then wildcard receives, tagged
    // and untagged, posted at B: 100 of each, all with a 64 KiB buffer.
    post_recv(&mut e[1], 1, 64, true);
    post_send(&mut e[0], pb, 1, vec![1; 64], true);
    for _ in 0..10 {
        tick(&mut e, &mut t);
    }
    let c = e[1].poll_completion().expect("the live session works");
    assert_eq!((c.kind, c.context, c.error), (CompKind::Recv, 1, None));
    while e[0].poll_completion().is_some() {}
    for k in 0..100 {
        post_recv(&mut e[1], 1000 + k, 65536, true);
        post_recv(&mut e[1], 2000 + k, 65536, false);
    }
    // The forgeries: eager DATA and RTS from 1000 fake addresses, and from
    // A's own address with A's nonce (a peer sees it) but a guessed token.
    let mut rng = Rng::new(5);
    let mut sent = 0u64;
    let mut sent_bytes = 0u64;
    for k in 0..2000u32 {
        let (from, nonce) = if k % 10 == 0 {
            (addrs[0], 11)
        } else {
            (
                SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0xc612_1000 + k)), 9000),
                rng.next_u64().max(1),
            )
        };
        let (ty, body) = if k % 2 == 0 {
            (MsgType::Data, vec![0xEE; 100])
        } else {
            (MsgType::Rts, Vec::new())
        };
        let p = forged(
            from.port(),
            nonce,
            rng.next_u64().max(1),
            ty,
            k % 4,
            7,
            &body,
        );
        sent += 1;
        sent_bytes += p.len() as u64;
        e[1].handle_datagram(Instant::from_nanos(t), from, &p);
    }
    // Four seconds of simulated time: every timer and retry that could fire.
    let mut stray = Vec::new();
    for _ in 0..400 {
        t += 10_000_000;
        stray.extend(carry(&mut e, addrs, Instant::from_nanos(t)));
    }
    assert!(
        e[1].poll_completion().is_none(),
        "a forged message completed a receive"
    );
    let s = e[1].srd_stats();
    println!(
        "{sent} forgeries ({sent_bytes} B): {} replies to others ({} B); bad token {} no session {} peers {}",
        stray.len(),
        stray.iter().map(|x| x.1.len()).sum::<usize>(),
        s.rx_bad_token,
        s.rx_no_session,
        s.peers
    );
    assert_eq!(
        s.rx_bad_token + s.rx_no_session,
        sent,
        "forgeries not all counted"
    );
    assert_eq!(s.peers, 1, "a forgery created a peer");
    assert_eq!(
        e[1].msg_stats().unexpected,
        0,
        "a forgery reached the message layer"
    );
    // No reflector: only RESETs, at most one per forged packet, none larger
    // than what provoked it, and none to the live peer's address.
    assert!(stray.len() as u64 <= sent);
    for (dst, p) in &stray {
        assert_ne!(*dst, addrs[0]);
        let r = Repr::parse(&Packet::new_checked(&p[..]).unwrap()).unwrap();
        assert_eq!(r.ty, PacketType::Reset, "{r:?} sent to {dst}");
        assert_eq!(p.len(), HEADER_LEN);
    }
    // Every posted receive is still there: 200 real messages take them all,
    // in posting order.
    for k in 0..100 {
        post_send(&mut e[0], pb, 1000 + k, vec![k as u8; 100], true);
        post_send(&mut e[0], pb, 2000 + k, vec![k as u8; 100], false);
    }
    let mut got = Vec::new();
    for _ in 0..200 {
        tick(&mut e, &mut t);
        while let Some(c) = e[1].poll_completion() {
            assert!(c.error.is_none());
            got.push(c.context);
        }
    }
    got.sort_unstable();
    let want: Vec<u64> = (1000..1100).chain(2000..2100).collect();
    assert_eq!(got, want, "posted receives were taken by forgeries");
}
