//! Rails at the protocol level (`PROTOCOL.md` §5.1): the RAILS exchange and
//! the rail checks, what a peer with one rail sees (nothing new), a restart
//! of a peer with rails, and the attacks of §11 aimed at rails: forged RAILS
//! and forged packets from rail addresses change nothing, and a peer that
//! claims another endpoint's address as its rail gets no packet sent there
//! and takes nothing from that endpoint.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use core::time::Duration;

use spray::config::AuthKey;
use std::sync::atomic::{AtomicU64, Ordering};

use spray::sim::check::{config, payload, token_of};
use spray::sim::{addr, rail_addr, LinkSpec, Node, Sim, SrdNode, PORT};
use spray::time::Instant;
use spray::wire::rails::RailsRepr;
use spray::wire::srd::{flags, AckRepr, PacketType, Repr, HEADER_LEN};

const PATHS: u8 = 4;

fn link() -> LinkSpec {
    let mut s = LinkSpec::ideal(Duration::from_micros(20));
    s.bandwidth = 125_000_000;
    s.jitter = Duration::from_micros(5);
    s
}

/// Host `i`'s config with `rails` rails (1 = none).
fn cfg(i: usize, rails: usize, nonce: u64) -> spray::Config {
    let mut c = config(i, PATHS, nonce);
    if rails > 1 {
        c.rails = (0..rails).map(|r| rail_addr(i, r).ip()).collect();
    }
    c
}

/// A network of nodes with `rails[i]` rails each (links: one per rail).
fn net(seed: u64, cfgs: &[spray::Config], rails: &[usize]) -> Sim<SrdNode> {
    let nodes = cfgs.iter().map(SrdNode::new).collect();
    let links = rails.iter().copied().max().unwrap_or(1).max(1);
    let mut sim = Sim::new(seed, nodes, vec![link(); links]);
    for (i, &r) in rails.iter().enumerate() {
        if r > 1 {
            sim.set_rails(i, r, PATHS);
        }
    }
    sim
}

/// Tokens are unique over the whole test binary (several transfers per
/// network, in any direction).
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(0);

/// Send `n` datagrams from `a` to `b` and run until all are acked: each
/// arrives once, intact, and nothing arrives twice at `b` from anyone.
fn transfer(sim: &mut Sim<SrdNode>, a: usize, b: usize, n: u64) {
    let base = NEXT_TOKEN.fetch_add(n, Ordering::Relaxed);
    for t in base..base + n {
        sim.nodes[a].push(addr(b), t, payload(t, 1200));
    }
    let limit = sim.now + Duration::from_secs(20);
    let acked = |s: &Sim<SrdNode>| {
        s.nodes[a]
            .acked()
            .filter(|t| (base..base + n).contains(t))
            .count() as u64
    };
    let ok = sim.run_until(limit, |s| acked(s) >= n);
    assert!(
        ok && acked(sim) == n,
        "{a} -> {b}: {} of {n} acked",
        acked(sim)
    );
    let mut seen = std::collections::HashSet::new();
    for x in &sim.nodes[b].arrived {
        let t = token_of(&x.data).expect("intact payload");
        assert!(seen.insert(t), "token {t} delivered twice");
    }
    assert!(
        (base..base + n).all(|t| seen.contains(&t)),
        "acked, not delivered"
    );
    assert!(!sim.nodes[a].failed().any(|t| (base..base + n).contains(&t)));
}

/// Paths node `a` uses towards `b`, per rail.
fn rails_in_use(sim: &Sim<SrdNode>, a: usize, b: usize) -> Vec<usize> {
    let mut v = vec![0usize; 8];
    for p in sim.nodes[a].srd.peer_stats() {
        if p.addr == addr(b) {
            for x in &p.paths {
                v[usize::from(x.rail)] += 1;
            }
        }
    }
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

/// Data packets `a` sent `b` per rail.
fn sent_per_rail(sim: &Sim<SrdNode>, a: usize, b: usize) -> Vec<u64> {
    let mut v = vec![0u64; 8];
    for p in sim.nodes[a].srd.peer_stats() {
        if p.addr == addr(b) {
            for x in &p.paths {
                v[usize::from(x.rail)] += x.sent_packets;
            }
        }
    }
    v.truncate(2);
    v
}

/// A RAILS packet listing `ips`, as anyone can build it.
fn rails_packet(port: u16, nonce: u64, token: u64, ask: bool, ips: &[IpAddr]) -> Vec<u8> {
    let list = RailsRepr {
        rails: ips.to_vec(),
    };
    let h = Repr {
        ty: PacketType::Rails,
        flags: if ask { flags::ACK_NOW } else { 0 },
        path: 0,
        src_port: port,
        src_nonce: nonce,
        dst_token: token,
        psn: 0,
        psn_floor: 0,
        ack: None,
        payload_len: list.buffer_len() as u16,
    };
    let mut b = vec![0u8; HEADER_LEN + list.buffer_len()];
    h.emit(&mut b).unwrap();
    list.emit(&mut b[HEADER_LEN..]).unwrap();
    b
}

/// A DATA packet with an ack that would acknowledge a lot, if believed.
fn data_packet(port: u16, nonce: u64, token: u64, psn: u32) -> Vec<u8> {
    let body = payload(999_999, 64);
    let h = Repr {
        ty: PacketType::Data,
        flags: 0,
        path: 0,
        src_port: port,
        src_nonce: nonce,
        dst_token: token,
        psn,
        psn_floor: psn,
        ack: Some(AckRepr {
            cum: 100_000,
            recent: 99_999,
            delay_us: 0,
            credit: 0xffff,
            sack_base: 100_000,
            sack_bits: u64::MAX,
            repeat: false,
        }),
        payload_len: body.len() as u16,
    };
    let mut b = vec![0u8; HEADER_LEN + body.len()];
    h.emit(&mut b).unwrap();
    b[HEADER_LEN..].copy_from_slice(&body);
    b
}

/// Two hosts with two rails each: after the first message the RAILS
/// exchange (one ask, one answer) and one check per side put both rails in
/// use, within a few round trips; data then goes over both.
#[test]
fn rails_are_exchanged_checked_and_used() {
    let mut sim = net(1, &[cfg(0, 2, 10), cfg(1, 2, 20)], &[2, 2]);
    transfer(&mut sim, 0, 1, 1);
    let t_first = sim.now;
    sim.run_until(t_first + Duration::from_millis(2), |_| false);
    for (a, b) in [(0, 1), (1, 0)] {
        let s = sim.nodes[a].srd.stats();
        assert_eq!(s.rails_valid, 1, "node {a}: {s:?}");
        assert_eq!((s.rails_refused, s.rx_rails_ignored), (0, 0), "node {a}");
        assert_eq!(rails_in_use(&sim, a, b), vec![4, 4], "node {a}");
    }
    // The initiator asked once, the responder answered once.
    assert_eq!(sim.nodes[0].srd.stats().tx_rails, 1);
    assert_eq!(sim.nodes[1].srd.stats().tx_rails, 1);
    transfer(&mut sim, 0, 1, 2000);
    let split = sent_per_rail(&sim, 0, 1);
    assert!(split[0] > 500 && split[1] > 500, "{split:?}");
}

/// A peer with one rail sees nothing new: no RAILS either way, its
/// CHALLENGE offers no rails, and the traffic stays on rail 0, whichever
/// side speaks first.
#[test]
fn a_peer_with_one_rail_sees_nothing_new() {
    for (first, second) in [(0usize, 1usize), (1, 0)] {
        let mut sim = net(2, &[cfg(0, 2, 10), cfg(1, 1, 20)], &[2, 1]);
        transfer(&mut sim, first, second, 500);
        transfer(&mut sim, second, first, 500);
        for n in 0..2 {
            let s = sim.nodes[n].srd.stats();
            assert_eq!(
                (s.tx_rails, s.rx_rails, s.tx_rail_checks, s.rails_valid),
                (0, 0, 0, 0),
                "node {n} (first {first})"
            );
        }
        assert_eq!(rails_in_use(&sim, 0, 1), vec![4]);
    }
}

/// Three rails against two: rails pair by index, so two are used; and a
/// RAILS answer lost (the ask is resent) or a check lost (resent) only
/// delays them.
#[test]
fn unequal_rail_counts_and_lost_rails_packets() {
    let mut sim = net(3, &[cfg(0, 3, 10), cfg(1, 2, 20)], &[3, 2]);
    // Lose everything on rail 1 for the first 20 ms: the first checks fail
    // and are resent.
    for (a, b) in [(0, 1), (1, 0)] {
        sim.paths_mut(a, b)[1].schedule.push(spray::sim::Event {
            from: Instant::ZERO,
            until: Instant::from_nanos(20_000_000),
            kind: spray::sim::EventKind::Blackhole,
        });
    }
    transfer(&mut sim, 0, 1, 10);
    sim.run_until(Instant::from_nanos(200_000_000), |_| false);
    transfer(&mut sim, 0, 1, 500);
    assert_eq!(rails_in_use(&sim, 0, 1), vec![4, 4]);
    assert_eq!(rails_in_use(&sim, 1, 0), vec![4, 4]);
    assert!(sim.nodes[0].srd.stats().tx_rail_checks >= 2);
}

/// A peer with rails restarts (new nonce, same addresses): the old rails
/// are forgotten with the old session, the new incarnation's are exchanged
/// and checked again, and traffic goes on over both.
#[test]
fn a_restart_relearns_the_rails() {
    let mut sim = net(4, &[cfg(0, 2, 10), cfg(1, 2, 20)], &[2, 2]);
    transfer(&mut sim, 0, 1, 300);
    assert_eq!(rails_in_use(&sim, 0, 1), vec![4, 4]);
    sim.nodes[1] = SrdNode::new(&cfg(1, 2, 21));
    // What goes to the old incarnation meanwhile fails (PeerRestarted).
    for t in 0..10 {
        sim.nodes[0].push(addr(1), 1 << 40 | t, payload(1 << 40 | t, 1200));
    }
    let limit = sim.now + Duration::from_secs(5);
    sim.run_until(limit, |s| s.nodes[0].srd.stats().peer_restarts == 1);
    transfer(&mut sim, 0, 1, 300);
    let s = sim.nodes[0].srd.stats();
    assert_eq!(s.peer_restarts, 1, "{s:?}");
    assert_eq!(s.rails_valid, 2, "checked again after the restart: {s:?}");
    assert_eq!(rails_in_use(&sim, 0, 1), vec![4, 4]);
    assert_eq!(sim.nodes[1].srd.stats().rails_valid, 1);
}

/// Forged RAILS and forged packets from rail addresses change nothing:
/// from a stranger (no token) they are `rx_no_session`, from the peer's
/// main or rail address with a wrong token `rx_bad_token`; none is
/// delivered, acknowledges anything, adds a rail or a peer, or restarts a
/// session; a packet from a rail address carrying the cookie of a new nonce
/// opens at most a session of its own (a rail address never restarts its
/// peer). The transfer under way completes exactly once.
#[test]
fn forgeries_aimed_at_rails_change_nothing() {
    let mut sim = net(5, &[cfg(0, 2, 10), cfg(1, 2, 20)], &[2, 2]);
    transfer(&mut sim, 0, 1, 50);
    let n = 3000u64;
    let base = NEXT_TOKEN.fetch_add(n, Ordering::Relaxed);
    for t in base..base + n {
        sim.nodes[0].push(addr(1), t, payload(t, 1200));
    }
    sim.run_until(sim.now + Duration::from_micros(300), |_| false);
    let before = sim.nodes[1].srd.stats().clone();
    let stranger = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 9, 9, 9)), PORT);
    let rail1 = SocketAddr::new(rail_addr(0, 1).ip(), PORT + 5);
    let main = SocketAddr::new(addr(0).ip(), PORT + 1);
    let hijack = [addr(0).ip(), IpAddr::V4(Ipv4Addr::new(10, 9, 9, 9))];
    let mut expect_no_session = 0;
    let mut expect_bad_token = 0;
    for k in 0..50u64 {
        let wrong = 0x1234_5678_9abc_def0 ^ k;
        let now = sim.now;
        let node = &mut sim.nodes[1];
        // RAILS claiming the stranger as host 0's rail: from the stranger,
        // from host 0's main address and from its rail, without the token.
        node.handle_datagram(now, stranger, &rails_packet(PORT, 10, wrong, true, &hijack));
        expect_no_session += 1;
        node.handle_datagram(now, main, &rails_packet(PORT, 10, wrong, true, &hijack));
        node.handle_datagram(now, rail1, &rails_packet(PORT, 10, wrong, false, &hijack));
        expect_bad_token += 2;
        // DATA that would acknowledge and deliver, from the rail address.
        node.handle_datagram(now, rail1, &data_packet(PORT, 10, wrong, 5 + k as u32));
        node.handle_datagram(now, rail1, &data_packet(PORT, 77 + k, wrong, 5));
        expect_bad_token += 2;
        sim.run_until(now + Duration::from_micros(50), |_| false);
    }
    let s = sim.nodes[1].srd.stats().clone();
    assert_eq!(s.rx_no_session - before.rx_no_session, expect_no_session);
    assert_eq!(s.rx_bad_token - before.rx_bad_token, expect_bad_token);
    assert_eq!(
        (s.rx_rails, s.peers, s.peer_restarts),
        (before.rx_rails, 1, 0)
    );
    let limit = sim.now + Duration::from_secs(20);
    sim.run_until(limit, |s| s.nodes[0].acked().count() as u64 >= n + 50);
    assert_eq!(sim.nodes[0].acked().count() as u64, n + 50);
    assert_eq!(sim.nodes[0].failed().count(), 0);
    let mut seen = std::collections::HashSet::new();
    for x in &sim.nodes[1].arrived {
        assert!(seen.insert(token_of(&x.data).expect("intact")), "twice");
    }
    assert!((base..base + n).all(|t| seen.contains(&t)));
    assert!(
        sim.nodes[1]
            .arrived
            .iter()
            .all(|a| a.data != payload(999_999, 64)),
        "a forged payload was delivered"
    );
    assert_eq!(rails_in_use(&sim, 1, 0), vec![4, 4], "no rail added");
    assert_eq!(sim.nodes[0].srd.stats().peer_restarts, 0);
}

/// A peer that claims another endpoint's address as its rail (a buggy or
/// malicious peer, `PROTOCOL.md` §11): the check HELLO to that address is
/// answered by the other endpoint's own nonce, so the rail is refused and
/// none of the claimer's traffic goes there; if the other endpoint is
/// already a peer, its address is refused at once, without a check. The
/// other endpoint's own session with us works either way.
#[test]
fn a_rail_claiming_another_endpoints_address_is_refused() {
    for victim_first in [false, true] {
        // Host 0: us (two rails). Host 1: the victim (one rail). Host 2:
        // the claimer, whose rail 1 "is" the victim's address.
        let mut claimer = config(2, PATHS, 30);
        claimer.rails = vec![addr(2).ip(), addr(1).ip()];
        let mut sim = net(6, &[cfg(0, 2, 10), cfg(1, 1, 20), claimer], &[2, 1, 1]);
        if victim_first {
            transfer(&mut sim, 1, 0, 100);
        }
        transfer(&mut sim, 0, 2, 300);
        transfer(&mut sim, 2, 0, 300);
        let s = sim.nodes[0].srd.stats();
        assert_eq!(s.rails_valid, 0, "victim first {victim_first}: {s:?}");
        assert_eq!(s.rails_refused, 1, "victim first {victim_first}: {s:?}");
        assert_eq!(rails_in_use(&sim, 0, 2), vec![4]);
        let v = sim.nodes[1].srd.stats();
        // At most the one check HELLO reached the victim (answered
        // statelessly); no packet of the claimer's session.
        let checks = if victim_first { 0 } else { 1 };
        assert_eq!(
            v.tx_challenges, checks,
            "victim first {victim_first}: {v:?}"
        );
        assert_eq!(
            v.rx_bad_token + v.rx_no_session,
            0,
            "victim first {victim_first}: {v:?}"
        );
        // The victim's own session with us works, whichever came first.
        transfer(&mut sim, 1, 0, 100);
        transfer(&mut sim, 0, 1, 100);
    }
}

/// Sees each packet moved by `pump` first: (sender, bytes, receiver, source
/// address); true = handled (not delivered as is).
type Tap<'a> = &'a mut dyn FnMut(usize, &[u8], &mut spray::srd::Srd, SocketAddr) -> bool;

/// Move packets between two cores by hand until both are quiet, at `now`
/// (each packet from the address of the rail its path names); `tap` sees
/// each packet first and may deliver something else in its place.
fn pump(srds: &mut [spray::srd::Srd; 2], now: Instant, tap: Tap<'_>) {
    let mut buf = vec![0u8; 65536];
    for _ in 0..1000 {
        let mut moved = false;
        for a in 0..2 {
            let b = 1 - a;
            while let Some(t) = srds[a].poll_transmit(now, &mut buf) {
                moved = true;
                let from = SocketAddr::new(
                    rail_addr(a, usize::from(t.path / PATHS)).ip(),
                    PORT + u16::from(t.path),
                );
                let pkt = buf[..t.len].to_vec();
                if tap(a, &pkt, &mut srds[b], from) {
                    continue;
                }
                srds[b].handle_datagram(now, from, &pkt);
            }
        }
        if !moved {
            return;
        }
    }
    panic!("no end to the packets");
}

/// With a job key the RAILS exchange is authenticated like every session
/// packet: a RAILS altered on the way (its addresses) fails its tag and is
/// dropped (`rx_bad_mac`) before anything is learned; the real one puts
/// the rails in use.
#[test]
fn with_a_job_key() {
    let mk = |i: usize, nonce: u64| {
        let mut c = cfg(i, 2, nonce);
        c.auth_key = Some(AuthKey(b"rails job key".to_vec()));
        spray::srd::Srd::new(&c)
    };
    let mut srds = [mk(0, 10), mk(1, 20)];
    let b = srds[0].peer(addr(1));
    let p = payload(1, 100);
    spray::Datagrams::send(&mut srds[0], b, 1, p.len(), &mut |x| x.copy_from_slice(&p)).unwrap();
    let mut altered = 0;
    let mut t = 1_000_000u64;
    for _ in 0..20 {
        pump(
            &mut srds,
            Instant::from_nanos(t),
            &mut |from, pkt, to, addr| {
                if from == 0 && pkt[1] == PacketType::Rails as u8 && altered == 0 {
                    let mut x = pkt.to_vec();
                    let last = x.len() - 1;
                    x[last] ^= 1;
                    let before = (to.stats().rx_bad_mac, to.stats().rx_rails);
                    to.handle_datagram(Instant::from_nanos(t), addr, &x);
                    let s = to.stats();
                    assert_eq!((s.rx_bad_mac, s.rx_rails), (before.0 + 1, before.1));
                    altered += 1;
                }
                false
            },
        );
        t += 3_000_000;
        for s in srds.iter_mut() {
            s.handle_timeout(Instant::from_nanos(t));
        }
    }
    assert_eq!(altered, 1, "no RAILS seen");
    for (k, s) in srds.iter().enumerate() {
        let st = s.stats();
        assert_eq!((st.rails_valid, st.rx_rails), (1, 1), "node {k}: {st:?}");
        let paths: Vec<u8> = s.peer_stats()[0].paths.iter().map(|x| x.rail).collect();
        assert_eq!(paths, [0, 0, 0, 0, 1, 1, 1, 1], "node {k}");
    }
}
