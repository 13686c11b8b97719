//! One ECMP link of 4 silently dead, both ways, for the whole run (a
//! blackholed link): 16 paths hash onto the links unevenly; the two hosts
//! exchange rounds of 2 datagrams both ways (as MPI_Sendrecv does). Every
//! round after the first (whose timeout has the first-flight floor, 32 ms)
//! must complete within a few ms, and each side may time out at most once
//! per path of the dead link (its first loss there, on a path still
//! believed good). Before: rounds of 180 ms to 2.2 s (timeouts doubling),
//! and Intel MPI across 4 hosts failed with a peer unreachable. What was
//! wrong: pure ACKs and probes took bad paths' probe turns and died there;
//! a tail ask followed a lost packet onto its dead path; a young peer's
//! credit ramp counted as fan-in, so a packet resent after a timeout gave
//! an RTT sample of its age (srtt 30 us -> 16 ms).

use core::time::Duration;

use spray::sim::check::{check_pair, config, payload};
use spray::sim::{addr, LinkSpec, Sim, SrdNode};

const PATHS: u8 = 16;
/// Ports per link as random source ports fall: 5/3/4/4.
const MAP: [usize; 16] = [0, 2, 1, 3, 0, 2, 3, 0, 1, 2, 3, 0, 1, 3, 2, 0];

/// (most RTOs of one side, slowest round after the first in µs).
fn run(seed: u64, dead: usize, rounds: u64, per: u64, size: usize) -> (u64, u64) {
    let mut spec = LinkSpec::ideal(Duration::from_micros(15));
    spec.jitter = Duration::from_micros(5);
    let mut specs = vec![spec; 4];
    specs[dead].loss = 1.0;
    let nodes = vec![
        SrdNode::new(&config(0, PATHS, 10 * seed + 1)),
        SrdNode::new(&config(1, PATHS, 10 * seed + 2)),
    ];
    let mut sim = Sim::new(seed, nodes, specs);
    sim.path_links = MAP.to_vec();
    let mut slowest = 0u64;
    let mut tok = 0u64;
    for r in 0..rounds {
        let start = sim.now;
        for _ in 0..per {
            sim.nodes[0].push(addr(1), tok, payload(tok, size));
            sim.nodes[1].push(addr(0), tok, payload(tok, size));
            tok += 1;
        }
        let want = tok;
        let ok = sim.run_until(start + Duration::from_secs(5), |s| {
            (0..2).all(|i| s.nodes[i].acked().count() as u64 == want)
        });
        let took = sim.now.saturating_since(start).as_nanos() as u64 / 1000;
        assert!(
            ok,
            "seed {seed}, dead link {dead}: round {r} not done in 5 s"
        );
        if r > 0 {
            slowest = slowest.max(took);
        }
        if took > 5000 && std::env::var("SIM_DEAD_TRACE").is_ok() {
            let (a, b) = (sim.nodes[0].srd.stats(), sim.nodes[1].srd.stats());
            println!(
                "  round {r}: {took} us; rto {}/{} lost {}/{} path_lost {:?} / {:?}",
                a.timeouts, b.timeouts, a.lost, b.lost, a.path_lost, b.path_lost
            );
        }
        let pause = sim.now + Duration::from_micros(200);
        sim.run_until(pause, |_| false);
    }
    for (a, b) in [(0, 1), (1, 0)] {
        check_pair(&sim, a, b, tok).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    for i in 0..2 {
        let s = sim.nodes[i].srd.stats();
        println!(
            "  node {i}: rto {} tlp {} stall_probes {} lost {} retx {} hedges {} acks {} path_lost {:?}",
            s.timeouts, s.tail_probes, s.stall_probes, s.lost, s.retransmits, s.tail_hedges, s.tx_acks, s.path_lost
        );
    }
    let rto = sim.nodes[0]
        .srd
        .stats()
        .timeouts
        .max(sim.nodes[1].srd.stats().timeouts);
    (rto, slowest)
}

#[test]
fn rounds_both_ways_over_a_dead_link() {
    for dead in 0..4 {
        for seed in 1..=4 {
            let (rto, slow) = run(seed, dead, 200, 2, 1000);
            println!("dead {dead} seed {seed}: {rto} RTOs, slowest round {slow} us");
            let dead_paths = MAP.iter().filter(|&&l| l == dead).count() as u64;
            assert!(
                slow < 10_000,
                "seed {seed}, dead link {dead}: a round took {slow} us"
            );
            assert!(
                rto <= dead_paths,
                "seed {seed}, dead link {dead}: {rto} timeouts on one side ({dead_paths} dead paths)"
            );
        }
    }
}

/// Links die under a sender whose every path has an RTT sample: its
/// retransmission timer asks with stall probes, which mark no path lost;
/// on the fast path chosen every time they all died with it, and the peer
/// was declared unreachable after seconds (seen across 4 hosts). The next
/// stall probe after an unanswered one takes another path.
#[test]
fn stall_probes_move_off_a_path_that_died() {
    use spray::sim::{Event, EventKind};
    for seed in 1..=4u64 {
        let mut spec = LinkSpec::ideal(Duration::from_micros(15));
        spec.jitter = Duration::from_micros(3);
        let nodes = vec![
            SrdNode::new(&config(0, 4, 10 * seed + 1)),
            SrdNode::new(&config(1, 4, 10 * seed + 2)),
        ];
        let mut sim = Sim::new(seed, nodes, vec![spec; 4]);
        let mut tok = 0u64;
        let round = |sim: &mut Sim<SrdNode>, tok: &mut u64, limit: Duration| {
            let start = sim.now;
            sim.nodes[0].push(addr(1), *tok, payload(*tok, 1000));
            *tok += 1;
            let want = *tok;
            let ok = sim.run_until(start + limit, |s| s.nodes[0].acked().count() as u64 == want);
            let took = sim.now.saturating_since(start);
            let pause = sim.now + Duration::from_micros(300);
            sim.run_until(pause, |_| false);
            (ok, took)
        };
        // Every path gets RTT samples.
        for _ in 0..40 {
            assert!(round(&mut sim, &mut tok, Duration::from_secs(1)).0);
        }
        // Paths 0 and 1 (the fast-path choices) die towards the receiver.
        let from = sim.now;
        let until = from + Duration::from_secs(100);
        for k in 0..2 {
            sim.paths_mut(0, 1)[k].schedule.push(Event {
                from,
                until,
                kind: EventKind::Blackhole,
            });
        }
        for r in 0..20 {
            let (ok, took) = round(&mut sim, &mut tok, Duration::from_secs(2));
            assert!(
                ok,
                "seed {seed}: message {r} after the links died not acknowledged in 2 s: {:?}",
                sim.nodes[0].srd.stats()
            );
            assert!(
                took < Duration::from_millis(500),
                "seed {seed}: message {r} took {took:?}"
            );
        }
        check_pair(&sim, 0, 1, tok).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// The acks of one message are lost for 20 ms (the way back dies for a
/// while); the ack that finally arrives reports the packet's age, not a
/// receiver hold (flag ACK_REPEAT: its `recent` was acknowledged before).
/// Taken as a hold, that age raised every later retransmission timeout by
/// as much.
#[test]
fn a_repeated_ack_is_not_a_receiver_hold() {
    use spray::sim::{Event, EventKind};
    for seed in 1..=4u64 {
        let spec = LinkSpec::ideal(Duration::from_micros(15));
        let nodes = vec![
            SrdNode::new(&config(0, 1, 10 * seed + 1)),
            SrdNode::new(&config(1, 1, 10 * seed + 2)),
        ];
        let mut sim = Sim::new(seed, nodes, vec![spec; 1]);
        let mut tok = 0u64;
        let send = |sim: &mut Sim<SrdNode>, tok: &mut u64| {
            let start = sim.now;
            sim.nodes[0].push(addr(1), *tok, payload(*tok, 1000));
            *tok += 1;
            let want = *tok;
            let ok = sim.run_until(start + Duration::from_secs(2), |s| {
                s.nodes[0].acked().count() as u64 == want
            });
            assert!(ok, "seed {seed}: message {want} not acknowledged");
            let pause = sim.now + Duration::from_millis(1);
            sim.run_until(pause, |_| false);
        };
        for _ in 0..40 {
            send(&mut sim, &mut tok);
        }
        let rto = |sim: &Sim<SrdNode>| sim.nodes[0].srd.peer_stats()[0].rto_ns;
        let before = rto(&sim);
        let from = sim.now;
        sim.paths_mut(1, 0)[0].schedule.push(Event {
            from,
            until: from + Duration::from_millis(20),
            kind: EventKind::Blackhole,
        });
        send(&mut sim, &mut tok);
        // Settle, then a few messages more (the RTO's back-off is undone).
        for _ in 0..5 {
            send(&mut sim, &mut tok);
        }
        let after = rto(&sim);
        assert!(
            after < before + 5_000_000,
            "seed {seed}: RTO {before} ns before the lost acks, {after} ns after"
        );
        check_pair(&sim, 0, 1, tok).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}
