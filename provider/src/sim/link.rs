//! One simulated link (a path in one direction, or a shared bottleneck):
//! serialization at a bandwidth, a drop-tail FIFO buffer, one-way delay with
//! FIFO-preserving jitter, random loss / duplication / corruption, and a
//! schedule of blackhole or slow-down periods.

use core::time::Duration;

use crate::rng::Rng;
use crate::time::Instant;

/// Static description of a link.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Extra delay uniform in `0..jitter` per packet (order on the link is kept).
    pub jitter: Duration,
    /// Bandwidth in bytes per second (0 = infinite).
    pub bandwidth: u64,
    /// Drop-tail buffer in bytes (0 = unlimited).
    pub buffer: u64,
    /// Probability a packet is lost.
    pub loss: f64,
    /// Probability a packet is delivered twice.
    pub dup: f64,
    /// Probability a packet is corrupted (then dropped by the UDP checksum).
    pub corrupt: f64,
}

impl LinkSpec {
    /// A lossless link with `delay` and no bandwidth limit.
    pub fn ideal(delay: Duration) -> Self {
        LinkSpec {
            delay,
            jitter: Duration::ZERO,
            bandwidth: 0,
            buffer: 0,
            loss: 0.0,
            dup: 0.0,
            corrupt: 0.0,
        }
    }
}

/// A change of a link's behaviour during `[from, until)`.
#[derive(Clone, Debug)]
pub struct Event {
    /// Start.
    pub from: Instant,
    /// End.
    pub until: Instant,
    /// What happens.
    pub kind: EventKind,
}

/// Kinds of scheduled link changes.
#[derive(Clone, Debug)]
pub enum EventKind {
    /// Every packet is silently dropped.
    Blackhole,
    /// Extra one-way delay.
    Slow(Duration),
}

/// Counters of one link.
#[derive(Clone, Debug, Default)]
pub struct LinkStats {
    /// Packets offered.
    pub offered: u64,
    /// Packets delivered (duplicates counted).
    pub delivered: u64,
    /// Dropped by random loss.
    pub lost: u64,
    /// Dropped because the buffer was full.
    pub overflow: u64,
    /// Dropped by a blackhole period.
    pub blackholed: u64,
    /// Corrupted (dropped by checksum).
    pub corrupted: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Bytes offered.
    pub bytes: u64,
}

/// A link's state while the simulation runs.
#[derive(Clone, Debug)]
pub struct Link {
    /// Description.
    pub spec: LinkSpec,
    /// Scheduled changes.
    pub schedule: Vec<Event>,
    /// Counters.
    pub stats: LinkStats,
    /// When the transmitter finishes the last queued packet.
    busy_until: Instant,
    /// Arrival time of the last packet (FIFO order is kept).
    last_arrival: Instant,
}

impl Link {
    /// A link from `spec`.
    pub fn new(spec: LinkSpec) -> Self {
        Link {
            spec,
            schedule: Vec::new(),
            stats: LinkStats::default(),
            busy_until: Instant::ZERO,
            last_arrival: Instant::ZERO,
        }
    }

    /// Bytes waiting in the queue at `now` (not yet serialised).
    pub fn queued_bytes(&self, now: Instant) -> u64 {
        let ns = self.busy_until.saturating_since(now).as_nanos() as u64;
        (u128::from(ns) * u128::from(self.spec.bandwidth) / 1_000_000_000) as u64
    }

    /// Offer a packet of `len` bytes at `now`: the arrival times at the far
    /// end (0, 1 or 2 copies; `None` = no copy).
    pub fn offer(&mut self, rng: &mut Rng, now: Instant, len: usize) -> [Option<Instant>; 2] {
        self.stats.offered += 1;
        self.stats.bytes += len as u64;
        let mut extra = Duration::ZERO;
        for e in &self.schedule {
            if e.from <= now && now < e.until {
                match e.kind {
                    EventKind::Blackhole => {
                        self.stats.blackholed += 1;
                        return [None, None];
                    }
                    EventKind::Slow(d) => extra += d,
                }
            }
        }
        let start = self.busy_until.max(now);
        if self.spec.bandwidth > 0 {
            let queued_ns = start.saturating_since(now).as_nanos() as u64;
            let queued_bytes =
                (u128::from(queued_ns) * u128::from(self.spec.bandwidth) / 1_000_000_000) as u64;
            if self.spec.buffer > 0 && queued_bytes + len as u64 > self.spec.buffer {
                self.stats.overflow += 1;
                return [None, None];
            }
            let ser = (len as u128 * 1_000_000_000 / u128::from(self.spec.bandwidth)) as u64;
            self.busy_until = start + Duration::from_nanos(ser);
        } else {
            self.busy_until = start;
        }
        if rng.chance(self.spec.loss) {
            self.stats.lost += 1;
            return [None, None];
        }
        if rng.chance(self.spec.corrupt) {
            self.stats.corrupted += 1;
            return [None, None];
        }
        let jitter_ns = self.spec.jitter.as_nanos() as u64;
        let j = Duration::from_nanos(rng.below(jitter_ns.max(1)));
        let arrival = (self.busy_until + self.spec.delay + extra + j).max(self.last_arrival);
        self.last_arrival = arrival;
        self.stats.delivered += 1;
        let mut out = [Some(arrival), None];
        if rng.chance(self.spec.dup) {
            self.stats.duplicated += 1;
            self.stats.delivered += 1;
            out[1] = Some(arrival + Duration::from_nanos(1 + rng.below(jitter_ns.max(1000))));
        }
        out
    }
}
