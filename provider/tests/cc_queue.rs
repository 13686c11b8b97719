//! The BBR window must not sustain a queue of its own making: a closed-loop
//! fluid model of one sender, a bottleneck of rate `r` and the receiver's
//! bursty acks (per-ack rate samples read 3x `r`, the windowed ones `r`).

use spray::srd::cc::bbr::Bbr;
use spray::srd::cc::{AckSample, Controller};
use spray::Instant;

/// Runs the loop for `ms` milliseconds from a standing queue of
/// `queue0_bytes` and returns the RTT at the end, ns.
fn settle(receiver_limited: bool, queue0_bytes: u64, ms: u64) -> u64 {
    let r: u64 = 500_000_000; // bottleneck, bytes/s
    let min_rtt: u64 = 20_000; // ns
    let step: u64 = 10_000; // ns between acks
    let mut cc = Bbr::new(64 << 10, 16 << 10, 0, 0);
    let mut queue = queue0_bytes;
    for i in 0..ms * 1_000_000 / step {
        let now = Instant::from_nanos((i + 1) * step);
        // The RTT every path sees: the base plus the queue's drain time.
        let rtt = min_rtt + queue * 1_000_000_000 / r;
        let acked = r * step / 1_000_000_000;
        cc.on_ack(
            now,
            &AckSample {
                acked_bytes: acked,
                // A burst: the step's bytes in a third of it.
                delivered_bytes: acked,
                interval_ns: step / 3,
                min_rtt_ns: min_rtt,
                median_srtt_ns: rtt,
                avg_bytes: r / 1000,
                avg_interval_ns: 1_000_000,
                receiver_limited,
                peer_delay_ns: 0,
            },
        );
        // The sender fills the window; what exceeds the pipe queues.
        let pipe = r * min_rtt / 1_000_000_000;
        queue = cc.window().saturating_sub(pipe);
    }
    min_rtt + queue * 1_000_000_000 / r
}

#[test]
fn the_window_drains_a_standing_queue() {
    for receiver_limited in [false, true] {
        // 10 ms of queue at the bottleneck's rate to start with.
        let rtt = settle(receiver_limited, 5_000_000, 200);
        // What is left: the window's two BDPs and at most EXTRA_ACKED_MAX_NS
        // (1 ms) of aggregation at the peak rate, far below the 10 ms.
        assert!(
            rtt < 4_000_000,
            "receiver_limited={receiver_limited}: RTT {rtt} ns after 200 ms (started at 10 ms)"
        );
    }
}
