//! A BBR-like controller: bottleneck bandwidth from delivery-rate samples,
//! min RTT from the paths, inflight cap of about two BDPs, pacing above the
//! measured rate. Multipath-aware: only the MEDIAN path RTT rising over the
//! min RTT (the whole connection queueing, e.g. incast) lowers the gains;
//! one slow path is handled by the path picker, not here.
//!
//! Two bandwidth estimates: the peak of per-ack samples (the rate of a
//! burst: a receiver that runs in slices acks in bursts, and the window
//! must cover its gaps) and the peak of windowed samples (a millisecond or
//! an RTT of acks). While the NETWORK queues (the median path RTT well above
//! the min) and no receiver credit bounds the flight, the smaller one sets
//! the window (pacing keeps the per-ack peak): ack bursts on a busy host
//! made per-ack samples read 2-4x the fabric's rate (880 Mbit/s on a
//! 400 Mbit/s fabric), and a window that large filled every link's buffer
//! until it overflowed.
//!
//! Host-aware: the window also covers the time the RECEIVING HOST holds our
//! packets before acking them (reported in every ack; with kernel arrival
//! stamps it includes time in the socket buffer while the receiving process
//! is not running). On a loaded machine that is milliseconds, and a window of
//! one network BDP then leaves the pipe idle for most of each scheduling gap.
//! Packets waiting there sit in the receiver's socket buffer, not in a
//! network queue. The term is capped (`max_host_delay_ns`) so that a slow
//! receiver cannot grow it without bound. (The simulator's hosts hold
//! packets only for the delayed ack, so there this changes nothing.)

use super::{AckSample, Controller};
use crate::muldiv::mul_div;
use crate::time::Instant;

/// Most ack aggregation the window covers, as time at the estimated rate, ns.
const EXTRA_ACKED_MAX_NS: u64 = 1_000_000;

/// How long the RTO's hold-time peak is kept before it decays, ns.
const RTO_HOLD_MEMORY_NS: u128 = 1_000_000_000;

/// BBR-like controller state.
pub struct Bbr {
    /// Bottleneck bandwidth estimate, bytes/s (0 = none yet).
    bw: u64,
    /// When `bw` was last raised or refreshed.
    bw_stamp: Instant,
    /// Min RTT, ns (0 = unknown).
    min_rtt_ns: u64,
    /// Median path RTT, ns.
    median_srtt_ns: u64,
    /// Window before any estimate, bytes.
    initial_window: u64,
    /// Smallest window ever used, bytes (enough for ack batching).
    min_window: u64,
    /// Receiver's ack hold time, ns (part of the effective RTT).
    ack_delay_ns: u64,
    /// Recent peak of the receiver-reported hold time, ns (decays).
    host_delay_ns: u64,
    /// When `host_delay_ns` was last raised or refreshed.
    host_stamp: Instant,
    /// Long-memory peak of the hold time for the RTO, ns (see `host_delay_peak`).
    rto_hold_ns: u64,
    /// When `rto_hold_ns` was last raised or decayed.
    rto_hold_stamp: Instant,
    /// Most of `host_delay_ns` the window covers, ns.
    max_host_delay_ns: u64,
    /// Peak of the windowed delivery-rate samples, bytes/s (0 = none yet).
    bw_avg: u64,
    /// When `bw_avg` was last raised or refreshed.
    bw_avg_stamp: Instant,
    /// The receiver's credit bounds our flight (as of the latest ack).
    receiver_limited: bool,
    /// `bw` before the timeouts since the last ack, bytes/s (for their undo).
    bw_before_timeout: Option<u64>,
    /// Start of the current ack-aggregation epoch (see `extra_acked`).
    agg_start: Instant,
    /// Bytes acked since `agg_start`.
    agg_bytes: u64,
    /// Recent peak of the bytes acked beyond what `bw` explains, bytes (decays).
    extra_acked: u64,
    /// When `extra_acked` was last raised or refreshed.
    extra_stamp: Instant,
    /// `window()` as of the latest change of state: it is asked for every
    /// packet sent, and computing it takes two 128-bit divisions (75 ns a
    /// packet at MTU 1500 in a profile), while the state changes once per ack.
    window_bytes: u64,
}

impl Bbr {
    /// A controller with an `initial_window` (bytes) and a `min_window`
    /// (bytes); `ack_delay_ns` is the receiver's delayed-ack time; the window
    /// covers reported receiver hold times up to `max_host_delay_ns`.
    pub fn new(
        initial_window: u64,
        min_window: u64,
        ack_delay_ns: u64,
        max_host_delay_ns: u64,
    ) -> Self {
        Bbr {
            bw: 0,
            bw_stamp: Instant::ZERO,
            min_rtt_ns: 0,
            median_srtt_ns: 0,
            initial_window,
            min_window,
            ack_delay_ns,
            host_delay_ns: 0,
            host_stamp: Instant::ZERO,
            rto_hold_ns: 0,
            rto_hold_stamp: Instant::ZERO,
            max_host_delay_ns,
            bw_avg: 0,
            bw_avg_stamp: Instant::ZERO,
            receiver_limited: false,
            bw_before_timeout: None,
            agg_start: Instant::ZERO,
            agg_bytes: 0,
            extra_acked: 0,
            extra_stamp: Instant::ZERO,
            window_bytes: initial_window,
        }
    }

    /// Track ack aggregation (as BBR's `extra_acked`): acks that come in
    /// bursts (a receiver that reads a coalesced flowlet at once, a host
    /// that runs its receiver in slices) deliver more in a moment than the
    /// bandwidth explains, and idle the sender between bursts unless the
    /// window also holds what the burst acks. An epoch starts whenever the
    /// acks fall behind the estimated rate; the excess within it, at most
    /// `EXTRA_ACKED_MAX_NS` of the rate, is kept as long as a bandwidth peak.
    fn note_aggregation(&mut self, now: Instant, acked: u64) {
        let bw = self.bw;
        if bw == 0 || acked == 0 {
            return;
        }
        let el = now.saturating_since(self.agg_start).as_nanos() as u64;
        let expected = mul_div(bw, el, 1_000_000_000).min(u128::from(u64::MAX)) as u64;
        if self.agg_start == Instant::ZERO || self.agg_bytes <= expected {
            self.agg_start = now;
            self.agg_bytes = 0;
        }
        self.agg_bytes += acked;
        let el = now.saturating_since(self.agg_start).as_nanos() as u64;
        let expected = mul_div(bw, el, 1_000_000_000).min(u128::from(u64::MAX)) as u64;
        let cap = mul_div(bw, EXTRA_ACKED_MAX_NS, 1_000_000_000).min(u128::from(u64::MAX)) as u64;
        let extra = self.agg_bytes.saturating_sub(expected).min(cap);
        let stale = now.saturating_since(self.extra_stamp).as_nanos() as u64 > self.bw_window_ns();
        if extra >= self.extra_acked {
            self.extra_acked = extra;
            self.extra_stamp = now;
        } else if stale {
            self.extra_acked = (self.extra_acked * 3 / 4).max(extra);
            self.extra_stamp = now;
        }
    }

    /// Is the connection as a whole queueing (most paths' RTT well above min)?
    pub fn congested(&self) -> bool {
        self.min_rtt_ns > 0 && self.median_srtt_ns > 2 * self.min_rtt_ns + 20_000
    }

    /// The window from the current state (see `window_bytes`).
    fn compute_window(&self) -> u64 {
        let bw = self.bandwidth();
        if bw == 0 || self.min_rtt_ns == 0 {
            // Honoured as configured: it bounds the first round trip's burst.
            return self.initial_window;
        }
        let gain = if self.congested() { 1 } else { 2 };
        // Min RTT plus the receiver's hold (configured ack delay, or what the
        // receiving host reports, see the module doc); but at least half the median
        // path RTT, so spraying jitter (RTTs spread far above the min) does
        // not starve the pipe. Half, and at the windowed rate, so that our own
        // queue cannot feed back.
        let hold = self.ack_delay_ns.max(self.host_delay());
        let base = mul_div(bw, self.min_rtt_ns + hold, 1_000_000_000);
        // The median term at the windowed rate, never the per-ack peak: when
        // the median RTT is our own queue, a window of peak x median / 2 (the
        // peak 2-4x the real rate on a busy receiver) kept that queue and grew
        // it; a 1 MiB stream between two loaded hosts ran at 234 MB/s with a
        // 10 MB window and 21 ms of median RTT. At the windowed rate it halves
        // the queue every round trip.
        let avg = if self.bw_avg > 0 {
            bw.min(self.bw_avg)
        } else {
            bw
        };
        let spread = mul_div(avg, self.median_srtt_ns / 2, 1_000_000_000);
        let bdp = base.max(spread).min(u128::from(u64::MAX)) as u64;
        // Plus the acks' aggregation, unless a receiver credit bounds the
        // flight (an incast: the receiver sizes it to its buffer).
        let extra = if self.receiver_limited {
            0
        } else {
            self.extra_acked
        };
        bdp.saturating_mul(gain)
            .saturating_add(extra)
            .max(self.min_window)
    }

    /// How long a bandwidth maximum is kept before it may decay, ns.
    fn bw_window_ns(&self) -> u64 {
        (self.median_srtt_ns.max(self.min_rtt_ns) * 10).clamp(1_000_000, 100_000_000)
    }
}

impl Controller for Bbr {
    fn on_sent(&mut self, _now: Instant, _bytes: u64) {}

    fn on_ack(&mut self, now: Instant, s: &AckSample) {
        // Called after any undo of this ack (`on_timeout_undone`): a timeout
        // not undone by now stands.
        self.bw_before_timeout = None;
        if s.min_rtt_ns > 0 {
            self.min_rtt_ns = s.min_rtt_ns;
        }
        if s.median_srtt_ns > 0 {
            self.median_srtt_ns = s.median_srtt_ns;
        }
        // Peak hold time, kept as long as a bandwidth maximum: the gaps of
        // a descheduled receiver come every few ms, not every ack.
        let stale = now.saturating_since(self.host_stamp).as_nanos() as u64 > self.bw_window_ns();
        if s.peer_delay_ns >= self.rto_hold_ns {
            self.rto_hold_ns = s.peer_delay_ns;
            self.rto_hold_stamp = now;
        } else if now.saturating_since(self.rto_hold_stamp).as_nanos() > RTO_HOLD_MEMORY_NS {
            self.rto_hold_ns = (self.rto_hold_ns * 3 / 4).max(s.peer_delay_ns);
            self.rto_hold_stamp = now;
        }
        if s.peer_delay_ns >= self.host_delay_ns {
            self.host_delay_ns = s.peer_delay_ns;
            self.host_stamp = now;
        } else if stale {
            self.host_delay_ns = (self.host_delay_ns * 3 / 4).max(s.peer_delay_ns);
            self.host_stamp = now;
        }
        self.receiver_limited = s.receiver_limited;
        self.note_aggregation(now, s.acked_bytes);
        if s.avg_interval_ns > 0 {
            let rate = mul_div(s.avg_bytes, 1_000_000_000, s.avg_interval_ns)
                .min(u128::from(u64::MAX / 4)) as u64;
            let stale =
                now.saturating_since(self.bw_avg_stamp).as_nanos() as u64 > self.bw_window_ns();
            if rate >= self.bw_avg {
                self.bw_avg = rate;
                self.bw_avg_stamp = now;
            } else if stale {
                self.bw_avg = (self.bw_avg * 3 / 4).max(rate);
                self.bw_avg_stamp = now;
            }
        }
        if s.interval_ns > 0 && s.delivered_bytes > 0 {
            // At least 1 µs: a burst acked "at once" is no rate measurement.
            let interval = s.interval_ns.max(1000);
            let rate = mul_div(s.delivered_bytes, 1_000_000_000, interval)
                .min(u128::from(u64::MAX / 4)) as u64;
            let stale = now.saturating_since(self.bw_stamp).as_nanos() as u64 > self.bw_window_ns();
            if rate >= self.bw {
                self.bw = rate;
                self.bw_stamp = now;
            } else if stale && !s.app_limited {
                // The old maximum aged out: decay towards the current rate
                // (not towards an application's pace: see `Peer::note_queued`).
                self.bw = (self.bw * 3 / 4).max(rate);
                self.bw_stamp = now;
            }
        }
        self.window_bytes = self.compute_window();
    }

    fn on_loss(&mut self, _now: Instant, _bytes: u64) {
        // Random loss is not a congestion signal here; queueing (RTT) is.
    }

    fn on_timeout(&mut self, _now: Instant) {
        self.bw_before_timeout.get_or_insert(self.bw);
        self.bw /= 2;
        self.window_bytes = self.compute_window();
    }

    fn on_timeout_undone(&mut self) {
        if let Some(bw) = self.bw_before_timeout.take() {
            self.bw = self.bw.max(bw);
        }
        self.window_bytes = self.compute_window();
    }

    fn window(&self) -> u64 {
        self.window_bytes
    }

    /// Bottleneck bandwidth estimate the window uses, bytes/s: the per-ack
    /// peak, or the windowed one when smaller while the network queues and
    /// no receiver credit bounds us (see the module doc).
    fn bandwidth(&self) -> u64 {
        if self.bw_avg > 0 && !self.receiver_limited && self.congested() {
            self.bw.min(self.bw_avg)
        } else {
            self.bw
        }
    }

    /// The receiver hold time the window covers, ns.
    fn host_delay(&self) -> u64 {
        self.host_delay_ns.min(self.max_host_delay_ns)
    }

    /// Peak of the receiver-reported hold time over the last second or so,
    /// uncapped, ns: what the retransmission timer must wait out (a
    /// receiver off the CPU is not a loss), where the window's term stays
    /// capped. A long memory: a loaded host deschedules its processes every
    /// few hundred ms, far apart compared with the window's peak (kept for
    /// ten RTTs).
    fn host_delay_peak(&self) -> u64 {
        self.rto_hold_ns
    }

    fn pacing_rate(&self) -> Option<u64> {
        // The per-ack peak: the windowed one bounds the window only. On a
        // host whose scheduling delays keep the median RTT far above the
        // min ("congested" with empty links), pacing at 1.25x the windowed
        // rate held a lone flow at a third of the fabric after a spurious RTO.
        let bw = self.bw;
        if bw == 0 {
            return None;
        }
        // Pace above the estimate so the rate can grow (BBR's startup gain);
        // closer to it when the whole connection is queueing.
        Some(if self.congested() {
            bw / 4 * 5
        } else {
            bw.saturating_mul(2)
        })
    }
}
