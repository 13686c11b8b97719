//! Rails (several NICs per host, `PROTOCOL.md` §5.1) in the simulator: two
//! hosts with two rails each, one link per rail (each rail its own network),
//! one flow from host 0 to host 1. Every datagram must arrive exactly once,
//! and the flow must use both rails by what each carries: two equal rails
//! give about twice one rail's rate, rails of 2:1 rates share 2:1, a lossy
//! rail still carries its part, and a rail that dies mid-transfer costs
//! nothing but its share while it is down and is used again once back.

use core::time::Duration;

use spray::sim::check::{check_pair, config, payload, row};
use spray::sim::{addr, rail_addr, Event, EventKind, LinkSpec, Sim, SrdNode};
use spray::time::Instant;

const SIZE: usize = 1400;
/// Paths (entropy values) per rail.
const PATHS: u8 = 8;
/// 100 Mbit/s, bytes/s.
const RATE: u64 = 12_500_000;

/// A testbed-like link: 30 us one way, 5 us jitter, 64 KiB buffer.
fn link(rate: u64) -> LinkSpec {
    let mut s = LinkSpec::ideal(Duration::from_micros(30));
    s.bandwidth = rate;
    s.buffer = 65_536;
    s.jitter = Duration::from_micros(5);
    s
}

/// Two hosts; with `rails`, two rails each (links: one per rail, both ways).
fn pair(seed: u64, rails: bool, specs: Vec<LinkSpec>) -> Sim<SrdNode> {
    let mut c0 = config(0, PATHS, 10);
    let mut c1 = config(1, PATHS, 20);
    if rails {
        c0.rails = vec![addr(0).ip(), rail_addr(0, 1).ip()];
        c1.rails = vec![addr(1).ip(), rail_addr(1, 1).ip()];
    }
    let nodes = vec![SrdNode::new(&c0), SrdNode::new(&c1)];
    let mut sim = Sim::new(seed, nodes, specs);
    if rails {
        sim.set_rails(0, 2, PATHS);
        sim.set_rails(1, 2, PATHS);
    }
    sim
}

/// What one transfer did.
#[derive(Debug)]
struct Run {
    /// When the last datagram arrived, ns.
    last_ns: u64,
    /// Data packets sent on rail 0 / rail 1 (sockets `< PATHS` are rail 0's).
    per_rail: [u64; 2],
    retransmits: u64,
}

/// Send `n` datagrams from host 0 to host 1, check exactly-once delivery.
fn transfer(name: &str, seed: u64, sim: &mut Sim<SrdNode>, n: u64) -> Run {
    for t in 0..n {
        sim.nodes[0].push(addr(1), t, payload(t, SIZE));
    }
    let ok = sim.run_until(Instant::from_nanos(60_000_000_000), |s| {
        s.nodes[0].acked().count() as u64 == n
    });
    let o = check_pair(sim, 0, 1, n).unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
    assert!(
        ok && o.acked == n && o.delivered == n,
        "{name} seed {seed}: {o:?}"
    );
    let last_ns = sim.nodes[1]
        .arrived
        .iter()
        .map(|a| a.at.as_nanos())
        .max()
        .unwrap_or(0);
    let st = sim.nodes[0].srd.stats();
    let per_rail = rail_split(sim);
    let run = Run {
        last_ns,
        per_rail,
        retransmits: st.retransmits,
    };
    println!("{name} seed {seed}: {run:?}");
    run
}

/// Data packets host 0 sent to host 1 on each rail (by the peer's paths).
fn rail_split(sim: &Sim<SrdNode>) -> [u64; 2] {
    let mut v = [0u64; 2];
    for p in sim.nodes[0].srd.peer_stats() {
        for x in &p.paths {
            v[usize::from(x.rail).min(1)] += x.sent_packets;
        }
    }
    v
}

/// Ideal time of `n` datagrams at `rate` bytes/s, ns.
fn ideal_ns(n: u64, rate: u64) -> f64 {
    n as f64 * (SIZE + 56) as f64 / rate as f64 * 1e9
}

#[test]
fn two_equal_rails_carry_twice_one() {
    let n = 4000;
    for seed in 1..3 {
        let one = transfer(
            "one rail",
            seed,
            &mut pair(seed, false, vec![link(RATE)]),
            n,
        );
        let two = transfer(
            "two rails",
            seed,
            &mut pair(seed, true, vec![link(RATE), link(RATE)]),
            n,
        );
        let gain = one.last_ns as f64 / two.last_ns as f64;
        let share = two.per_rail[1] as f64 / (two.per_rail[0] + two.per_rail[1]) as f64;
        let ok = gain >= 1.8 && (0.4..=0.6).contains(&share);
        row(
            "2 equal rails (100 Mbit/s each) vs 1, one flow",
            &format!(
                "{gain:.2}x one rail's rate; rail 1 carried {:.1} % of the packets",
                share * 100.0
            ),
            ">= 1.8x, 40-60 %",
            ok,
        );
        assert!(ok, "seed {seed}: gain {gain:.2}, share {share:.2}");
    }
}

#[test]
fn rails_of_different_rates_share_by_rate() {
    let n = 4000;
    for seed in 1..3 {
        let two = transfer(
            "rails 100 + 50 Mbit/s",
            seed,
            &mut pair(seed, true, vec![link(RATE), link(RATE / 2)]),
            n,
        );
        let ratio = two.last_ns as f64 / ideal_ns(n, RATE + RATE / 2);
        let share = two.per_rail[1] as f64 / (two.per_rail[0] + two.per_rail[1]) as f64;
        let ok = ratio <= 1.2 && (0.25..=0.42).contains(&share);
        row(
            "rails of 100 and 50 Mbit/s, one flow",
            &format!(
                "completion {ratio:.3}x the 150 Mbit/s ideal; slow rail {:.1} % of the packets",
                share * 100.0
            ),
            "<= 1.2x, 25-42 %",
            ok,
        );
        assert!(ok, "seed {seed}: {ratio:.3}x, share {share:.2}");
    }
}

#[test]
fn a_rail_dies_mid_transfer_and_comes_back() {
    let n = 6000;
    for (seed, dead) in [(1u64, 1usize), (2, 0), (3, 1)] {
        let mut sim = pair(seed, true, vec![link(RATE), link(RATE)]);
        // Down from 100 to 300 ms, both ways: the transfer takes ~350 ms
        // over both rails (~700 ms over one).
        let down = Event {
            from: Instant::from_nanos(100_000_000),
            until: Instant::from_nanos(300_000_000),
            kind: EventKind::Blackhole,
        };
        for (a, b) in [(0, 1), (1, 0)] {
            sim.paths_mut(a, b)[dead].schedule.push(down.clone());
        }
        let run = transfer(&format!("rail {dead} down 100-300 ms"), seed, &mut sim, n);
        // Arrivals per 20 ms slice: the rate while down is one rail's, and
        // both rails carry again after.
        let arrivals: Vec<u64> = sim.nodes[1]
            .arrived
            .iter()
            .map(|a| a.at.as_nanos())
            .collect();
        let in_window =
            |a: u64, b: u64| arrivals.iter().filter(|&&t| t >= a && t < b).count() as f64;
        let pkt_per_s = RATE as f64 / (SIZE + 56) as f64;
        let during = in_window(150_000_000, 290_000_000) / 0.14 / pkt_per_s;
        let after_end = run.last_ns.max(300_000_000);
        let after = if after_end > 320_000_000 + 40_000_000 {
            in_window(320_000_000, after_end) / ((after_end - 320_000_000) as f64 / 1e9) / pkt_per_s
        } else {
            f64::NAN
        };
        let st = sim.nodes[0].srd.stats();
        println!(
            "dead rail {dead}: during {during:.2} rails' worth, after {after:.2}, lost {} retx {}",
            st.lost, st.retransmits
        );
        let ok = during >= 0.8 && (after.is_nan() || after >= 1.6);
        row(
            &format!("rail {dead} of 2 dead for 200 ms mid-transfer, one flow"),
            &format!(
                "all {n} datagrams once; rate while down {during:.2}x one rail, after {after:.2}x"
            ),
            ">= 0.8x while down, >= 1.6x after",
            ok,
        );
        assert!(ok, "seed {seed}: during {during:.2}, after {after:.2}");
    }
}

/// A rail back after a long outage is used again within a few round trips
/// of its return, not after each path's own probe back-off (up to 256 RTTs
/// per path: here 1 s): a dead rail is probed at least every 16 RTTs, and
/// the first probe that gets through has every other path of the rail
/// probed at once.
#[test]
fn a_rail_back_is_used_again_at_once() {
    // 2 ms one way: RTT ~4 ms, so 256 RTTs are ~1 s.
    let slow = |rate: u64| {
        let mut s = link(rate);
        s.delay = Duration::from_millis(2);
        s.buffer = 256 << 10;
        s
    };
    let n = 30_000;
    for seed in 1..3 {
        let mut sim = pair(seed, true, vec![slow(RATE), slow(RATE)]);
        let back_ns = 2_200_000_000u64;
        let down = Event {
            from: Instant::from_nanos(200_000_000),
            until: Instant::from_nanos(back_ns),
            kind: EventKind::Blackhole,
        };
        for (a, b) in [(0, 1), (1, 0)] {
            sim.paths_mut(a, b)[1].schedule.push(down.clone());
        }
        let run = transfer("rail 1 down 0.2-2.2 s, 4 ms RTT", seed, &mut sim, n);
        let arrivals: Vec<u64> = sim.nodes[1]
            .arrived
            .iter()
            .map(|a| a.at.as_nanos())
            .collect();
        let pkt_per_s = RATE as f64 / (SIZE + 56) as f64;
        let rate_in = |a: u64, b: u64| {
            arrivals.iter().filter(|&&t| t >= a && t < b).count() as f64
                / ((b - a) as f64 / 1e9)
                / pkt_per_s
        };
        // From 150 ms after the return (a 64 ms probe, a round trip, the
        // window refilling) for 200 ms.
        let after = rate_in(back_ns + 150_000_000, back_ns + 350_000_000);
        let ok = run.last_ns > back_ns + 350_000_000 && after >= 1.6;
        row(
            "rail 1 of 2 dead for 2 s (4 ms RTT), one flow",
            &format!("{after:.2}x one rail's rate 150-350 ms after it is back"),
            ">= 1.6x",
            ok,
        );
        assert!(ok, "seed {seed}: {after:.2}, last {}", run.last_ns);
    }
}

/// One rail loses packets at random (1 % and 5 %, both ways): every
/// datagram still arrives exactly once, and the flow gets more than one
/// rail's rate (the lossy rail carries what it can).
#[test]
fn a_lossy_rail() {
    let n = 6000;
    for (seed, loss) in [(1u64, 0.01), (2, 0.05)] {
        let mut lossy = link(RATE);
        lossy.loss = loss;
        let run = transfer(
            &format!("rail 1 loses {:.0} %", loss * 100.0),
            seed,
            &mut pair(seed, true, vec![link(RATE), lossy]),
            n,
        );
        let rate = ideal_ns(n, RATE) / run.last_ns as f64;
        let share = run.per_rail[1] as f64 / (run.per_rail[0] + run.per_rail[1]) as f64;
        let ok = rate >= 1.7;
        row(
            &format!("rail 1 of 2 loses {:.0} % at random, one flow", loss * 100.0),
            &format!(
                "all {n} datagrams once; {rate:.2}x one rail's rate, lossy rail {:.1} % of the packets, {} resent",
                share * 100.0,
                run.retransmits
            ),
            ">= 1.7x",
            ok,
        );
        assert!(ok, "seed {seed}: {rate:.2}x");
    }
}

/// A rail that dies mid-transfer and never comes back, rail 1 or rail 0
/// (the main addresses: then every packet, acks included, must go by the
/// rail left): every datagram arrives exactly once, intact, none fails,
/// and the rest goes at about one rail's rate.
#[test]
fn a_rail_dies_for_good() {
    let n = 6000;
    for (seed, dead) in [(4u64, 1usize), (5, 0)] {
        let mut sim = pair(seed, true, vec![link(RATE), link(RATE)]);
        let down = Event {
            from: Instant::from_nanos(100_000_000),
            until: Instant::from_nanos(u64::MAX),
            kind: EventKind::Blackhole,
        };
        for (a, b) in [(0, 1), (1, 0)] {
            sim.paths_mut(a, b)[dead].schedule.push(down.clone());
        }
        let run = transfer(&format!("rail {dead} dead from 100 ms"), seed, &mut sim, n);
        let failed = sim.nodes[0].failed().count();
        let arrivals: Vec<u64> = sim.nodes[1]
            .arrived
            .iter()
            .map(|a| a.at.as_nanos())
            .collect();
        let pkt_per_s = RATE as f64 / (SIZE + 56) as f64;
        let end = run.last_ns;
        let from = 200_000_000u64;
        let after = arrivals.iter().filter(|&&t| t >= from).count() as f64
            / ((end.max(from + 1) - from) as f64 / 1e9)
            / pkt_per_s;
        let ok = failed == 0 && end > from && after >= 0.8;
        row(
            &format!("rail {dead} of 2 dead for good from 100 ms, one flow"),
            &format!("all {n} datagrams once, {failed} failed; {after:.2}x one rail's rate after"),
            "none failed, >= 0.8x",
            ok,
        );
        assert!(
            ok,
            "seed {seed}: failed {failed}, after {after:.2}, last {end}"
        );
    }
}
