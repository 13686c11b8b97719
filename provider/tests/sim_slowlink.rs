//! One flow over an ECMP fabric shaped like the kernel testbed's
//! (experiments/testbed.sh): 4 links of 100 Mbit/s with 64 KiB buffers,
//! 8 entropy values (2 per link), one link 10x slower. Prints completion
//! against the 3-good-link ideal and the slow link's share of the packets.

use core::time::Duration;

use spray::sim::addr;
use spray::sim::check::{check_pair, payload, slow_link_pair};
use spray::time::Instant;

const SIZE: usize = 1400;

/// Completion / ideal, the slow link's packet share, retransmissions.
fn run(seed: u64, n: u64, slow: bool) -> (f64, f64, u64) {
    let paths = 8u8;
    let links = 4usize;
    let link = (Duration::from_micros(30), 12_500_000, 65_536);
    let (mut sim, good) = slow_link_pair(seed, paths, links, link, slow);
    for t in 0..n {
        sim.nodes[0].push(addr(1), t, payload(t, SIZE));
    }
    let ok = sim.run_until(Instant::from_nanos(20_000_000_000), |s| {
        s.nodes[0].acked().count() as u64 == n
    });
    let o = check_pair(&sim, 0, 1, n).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert!(ok && o.acked == n, "seed {seed}: {o:?}");
    let last = sim.nodes[1]
        .arrived
        .iter()
        .map(|a| a.at)
        .max()
        .unwrap_or(Instant::ZERO);
    let ideal_ns = n as f64 * (SIZE + 48) as f64 / good as f64 * 1e9;
    let st = sim.nodes[0].srd.stats();
    // Paths p and p + 4 share link p % 4.
    let on_slow = st.path_sent[0] + st.path_sent[links];
    let ratio = last.as_nanos() as f64 / ideal_ns;
    let share = on_slow as f64 / st.tx_data as f64;
    println!(
        "slow {slow} seed {seed}: completion {:.3}x ideal, link-0 share {:.2} %, retx {}, per path {:?}",
        ratio,
        share * 100.0,
        st.retransmits,
        st.path_sent
    );
    (ratio, share, st.retransmits)
}

#[test]
fn one_link_10x_slower_single_flow() {
    for seed in 1..3 {
        let (ratio, share, _) = run(seed, 3000, true);
        spray::sim::check::row(
            "one of 4 ECMP links 10x slower, 1 flow (testbed-like)",
            &format!(
                "completion {ratio:.3}x 3-good-link ideal; slow link {:.2} % of packets",
                share * 100.0
            ),
            "<= 1.2x",
            ratio <= 1.2,
        );
        assert!(ratio <= 1.2, "seed {seed}: {ratio:.3}x");
    }
}

#[test]
fn healthy_links_single_flow() {
    let (ratio, _, _) = run(1, 3000, false);
    assert!(ratio <= 1.2, "{ratio:.3}x");
}
