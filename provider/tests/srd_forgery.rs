//! Forged and replayed packets against live SRD sessions (issue 17, findings
//! 2, 3 and 4): a packet claiming a peer's address but lacking the session
//! token changes nothing and is counted; packets from unknown sources create
//! no state; a process restarted on the same address within a millisecond
//! gets a working session while its predecessor's late packets are dropped.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use core::time::Duration;

use spray::dgram::{DgramEvent, FailReason};
use spray::rng::Rng;
use spray::sim::check::{check_pair, config, payload, token_of};
use spray::sim::{addr, LinkSpec, Node, Sim, SrdNode, PORT};
use spray::srd::Srd;
use spray::time::Instant;
use spray::wire::srd::{
    AckRepr, HandshakeRepr, Packet, PacketType, Repr, HANDSHAKE_LEN, HEADER_LEN,
};
use spray::{Datagrams, EpMode};

/// A packet of type `ty` from main port `port`, as an attacker builds it.
fn forge(ty: PacketType, port: u16, nonce: u64, token: u64, psn: u32, body: &[u8]) -> Vec<u8> {
    let handshake = matches!(ty, PacketType::Hello | PacketType::Challenge);
    let ack = match ty {
        PacketType::Ack | PacketType::Data => Some(AckRepr {
            cum: psn.wrapping_add(5000),
            recent: psn,
            delay_us: 0,
            credit: 0,
            sack_base: psn.wrapping_add(5000),
            sack_bits: u64::MAX,
            repeat: false,
        }),
        _ => None,
    };
    // Only DATA carries a body; the other types must be well-formed to
    // reach the session check at all.
    let body = if ty == PacketType::Data { body } else { &[] };
    let len = if handshake { HANDSHAKE_LEN } else { body.len() };
    let r = Repr {
        ty,
        flags: 0,
        path: 0,
        src_port: port,
        src_nonce: nonce,
        dst_token: if ty == PacketType::Hello { 0 } else { token },
        psn,
        psn_floor: psn,
        ack,
        payload_len: len as u16,
    };
    let mut b = vec![0u8; HEADER_LEN + len];
    r.emit(&mut b).unwrap();
    if handshake {
        HandshakeRepr {
            value: token.max(1),
            caps: 0,
        }
        .emit(&mut b[HEADER_LEN..])
        .unwrap();
    } else {
        b[HEADER_LEN..].copy_from_slice(body);
    }
    b
}

/// Every forgery an off-path attacker who knows the addresses (and, worse,
/// the nonce: peers see it) can send as `claimed`: the 48-byte packets of the
/// finding (a huge nonce, no token) and each type with wrong tokens.
fn forgeries(rng: &mut Rng, port: u16, real_nonce: u64) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for ty in [PacketType::Reset, PacketType::Ack, PacketType::Probe] {
        v.push(forge(ty, port, 0xffff_ffff, 1, 0, &[]));
    }
    for nonce in [real_nonce, rng.next_u64().max(1)] {
        let t = rng.next_u64().max(1);
        v.push(forge(
            PacketType::Data,
            port,
            nonce,
            t,
            rng.next_u64() as u32,
            &payload(999_999, 100),
        ));
        v.push(forge(
            PacketType::Data,
            port,
            nonce,
            t,
            0,
            &payload(999_998, 100),
        ));
        v.push(forge(PacketType::Ack, port, nonce, t, 7, &[]));
        v.push(forge(PacketType::Probe, port, nonce, t, 1, &[]));
        v.push(forge(PacketType::Reset, port, nonce, t, 0, &[]));
        v.push(forge(PacketType::Challenge, port, nonce, t, 0, &[]));
    }
    v
}

/// Finding 2 (and 5 at the SRD level): forged RESET / ACK / PROBE / DATA /
/// CHALLENGE packets claiming each side's peer, injected mid-transfer, change
/// nothing: both transfers complete exactly once with no failure and no
/// restart, no forged payload is delivered, and every forgery is counted.
/// (On the epoch protocol a single such ACK wedged the session for good.)
#[test]
fn forged_packets_with_the_peers_address_change_nothing() {
    for seed in 0..12u64 {
        let paths = 4;
        let mut spec = LinkSpec::ideal(Duration::from_micros(20));
        spec.bandwidth = 125_000_000;
        spec.jitter = Duration::from_micros(5);
        let nodes = vec![
            SrdNode::new(&config(0, paths, 10)),
            SrdNode::new(&config(1, paths, 20)),
        ];
        let mut sim = Sim::new(seed, nodes, vec![spec; usize::from(paths)]);
        let n = 2000u64;
        for t in 0..n {
            sim.nodes[0].push(addr(1), t, payload(t, 1 + (t as usize * 37) % 1400));
            sim.nodes[1].push(addr(0), t, payload(t, 1 + (t as usize * 53) % 1400));
        }
        let mut rng = Rng::new(seed);
        let mut forged = [0u64; 2];
        let mut before = [(0u64, 0u64, 0u64); 2];
        for round in 0..5u64 {
            let at = Instant::from_nanos(200_000 + round * 300_000 + rng.below(100_000));
            sim.run_until(at, |_| false);
            for (victim, claimed, nonce) in [(1usize, 0usize, 10u64), (0, 1, 20)] {
                if round == 0 {
                    let s = sim.nodes[victim].srd.stats();
                    before[victim] = (s.rx_bad_token, s.rx_no_session, s.rx_malformed);
                }
                let from = SocketAddr::new(addr(claimed).ip(), PORT + rng.below(4) as u16);
                for p in forgeries(&mut rng, PORT, nonce) {
                    sim.nodes[victim].handle_datagram(sim.now, from, &p);
                    forged[victim] += 1;
                }
                // A HELLO claiming the peer: answered to the real peer, whose
                // handshake it never started (counted there), nothing else.
                let h = forge(
                    PacketType::Hello,
                    PORT,
                    rng.next_u64().max(1),
                    rng.next_u64(),
                    0,
                    &[],
                );
                sim.nodes[victim].handle_datagram(sim.now, from, &h);
                forged[claimed] += 1;
            }
        }
        let done = |s: &Sim<SrdNode>| (0..2).all(|i| s.nodes[i].acked().count() as u64 == n);
        assert!(
            sim.run_until(Instant::from_nanos(5_000_000_000), done),
            "seed {seed}: transfers did not finish"
        );
        for (from, to) in [(0, 1), (1, 0)] {
            let o = check_pair(&sim, from, to, n).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(
                (o.acked, o.failed, o.delivered),
                (n, 0, n),
                "seed {seed}: {from}->{to}"
            );
        }
        for (i, node) in sim.nodes.iter().enumerate() {
            let s = node.srd.stats();
            assert!(
                !node
                    .events
                    .iter()
                    .any(|(_, e)| matches!(e, DgramEvent::PeerRestarted { .. })),
                "seed {seed}: a forgery restarted host {i}'s session"
            );
            assert_eq!(s.peer_restarts + s.failed + s.unreachable, 0, "seed {seed}");
            let (bad, none, malformed) = before[i];
            let counted =
                (s.rx_bad_token - bad) + (s.rx_no_session - none) + (s.rx_malformed - malformed);
            // Plus the RESETs the other host sent back to the claimed
            // address (us), each echoing a token we never issued.
            let resets = sim.nodes[1 - i].srd.stats().tx_resets;
            assert_eq!(
                counted,
                forged[i] + resets,
                "seed {seed}: host {i}: forgeries not all counted: {s:?}"
            );
            assert_eq!(s.peers, 1, "seed {seed}: host {i} gained a peer");
        }
    }
}

/// Finding 4's memory, and no state before a handshake: 10^5 forged packets
/// of every kind from 10^5 source addresses leave no peer behind, and the
/// replies they provoke are single, small, rate-limited RESETs and
/// CHALLENGEs (no retries, no amplification), and the queue of them is
/// bounded. (On the epoch protocol each created a peer: 214 MB for 131070.)
#[test]
fn forged_first_packets_create_no_state() {
    let me: SocketAddr = "198.18.0.1:7000".parse().unwrap();
    let mut cfg = spray::Config::new(spray::EpMode::Rdm, me);
    cfg.nonce = 77;
    let mut srd = Srd::new(&cfg);
    let mut rng = Rng::new(4);
    let mut buf = vec![0u8; 65536];
    let (mut replies, mut reply_bytes, mut sent_bytes) = (0u64, 0u64, 0u64);
    let total = 100_000u64;
    for k in 0..total {
        let ip = IpAddr::V4(Ipv4Addr::from(0xc612_0000 | (k as u32 & 0xffff)));
        let port = 1024 + (k >> 16) as u16;
        let ty = [
            PacketType::Data,
            PacketType::Ack,
            PacketType::Probe,
            PacketType::Reset,
            PacketType::Challenge,
            PacketType::Hello,
        ][(k % 6) as usize];
        let p = forge(
            ty,
            port,
            rng.next_u64().max(1),
            rng.next_u64().max(1),
            k as u32,
            &payload(k, 64),
        );
        sent_bytes += p.len() as u64;
        // 10^5 packets in 100 ms: 10^6 packets/s of forgeries.
        let now = Instant::from_nanos(k * 1000);
        assert!(srd
            .handle_datagram(now, SocketAddr::new(ip, port), &p)
            .is_none());
        if k % 64 == 63 || k == total - 1 {
            let mut batch = 0;
            while let Some(t) = srd.poll_transmit(now, &mut buf) {
                batch += 1;
                assert!(batch <= 1024, "unbounded queue of replies");
                let r = Repr::parse(&Packet::new_checked(&buf[..t.len]).unwrap()).unwrap();
                assert!(matches!(r.ty, PacketType::Reset | PacketType::Challenge));
                replies += 1;
                reply_bytes += t.len as u64;
            }
        }
    }
    let s = srd.stats().clone();
    println!(
        "{total} forgeries ({sent_bytes} B): {replies} replies ({reply_bytes} B), {} over the rate; peers {}",
        s.stateless_dropped, s.peers
    );
    assert_eq!(s.peers, 0, "a forged packet created a peer");
    assert!(
        srd.peer_memory() < 4096,
        "{} B of peer table",
        srd.peer_memory()
    );
    let hellos = (0..total).filter(|k| k % 6 == 5).count() as u64;
    assert_eq!(
        s.rx_no_session + s.rx_bad_token,
        total - hellos,
        "forgeries not all counted"
    );
    // Every forged DATA / PROBE may get one RESET, every HELLO one
    // CHALLENGE: nothing more, and no more bytes than came in.
    assert!(
        replies <= total / 2,
        "{replies} replies to {total} forgeries"
    );
    assert!(
        reply_bytes <= sent_bytes,
        "amplification: {reply_bytes} B out for {sent_bytes} B in"
    );
    // The rate limit: the burst plus 200 000/s for 0.1 s.
    assert!(
        replies <= 4096 + 20_000 + 1,
        "{replies} replies: not rate-limited"
    );
    assert!(s.stateless_dropped > 0);
    // Nothing left to send later (no retries to anyone).
    let later = Instant::from_nanos(4_000_000_000);
    srd.handle_timeout(later);
    assert!(srd.poll_transmit(later, &mut buf).is_none());
    assert_eq!(srd.poll_timeout(), None);
}

/// The two hosts of the handshake tests below.
const A_ADDR: &str = "198.18.0.1:7000";
const B_ADDR: &str = "198.18.0.2:7000";

/// An SRD endpoint at `at` with incarnation `nonce`, a secret of its own,
/// in `mode`.
fn srd_at(at: SocketAddr, nonce: u64, mode: EpMode) -> Srd {
    let mut c = spray::Config::new(mode, at);
    c.nonce = nonce;
    c.secret = nonce.to_le_bytes().repeat(2).try_into().unwrap();
    Srd::new(&c)
}

/// Move every packet `from` has to `to` (or into `capture`), at `now`.
fn carry(
    from: &mut Srd,
    from_addr: SocketAddr,
    to: &mut Srd,
    now: Instant,
    got: &mut Vec<u64>,
    capture: Option<&mut Vec<Vec<u8>>>,
) {
    let mut buf = vec![0u8; 65536];
    let mut cap = capture;
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        if let Some(c) = cap.as_mut() {
            c.push(buf[..t.len].to_vec());
            continue;
        }
        if let Some((_, p)) = to.handle_datagram(now, from_addr, &buf[..t.len]) {
            got.push(token_of(p).expect("intact payload"));
        }
    }
}

fn events(s: &mut Srd) -> Vec<DgramEvent> {
    core::iter::from_fn(|| s.poll_event()).collect()
}

/// Finding 3: a process restarted on the same address within a millisecond
/// (as often as the test likes; on the epoch protocol 6 of 12 such restarts
/// got an epoch no newer than before and could never send) works at once in
/// both directions; its predecessor's packets that arrive late are dropped
/// and counted, never delivered, and never undo the restart.
#[test]
fn restart_within_a_millisecond_on_the_same_address() {
    let (a_addr, b_addr) = (A_ADDR.parse().unwrap(), B_ADDR.parse().unwrap());
    let mut rng = Rng::new(3);
    let mut a = srd_at(a_addr, rng.next_u64(), EpMode::Dgram);
    let mut b = srd_at(b_addr, rng.next_u64(), EpMode::Dgram);
    let pb = a.peer(b_addr);
    let mut at_a = Vec::new();
    let mut at_b = Vec::new();
    let mut t = 1_000_000u64;
    let mut token = 0u64;
    for round in 0..20 {
        // Some traffic each way with the current incarnation of b.
        for _ in 0..5 {
            a.send(pb, token, 100, &mut |x| {
                x.copy_from_slice(&payload(token, 100))
            })
            .unwrap();
            token += 1;
        }
        let pa = b.peer(a_addr);
        for _ in 0..5 {
            b.send(pa, token, 100, &mut |x| {
                x.copy_from_slice(&payload(token, 100))
            })
            .unwrap();
            token += 1;
        }
        for _ in 0..6 {
            t += 20_000;
            let now = Instant::from_nanos(t);
            carry(&mut a, a_addr, &mut b, now, &mut at_b, None);
            carry(&mut b, b_addr, &mut a, now, &mut at_a, None);
            a.handle_timeout(now);
            b.handle_timeout(now);
        }
        let ev_a = events(&mut a);
        assert!(
            ev_a.iter().all(|e| !matches!(e, DgramEvent::Failed { .. })),
            "round {round}: {ev_a:?}"
        );
        events(&mut b);
        // b sends a few more that never arrive before it dies: late packets.
        for _ in 0..5 {
            b.send(pa, 1 << 40, 100, &mut |x| {
                x.copy_from_slice(&payload(1 << 40, 100))
            })
            .unwrap();
        }
        let mut late = Vec::new();
        carry(
            &mut b,
            b_addr,
            &mut a,
            Instant::from_nanos(t),
            &mut at_a,
            Some(&mut late),
        );
        assert!(!late.is_empty());
        // Restart on the same address within 1 ms, new nonce (as the FFI
        // draws it); half the time the new one speaks first.
        t += rng.below(1_000_000);
        b = srd_at(b_addr, rng.next_u64(), EpMode::Dgram);
        let pa = b.peer(a_addr);
        // Half the time the new incarnation speaks first (it opens a
        // handshake), half the time a does (to the old session: the new
        // one refuses it with a RESET, a checks with a handshake, learns
        // the restart and fails that datagram back, PeerRestarted).
        if round % 2 == 0 {
            b.send(pa, token, 100, &mut |x| {
                x.copy_from_slice(&payload(token, 100))
            })
            .unwrap();
        } else {
            a.send(pb, token, 100, &mut |x| {
                x.copy_from_slice(&payload(token, 100))
            })
            .unwrap();
        }
        token += 1;
        let mut restarts = 0;
        let mut failed = 0;
        let mut step =
            |a: &mut Srd, b: &mut Srd, t: &mut u64, restarts: &mut u32, failed: &mut u32| {
                let mut acked = Vec::new();
                *t += 20_000;
                let now = Instant::from_nanos(*t);
                carry(a, a_addr, b, now, &mut at_b, None);
                carry(b, b_addr, a, now, &mut at_a, None);
                a.handle_timeout(now);
                b.handle_timeout(now);
                for e in events(a).into_iter().chain(events(b)) {
                    match e {
                        DgramEvent::PeerRestarted { .. } => *restarts += 1,
                        DgramEvent::Failed { reason, .. } => {
                            assert_eq!(reason, FailReason::PeerRestarted);
                            *failed += 1;
                        }
                        DgramEvent::Acked {
                            token: k, count, ..
                        } => acked.extend(std::iter::repeat_n(k, count as usize)),
                    }
                }
                acked
            };
        let mut acked = Vec::new();
        // A RESET starts at most one check per min RTO (2 ms): a peer
        // restarted twice within that waits for the next one.
        for _ in 0..500 {
            acked.extend(step(&mut a, &mut b, &mut t, &mut restarts, &mut failed));
            if restarts == 1 && (acked.contains(&(token - 1)) || failed == 1) {
                break;
            }
        }
        assert_eq!(restarts, 1, "round {round}: the restart was not recognised");
        assert!(failed <= 1, "round {round}: {failed} failed");
        // The new incarnation's session works both ways at once.
        let (x, y) = (token, token + 1);
        token += 2;
        a.send(pb, x, 100, &mut |v| v.copy_from_slice(&payload(x, 100)))
            .unwrap();
        b.send(pa, y, 100, &mut |v| v.copy_from_slice(&payload(y, 100)))
            .unwrap();
        for _ in 0..10 {
            acked.extend(step(&mut a, &mut b, &mut t, &mut restarts, &mut failed));
        }
        assert!(
            acked.contains(&x) && acked.contains(&y),
            "round {round}: the restarted peer's session does not work"
        );
        assert!(at_b.contains(&x) && at_a.contains(&y));
        assert_eq!(restarts, 1);
        // Now the predecessor's late packets arrive: dropped, counted.
        let s0 = a.stats().clone();
        for p in &late {
            assert!(
                a.handle_datagram(Instant::from_nanos(t), b_addr, p)
                    .is_none(),
                "round {round}: late packet delivered"
            );
        }
        let s1 = a.stats();
        assert_eq!(
            (s1.rx_stale_src + s1.rx_bad_token) - (s0.rx_stale_src + s0.rx_bad_token),
            late.len() as u64,
            "round {round}: late packets not counted"
        );
        assert_eq!(
            s1.peer_restarts, s0.peer_restarts,
            "round {round}: a late packet undid the restart"
        );
        assert!(!at_a.contains(&(1 << 40)) && !at_b.contains(&(1 << 40)));
    }
    // Everything delivered at most once.
    let mut all = at_a.clone();
    all.extend(&at_b);
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(n, all.len(), "a datagram delivered twice");
}

/// A packet that carries the session's token but is malformed (a DATA whose
/// `psn_floor` is after its `psn`) is dropped before it touches any state:
/// in particular its piggybacked ack is never applied. (Before, the engine
/// refused such a packet only after the session check and after applying
/// its ack: a mutated replay that also claimed a later cumulative ack made
/// the sender take undelivered datagrams for acknowledged, and the message
/// layer above waited for them for ever: the 10^6 network fuzzer's stall.)
#[test]
fn malformed_in_session_packets_change_nothing() {
    let (a_addr, b_addr) = (A_ADDR.parse().unwrap(), B_ADDR.parse().unwrap());
    let mut a = srd_at(a_addr, 0x1111, EpMode::Rdm);
    let mut b = srd_at(b_addr, 0x2222, EpMode::Rdm);
    let pb = a.peer(b_addr);
    let pa = b.peer(a_addr);
    let (mut at_a, mut at_b) = (Vec::new(), Vec::new());
    let mut t = 1_000_000u64;
    let mut token = 0u64;
    let send = |s: &mut Srd, p, token: &mut u64| {
        let k = *token;
        s.send(p, k, 100, &mut |x| x.copy_from_slice(&payload(k, 100)))
            .unwrap();
        *token += 1;
        k
    };
    // A session with traffic both ways.
    for _ in 0..5 {
        send(&mut a, pb, &mut token);
        send(&mut b, pa, &mut token);
    }
    for _ in 0..20 {
        t += 20_000;
        let now = Instant::from_nanos(t);
        carry(&mut a, a_addr, &mut b, now, &mut at_b, None);
        carry(&mut b, b_addr, &mut a, now, &mut at_a, None);
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    events(&mut a);
    events(&mut b);
    assert_eq!((at_a.len(), at_b.len()), (5, 5));
    // a sends 8 datagrams; the network loses every packet a sends now.
    let lost: Vec<u64> = (0..8).map(|_| send(&mut a, pb, &mut token)).collect();
    let mut psns = Vec::new();
    for _ in 0..50 {
        let mut dropped = Vec::new();
        carry(
            &mut a,
            a_addr,
            &mut b,
            Instant::from_nanos(t),
            &mut at_b,
            Some(&mut dropped),
        );
        for p in &dropped {
            let r = Repr::parse(&Packet::new_checked(&p[..]).unwrap()).unwrap();
            if r.ty == PacketType::Data && !psns.contains(&r.psn) {
                psns.push(r.psn);
            }
        }
        t += 5_000;
    }
    // As many as its credit allows (a young sender's ramps up).
    assert!(psns.len() >= 4, "a sent {} datagrams", psns.len());
    let highest = *psns
        .iter()
        .max_by_key(|&&p| p.wrapping_sub(psns[0]))
        .unwrap();
    // b sends a datagram (it carries an ack); an on-path mutation of it
    // claims every lost packet acknowledged, with a floor after its PSN.
    send(&mut b, pa, &mut token);
    let mut real = Vec::new();
    carry(
        &mut b,
        b_addr,
        &mut a,
        Instant::from_nanos(t),
        &mut at_a,
        Some(&mut real),
    );
    let data = real
        .iter()
        .find(|p| {
            Repr::parse(&Packet::new_checked(&p[..]).unwrap())
                .unwrap()
                .ty
                == PacketType::Data
        })
        .expect("b sent DATA")
        .clone();
    let mut r = Repr::parse(&Packet::new_checked(&data[..]).unwrap()).unwrap();
    let ack = r.ack.as_mut().expect("DATA carries an ack");
    ack.cum = highest.wrapping_add(1);
    ack.recent = highest;
    ack.sack_base = ack.cum;
    ack.sack_bits = 0;
    r.psn_floor = r.psn.wrapping_add(1);
    let mut bad = data.clone();
    r.emit(&mut bad).unwrap();
    let malformed = a.stats().rx_malformed;
    assert!(a
        .handle_datagram(Instant::from_nanos(t), b_addr, &bad)
        .is_none());
    assert_eq!(a.stats().rx_malformed, malformed + 1, "not counted");
    let acked: Vec<u64> = events(&mut a)
        .into_iter()
        .filter_map(|e| match e {
            DgramEvent::Acked { token, .. } => Some(token),
            _ => None,
        })
        .collect();
    assert!(
        acked.iter().all(|k| !lost.contains(k)),
        "a malformed packet acknowledged lost datagrams {acked:?}"
    );
    // The real packet, then normal running: every lost datagram is
    // repaired and arrives once.
    assert!(a
        .handle_datagram(Instant::from_nanos(t), b_addr, &data)
        .is_some());
    for _ in 0..500 {
        t += 20_000;
        let now = Instant::from_nanos(t);
        carry(&mut a, a_addr, &mut b, now, &mut at_b, None);
        carry(&mut b, b_addr, &mut a, now, &mut at_a, None);
        a.handle_timeout(now);
        b.handle_timeout(now);
        if lost.iter().all(|k| at_b.contains(k)) {
            break;
        }
    }
    for k in &lost {
        assert_eq!(
            at_b.iter().filter(|x| *x == k).count(),
            1,
            "datagram {k} not delivered once: {at_b:?}"
        );
    }
}

/// A copy of a's HELLO with another nonce, answered before a's own (a
/// mutation `fuzz_engine` found at case seed 225718205733238): b's CHALLENGE
/// carries the cookie for that nonce and echoes a's echo value, so a takes
/// it; a's packets then carry a token b never gave a's real nonce. b, whose
/// own handshake has given it a session with a's real nonce, dropped them
/// without a word, and a's sends failed as unreachable 5 s later while both
/// processes lived. Now such a packet gets a RESET echoing its token, which
/// a accepts (it is its token) and checks the session with a new HELLO:
/// within a few round trips everything is delivered, nothing fails.
#[test]
fn a_token_for_another_nonce_is_refused_and_learned_again() {
    let (a_addr, b_addr) = (A_ADDR.parse().unwrap(), B_ADDR.parse().unwrap());
    let (na, nb) = (0x0a0a_0001u64, 0x0b0b_0002u64);
    let mut a = srd_at(a_addr, na, EpMode::Dgram);
    let mut b = srd_at(b_addr, nb, EpMode::Dgram);
    let pb = a.peer(b_addr);
    let pa = b.peer(a_addr);
    for token in 0..4u64 {
        a.send(pb, token, 100, &mut |x| {
            x.copy_from_slice(&payload(token, 100))
        })
        .unwrap();
        b.send(pa, 100 + token, 100, &mut |x| {
            x.copy_from_slice(&payload(100 + token, 100))
        })
        .unwrap();
    }
    let mut t = 1_000_000u64;
    let now = Instant::from_nanos(t);
    // a's HELLO, held back; b completes its own handshake first.
    let mut hello_a = Vec::new();
    carry(
        &mut a,
        a_addr,
        &mut b,
        now,
        &mut Vec::new(),
        Some(&mut hello_a),
    );
    assert_eq!(hello_a.len(), 1, "a's HELLO");
    let mut at_a = Vec::new();
    let mut at_b = Vec::new();
    // b's HELLO to a, a's CHALLENGE back: b's session has a's real nonce.
    carry(&mut b, b_addr, &mut a, now, &mut at_a, None);
    carry(&mut a, a_addr, &mut b, now, &mut at_b, None);
    // The copy: a's HELLO with its nonce changed, from a's address.
    let mut copy = hello_a[0].clone();
    let mut h = Repr::parse(&Packet::new_checked(&copy[..]).unwrap()).unwrap();
    assert_eq!((h.ty, h.src_nonce), (PacketType::Hello, na));
    h.src_nonce = na + 1;
    h.emit(&mut copy).unwrap();
    assert!(b.handle_datagram(now, a_addr, &copy).is_none());
    // b's CHALLENGE for the copy reaches a (the real HELLO is lost).
    let before = b.stats().rx_bad_token;
    for _ in 0..40 {
        t += 20_000;
        let now = Instant::from_nanos(t);
        carry(&mut b, b_addr, &mut a, now, &mut at_a, None);
        carry(&mut a, a_addr, &mut b, now, &mut at_b, None);
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    assert!(
        b.stats().rx_bad_token > before,
        "a used the copy's token: {:?}",
        b.stats()
    );
    assert!(a.stats().rx_resets > 0, "a heard no RESET: {:?}", a.stats());
    at_a.sort_unstable();
    at_b.sort_unstable();
    assert_eq!(at_b, vec![0, 1, 2, 3], "delivered at b");
    assert_eq!(at_a, vec![100, 101, 102, 103], "delivered at a");
    for (name, s) in [("a", &mut a), ("b", &mut b)] {
        let ev = events(s);
        assert!(
            ev.iter().all(|e| !matches!(e, DgramEvent::Failed { .. })),
            "{name}: {ev:?}"
        );
        assert_eq!(s.stats().unreachable, 0, "{name}");
    }
}
