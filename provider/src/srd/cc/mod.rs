//! Congestion control behind a small trait; one file per algorithm.

pub mod bbr;

use crate::time::Instant;

/// What the controller learns from one acknowledgement.
#[derive(Copy, Clone, Debug, Default)]
pub struct AckSample {
    /// Bytes newly acknowledged by this ack.
    pub acked_bytes: u64,
    /// Delivery-rate sample: bytes delivered over `interval_ns` (0 = none).
    pub delivered_bytes: u64,
    /// Interval of the delivery-rate sample, ns.
    pub interval_ns: u64,
    /// Smallest RTT of any path, ns (0 = unknown).
    pub min_rtt_ns: u64,
    /// Median smoothed RTT over the usable paths, ns (0 = unknown).
    pub median_srtt_ns: u64,
    /// Windowed delivery-rate sample (at least a millisecond and an RTT of
    /// acks, see `Peer::bw_sample`): bytes over `avg_interval_ns` (0 = none).
    pub avg_bytes: u64,
    /// Interval of the windowed sample, ns.
    pub avg_interval_ns: u64,
    /// The receiver bounds our flight with a credit (it shares its buffer
    /// among several senders, or schedules them).
    pub receiver_limited: bool,
    /// How long the receiver held the newest packet this ack reports before
    /// acknowledging it, ns: its delayed-ack time plus, where its driver
    /// stamps arrivals in the kernel, the time the packet waited in the
    /// receiving host (socket buffer, process not running, backlog).
    pub peer_delay_ns: u64,
    /// The delivery-rate sample's packet left while the sender was
    /// application-limited (`Tx::app_limited`): a low rate says how fast
    /// the application sent, not what the path carries.
    pub app_limited: bool,
}

/// A per-peer congestion controller.
pub trait Controller {
    /// `bytes` went on the wire.
    fn on_sent(&mut self, now: Instant, bytes: u64);
    /// An acknowledgement arrived.
    fn on_ack(&mut self, now: Instant, s: &AckSample);
    /// `bytes` were declared lost (one packet).
    fn on_loss(&mut self, now: Instant, bytes: u64);
    /// The retransmission timer fired.
    fn on_timeout(&mut self, now: Instant);
    /// The last timeout proved spurious (packets sent before it were acked
    /// after it: the path or the receiver was late, nothing was lost).
    fn on_timeout_undone(&mut self) {}
    /// Most bytes allowed in flight.
    fn window(&self) -> u64;
    /// Pacing rate in bytes per second (`None` = unpaced).
    fn pacing_rate(&self) -> Option<u64>;
    /// Bottleneck bandwidth estimate, bytes/s, for statistics (0 = none).
    fn bandwidth(&self) -> u64 {
        0
    }
    /// How long the receiving host typically holds our packets before
    /// acking them, as the window covers it, ns (`AckSample::peer_delay_ns`).
    /// The tail-loss probe of a whole flight waits for it as well (a flight
    /// going silent is more often a receiver off the CPU than a lost tail).
    /// Default 0: a controller that does not track it leaves the probe to
    /// wait for the configured delayed-ack time only.
    fn host_delay(&self) -> u64 {
        0
    }
    /// Longer-memory peak of that hold time, uncapped, ns: what the
    /// retransmission timer waits out on top of the RTT. Default: the same
    /// as `host_delay`.
    fn host_delay_peak(&self) -> u64 {
        self.host_delay()
    }
}

/// The controller a peer runs. An enum, not a `Box<dyn Controller>`: the
/// window, pacing rate and `on_sent` are asked for every packet, and a match
/// on one variant compiles to a direct (inlinable) call with the state inline
/// in `Peer`, where a trait object costs an indirect call and a separate
/// allocation per peer (which `Peer::memory` would have to count). A second
/// algorithm is one more variant, chosen in `Cc::new`, and is then compared
/// with the first in the simulator on the same scenarios.
pub enum Cc {
    /// The BBR-like controller (`bbr.rs`).
    Bbr(bbr::Bbr),
}

impl Cc {
    /// The controller for a new peer: an `initial_window` and a `min_window`
    /// (bytes); `ack_delay_ns` is the receiver's delayed-ack time; the
    /// window covers receiver hold times up to `max_host_delay_ns`.
    pub fn new(
        initial_window: u64,
        min_window: u64,
        ack_delay_ns: u64,
        max_host_delay_ns: u64,
    ) -> Self {
        Cc::Bbr(bbr::Bbr::new(
            initial_window,
            min_window,
            ack_delay_ns,
            max_host_delay_ns,
        ))
    }
}

/// Forwards every call to the variant's controller.
macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Cc::Bbr($c) => $e,
        }
    };
}

impl Controller for Cc {
    #[inline]
    fn on_sent(&mut self, now: Instant, bytes: u64) {
        dispatch!(self, c => c.on_sent(now, bytes))
    }
    #[inline]
    fn on_ack(&mut self, now: Instant, s: &AckSample) {
        dispatch!(self, c => c.on_ack(now, s))
    }
    #[inline]
    fn on_loss(&mut self, now: Instant, bytes: u64) {
        dispatch!(self, c => c.on_loss(now, bytes))
    }
    #[inline]
    fn on_timeout(&mut self, now: Instant) {
        dispatch!(self, c => c.on_timeout(now))
    }
    #[inline]
    fn on_timeout_undone(&mut self) {
        dispatch!(self, c => c.on_timeout_undone())
    }
    #[inline]
    fn window(&self) -> u64 {
        dispatch!(self, c => c.window())
    }
    #[inline]
    fn pacing_rate(&self) -> Option<u64> {
        dispatch!(self, c => c.pacing_rate())
    }
    #[inline]
    fn bandwidth(&self) -> u64 {
        dispatch!(self, c => c.bandwidth())
    }
    #[inline]
    fn host_delay(&self) -> u64 {
        dispatch!(self, c => c.host_delay())
    }
    #[inline]
    fn host_delay_peak(&self) -> u64 {
        dispatch!(self, c => c.host_delay_peak())
    }
}
