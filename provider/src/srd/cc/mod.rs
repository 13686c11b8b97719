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
}
