//! Forged packets through the real library on loopback (issue 17, findings 2
//! and 5): while two spray endpoints exchange checked tagged messages, a raw
//! UDP socket sends each of them packets claiming to come from the other
//! (its address in the header), with every packet type, guessed tokens and
//! nonces, and the 48-byte version-1 packets that used to wedge a session;
//! also forged eager messages and rendezvous requests from strangers at a
//! posted wildcard receive. The session is unharmed (every message intact,
//! no restart, no failure), the wildcard receive gets only the real message,
//! and every forgery is counted in FI_SPRAY_STATS.

mod common;
use common::fab::*;
use common::stat_sum;

use std::net::{SocketAddrV4, UdpSocket};
use std::os::raw::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray::wire::msg::{MsgType, Repr as MsgRepr, HEADER_LEN as MSG_HEAD};
use spray::wire::srd::{AckRepr, HandshakeRepr, PacketType, Repr, HANDSHAKE_LEN, HEADER_LEN};
use spray_fi::sys;

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);

struct Pair {
    info: *mut sys::fi_info,
    fab: *mut sys::fid_fabric,
    dom: *mut sys::fid_domain,
    av: *mut sys::fid_av,
    ep: [*mut sys::fid_ep; 2],
    cq: [*mut sys::fid_cq; 2],
    addr: [u64; 2],
    name: [SocketAddrV4; 2],
}

impl Pair {
    fn new() -> Pair {
        let info = getinfo(
            sys::fi_ep_type_FI_EP_RDM,
            (sys::FI_MSG | sys::FI_TAGGED) as u64,
        );
        let (fab, dom) = open_domain(info);
        let av = open_av(dom);
        let mut ep = [null_mut(); 2];
        let mut cq = [null_mut(); 2];
        for i in 0..2 {
            ep[i] = open_ep(dom, info);
            cq[i] = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
            assert_eq!(bind(ep[i], av, 0), 0);
            assert_eq!(
                bind(ep[i], cq[i], (sys::FI_TRANSMIT | sys::FI_RECV) as u64),
                0
            );
            assert_eq!(control(ep[i], sys::FI_ENABLE, null_mut()), 0, "fi_enable");
        }
        let sa = [getname(ep[0]), getname(ep[1])];
        let addr = [av_insert(av, &sa[0]), av_insert(av, &sa[1])];
        let v4 = |s: &libc::sockaddr_in| {
            SocketAddrV4::new(
                u32::from_be(s.sin_addr.s_addr).into(),
                u16::from_be(s.sin_port),
            )
        };
        Pair {
            info,
            fab,
            dom,
            av,
            ep,
            cq,
            addr,
            name: [v4(&sa[0]), v4(&sa[1])],
        }
    }

    fn close(self) {
        for i in 0..2 {
            assert_eq!(close(self.ep[i]), 0);
            assert_eq!(close(self.cq[i]), 0);
        }
        assert_eq!(close(self.av), 0);
        assert_eq!(close(self.dom), 0);
        assert_eq!(close(self.fab), 0);
        unsafe { sys::fi_freeinfo(self.info) };
    }
}

/// Poll `cq` (and progress `other`) until one completion; panics on an error
/// completion or after 10 s.
fn wait_one(cq: *mut sys::fid_cq, other: *mut sys::fid_cq) -> sys::fi_cq_tagged_entry {
    let t = Instant::now();
    loop {
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        let n = cq_read(cq, &mut e);
        if n == 1 {
            return e[0];
        }
        assert_eq!(n, EAGAIN, "fi_cq_read failed (error completion?)");
        let _ = cq_read(other, &mut []);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no completion within 10 s"
        );
    }
}

fn ctx(x: &mut u64) -> *mut c_void {
    (x as *mut u64).cast()
}

fn trecv(p: &Pair, at: usize, buf: &mut [u8], src: u64, tag: u64, ignore: u64, c: &mut u64) {
    let r = unsafe {
        (*(*p.ep[at]).tagged).recv.unwrap()(
            p.ep[at],
            buf.as_mut_ptr().cast(),
            buf.len(),
            null_mut(),
            src,
            tag,
            ignore,
            ctx(c),
        )
    };
    assert_eq!(r, 0, "fi_trecv");
}

fn tsend(p: &Pair, from: usize, to: usize, buf: &[u8], tag: u64, c: &mut u64) {
    let s = unsafe {
        (*(*p.ep[from]).tagged).send.unwrap()(
            p.ep[from],
            buf.as_ptr().cast(),
            buf.len(),
            null_mut(),
            p.addr[to],
            tag,
            ctx(c),
        )
    };
    assert_eq!(s, 0, "fi_tsend");
}

/// One checked tagged message `from` -> `to` of `size` bytes.
fn exchange(p: &Pair, from: usize, to: usize, size: usize, seed: u8) {
    let tx: Vec<u8> = (0..size)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    let mut rx = vec![0u8; size];
    let (mut sctx, mut rctx) = (1u64, 2u64);
    trecv(p, to, &mut rx, p.addr[from], u64::from(seed), 0, &mut rctx);
    tsend(p, from, to, &tx, u64::from(seed), &mut sctx);
    let e = wait_one(p.cq[to], p.cq[from]);
    assert_eq!((e.op_context, e.len), (ctx(&mut rctx), size));
    assert!(rx == tx, "{size}-byte message {from}->{to} corrupted");
    let e = wait_one(p.cq[from], p.cq[to]);
    assert_eq!(e.op_context, ctx(&mut sctx));
}

/// A v2 SRD packet of type `ty` claiming main port `port`, with `body`.
fn forge(ty: PacketType, port: u16, nonce: u64, token: u64, body: &[u8]) -> Vec<u8> {
    let hs = matches!(ty, PacketType::Hello | PacketType::Challenge);
    let body = if ty == PacketType::Data {
        body
    } else {
        &[][..]
    };
    let len = if hs { HANDSHAKE_LEN } else { body.len() };
    let ack = matches!(ty, PacketType::Ack | PacketType::Data).then_some(AckRepr {
        cum: 1 << 20,
        recent: 5,
        delay_us: 0,
        credit: 0,
        sack_base: 1 << 20,
        sack_bits: u64::MAX,
        repeat: false,
    });
    let r = Repr {
        ty,
        flags: 0,
        path: 0,
        src_port: port,
        src_nonce: nonce,
        dst_token: if ty == PacketType::Hello { 0 } else { token },
        psn: 3,
        psn_floor: 3,
        ack,
        payload_len: len as u16,
    };
    let mut b = vec![0u8; HEADER_LEN + len];
    r.emit(&mut b).expect("emit");
    if hs {
        let v = HandshakeRepr {
            value: token.max(1),
            caps: 0,
        };
        v.emit(&mut b[HEADER_LEN..]).expect("emit");
    } else {
        b[HEADER_LEN..].copy_from_slice(body);
    }
    b
}

/// A message-layer datagram (eager DATA of 64 bytes, or an RTS of 1 MiB).
fn msg(ty: MsgType, tag: u64) -> Vec<u8> {
    let data = if ty == MsgType::Data { 64 } else { 0 };
    let m = MsgRepr {
        ty,
        seq: 0,
        total: if ty == MsgType::Data { 64 } else { 1 << 20 },
        offset: 0,
        tag: Some(tag),
        data: None,
    };
    let mut b = vec![0xEE; MSG_HEAD + data];
    assert!(m.emit_into(&mut b));
    b
}

/// The 48-byte version-1 packets of the finding: RESET, ACK, PROBE with
/// src_epoch 0xffffffff and dst_epoch 0 (the old layout).
fn v1_packet(ty: u8, port: u16) -> Vec<u8> {
    let mut b = vec![0u8; 48];
    b[0] = 1;
    b[1] = ty;
    b[2] = if ty == 2 { 1 } else { 0 };
    b[4..6].copy_from_slice(&port.to_be_bytes());
    b[8..12].copy_from_slice(&0xffff_ffffu32.to_be_bytes());
    b
}

/// Every forgery of one round, sent to `victim` claiming `claimed`'s main
/// port; returns how many were sent, and how many of them were HELLOs.
fn forgeries(sock: &UdpSocket, victim: SocketAddrV4, claimed: u16, round: u64) -> (u64, u64) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ round;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x.max(1)
    };
    let mut pkts = Vec::new();
    for ty in [3u8, 2, 4] {
        pkts.push(v1_packet(ty, claimed));
    }
    for ty in [
        PacketType::Reset,
        PacketType::Ack,
        PacketType::Probe,
        PacketType::Challenge,
    ] {
        pkts.push(forge(ty, claimed, 0xffff_ffff, rnd(), &[]));
        pkts.push(forge(ty, claimed, rnd(), rnd(), &[]));
    }
    for m in [msg(MsgType::Data, 77), msg(MsgType::Rts, 77)] {
        pkts.push(forge(PacketType::Data, claimed, rnd(), rnd(), &m));
        pkts.push(forge(PacketType::Data, claimed, 0xffff_ffff, 0, &m));
    }
    pkts.push(forge(PacketType::Hello, claimed, rnd(), rnd(), &[]));
    for b in &pkts {
        sock.send_to(b, victim).expect("send forgery");
    }
    (pkts.len() as u64, 1)
}

#[test]
fn forged_packets_leave_the_session_unharmed_and_are_counted() {
    let path = std::env::temp_dir().join(format!("spray-forgery-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    std::env::set_var("FI_SPRAY_STATS", &path);
    let p = Pair::new();
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind forger");
    exchange(&p, 0, 1, 8, 1);
    exchange(&p, 1, 0, 8, 2);
    // A wildcard receive at B (any source) for the tag the forgeries carry:
    // forged eager messages and RTSs must not complete it.
    let mut wild = vec![0u8; 4096];
    let mut wctx = 9u64;
    trecv(&p, 1, &mut wild, u64::MAX, 77, 0, &mut wctx);
    let (mut sent, mut hellos) = (0u64, 0u64);
    let rounds = 20;
    for round in 0..rounds {
        for (victim, claimed) in [(1usize, 0usize), (0, 1)] {
            let (n, h) = forgeries(&sock, p.name[victim], p.name[claimed].port(), round);
            sent += n;
            hellos += h;
        }
        // Strangers too (the forger's own address and port).
        let m = forge(
            PacketType::Data,
            sock.local_addr().unwrap().port(),
            round + 1,
            round + 7,
            &msg(MsgType::Data, 77),
        );
        sock.send_to(&m, p.name[1]).expect("send forgery");
        sent += 1;
        if round == 0 {
            // Let the forgeries land with B polled, then check the wildcard
            // receive is still waiting.
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(20) {
                let mut e = [sys::fi_cq_tagged_entry::default(); 1];
                assert_eq!(
                    cq_read(p.cq[1], &mut e),
                    EAGAIN,
                    "a forged message completed a receive"
                );
                let _ = cq_read(p.cq[0], &mut []);
            }
        }
        exchange(&p, 0, 1, 100, 3);
        exchange(&p, 1, 0, 3000, 4);
        exchange(&p, 0, 1, 200_000, 5);
        exchange(&p, 1, 0, 8, 6);
    }
    // The real message takes the wildcard receive.
    let data = vec![0x5A; 1000];
    let mut sctx = 1u64;
    tsend(&p, 0, 1, &data, 77, &mut sctx);
    let e = wait_one(p.cq[1], p.cq[0]);
    assert_eq!((e.op_context, e.len, e.tag), (ctx(&mut wctx), 1000, 77));
    assert!(wild[..1000] == data[..]);
    let _ = wait_one(p.cq[0], p.cq[1]);
    p.close();
    // Replies that reached the forger itself (RESETs to its own packets).
    sock.set_nonblocking(true).expect("nonblocking");
    let mut to_forger = 0u64;
    let mut b = [0u8; 2048];
    while let Ok(n) = sock.recv(&mut b) {
        assert!(
            n <= HEADER_LEN + HANDSHAKE_LEN,
            "a {n}-byte reply to a forgery"
        );
        to_forger += 1;
    }
    let text = std::fs::read_to_string(&path).expect("FI_SPRAY_STATS file written at close");
    let _ = std::fs::remove_file(&path);
    let s = |k: &str| stat_sum(&text, k);
    let dropped = s("rx_bad_token") + s("rx_no_session") + s("rx_malformed");
    // Each forgery but the HELLOs is dropped where it lands; each RESET or
    // CHALLENGE it provoked is dropped by the real endpoint it went to.
    let provoked = s("tx_resets") + s("tx_challenges") - s("tx_hellos");
    println!(
        "{sent} forgeries ({hellos} HELLOs): dropped {dropped} (bad token {}, no session {}, malformed {}), provoked replies {provoked}, stateless replies over the rate {}",
        s("rx_bad_token"),
        s("rx_no_session"),
        s("rx_malformed"),
        s("stateless_dropped")
    );
    println!("replies to the forger: {to_forger}");
    assert!(
        to_forger <= rounds,
        "more than one reply per stranger's packet"
    );
    assert_eq!(
        dropped,
        sent - hellos + provoked - to_forger,
        "forgeries not all counted"
    );
    assert_eq!(
        s("peer_restarts") + s("failed") + s("unreachable"),
        0,
        "the session was harmed"
    );
    assert_eq!(s("peers"), 2, "a forgery created a peer");
}
