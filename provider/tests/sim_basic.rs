//! Basic SRD behaviour over the simulator: lossless transfer, ping-pong
//! packet economy, loss repair.

use core::time::Duration;

use spray::sim::check::{check_pair, config, payload};
use spray::sim::{addr, LinkSpec, Sim, SrdNode};
use spray::time::Instant;

fn pair(seed: u64, paths: u8, spec: LinkSpec) -> Sim<SrdNode> {
    let nodes = vec![
        SrdNode::new(&config(0, paths, 10)),
        SrdNode::new(&config(1, paths, 20)),
    ];
    Sim::new(seed, nodes, vec![spec; usize::from(paths)])
}

fn secs(s: f64) -> Instant {
    Instant::from_nanos((s * 1e9) as u64)
}

#[test]
fn lossless_transfer() {
    let mut spec = LinkSpec::ideal(Duration::from_micros(20));
    spec.bandwidth = 1_250_000_000;
    let mut sim = pair(1, 4, spec);
    let n = 2000;
    for t in 0..n {
        sim.nodes[0].push(addr(1), t, payload(t, 1000));
    }
    let ok = sim.run_until(secs(1.0), |s| s.nodes[0].acked().count() as u64 == n);
    let o = check_pair(&sim, 0, 1, n).unwrap();
    let st = sim.nodes[0].srd.stats().clone();
    println!("{o:?} t={:?} {st:?}", sim.now);
    assert!(ok, "not done: {o:?}");
    assert_eq!(o.delivered, n);
    assert_eq!(st.retransmits, 0);
    assert_eq!(sim.nodes[0].srd.bytes_in_flight(spray::PeerId(0)), 0);
}

#[test]
fn ping_pong_one_packet_each_way() {
    let mut sim = pair(2, 8, LinkSpec::ideal(Duration::from_micros(10)));
    let rounds = 100u64;
    // Host 0 sends; host 1 answers each arrival at once; host 0 sends the
    // next when the answer arrives.
    sim.nodes[0].push(addr(1), 0, payload(0, 8));
    let mut r = 0;
    while r < rounds {
        let want0 = r as usize + 1;
        sim.run_until(secs(1.0), |s| s.nodes[1].arrived.len() >= want0);
        sim.nodes[1].push(addr(0), r, payload(r, 8));
        sim.run_until(secs(1.0), |s| s.nodes[0].arrived.len() >= want0);
        r += 1;
        if r < rounds {
            sim.nodes[0].push(addr(1), r, payload(r, 8));
        }
    }
    let a = sim.nodes[0].srd.stats().clone();
    let b = sim.nodes[1].srd.stats().clone();
    println!("a {a:?}\nb {b:?}");
    assert_eq!(sim.nodes[0].arrived.len() as u64, rounds);
    assert_eq!(a.tx_data, rounds);
    assert_eq!(b.tx_data, rounds);
    // Only the very last message may need a pure ack (no reply carries it).
    assert!(
        a.tx_acks <= 1 && b.tx_acks <= 1,
        "pure acks: {} {}",
        a.tx_acks,
        b.tx_acks
    );
}

#[test]
fn repairs_random_loss() {
    for seed in 0..5 {
        let mut spec = LinkSpec::ideal(Duration::from_micros(20));
        spec.loss = 0.05;
        spec.jitter = Duration::from_micros(10);
        let mut sim = pair(seed, 8, spec);
        let n = 1000;
        for t in 0..n {
            sim.nodes[0].push(addr(1), t, payload(t, 200));
        }
        let ok = sim.run_until(secs(2.0), |s| s.nodes[0].acked().count() as u64 == n);
        let o = check_pair(&sim, 0, 1, n).unwrap();
        let st = sim.nodes[0].srd.stats().clone();
        println!(
            "seed {seed}: {o:?} t={:?} {st:?} {:?}",
            sim.now,
            sim.nodes[1].srd.stats()
        );
        assert!(ok, "seed {seed}: not done: {o:?} {st:?}");
    }
}

/// Ping-pong (fi_pingpong style) with 1 % and 5 % loss: every round
/// completes, and a lost packet costs a few RTTs (tail probe), not an RTO.
#[test]
fn ping_pong_with_loss_does_not_stall() {
    for (loss, seed) in [(0.01, 31u64), (0.05, 32)] {
        let mut spec = LinkSpec::ideal(Duration::from_micros(10));
        spec.loss = loss;
        let mut sim = pair(seed, 8, spec);
        let rounds = 2000u64;
        let mut worst = Duration::ZERO;
        for r in 0..rounds {
            let t0 = sim.now;
            let want = r as usize + 1;
            sim.nodes[0].push(addr(1), r, payload(r, 64));
            assert!(
                sim.run_until(secs(100.0), |s| s.nodes[1].arrived.len() >= want),
                "seed {seed}: ping {r} lost"
            );
            sim.nodes[1].push(addr(0), r, payload(r, 64));
            assert!(
                sim.run_until(secs(100.0), |s| s.nodes[0].arrived.len() >= want),
                "seed {seed}: pong {r} lost"
            );
            worst = worst.max(sim.now.saturating_since(t0));
        }
        let (a, b) = (
            sim.nodes[0].srd.stats().clone(),
            sim.nodes[1].srd.stats().clone(),
        );
        let avg_us = sim.now.as_nanos() as f64 / rounds as f64 / 1e3;
        println!(
            "ping-pong loss {loss}: avg round {avg_us:.1} us (ideal 20), worst {worst:?}, tail probes {}, timeouts {}",
            a.tail_probes + b.tail_probes,
            a.timeouts + b.timeouts
        );
        assert!(check_pair(&sim, 0, 1, rounds).is_ok() && check_pair(&sim, 1, 0, rounds).is_ok());
        // Far below the 2 ms minimum RTO on average.
        assert!(
            avg_us < 20.0 * (1.0 + 20.0 * loss) + 10.0,
            "avg round {avg_us:.1} us"
        );
    }
}

/// Datagrams acked together that share a token (a message's segments) are
/// reported in one `Acked` event with their count; every datagram is counted
/// once, and datagrams with tokens of their own get an event each.
#[test]
fn one_event_for_datagrams_acked_together_with_one_token() {
    let mut spec = LinkSpec::ideal(Duration::from_micros(20));
    spec.bandwidth = 1_250_000_000;
    let mut sim = pair(3, 4, spec);
    let (shared, n) = (7u64, 40u64);
    for t in 0..n {
        sim.nodes[0].push(addr(1), shared, payload(t, 1000));
    }
    for t in 100..105u64 {
        sim.nodes[0].push(addr(1), t, payload(t, 1000));
    }
    let ok = sim.run_until(secs(1.0), |s| s.nodes[0].acked().count() == 45);
    assert!(ok, "not all acked: {}", sim.nodes[0].acked().count());
    let mut shared_events = 0;
    let mut shared_count = 0;
    let mut own = Vec::new();
    for (_, e) in &sim.nodes[0].events {
        if let spray::dgram::DgramEvent::Acked { token, count, .. } = *e {
            if token == shared {
                shared_events += 1;
                shared_count += u64::from(count);
            } else {
                assert_eq!(count, 1, "token {token}");
                own.push(token);
            }
        }
    }
    assert_eq!(shared_count, n, "each datagram counted once");
    // One event per ack at most (21 here: acks of a few packets each, as
    // they come back over 4 paths out of order), not one per datagram.
    assert!(
        shared_events * 4 <= n * 3,
        "{shared_events} events for {n} datagrams"
    );
    own.sort_unstable();
    assert_eq!(own, (100..105).collect::<Vec<_>>());
    assert_eq!(sim.nodes[1].arrived.len() as u64, n + 5);
}
