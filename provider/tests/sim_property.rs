//! Property test over many seeds: random small two-host scenarios (loss,
//! duplication, reordering by jitter, corruption, 1–8 paths, random sizes and
//! counts, traffic one or both ways). Every datagram is delivered exactly
//! once or failed back; nothing stays outstanding; the run terminates.

use core::time::Duration;

use spray::rng::Rng;
use spray::sim::check::{check_pair, config, payload};
use spray::sim::{addr, Event, EventKind, LinkSpec, Sim, SrdNode};
use spray::time::Instant;
use spray::{Datagrams, PeerId};

fn scenario(seed: u64) -> Result<String, String> {
    let mut r = Rng::new(seed);
    let paths = 1 + r.below(8) as u8;
    let spec = LinkSpec {
        delay: Duration::from_micros(5 + r.below(200)),
        jitter: Duration::from_micros(r.below(100)),
        bandwidth: if r.chance(0.5) {
            0
        } else {
            100_000_000 + r.below(2_000_000_000)
        },
        buffer: 0,
        loss: r.unit() * 0.2,
        dup: if r.chance(0.3) { r.unit() * 0.05 } else { 0.0 },
        corrupt: if r.chance(0.3) { r.unit() * 0.05 } else { 0.0 },
    };
    let mut specs = vec![spec.clone(); usize::from(paths)];
    if r.chance(0.3) {
        // One path much slower than the others.
        specs[0].delay *= 10;
    }
    let mut a = config(0, paths, 100);
    let mut b = config(1, paths, 200);
    if r.chance(0.5) {
        a.max_datagram = 200 + r.below(9000) as usize;
        b.max_datagram = a.max_datagram;
    }
    if r.chance(0.5) {
        // The FFI driver's default: acknowledge at the end of each batch.
        a.ack_delay = Duration::ZERO;
        b.ack_delay = Duration::ZERO;
    }
    if r.chance(0.2) {
        a.ack_every = 1 + r.below(32) as u32;
        b.ack_every = a.ack_every;
    }
    let nodes = vec![SrdNode::new(&a), SrdNode::new(&b)];
    let mut sim = Sim::new(seed, nodes, specs);
    // Sometimes a path, or every path, goes dark for a while (both ways).
    if r.chance(0.3) {
        let all = r.chance(0.3);
        let from = Instant::from_nanos(r.below(2_000_000));
        let until = from + Duration::from_micros(100 + r.below(5_000));
        let k = r.below(u64::from(paths)) as usize;
        for (a, b) in [(0, 1), (1, 0)] {
            for (i, l) in sim.paths_mut(a, b).iter_mut().enumerate() {
                if all || i == k {
                    l.schedule.push(Event {
                        from,
                        until,
                        kind: EventKind::Blackhole,
                    });
                }
            }
        }
    }
    let max = sim.nodes[0].srd.max_payload();
    let n0 = 1 + r.below(150);
    let n1 = if r.chance(0.5) { r.below(100) } else { 0 };
    for t in 0..n0 {
        sim.nodes[0].push(addr(1), t, payload(t, 8 + r.below(max as u64 - 7) as usize));
    }
    for t in 0..n1 {
        sim.nodes[1].push(addr(0), t, payload(t, 8 + r.below(max as u64 - 7) as usize));
    }
    let done = |s: &Sim<SrdNode>| {
        let settled = |i: usize, n: u64| {
            s.nodes[i].acked().count() as u64 + s.nodes[i].failed().count() as u64 == n
        };
        settled(0, n0) && settled(1, n1)
    };
    let limit_ms = std::env::var("SPRAY_LIMIT_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000u64);
    let limit = Instant::from_nanos(limit_ms * 1_000_000);
    if std::env::var("SPRAY_VERBOSE").is_ok() {
        eprintln!("paths {paths} {spec:?} n {n0}/{n1} max {max}");
    }
    let finished = sim.run_until(limit, done);
    let o0 = check_pair(&sim, 0, 1, n0)?;
    let o1 = check_pair(&sim, 1, 0, n1)?;
    if std::env::var("SPRAY_VERBOSE").is_ok() {
        eprintln!(
            "now {:?} a {:?}\nb {:?}",
            sim.now,
            sim.nodes[0].srd.stats(),
            sim.nodes[1].srd.stats()
        );
    }
    if !finished {
        return Err(format!("did not settle by {:?}: {o0:?} {o1:?}", sim.now));
    }
    if o0.failed + o1.failed > 0 {
        return Err(format!("failures on a live peer: {o0:?} {o1:?}"));
    }
    for (i, n) in [(0usize, n0), (1, n1)] {
        let srd = &sim.nodes[i].srd;
        if n > 0 {
            let p = PeerId(0);
            if srd.outstanding(p) != 0 || srd.bytes_in_flight(p) != 0 {
                return Err(format!(
                    "host {i}: outstanding {} inflight {}",
                    srd.outstanding(p),
                    srd.bytes_in_flight(p)
                ));
            }
        }
    }
    Ok(format!(
        "paths {paths} loss {:.3} n {n0}/{n1} t {:?} retx {}",
        spec.loss,
        sim.now,
        sim.nodes[0].srd.stats().retransmits
    ))
}

/// Run `count` seeds from `first` (plus `SPRAY_SEED` if set, to replay).
fn run_seeds(first: u64, count: u64) {
    let base = std::env::var("SPRAY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(first);
    let verbose = std::env::var("SPRAY_VERBOSE").is_ok();
    for seed in base..base + count {
        let res = scenario(seed);
        if verbose {
            eprintln!("seed {seed}: {res:?}");
        }
        if let Err(e) = res {
            panic!("seed {seed}: {e} (replay: SPRAY_SEED={seed} SPRAY_VERBOSE=1)");
        }
    }
    spray::sim::check::row(
        &format!("property: seeds {base}..{} (loss, dup, jitter, corruption, blackholes, 1-8 paths)", base + count),
        "every datagram delivered exactly once or failed back; no duplicates; nothing left in flight",
        "all seeds",
        true,
    );
}

// 20 000 seeds in four tests so they run in parallel (about 2 s each in
// release). The first 1 000 missed the heavy-loss seeds below, the first
// of which is seed 11 569.
#[test]
fn exactly_once_seeds_00000() {
    run_seeds(0, 5000);
}
#[test]
fn exactly_once_seeds_05000() {
    run_seeds(5000, 5000);
}
#[test]
fn exactly_once_seeds_10000() {
    run_seeds(10_000, 5000);
}
#[test]
fn exactly_once_seeds_15000() {
    run_seeds(15_000, 5000);
}

/// Seeds beyond those above (found running seeds 0..400 000) where a
/// live peer was declared unreachable: 11.5-20 % loss on each of 1-8
/// paths, some with corrupted packets. The retransmission timer backed off
/// to its 1 s maximum and the sender, whose stall probes or resends had
/// lost a round trip 4-5 times in a row, reached the 5 s unreachable
/// timeout; with the timer held to a sixteenth of that timeout every one
/// of them delivers everything.
#[test]
fn heavy_loss_seeds_once_declared_a_live_peer_unreachable() {
    for seed in [11569, 82247, 120366, 141377, 198507, 319862, 329247] {
        if let Err(e) = scenario(seed) {
            panic!("seed {seed}: {e} (replay: SPRAY_SEED={seed} SPRAY_VERBOSE=1)");
        }
    }
}
