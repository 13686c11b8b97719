//! Bounded peer state (issue 17, finding 4): idle peers give their memory
//! back and resume without a handshake and without the other side noticing;
//! quiet peers trim their send ring and path records within a second and
//! keep each path's RTT and health; the number of peers remote handshakes
//! can add is capped.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use core::time::Duration;

use spray::dgram::DgramEvent;
use spray::sim::check::{config, payload, row, token_of};
use spray::sim::{addr, Event, EventKind, LinkSpec, Sim, SrdNode};
use spray::srd::Srd;
use spray::time::Instant;
use spray::wire::srd::{HandshakeRepr, Packet, PacketType, Repr, HANDSHAKE_LEN, HEADER_LEN};

/// Tokens `lo..hi` from `a` arrived at `b` exactly once, intact, and were
/// acked at `a`, and nothing failed.
fn check(sim: &Sim<SrdNode>, a: usize, b: usize, lo: u64, hi: u64) {
    let pa = sim.nodes[b].srd.peer_addr_id(addr(a)).unwrap();
    let mut got: Vec<u64> = sim.nodes[b]
        .arrived
        .iter()
        .filter(|x| x.peer == pa)
        .map(|x| token_of(&x.data).expect("intact"))
        .filter(|t| (lo..hi).contains(t))
        .collect();
    got.sort_unstable();
    assert_eq!(got, (lo..hi).collect::<Vec<_>>(), "{a}->{b}: not each once");
    let acked = sim.nodes[a]
        .acked()
        .filter(|t| (lo..hi).contains(t))
        .count() as u64;
    assert_eq!(acked, hi - lo, "{a}->{b}: not all acked");
    assert_eq!(sim.nodes[a].failed().count(), 0);
}

/// Let both nodes idle for `d`; the sweep runs on the next call into the
/// core (an idle endpoint is not woken for it): a timer call on each side
/// stands for whatever comes next.
fn idle_for(sim: &mut Sim<SrdNode>, d: Duration) {
    let until = sim.now + d;
    sim.run_until(until, |_| false);
    // (`run_until` stops at the last event: the clock runs on idle.)
    sim.now = sim.now.max(until);
    for i in 0..2 {
        let now = sim.now;
        sim.nodes[i].srd.handle_timeout(now);
    }
}

/// Peers idle past `peer_idle_timeout` are reclaimed (their memory falls to
/// that of a new peer) on one side or both; traffic then resumes in both
/// directions with no handshake, no restart and exactly-once delivery.
#[test]
fn idle_peers_are_reclaimed_and_resume_unnoticed() {
    for both in [false, true] {
        let paths = 4;
        let mut spec = LinkSpec::ideal(Duration::from_micros(20));
        spec.bandwidth = 125_000_000;
        spec.loss = 0.01;
        let mut c0 = config(0, paths, 10);
        let mut c1 = config(1, paths, 20);
        c0.peer_idle_timeout = Duration::from_millis(200);
        c1.peer_idle_timeout = if both {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(100)
        };
        let mut sim = Sim::new(
            7,
            vec![SrdNode::new(&c0), SrdNode::new(&c1)],
            vec![spec; usize::from(paths)],
        );
        let mut next = 0u64;
        let mut rounds = Vec::new();
        for round in 0..3u64 {
            let lo = next;
            // Enough to wrap the send ring (4096 slots) once in round 0.
            let n = if round == 0 { 5000 } else { 500 };
            for t in lo..lo + n {
                sim.nodes[0].push(addr(1), t, payload(t, 1200));
                sim.nodes[1].push(addr(0), t, payload(t, 1200));
            }
            next = lo + n;
            let done = |s: &Sim<SrdNode>| (0..2).all(|i| s.nodes[i].acked().count() as u64 == next);
            assert!(
                sim.run_until(sim.now + Duration::from_secs(2), done),
                "round {round} did not finish"
            );
            check(&sim, 0, 1, lo, next);
            check(&sim, 1, 0, lo, next);
            let used = sim.nodes[0].srd.peer_memory();
            // Idle past both timeouts.
            idle_for(&mut sim, Duration::from_millis(600));
            let idle = sim.nodes[0].srd.peer_memory();
            rounds.push((used, idle));
            assert!(
                idle * 10 < used,
                "round {round}: {used} B before, {idle} B idle: not reclaimed"
            );
            // The peer struct (~1.6 KB) and the address map, not its path
            // records (4 x 248 B): those come back when it is used again.
            assert!(
                idle <= 2048,
                "round {round}: {idle} B for a reclaimed peer: path records kept?"
            );
        }
        let (s0, s1) = (sim.nodes[0].srd.stats(), sim.nodes[1].srd.stats());
        assert_eq!(s0.peers_reclaimed, 3);
        assert_eq!(s1.peers_reclaimed, if both { 3 } else { 0 });
        for s in [s0, s1] {
            assert_eq!(
                s.tx_hellos + s.sessions_accepted,
                1,
                "a resumed peer needed a handshake: {s:?}"
            );
            assert_eq!(
                s.peer_restarts + s.failed + s.rx_bad_token + s.rx_no_session,
                0,
                "{s:?}"
            );
        }
        for n in &sim.nodes {
            assert!(!n
                .events
                .iter()
                .any(|(_, e)| matches!(e, DgramEvent::PeerRestarted { .. })));
        }
        // Nothing left armed: an idle endpoint does not wake up.
        assert_eq!(sim.nodes[0].srd.poll_timeout(), None);
        row(
            &format!("idle peer reclaimed ({}), traffic resumes", if both { "both sides" } else { "one side" }),
            &format!("peer memory busy/idle per round: {rounds:?} B; 0 handshakes, 0 restarts, exactly once"),
            "memory back to a new peer's; no handshake; exactly once",
            true,
        );
    }
}

/// A peer quiet for `peer_trim_after` gives back its send ring (sized by
/// its largest flight: 754 KB once it had been sent 4096 packets, before the
/// ring followed the flight) and its path records, long before the idle
/// timeout; it keeps each path's RTT and health, so traffic resumes on the
/// measured RTTs and not on the path known dead (one of 4 blackholed from
/// 0 to 1 throughout), exactly once and without a handshake.
/// Peer memory busy and trimmed after a round, bytes, and each path's
/// (srtt, min RTT), ns.
type Round = (usize, usize, Vec<(u64, u64)>);

#[test]
fn quiet_peers_trim_and_keep_path_rtts_and_health() {
    let paths = 4u8;
    let mut spec = LinkSpec::ideal(Duration::from_micros(20));
    spec.bandwidth = 125_000_000;
    let mut cfgs = [config(0, paths, 10), config(1, paths, 20)];
    for c in &mut cfgs {
        c.peer_trim_after = Duration::from_millis(50);
        c.peer_idle_timeout = Duration::from_secs(100);
    }
    let mut sim = Sim::new(
        11,
        vec![SrdNode::new(&cfgs[0]), SrdNode::new(&cfgs[1])],
        vec![spec; usize::from(paths)],
    );
    sim.paths_mut(0, 1)[3].schedule.push(Event {
        from: Instant::ZERO,
        until: Instant::from_nanos(3_600_000_000_000),
        kind: EventKind::Blackhole,
    });
    let stats = |sim: &Sim<SrdNode>| sim.nodes[0].srd.peer_stats().remove(0);
    let mut next = 0u64;
    // Per round: peer memory busy and trimmed, and each path's (srtt, min RTT).
    let mut report: Vec<Round> = Vec::new();
    for round in 0..3u64 {
        let lo = next;
        let n = if round == 0 { 6000 } else { 500 };
        for t in lo..lo + n {
            sim.nodes[0].push(addr(1), t, payload(t, 1200));
            sim.nodes[1].push(addr(0), t, payload(t, 1200));
        }
        next = lo + n;
        if round > 0 {
            // Queued, not yet sent: the path records are back from the summary.
            let now = sim.now;
            sim.nodes[0].pump(now);
            let back = stats(&sim);
            let before: &Vec<(u64, u64)> = &report[report.len() - 1].2;
            for (k, p) in back.paths.iter().enumerate() {
                let (srtt, min) = before[k];
                // Kept to the microsecond (0.1 % above 2 ms), rounded up.
                assert!(
                    (srtt..=srtt + 1000).contains(&p.srtt_ns)
                        && (min..=min + 1000).contains(&p.min_rtt_ns),
                    "round {round} path {k}: srtt/min {}/{} ns back, {srtt}/{min} before the trim",
                    p.srtt_ns,
                    p.min_rtt_ns
                );
            }
        }
        let done = |s: &Sim<SrdNode>| (0..2).all(|i| s.nodes[i].acked().count() as u64 == next);
        assert!(
            sim.run_until(sim.now + Duration::from_secs(5), done),
            "round {round} did not finish"
        );
        check(&sim, 0, 1, lo, next);
        check(&sim, 1, 0, lo, next);
        let st = stats(&sim);
        if round > 0 {
            // Fresh counters since the trim: the dead path got its probe, not
            // a flowlet's share of the round.
            let dead = &st.paths[3];
            assert!(
                dead.sent_packets <= 2,
                "round {round}: {} packets to the dead path after the trim",
                dead.sent_packets
            );
        }
        let rtts: Vec<(u64, u64)> = st.paths.iter().map(|p| (p.srtt_ns, p.min_rtt_ns)).collect();
        let used = sim.nodes[0].srd.peer_memory();
        idle_for(&mut sim, Duration::from_millis(200));
        let quiet = sim.nodes[0].srd.peer_memory();
        assert!(
            quiet <= 2048,
            "round {round}: {quiet} B for a trimmed peer ({used} B before)"
        );
        if round == 0 {
            assert!(
                used > 20 * quiet,
                "round 0: {used} B busy, {quiet} B trimmed"
            );
        }
        report.push((used, quiet, rtts));
    }
    for n in &sim.nodes {
        let s = n.srd.stats();
        assert_eq!(s.peers_trimmed, 3, "{s:?}");
        assert_eq!(s.peers_reclaimed, 0, "{s:?}");
        assert_eq!(s.tx_hellos + s.sessions_accepted, 1, "{s:?}");
        assert_eq!(s.peer_restarts + s.failed, 0, "{s:?}");
    }
    let mem: Vec<(usize, usize)> = report.iter().map(|r| (r.0, r.1)).collect();
    row(
        "quiet peer trimmed (50 ms), traffic resumes",
        &format!("peer memory busy/trimmed per round: {mem:?} B; RTTs kept; dead path not reused"),
        "ring and path records back; RTT and health kept; exactly once",
        true,
    );
}

/// An attacker that owns many addresses and completes real handshakes from
/// each still adds at most `max_peers` peers; the rest are refused and
/// counted, and the table's memory stays bounded.
#[test]
fn handshaken_peers_are_capped() {
    let me: SocketAddr = "198.18.0.1:7000".parse().unwrap();
    let mut cfg = spray::Config::new(spray::EpMode::Rdm, me);
    cfg.max_peers = 1000;
    let mut srd = Srd::new(&cfg);
    let mut buf = vec![0u8; 65536];
    let clients = 5000u32;
    for k in 0..clients {
        let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0xc612_0000 + k)), 9000);
        let nonce = u64::from(k) + 1;
        let now = Instant::from_nanos(u64::from(k) * 10_000);
        let mut hello = vec![0u8; HEADER_LEN + HANDSHAKE_LEN];
        let h = Repr {
            ty: PacketType::Hello,
            flags: 0,
            path: 0,
            src_port: 9000,
            src_nonce: nonce,
            dst_token: 0,
            psn: 0,
            psn_floor: 0,
            ack: None,
            payload_len: HANDSHAKE_LEN as u16,
        };
        h.emit(&mut hello).unwrap();
        HandshakeRepr { value: 42, caps: 0 }
            .emit(&mut hello[HEADER_LEN..])
            .unwrap();
        srd.handle_datagram(now, from, &hello);
        let t = srd.poll_transmit(now, &mut buf).expect("a CHALLENGE");
        assert_eq!(t.dst, from);
        let p = Packet::new_checked(&buf[..t.len]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap().dst_token, 42);
        let cookie = HandshakeRepr::parse(p.payload()).unwrap().value;
        // The third leg: a PROBE with the cookie.
        let mut probe = vec![0u8; HEADER_LEN];
        Repr {
            ty: PacketType::Probe,
            dst_token: cookie,
            payload_len: 0,
            ..h
        }
        .emit(&mut probe)
        .unwrap();
        srd.handle_datagram(now, from, &probe);
        while srd.poll_transmit(now, &mut buf).is_some() {}
    }
    let s = srd.stats();
    println!(
        "{clients} handshaken clients, max_peers 1000: peers {}, refused {}, table {} B",
        s.peers,
        s.rx_peer_limit,
        srd.peer_memory()
    );
    assert_eq!(s.peers, 1000);
    assert_eq!(s.sessions_accepted, 1000);
    assert_eq!(s.rx_peer_limit, u64::from(clients) - 1000);
    assert!(
        srd.peer_memory() < 1000 * 4096,
        "{} B for 1000 idle peers",
        srd.peer_memory()
    );
}
