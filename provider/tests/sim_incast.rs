//! Incast: many senders into one receiver behind a shared bottleneck with a
//! one-BDP buffer. Prints FCTs, fairness and drops; asserts the bars of the
//! design brief (max FCT <= 1.2x ideal, Jain >= 0.95, drops <= 1 %, and for
//! sustained incast every flow within ±20 % of its fair share).

use core::time::Duration;

use spray::sim::check::{check_pair, config, payload};
use spray::sim::{addr, Link, LinkSpec, Sim, SrdNode};
use spray::time::Instant;

struct Incast {
    max_fct_ratio: f64,
    jain: f64,
    drop_rate: f64,
}

fn incast(senders: usize, per_sender: u64, initial_window: u32) -> Incast {
    let size = 1400usize;
    let rate = 1_250_000_000u64; // 10 Gbit/s into the receiver
    let one_way = Duration::from_micros(25);
    let paths = 4u8;
    let rx = senders;
    let nodes: Vec<SrdNode> = (0..=senders)
        .map(|i| {
            let mut c = config(i, paths, 100 + i as u64);
            c.initial_window = initial_window;
            // The budget must cover this link's BDP (43 packets) whatever
            // the initial window: with zero grants, 64 senders under a
            // budget of 4 would get 4 packets in flight in all.
            c.rx_credit_packets = 64;
            SrdNode::new(&c)
        })
        .collect();
    let mut spec = LinkSpec::ideal(one_way);
    spec.bandwidth = 4 * rate; // the edge links are fast; the bottleneck is shared
    let mut sim = Sim::new(21, nodes, vec![spec; usize::from(paths)]);
    let rtt_ns = 2 * one_way.as_nanos() as u64;
    let bdp = rate * rtt_ns / 1_000_000_000;
    let mut b = LinkSpec::ideal(Duration::ZERO);
    b.bandwidth = rate;
    b.buffer = bdp;
    sim.bottleneck[rx] = Some(Link::new(b));
    for s in 0..senders {
        for t in 0..per_sender {
            sim.nodes[s].push(addr(rx), t, payload(t, size));
        }
    }
    if std::env::var("SPRAY_VERBOSE").is_ok() {
        for k in 1..=20u64 {
            sim.run_until(Instant::from_nanos(k * 250_000), |_| false);
            let bl = sim.bottleneck[rx]
                .as_ref()
                .map(|l| l.stats.clone())
                .unwrap_or_default();
            eprintln!(
                "t {k} drops {} offered {} s0: {} {:?}",
                bl.overflow,
                bl.offered,
                sim.nodes[0].srd.debug_peer(spray::PeerId(0)),
                sim.nodes[0].srd.stats().tail_probes
            );
        }
    }
    let done = |sim: &Sim<SrdNode>| {
        (0..senders).all(|s| sim.nodes[s].acked().count() as u64 == per_sender)
    };
    let finished = sim.run_until(Instant::from_nanos(5_000_000_000), done);
    if !finished {
        for s in 0..senders {
            if sim.nodes[s].acked().count() as u64 != per_sender {
                let st = sim.nodes[s].srd.stats();
                eprintln!(
                    "stuck sender {s}: acked {} {} {st:?}",
                    sim.nodes[s].acked().count(),
                    sim.nodes[s].srd.debug_peer(spray::PeerId(0))
                );
                if let Some(rp) = sim.nodes[rx].srd.peer_addr_id(addr(s)) {
                    eprintln!("  receiver view: {}", sim.nodes[rx].srd.debug_peer(rp));
                }
                break;
            }
        }
    }
    assert!(finished, "incast did not finish");
    let mut fcts = Vec::new();
    for s in 0..senders {
        check_pair(&sim, s, rx, per_sender).unwrap();
        let fct = sim.nodes[s]
            .events
            .iter()
            .map(|(t, _)| *t)
            .max()
            .unwrap_or(Instant::ZERO);
        fcts.push(fct.as_nanos() as f64);
    }
    if std::env::var("SPRAY_VERBOSE").is_ok() {
        let mut f = fcts.clone();
        f.sort_by(|a, b| a.total_cmp(b));
        eprintln!(
            "fct ms: min {:.2} med {:.2} p90 {:.2} max {:.2}",
            f[0] / 1e6,
            f[f.len() / 2] / 1e6,
            f[f.len() * 9 / 10] / 1e6,
            f[f.len() - 1] / 1e6
        );
        let st: Vec<(u64, u64, u64)> = (0..senders)
            .map(|s| {
                let x = sim.nodes[s].srd.stats();
                (x.timeouts, x.tail_probes, x.retransmits)
            })
            .collect();
        eprintln!("timeouts/tlp/retx per sender: {st:?}");
    }
    let wire = (size + 48) as f64;
    let ideal = senders as f64 * per_sender as f64 * wire / rate as f64 * 1e9;
    let max = fcts.iter().cloned().fold(0.0, f64::max);
    // Jain's index over per-sender throughput (bytes / FCT).
    let thr: Vec<f64> = fcts.iter().map(|f| per_sender as f64 / f).collect();
    let sum: f64 = thr.iter().sum();
    let sq: f64 = thr.iter().map(|x| x * x).sum();
    let jain = sum * sum / (thr.len() as f64 * sq);
    let bl = sim.bottleneck[rx]
        .as_ref()
        .map(|l| l.stats.clone())
        .unwrap_or_default();
    let drop_rate = bl.overflow as f64 / bl.offered.max(1) as f64;
    let retx: u64 = (0..senders)
        .map(|s| sim.nodes[s].srd.stats().retransmits)
        .sum();
    println!(
        "incast {senders}->1, {per_sender} x {size} B each, initial window {initial_window}: ideal {:.2} ms, max FCT {:.2} ms ({:.3}x), Jain {jain:.3}, bottleneck drops {} of {} ({:.2}%), retx {retx}",
        ideal / 1e6,
        max / 1e6,
        max / ideal,
        bl.overflow,
        bl.offered,
        drop_rate * 100.0
    );
    spray::sim::check::row(
        &format!("{senders} senders -> 1 receiver, 1-BDP buffer, bursts together (initial window {initial_window})"),
        &format!("max FCT {:.3}x ideal; Jain {jain:.3}; drops {:.2} %", max / ideal, drop_rate * 100.0),
        "<= 1.2x; >= 0.95; <= 1 %",
        max / ideal <= 1.2 && jain >= 0.95 && drop_rate <= 0.01,
    );
    Incast {
        max_fct_ratio: max / ideal,
        jain,
        drop_rate,
    }
}

/// The bars of the design brief for an incast into a one-BDP buffer.
fn assert_bars(r: &Incast) {
    assert!(
        r.max_fct_ratio <= 1.2,
        "max FCT {:.3}x ideal",
        r.max_fct_ratio
    );
    assert!(r.jain >= 0.95, "Jain {:.3}", r.jain);
    assert!(r.drop_rate <= 0.01, "drops {:.2} %", r.drop_rate * 100.0);
}

// Reached (also printed): 16->1 1.04x / Jain 1.000 / 0 % drops; 64->1
// 1.04x / 0.999 / 0.54 %; with initial_window 4 1.05x / 1.000 / 0.54 %. The
// drops are the unscheduled first packets of 64 senders into a 43-packet
// buffer (see PROTOCOL.md, known limits).

#[test]
fn incast_16_to_1() {
    assert_bars(&incast(16, 200, 64));
}

#[test]
fn incast_64_to_1() {
    assert_bars(&incast(64, 60, 64));
}

#[test]
fn incast_64_to_1_small_initial_window() {
    assert_bars(&incast(64, 60, 4));
}

/// Sustained incast: 16 senders, each with far more data than a round trip,
/// into the same one-BDP bottleneck. After convergence every flow's
/// throughput, sampled over 0.5 ms windows (10 RTTs) until the first flow
/// finishes, stays within ±20 % of the fair share (the window's total / 16).
#[test]
fn sustained_incast_16_flows_stay_near_fair_share() {
    let (senders, per_sender, size) = (16usize, 600u64, 1400usize);
    let rate = 1_250_000_000u64;
    let one_way = Duration::from_micros(25);
    let paths = 4u8;
    let rx = senders;
    let nodes: Vec<SrdNode> = (0..=senders)
        .map(|i| SrdNode::new(&config(i, paths, 100 + i as u64)))
        .collect();
    let mut spec = LinkSpec::ideal(one_way);
    spec.bandwidth = 4 * rate;
    let mut sim = Sim::new(33, nodes, vec![spec; usize::from(paths)]);
    let mut b = LinkSpec::ideal(Duration::ZERO);
    b.bandwidth = rate;
    b.buffer = rate * 2 * one_way.as_nanos() as u64 / 1_000_000_000;
    sim.bottleneck[rx] = Some(Link::new(b));
    for s in 0..senders {
        for t in 0..per_sender {
            sim.nodes[s].push(addr(rx), t, payload(t, size));
        }
    }
    let done = |sim: &Sim<SrdNode>| {
        (0..senders).all(|s| sim.nodes[s].acked().count() as u64 == per_sender)
    };
    assert!(sim.run_until(Instant::from_nanos(5_000_000_000), done));
    for s in 0..senders {
        check_pair(&sim, s, rx, per_sender).unwrap();
    }
    // Arrival times at the receiver, per sender.
    let mut arrivals: Vec<Vec<u64>> = vec![Vec::new(); senders];
    for a in &sim.nodes[rx].arrived {
        if let Some(s) =
            (0..senders).find(|&s| sim.nodes[rx].srd.peer_addr(a.peer) == Some(addr(s)))
        {
            arrivals[s].push(a.at.as_nanos());
        }
    }
    let first_done = arrivals
        .iter()
        .map(|v| v.iter().copied().max().unwrap_or(0))
        .min()
        .unwrap_or(0);
    let window = 500_000u64;
    let start = 1_000_000u64; // convergence: 20 RTTs
    let mut worst = 0.0f64;
    let mut windows = 0;
    let mut t = start;
    while t + window <= first_done {
        let counts: Vec<u64> = arrivals
            .iter()
            .map(|v| v.iter().filter(|&&x| x >= t && x < t + window).count() as u64)
            .collect();
        let total: u64 = counts.iter().sum();
        let fair = total as f64 / senders as f64;
        for &c in &counts {
            worst = worst.max((c as f64 - fair).abs() / fair);
        }
        // The bottleneck stays busy too (at least 90 % utilised).
        let util = total as f64 * (size + 48) as f64 / (rate as f64 * window as f64 / 1e9);
        assert!(util >= 0.9, "window at {t} ns: utilisation {util:.3}");
        windows += 1;
        t += window;
    }
    let bl = sim.bottleneck[rx]
        .as_ref()
        .map(|l| l.stats.clone())
        .unwrap_or_default();
    println!(
        "sustained incast 16->1: {windows} windows of 0.5 ms, worst deviation from fair share {:.1} %, drops {} of {}",
        worst * 100.0,
        bl.overflow,
        bl.offered
    );
    spray::sim::check::row(
        "sustained incast, 16 senders (per-flow throughput per 0.5 ms window)",
        &format!(
            "worst deviation from fair share {:.1} % over {windows} windows; drops {}",
            worst * 100.0,
            bl.overflow
        ),
        "within +-20 %",
        worst <= 0.2,
    );
    assert!(windows >= 8, "only {windows} sample windows");
    assert!(
        worst <= 0.2,
        "a flow deviated {:.1} % from its fair share",
        worst * 100.0
    );
}
