//! Peer lifecycle over the simulator: a peer restarts with a new nonce while
//! old packets are in flight; a peer disappears and outstanding sends fail
//! back in the configured time.

use core::time::Duration;

use spray::dgram::{DgramEvent, FailReason};
use spray::sim::check::{config, payload, token_of};
use spray::sim::{addr, LinkSpec, Sim, SrdNode};
use spray::time::Instant;

fn ms(x: u64) -> Instant {
    Instant::from_nanos(x * 1_000_000)
}

#[test]
fn peer_restart_with_old_packets_in_flight() {
    let paths = 4;
    let mut spec = LinkSpec::ideal(Duration::from_micros(20));
    spec.bandwidth = 125_000_000;
    let nodes = vec![
        SrdNode::new(&config(0, paths, 10)),
        SrdNode::new(&config(1, paths, 20)),
    ];
    let mut sim = Sim::new(11, nodes, vec![spec; usize::from(paths)]);
    // One slow path each way keeps packets of the old session in flight long
    // after the restart.
    sim.paths_mut(0, 1)[2].spec.delay = Duration::from_millis(2);
    sim.paths_mut(1, 0)[2].spec.delay = Duration::from_millis(2);
    for t in 0..400 {
        sim.nodes[0].push(addr(1), t, payload(t, 1000));
        sim.nodes[1].push(addr(0), 10_000 + t, payload(10_000 + t, 1000));
    }
    sim.run_until(Instant::from_nanos(300_000), |_| false);
    let before = sim.nodes[1].arrived.len();
    assert!(
        before > 0 && before < 400,
        "restart should happen mid-transfer ({before})"
    );
    // Host 1 restarts: a new process on the same address, a new nonce.
    sim.nodes[1] = SrdNode::new(&config(1, paths, 30));
    for t in 1000..1100 {
        sim.nodes[1].push(addr(0), t, payload(t, 500));
    }
    sim.run_until(ms(20), |_| false);
    // New traffic 0 -> 1 after host 0 has learnt the new incarnation.
    for t in 2000..2100 {
        sim.nodes[0].push(addr(1), t, payload(t, 500));
    }
    let settled =
        |s: &Sim<SrdNode>| s.nodes[0].acked().count() + s.nodes[0].failed().count() == 500;
    assert!(sim.run_until(ms(200), settled), "host 0 did not settle");
    assert!(
        sim.run_until(ms(400), |s| s.nodes[1].acked().count() == 100),
        "new host 1 did not finish"
    );

    let a = sim.nodes[0].srd.stats().clone();
    let b = sim.nodes[1].srd.stats().clone();
    println!("host 0: {a:?}\nnew host 1: {b:?}");
    let restarted = sim.nodes[0]
        .events
        .iter()
        .filter(|(_, e)| matches!(e, DgramEvent::PeerRestarted { .. }))
        .count();
    assert_eq!(restarted, 1, "host 0 must see exactly one restart");
    let failed_restart = sim.nodes[0]
        .events
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                DgramEvent::Failed {
                    reason: FailReason::PeerRestarted,
                    ..
                }
            )
        })
        .count();
    assert!(
        failed_restart > 0,
        "datagrams sent to the old incarnation must fail back"
    );
    // Everything of the new session was acked; nothing was failed wrongly.
    let acked: Vec<u64> = sim.nodes[0].acked().collect();
    for t in 2000..2100 {
        assert!(acked.contains(&t), "token {t} of the new session not acked");
    }
    // Stale packets were dropped and counted on at least one side.
    assert!(
        a.rx_stale_src + a.rx_bad_token + b.rx_no_session + b.rx_bad_token > 0,
        "no stale packet was seen"
    );
    // The new host 1 got every new-session datagram exactly once, and host 0
    // got every datagram of the new host 1 exactly once.
    let mut got: Vec<u64> = sim.nodes[1]
        .arrived
        .iter()
        .filter_map(|x| token_of(&x.data))
        .collect();
    got.sort_unstable();
    let n = got.len();
    got.dedup();
    assert_eq!(n, got.len(), "duplicate delivery at the new host 1");
    for t in 2000..2100 {
        assert!(
            got.binary_search(&t).is_ok(),
            "token {t} missing at new host 1"
        );
    }
    let mut at0: Vec<u64> = sim.nodes[0]
        .arrived
        .iter()
        .filter_map(|x| token_of(&x.data))
        .collect();
    at0.sort_unstable();
    let n0 = at0.len();
    at0.dedup();
    assert_eq!(n0, at0.len(), "duplicate delivery at host 0");
    for t in 1000..1100 {
        assert!(
            at0.binary_search(&t).is_ok(),
            "token {t} from the new host 1 missing"
        );
    }
    spray::sim::check::row(
        "peer restarts (new nonce) with old packets in flight",
        &format!(
            "stale dropped and counted: {} (old incarnation) + {} (no session at the new one); {failed_restart} old sends failed back; new session 100/100 exactly once",
            a.rx_stale_src + a.rx_bad_token, b.rx_no_session + b.rx_bad_token
        ),
        "stale dropped and counted; new session works",
        true,
    );
}

#[test]
fn vanished_peer_fails_outstanding_in_time() {
    let paths = 4;
    let mut c0 = config(0, paths, 10);
    c0.unreachable_timeout = Duration::from_millis(50);
    let nodes = vec![SrdNode::new(&c0), SrdNode::new(&config(1, paths, 20))];
    let mut spec = LinkSpec::ideal(Duration::from_micros(20));
    spec.bandwidth = 125_000_000;
    let mut sim = Sim::new(12, nodes, vec![spec; usize::from(paths)]);
    let n = 2000u64;
    for t in 0..n {
        sim.nodes[0].push(addr(1), t, payload(t, 1000));
    }
    sim.run_until(Instant::from_nanos(500_000), |_| false);
    sim.down[1] = true;
    let gone = sim.now;
    let settled = |s: &Sim<SrdNode>| {
        s.nodes[0].acked().count() as u64 + s.nodes[0].failed().count() as u64 == n
            && s.nodes[0].outbox.is_empty()
    };
    assert!(
        sim.run_until(ms(1000), settled),
        "sends to a vanished peer never failed back"
    );
    let mut fails: Vec<Instant> = sim.nodes[0]
        .events
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                DgramEvent::Failed {
                    reason: FailReason::Unreachable,
                    ..
                }
            )
        })
        .map(|(t, _)| *t)
        .collect();
    fails.dedup();
    let first = fails
        .first()
        .expect("some datagrams must fail")
        .saturating_since(gone);
    let acked = sim.nodes[0].acked().count();
    println!(
        "vanished: acked {acked}, failed {} in {} batches, first failure {first:?} after the peer vanished",
        n as usize - acked,
        fails.len()
    );
    // What was outstanding fails after the timeout (+ at most an RTO or so);
    // what the application queues afterwards gets its own full timeout.
    assert!(
        first >= Duration::from_millis(50) && first <= Duration::from_millis(60),
        "first failure after {first:?}"
    );
    for w in fails.windows(2) {
        let gap = w[1].saturating_since(w[0]);
        assert!(
            gap <= Duration::from_millis(60),
            "{gap:?} between failure batches"
        );
    }
    // Nothing outstanding: no timer left running for the dead peer.
    sim.run_until(ms(2000), |_| false);
    assert_eq!(sim.nodes[0].srd.outstanding(spray::PeerId(0)), 0);
    assert_eq!(
        sim.nodes[0].srd.poll_timeout(),
        None,
        "a timer is still armed"
    );
    spray::sim::check::row(
        "peer disappears (unreachable timeout 50 ms)",
        &format!("first failure {first:?} after it vanished; no timer left, nothing outstanding"),
        "fail within the configured time; no hang",
        true,
    );
}
