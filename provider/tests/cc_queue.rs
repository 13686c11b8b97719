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
                app_limited: false,
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

/// One ack's sample: `rate` bytes/s over 100 us, RTTs of an
/// empty fabric, `app_limited` as given.
fn rate_sample(rate: u64, app_limited: bool) -> AckSample {
    AckSample {
        acked_bytes: rate / 10_000,
        delivered_bytes: rate / 10_000,
        interval_ns: 100_000,
        min_rtt_ns: 20_000,
        median_srtt_ns: 20_000,
        app_limited,
        ..AckSample::default()
    }
}

/// BBR's rule for application-limited samples: a sender whose application
/// sends less than the path carries (a ping-pong, a collective's
/// exchanges) measures the application's pace; such samples may raise the
/// bandwidth estimate but never age it out, while samples of a sender that
/// had data waiting do.
#[test]
fn app_limited_samples_keep_the_bandwidth_estimate() {
    let peak = 2_000_000_000; // bytes/s
    let slow = 100_000_000;
    for app_limited in [true, false] {
        let mut cc = Bbr::new(64 << 10, 16 << 10, 0, 0);
        cc.on_ack(Instant::from_nanos(1_000), &rate_sample(peak, false));
        let before = cc.pacing_rate().unwrap();
        // 100 ms of slow samples, one every 100 us: far past the peak's
        // lifetime (10 RTTs, at least 1 ms).
        for i in 1..=1000u64 {
            let now = Instant::from_nanos(1_000 + i * 100_000);
            cc.on_ack(now, &rate_sample(slow, app_limited));
        }
        let after = cc.pacing_rate().unwrap();
        if app_limited {
            assert_eq!(after, before, "app-limited samples aged the estimate out");
        } else {
            assert!(
                after < before / 4,
                "samples of a sender with data waiting must age the peak out: {before} -> {after}"
            );
        }
    }
    // A higher app-limited sample still raises it.
    let mut cc = Bbr::new(64 << 10, 16 << 10, 0, 0);
    cc.on_ack(Instant::from_nanos(1_000), &rate_sample(slow, true));
    let low = cc.pacing_rate().unwrap();
    cc.on_ack(Instant::from_nanos(2_000), &rate_sample(peak, true));
    assert!(cc.pacing_rate().unwrap() > low);
}
