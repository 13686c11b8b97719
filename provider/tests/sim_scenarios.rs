//! Scenario tests of the SRD core over the simulator: loss on many paths,
//! reordering without loss, a blackholed path, a much slower path. Each
//! prints a small table row and asserts the bar from the design brief.

use core::time::Duration;

use spray::sim::check::{check_pair, config, payload};
use spray::sim::{addr, Event, EventKind, LinkSpec, Sim, SrdNode};
use spray::srd::SrdStats;
use spray::time::Instant;

const SIZE: usize = 1400;

fn path(bw: u64, delay_us: u64) -> LinkSpec {
    let mut s = LinkSpec::ideal(Duration::from_micros(delay_us));
    s.bandwidth = bw;
    s.buffer = 512 << 10;
    s
}

struct Run {
    secs: f64,
    tx: SrdStats,
    rx: SrdStats,
    sim: Sim<SrdNode>,
}

/// Send `n` datagrams host 0 → host 1 over `specs`; `setup` may change the
/// network first. Panics (with the seed) if anything is lost or duplicated.
/// `ack_delay`: `None` = the default delayed ack, else this (the FFI driver
/// uses 0: acknowledge at the end of each receive batch).
fn transfer(
    seed: u64,
    ack_delay: Option<Duration>,
    specs: Vec<LinkSpec>,
    n: u64,
    setup: impl FnOnce(&mut Sim<SrdNode>),
) -> Run {
    let paths = specs.len() as u8;
    let (mut c0, mut c1) = (config(0, paths, 10), config(1, paths, 20));
    if let Some(d) = ack_delay {
        c0.ack_delay = d;
        c1.ack_delay = d;
    }
    let nodes = vec![SrdNode::new(&c0), SrdNode::new(&c1)];
    let mut sim = Sim::new(seed, nodes, specs);
    setup(&mut sim);
    for t in 0..n {
        sim.nodes[0].push(addr(1), t, payload(t, SIZE));
    }
    let ok = sim.run_until(Instant::from_nanos(10_000_000_000), |s| {
        s.nodes[0].acked().count() as u64 == n
    });
    let o = check_pair(&sim, 0, 1, n).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert!(ok && o.acked == n && o.failed == 0, "seed {seed}: {o:?}");
    // Completion = when the last datagram arrived at the receiver.
    let last = sim.nodes[1]
        .arrived
        .iter()
        .map(|a| a.at)
        .max()
        .unwrap_or(Instant::ZERO);
    let secs = last.as_nanos() as f64 / 1e9;
    Run {
        secs,
        tx: sim.nodes[0].srd.stats().clone(),
        rx: sim.nodes[1].srd.stats().clone(),
        sim,
    }
}

const GBIT: u64 = 125_000_000;

#[test]
fn eight_paths_one_percent_loss() {
    let n = 3000;
    let base = transfer(1, None, vec![path(GBIT, 10); 8], n, |_| {});
    let mut lossy = path(GBIT, 10);
    lossy.loss = 0.01;
    let mut worst_goodput = f64::MAX;
    let mut worst_repair = f64::MAX;
    for seed in 1..=3 {
        let r = transfer(seed, None, vec![lossy.clone(); 8], n, |_| {});
        let goodput = base.secs / r.secs;
        let lost: u64 = r.sim.links.values().flatten().map(|l| l.stats.lost).sum();
        let repaired_fast = 1.0 - r.tx.rto_lost as f64 / lost.max(1) as f64;
        println!(
            "1% loss seed {seed}: lossless {:.3} ms, lossy {:.3} ms, goodput {:.3}, link losses {lost}, retx {}, rto-lost {}, timeouts {}, spurious dup {}",
            base.secs * 1e3,
            r.secs * 1e3,
            goodput,
            r.tx.retransmits,
            r.tx.rto_lost,
            r.tx.timeouts,
            r.rx.rx_duplicates
        );
        worst_goodput = worst_goodput.min(goodput);
        worst_repair = worst_repair.min(repaired_fast);
    }
    spray::sim::check::row(
        "8 paths, 1 % random loss on each (3 seeds)",
        &format!(
            "goodput {worst_goodput:.3} of lossless; {:.1} % of losses repaired without a timeout",
            worst_repair * 100.0
        ),
        "goodput >= 0.90; >= 99 % without timeout",
        worst_goodput >= 0.9 && worst_repair >= 0.99,
    );
    assert!(
        worst_goodput >= 0.9,
        "goodput {worst_goodput:.3} of lossless"
    );
    assert!(
        worst_repair >= 0.99,
        "only {worst_repair:.3} of losses repaired without RTO"
    );
}

#[test]
fn jitter_reordering_is_not_loss() {
    let n = 3000;
    let mut p = path(GBIT, 10);
    p.jitter = Duration::from_micros(40);
    let mut specs = vec![p; 8];
    // Paths of different lengths reorder too: delays 10..115 µs, a spread of
    // 105 µs = 75 packet times at the 8-path aggregate rate (1400 B per
    // 1.4 µs), so packets overtake each other by up to ~75 positions (the
    // issue's bar is stated for a reordering depth of 64).
    for (i, s) in specs.iter_mut().enumerate() {
        s.delay = Duration::from_micros(10 + 15 * i as u64);
    }
    for ack_delay in [None, Some(Duration::ZERO)] {
        let r = transfer(7, ack_delay, specs.clone(), n, |_| {});
        let spurious = r.tx.retransmits as f64 / r.tx.tx_data as f64;
        println!(
        "jitter (ack delay {ack_delay:?}): {:.3} ms, data {}, retx {}, rx dups {}, spurious {:.5}",
        r.secs * 1e3,
        r.tx.tx_data,
        r.tx.retransmits,
        r.rx.rx_duplicates,
        spurious
    );
        assert!(spurious <= 0.001, "spurious retransmissions {spurious:.5}");
        spray::sim::check::row(
            &format!("reordering depth ~75 packets (jitter + path delays 10..115 µs), no loss (ack delay {ack_delay:?})"),
            &format!("spurious retransmissions {:.3} %", spurious * 100.0),
            "<= 0.1 %",
            spurious <= 0.001,
        );
    }
}

#[test]
fn blackholed_path_is_routed_around() {
    let n = 3000;
    let seven = transfer(3, None, vec![path(GBIT, 10); 7], n, |_| {});
    let t_bh = Instant::from_nanos((seven.secs * 1e9 / 3.0) as u64);
    let r = transfer(3, None, vec![path(GBIT, 10); 8], n, |sim| {
        let ev = Event {
            from: t_bh,
            until: Instant::from_nanos(u64::MAX),
            kind: EventKind::Blackhole,
        };
        sim.paths_mut(0, 1)[3].schedule.push(ev);
    });
    let link = &r.sim.links[&(0, 1)][3];
    let ratio = r.secs / seven.secs;
    println!(
        "blackhole: 7-path ideal {:.3} ms, 8 paths with one blackholed at {:.3} ms: {:.3} ms ({ratio:.3}x), packets into the hole {}, retx {}, timeouts {}",
        seven.secs * 1e3,
        t_bh.as_nanos() as f64 / 1e6,
        r.secs * 1e3,
        link.stats.blackholed,
        r.tx.retransmits,
        r.tx.timeouts
    );
    assert!(ratio <= 1.2, "completion {ratio:.3}x the 7-path ideal");
    // Leaving
    spray::sim::check::row(
        "one of 8 paths blackholed mid-transfer",
        &format!(
            "completion {ratio:.3}x the 7-path ideal; {} packets into the hole; nothing failed",
            link.stats.blackholed
        ),
        "<= 1.2x; leaves within ~3 RTTs",
        ratio <= 1.2 && link.stats.blackholed <= 40,
    );
    // Leaving within ~3 RTTs: at ~1/8 of 1 GB/s... a few RTTs of its share, plus probes.
    assert!(
        link.stats.blackholed <= 40,
        "{} packets sent into the hole",
        link.stats.blackholed
    );
}

#[test]
fn slow_path_gets_less_traffic() {
    let n = 3000;
    let seven = transfer(4, None, vec![path(GBIT, 10); 7], n, |_| {});
    let mut specs = vec![path(GBIT, 10); 8];
    specs[5].delay = Duration::from_micros(300); // RTT far above the others, even under load
                                                 // Default delayed acks, and the driver's "ack every batch" (0): with the
                                                 // latter a resend once made every path's packets look overtaken.
    for ack_delay in [None, Some(Duration::ZERO)] {
        let r = transfer(4, ack_delay, specs.clone(), n, |_| {});
        let share = r.tx.path_sent[5] as f64 / r.tx.tx_data as f64;
        println!(
            "path srtt ns: {:?}",
            r.sim.nodes[0].srd.path_srtt(spray::PeerId(0))
        );
        let ratio = r.secs / seven.secs;
        println!(
        "slow path (ack delay {ack_delay:?}): 7-path {:.3} ms, 8 with one far slower {:.3} ms ({ratio:.3}x), slow path share {share:.3}, retx {}",
        seven.secs * 1e3,
        r.secs * 1e3,
        r.tx.retransmits
    );
        assert!(share < 0.125, "slow path carried {share:.3} of the traffic");
        assert!(ratio <= 1.2, "completion {ratio:.3}x the 7-path ideal");
        assert!(
            r.tx.retransmits <= 60,
            "{} retransmissions without loss",
            r.tx.retransmits
        );
    }
}

/// One of 8 paths has a tenth of the others' bandwidth (same buffer, so
/// under load it also queues far longer): its share of the packets must stay
/// within 2 points of its share of the capacity (1/71), with both the
/// default delayed ack and the driver's ack-every-batch.
#[test]
fn ten_times_slower_path_carries_its_capacity_share() {
    let n = 3000;
    let mut specs = vec![path(GBIT, 10); 8];
    specs[2].bandwidth = GBIT / 10;
    let capacity_share = 0.1 / 7.1;
    for ack_delay in [None, Some(Duration::ZERO)] {
        let r = transfer(6, ack_delay, specs.clone(), n, |_| {});
        let share = r.tx.path_sent[2] as f64 / r.tx.tx_data as f64;
        spray::sim::check::row(
            &format!("one of 8 paths 10x slower (ack delay {ack_delay:?})"),
            &format!(
                "its share {:.2} % of packets, capacity share {:.2} %",
                share * 100.0,
                capacity_share * 100.0
            ),
            "<= capacity share + 2 points",
            share <= capacity_share + 0.02,
        );
        println!(
            "path srtt ns: {:?}",
            r.sim.nodes[0].srd.path_srtt(spray::PeerId(0))
        );
        println!(
            "10x slower path (ack delay {ack_delay:?}): share {:.2} % of packets, capacity share {:.2} %, {:.3} ms, retx {}",
            share * 100.0,
            capacity_share * 100.0,
            r.secs * 1e3,
            r.tx.retransmits
        );
        assert!(
            share <= capacity_share + 0.02,
            "slow path carried {:.2} % (capacity share {:.2} %)",
            share * 100.0,
            capacity_share * 100.0
        );
    }
}

#[test]
fn loopback_like_jumbo_datagrams_are_not_throttled() {
    // Loopback-like: 64 KiB datagrams, tiny delay, one shared 3 GB/s pipe
    // into the receiver (modelled as its bottleneck), 8 paths.
    let rate = 3_000_000_000u64;
    let paths = 8u8;
    let mut c0 = config(0, paths, 10);
    let mut c1 = config(1, paths, 20);
    c0.max_datagram = 65000;
    c1.max_datagram = 65000;
    let nodes = vec![SrdNode::new(&c0), SrdNode::new(&c1)];
    let mut sim = Sim::new(
        5,
        nodes,
        vec![LinkSpec::ideal(Duration::from_micros(5)); usize::from(paths)],
    );
    let mut b = LinkSpec::ideal(Duration::ZERO);
    b.bandwidth = rate;
    b.buffer = 4 << 20;
    sim.bottleneck[1] = Some(spray::sim::Link::new(b));
    let n = 600u64;
    let size = 64000;
    for t in 0..n {
        sim.nodes[0].push(addr(1), t, payload(t, size));
    }
    let ok = sim.run_until(Instant::from_nanos(1_000_000_000), |s| {
        s.nodes[0].acked().count() as u64 == n
    });
    assert!(ok);
    let last = sim.nodes[1]
        .arrived
        .iter()
        .map(|a| a.at)
        .max()
        .unwrap_or(Instant::ZERO);
    let gbps = (n * size as u64) as f64 / (last.as_nanos() as f64);
    let st = sim.nodes[0].srd.stats();
    println!(
        "loopback-like: {:.2} GB/s of {:.2}, retx {}, window {} B, overflow drops {}",
        gbps,
        rate as f64 / 1e9,
        st.retransmits,
        sim.nodes[0].srd.window(spray::PeerId(0)),
        sim.bottleneck[1].as_ref().map_or(0, |l| l.stats.overflow)
    );
    assert!(
        gbps >= 0.8 * rate as f64 / 1e9,
        "throttled to {gbps:.2} GB/s"
    );
}
