//! Per-path state (RTT, ordering for loss detection, health) and the path
//! picker that sprays packets over the healthy paths.

use std::collections::VecDeque;

use core::time::Duration;

use crate::time::Instant;

/// RTT assumed for a path before its first sample.
pub const INITIAL_RTT: Duration = Duration::from_millis(1);

/// Shortest span of one per-path delivery-rate sample, ns.
const RATE_SAMPLE_NS: u64 = 1_000_000;

/// A path may hold this percentage of its rate share of the window in
/// flight: room to grow its share by half per round trip, while a path far
/// slower than the others gets a small cap and so only a short queue.
const CAP_HEADROOM_PCT: u128 = 150;

/// A path's picker weight meaning "an equal share", fixed point.
pub const WEIGHT_ONE: u32 = 1024;
/// Picker weight bounds: a path may carry from 1/16 to 16 times an equal
/// share (16 random ports over 4 links can put 1 port on one link and 7 on
/// another).
const WEIGHT_MIN: u32 = WEIGHT_ONE / 16;
const WEIGHT_MAX: u32 = WEIGHT_ONE * 16;
/// Weight change per RTT sample outside the dead band: 1/32 (about 1.3x per
/// smoothing time constant of the path's srtt, so the weight does not run
/// ahead of the delay it reacts to).
const WEIGHT_STEP_SHIFT: u32 = 5;
/// A path's srtt must differ from the median by at least this much (and by
/// half the median) before its weight moves: host scheduling jitter is not
/// a queue.
const WEIGHT_DEADBAND_NS: u64 = 200_000;

/// Health of one path.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// Carrying traffic normally.
    Good,
    /// One recent loss: one packet at a time until an ack comes back.
    Suspect,
    /// Lost two in a row: skipped, probed now and then.
    Bad,
}

/// One path (entropy value) towards one peer.
///
/// Laid out by hand (`repr(C)`, 256 bytes, four cache lines, aligned to
/// them): what the scans over every path read (the picker, `has_room`, the
/// median RTT, loss detection) sits in the first two lines, so that a message's path
/// choice touches one line per path, not three. Across hosts the engine
/// runs from caches the kernel's network stack has cooled between
/// messages (`engine_speed`'s `SPRAY_SPEED_EVICT_KB`), and with 16 paths
/// the picker's scan was the costliest of a message's cache misses.
#[repr(C, align(64))]
pub struct Path {
    // -- line 0: the picker's and `has_room`'s fields (and the median's).
    /// Smoothed RTT, ns (0 = no sample yet).
    pub srtt_ns: u64,
    /// Transmissions on this path, numbering `outstanding` entries.
    pub next_seq: u64,
    /// Highest path sequence number acknowledged, +1 (0 = none).
    pub acked_seq: u64,
    /// While `Suspect`: `next_seq` when it became suspect (one more packet allowed).
    pub suspect_seq: u64,
    /// Smooth weighted round robin: accumulated weight.
    wrr: i64,
    /// While `Bad`: when the next probe may go.
    pub probe_at: Instant,
    /// Picker weight (`WEIGHT_ONE` = an equal share): grows while the
    /// path's RTT stays well below the median path's (its link has room:
    /// fewer of our ports hash onto it than onto the others), shrinks while
    /// well above (its link is the one queueing).
    pub weight: u32,
    /// Losses since the last acknowledgement on this path.
    pub loss_streak: u32,
    /// Health state.
    pub health: Health,
    /// A probe is outstanding on this (bad) path.
    pub probing: bool,
    /// While `Bad`: probe back-off exponent.
    pub probe_backoff: u32,
    // -- line 1: loss detection's, and the rate the caps use.
    /// Transmissions not yet known acked or lost, in send order: (psn, path seq).
    pub outstanding: VecDeque<(u32, u64)>,
    /// RTT variation, ns.
    pub rttvar_ns: u64,
    /// Delivery rate measured on this path, bytes/s (0 = no sample yet).
    pub rate_bps: u64,
    /// When the latest acknowledgement on this path arrived.
    last_acked_at: Instant,
    /// `acked_bytes / acked` (at least 1), bytes: the mean packet, kept
    /// here so that the in-flight cap checked for every path at every pick
    /// divides nothing (see `has_room_by_rate`).
    pkt_bytes: u64,
    // -- the rest: per packet sent or acked on this path only.
    /// Smallest RTT sample seen, ns (u64::MAX = none).
    pub min_rtt_ns: u64,
    /// Send time of the latest-sent packet acknowledged on this path.
    pub acked_sent: Instant,
    /// Packets sent once and acknowledged on this path.
    pub acked: u64,
    /// Payload bytes of `acked`.
    pub acked_bytes: u64,
    /// Start of the current delivery-rate sample.
    rate_start: Instant,
    /// `acked_bytes` at `rate_start`.
    rate_start_bytes: u64,
    /// Packets sent on this path (first transmissions and retransmissions).
    pub sent: u64,
    /// Payload bytes sent on this path.
    pub sent_bytes: u64,
    /// Retransmissions sent on this path.
    pub retransmits: u64,
    /// Packets declared lost on this path.
    pub lost: u64,
    /// The latest flowlet sent here (see `Flowlet`).
    pub flow: Option<Flowlet>,
}

/// What the sender remembers of the latest flowlet on a path, to see how
/// spread out its acks come back (`PathSet::on_flowlet_acked`).
#[derive(Copy, Clone, Debug)]
pub struct Flowlet {
    /// Path sequence number and send time of its first packet.
    pub first: (u64, Instant),
    /// Path sequence number and send time of its latest packet.
    pub last: (u64, Instant),
    /// When its first packet was acknowledged.
    pub first_acked: Option<Instant>,
}

impl Path {
    fn new() -> Self {
        Path {
            srtt_ns: 0,
            rttvar_ns: 0,
            min_rtt_ns: u64::MAX,
            next_seq: 0,
            acked_seq: 0,
            acked_sent: Instant::ZERO,
            outstanding: VecDeque::new(),
            health: Health::Good,
            loss_streak: 0,
            probe_at: Instant::ZERO,
            probe_backoff: 0,
            probing: false,
            suspect_seq: 0,
            weight: WEIGHT_ONE,
            wrr: 0,
            sent: 0,
            sent_bytes: 0,
            retransmits: 0,
            lost: 0,
            acked: 0,
            acked_bytes: 0,
            pkt_bytes: 1,
            rate_bps: 0,
            rate_start: Instant::ZERO,
            rate_start_bytes: 0,
            last_acked_at: Instant::ZERO,
            flow: None,
        }
    }

    /// Smoothed RTT, or `fallback_ns` before the first sample.
    pub fn srtt_or(&self, fallback_ns: u64) -> u64 {
        if self.srtt_ns == 0 {
            fallback_ns
        } else {
            self.srtt_ns
        }
    }

    /// Fold in one RTT sample; `for_min`: it may lower the min RTT (the
    /// receiver's hold of it was short, so little error could hide in it).
    fn on_rtt(&mut self, sample_ns: u64, for_min: bool) {
        let s = sample_ns.max(1);
        if for_min {
            self.min_rtt_ns = self.min_rtt_ns.min(s);
        }
        if self.srtt_ns == 0 {
            self.srtt_ns = s;
            self.rttvar_ns = s / 2;
        } else {
            let err = self.srtt_ns.abs_diff(s);
            self.rttvar_ns = (3 * self.rttvar_ns + err) / 4;
            self.srtt_ns = (7 * self.srtt_ns + s) / 8;
        }
    }

    /// A packet of `bytes` payload bytes went out on this path.
    pub fn on_sent(&mut self, bytes: u64, retransmit: bool) {
        self.sent += 1;
        self.sent_bytes += bytes;
        if retransmit {
            self.retransmits += 1;
        }
    }

    /// A packet of `bytes` sent once on this path was acknowledged at `now`:
    /// feeds the delivery rate. A sample spans at least `RATE_SAMPLE_NS` and
    /// two RTTs of the path, so ack batching does not make it jumpy; after an
    /// idle gap the sample restarts (an idle path is not a slow one).
    pub fn on_delivered(&mut self, now: Instant, bytes: u64) {
        self.acked += 1;
        self.acked_bytes += bytes;
        // The mean packet size. Where every packet so far had the size of
        // this one (a bulk flow), it is that size: no division per ack.
        let uniform = bytes == self.pkt_bytes
            && self.pkt_bytes.checked_mul(self.acked - 1) == Some(self.acked_bytes - bytes);
        if !uniform {
            self.pkt_bytes = (self.acked_bytes / self.acked).max(1);
        }
        let span = (2 * self.srtt_ns).max(RATE_SAMPLE_NS);
        let idle = now.saturating_since(self.last_acked_at).as_nanos() as u64;
        self.last_acked_at = now;
        if self.rate_start == Instant::ZERO || idle > 2 * span {
            self.rate_start = now;
            self.rate_start_bytes = self.acked_bytes - bytes;
            return;
        }
        let el = now.saturating_since(self.rate_start).as_nanos() as u64;
        if el < span {
            return;
        }
        let sample = (self.acked_bytes - self.rate_start_bytes).saturating_mul(1_000_000_000) / el;
        // Up at once, down by half the gap per sample: a receiver stalled for
        // a moment does not throttle the path, a path that really slowed
        // down is followed within a few samples.
        self.rate_bps = sample.max((self.rate_bps + sample) / 2);
        self.rate_start = now;
        self.rate_start_bytes = self.acked_bytes;
    }

    /// Packets in flight on this path: sent after the latest one acked here,
    /// less those declared lost since (an estimate: no per-path bookkeeping
    /// of each packet's fate).
    pub fn inflight_pkts(&self) -> u64 {
        (self.next_seq - self.acked_seq.min(self.next_seq))
            .saturating_sub(u64::from(self.loss_streak))
    }

    /// Its delivery rate if measured recently, bytes/s (`None`: no sample
    /// yet, or none lately: an idle path is not a slow one).
    fn recent_rate(&self, now: Instant) -> Option<u64> {
        // (A rate comes from acks only: `acked` is then at least 1, and
        // not read here, in another cache line than the caps' fields.)
        if self.rate_bps == 0 {
            return None;
        }
        let span = (2 * self.srtt_ns).max(RATE_SAMPLE_NS);
        (now.saturating_since(self.last_acked_at).as_nanos() as u64 <= 4 * span)
            .then_some(self.rate_bps)
    }

    /// Most packets this path may have in flight: `CAP_HEADROOM` times its
    /// share of the peer's window by delivery rate (`rate_bps` of
    /// `total_rate_bps`), at least one packet. (The definition, kept for
    /// the test that `has_room_by_rate` agrees with it.)
    #[cfg(test)]
    fn cap_pkts(&self, rate_bps: u64, total_rate_bps: u64, window_bytes: u64) -> u64 {
        let share = u128::from(window_bytes) * u128::from(rate_bps) * CAP_HEADROOM_PCT
            / (100 * u128::from(total_rate_bps.max(1)));
        (share.div_ceil(u128::from(self.pkt_bytes)) as u64).max(1)
    }

    /// Is this path below its in-flight cap (`cap_pkts`)? Exactly
    /// `inflight < cap_pkts(..)`, without a division: with `share` = floor(W r
    /// H / (100 T)) and the mean packet `b`, `inflight < max(1, ceil(share /
    /// b))` holds iff inflight is 0 or (inflight b + 1) 100 T <= W r H. It
    /// runs for every path at every pick (once per message in a ping-pong),
    /// and its two divisions cost tens of cycles each, 32 per pick with 16
    /// paths: IMB's PingPong of 8 B across 2 hosts took 0.5-0.9 us longer
    /// with 16 paths than with 1.
    fn has_room_by_rate(&self, rate_bps: u64, total_rate_bps: u64, window_bytes: u64) -> bool {
        let inflight = self.inflight_pkts();
        if inflight == 0 {
            return true;
        }
        let need = (u128::from(inflight) * u128::from(self.pkt_bytes) + 1)
            .checked_mul(100 * u128::from(total_rate_bps.max(1)));
        let have = (u128::from(window_bytes) * u128::from(rate_bps)).checked_mul(CAP_HEADROOM_PCT);
        match (need, have) {
            (Some(need), Some(have)) => need <= have,
            // (Beyond 2^128 only with absurd rates or windows: the share
            // is then larger than any flight.)
            (None, _) => false,
            (_, None) => true,
        }
    }

    /// Usable for new packets by its health (not bad; suspect ones carry one).
    fn usable(&self) -> bool {
        !(self.health == Health::Bad
            || (self.health == Health::Suspect && self.next_seq > self.suspect_seq))
    }

    /// A packet sent on this path was acknowledged.
    pub fn on_acked(&mut self, seq: u64, sent: Instant) {
        if seq + 1 > self.acked_seq {
            self.acked_seq = seq + 1;
        }
        if sent > self.acked_sent {
            self.acked_sent = sent;
        }
        self.loss_streak = 0;
        self.health = Health::Good;
        self.probing = false;
        self.probe_backoff = 0;
    }

    /// The outstanding probe of this bad path went unanswered (lost, or
    /// moved to another path before its ack came): back off, and probe
    /// again later. Without this a probe whose packet was resent elsewhere
    /// (its ack then credits no path) left the path unprobed for good.
    pub fn probe_unanswered(&mut self, now: Instant, rtt_ns: u64) {
        if self.health != Health::Bad || !self.probing {
            return;
        }
        self.probing = false;
        self.probe_backoff = (self.probe_backoff + 1).min(6);
        self.probe_at = now + Duration::from_nanos(rtt_ns.max(1000) * (4 << self.probe_backoff));
    }

    /// A packet sent on this path was declared lost at `now`; `rtt_ns` is the
    /// peer's typical RTT (how long a bad path is avoided before a probe).
    pub fn on_lost(&mut self, now: Instant, rtt_ns: u64) {
        self.lost += 1;
        self.loss_streak += 1;
        if self.health == Health::Bad {
            if self.probing {
                // The probe died too: back off.
                self.probe_unanswered(now, rtt_ns);
            }
        } else if self.loss_streak >= 2 {
            self.health = Health::Bad;
            self.probing = false;
            self.probe_at = now + Duration::from_nanos(rtt_ns.max(1000) * 4);
        } else {
            // One loss: carry a single packet until something is acked here.
            self.health = Health::Suspect;
            self.suspect_seq = self.next_seq;
        }
    }
}

/// All paths of one peer and the spraying cursor.
pub struct PathSet {
    /// The paths, indexed by entropy value: `count` of them, or none while
    /// the peer is reclaimed (`release`; `ensure` brings them back before
    /// the peer is used again).
    pub paths: Vec<Path>,
    /// Paths towards this peer (path numbers 0..count, over all its rails).
    count: usize,
    cursor: usize,
    /// Retransmission-timer expiries towards this peer (kept here, with the
    /// per-path counters, for the per-peer statistics).
    pub rtos: u64,
    /// Tail-loss probes towards this peer.
    pub tail_probes: u64,
    /// The peer's congestion window at the last `has_room`, bytes (0 = none
    /// yet: no per-path caps).
    window_bytes: u64,
    /// `median_srtt` as of `median_at` (see `median_srtt_at`), ns.
    median_ns: Option<u64>,
    /// When `median_ns` was computed (`None` = never).
    median_at: Option<Instant>,
    /// The flowlet under way: (path, new data packets it may still take).
    flowlet: Option<(u8, u32)>,
    /// Longest flowlet now, packets (see `on_flowlet_acked`).
    flowlet_cap: u32,
    /// Flowlets whose acks came spread (the cap halved), for statistics.
    pub flowlet_spread: u64,
    /// Flowlets whose acks came tight (the cap grew), for statistics.
    pub flowlet_tight: u64,
    /// `total_rate` as of an instant (see `total_rate_at`): asked for every
    /// packet sent, it walks every path (122 ns a packet at MTU 1500 in a
    /// profile of `has_room`), while within one flush (one `now`) it
    /// changes only when an ack or a loss changes a path (`touch`).
    total_cache: Option<(Instant, u64)>,
    /// `has_room`'s last answer: at the instant of `total_cache`, with the
    /// window `window_bytes`, path `room_path` had room (`NO_PATH`: no
    /// answer kept), having sent up to `room_seq` (its `next_seq`, low 32
    /// bits). While no ack or loss changed a path (`touch`) and nothing
    /// more went on that path, it still has: the packets of one flush ask
    /// for every packet sent, and the walk over the paths was about 100
    /// instructions a packet. (6 bytes with `room_idle`: a quiet peer's
    /// state stays under 4 KiB.)
    room_path: u8,
    room_seq: u32,
    /// `room_path` was idle (nothing in flight): it had room whatever the
    /// rates, so the answer holds at later instants too.
    room_idle: bool,
    /// `flowlet_goes_on`'s last yes for a good path that was not slow
    /// (`NO_PATH`: none kept). The answer rests on the paths' RTTs and
    /// health alone, which change only with an ack or a loss (`touch`,
    /// which drops it): until then the flowlet's later packets get it
    /// without the median and the checks (64 instructions a packet in a
    /// 64 KiB ping-pong); the median it used may predate the last ack's RTTs
    /// by up to `MEDIAN_REUSE_NS`, as any reuse of it does. One byte, no
    /// instant: with one, a quiet peer held 4101 bytes at 16384 peers, over
    /// the 4 KiB target (`engine_scale`).
    goes_on_path: u8,
    /// Where `pick_control` looks first (the path after its last pick).
    ctl_cursor: u8,
    /// While trimmed (`compact`): each path's RTT and health, for `ensure`.
    summary: Option<Box<[PathSummary]>>,
    /// Retransmissions and losses counted by path records given back by
    /// `compact` (the peer's totals in the statistics go on).
    pub retired_retransmits: u64,
    pub retired_lost: u64,
    /// The smallest `min_rtt_ns` of `paths`, ns (`u64::MAX`: none), kept
    /// as samples come (`on_rtt`) so that `min_rtt` reads no path: every
    /// ack asks for it, and the walk read a cache line of each of 16 paths.
    min_rtt_ns: u64,
    /// Paths whose `outstanding` may hold entries, bit i for path i (paths
    /// from 64 up are always visited): loss detection visits only
    /// these. In a ping-pong every message's ack empties its sender's
    /// flight, and clearing each path's queue touched a cache line of
    /// every path (16) per message where one holds entries.
    queued: u64,
}

/// What a trimmed peer keeps of one path (`PathSet::compact`): enough that
/// its next packets neither wait on the initial RTT nor go to a path known
/// bad; rates, weights and ordering state start afresh. 4 bytes: with 16
/// paths a quiet peer's records shrink from 3968 bytes to 64.
#[derive(Copy, Clone, Debug, Default)]
struct PathSummary {
    /// Smoothed RTT (`rtt_code`, 0 = no sample) | `SUMMARY_BAD` if the path was bad.
    srtt: u16,
    /// Min RTT (`rtt_code`, 0 = none).
    min_rtt: u16,
}

/// `PathSet::room_path` when no `has_room` answer is kept.
const NO_PATH: u8 = u8::MAX;

/// `PathSummary::srtt`'s bad-path bit.
const SUMMARY_BAD: u16 = 1 << 15;

/// An RTT in 15 bits: microseconds as an 11-bit mantissa and a 4-bit
/// exponent (`m << e`), rounded up: exact to 2 ms, within 0.1 % to 67 s.
fn rtt_code(ns: u64) -> u16 {
    let mut us = ns.div_ceil(1000).max(1);
    let mut e = 0u16;
    while us > 0x7ff && e < 15 {
        us = us.div_ceil(2);
        e += 1;
    }
    (e << 11) | us.min(0x7ff) as u16
}

/// The RTT `rtt_code` stands for, ns.
fn rtt_decode(code: u16) -> u64 {
    (u64::from(code & 0x7ff) << ((code >> 11) & 0xf)) * 1000
}

/// Longest flowlet `adapt_flowlet` allows, packets (the kernel's most
/// segments per segmented send).
const FLOWLET_CAP_MAX: u32 = 64;
/// Spread of a flowlet's acks (beyond its send time) that counts as
/// queueing only above this, plus half the base RTT, ns: receivers ack in
/// batches.
const FLOWLET_SPREAD_NS: u64 = 20_000;
/// Longest flowlet of a new peer, packets.
const FLOWLET_CAP_START: u32 = 4;

/// How long a computed median path RTT is reused, ns: RTTs move slowly, and
/// sorting the paths' RTTs on every poll of an idle loop costs more than the
/// whole rest of it.
const MEDIAN_REUSE_NS: u128 = 50_000;

impl PathSet {
    /// `n` fresh paths (at least one).
    pub fn new(n: u8) -> Self {
        let count = usize::from(n.max(1));
        PathSet {
            paths: (0..count).map(|_| Path::new()).collect(),
            count,
            cursor: 0,
            rtos: 0,
            tail_probes: 0,
            window_bytes: 0,
            median_ns: None,
            median_at: None,
            flowlet: None,
            flowlet_cap: FLOWLET_CAP_START,
            flowlet_spread: 0,
            flowlet_tight: 0,
            total_cache: None,
            room_path: NO_PATH,
            goes_on_path: NO_PATH,
            room_seq: 0,
            room_idle: false,
            ctl_cursor: 0,
            summary: None,
            retired_retransmits: 0,
            retired_lost: 0,
            min_rtt_ns: u64::MAX,
            queued: 0,
        }
    }

    /// Fold an RTT sample into path `i` (see `Path::on_rtt`); `for_min`: it
    /// may lower the path's min RTT, and so the set's.
    pub fn on_rtt(&mut self, i: usize, sample_ns: u64, for_min: bool) {
        if let Some(p) = self.paths.get_mut(i) {
            p.on_rtt(sample_ns, for_min);
            self.min_rtt_ns = self.min_rtt_ns.min(p.min_rtt_ns);
        }
    }

    /// `min_rtt_ns` from the paths held now (after records came or went).
    fn recount_min_rtt(&mut self) {
        self.min_rtt_ns = self
            .paths
            .iter()
            .map(|p| p.min_rtt_ns)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// The path of the flowlet under way (or the latest one), if any.
    pub fn flowlet_path(&self) -> Option<u8> {
        self.flowlet
            .map(|(i, _)| i)
            .filter(|&i| usize::from(i) < self.paths.len())
    }

    /// Path `i` took an `outstanding` entry (see `may_hold_outstanding`).
    #[inline]
    pub fn push_outstanding(&mut self, i: u8, psn: u32, pseq: u64) {
        self.paths[usize::from(i)]
            .outstanding
            .push_back((psn, pseq));
        self.queued |= 1u64.checked_shl(u32::from(i)).unwrap_or(0);
    }

    /// May path `i`'s `outstanding` hold entries? (A bit test, not the
    /// path's record; paths from 64 up are not tracked: always.)
    #[inline]
    pub fn may_hold_outstanding(&self, i: usize) -> bool {
        i >= 64 || self.queued & (1 << i) != 0
    }

    /// Path `i`'s `outstanding` is empty now.
    #[inline]
    pub fn outstanding_drained(&mut self, i: usize) {
        self.queued &= !1u64.checked_shl(i as u32).unwrap_or(0);
    }

    /// Empty every path's `outstanding` (nothing is in flight).
    pub fn clear_outstanding(&mut self) {
        for i in 0..self.paths.len() {
            if self.may_hold_outstanding(i) {
                self.paths[i].outstanding.clear();
            }
        }
        self.queued = 0;
    }

    /// Paths towards this peer, whether or not their records are held.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Give the path records back (a reclaimed peer: 248 bytes a path, 16
    /// paths by default, most of an idle peer's memory). Their RTT history
    /// goes with them; a reclaimed peer starts again like a new one.
    pub fn release(&mut self) {
        let count = self.count;
        *self = PathSet {
            paths: Vec::new(),
            count,
            ..PathSet::new(1)
        };
    }

    /// Give the path records back but keep each one's RTT and health (a
    /// trimmed peer: 4 bytes a path instead of 248 and its queue). Only
    /// while nothing is in flight: the records' ordering state is dropped.
    pub fn compact(&mut self) {
        if self.paths.is_empty() {
            return;
        }
        self.summary = Some(
            self.paths
                .iter()
                .map(|p| PathSummary {
                    srtt: if p.srtt_ns == 0 {
                        0
                    } else {
                        rtt_code(p.srtt_ns)
                    } | if p.health == Health::Bad {
                        SUMMARY_BAD
                    } else {
                        0
                    },
                    min_rtt: if p.min_rtt_ns == u64::MAX {
                        0
                    } else {
                        rtt_code(p.min_rtt_ns)
                    },
                })
                .collect(),
        );
        self.retired_retransmits += self.paths.iter().map(|p| p.retransmits).sum::<u64>();
        self.retired_lost += self.paths.iter().map(|p| p.lost).sum::<u64>();
        self.paths = Vec::new();
        self.queued = 0;
        self.min_rtt_ns = u64::MAX;
        self.flowlet = None;
        self.median_at = None;
        self.total_cache = None;
        self.room_path = NO_PATH;
    }

    /// Heap bytes of the summary a trimmed peer keeps.
    pub fn summary_memory(&self) -> usize {
        self.summary
            .as_ref()
            .map_or(0, |s| s.len() * core::mem::size_of::<PathSummary>())
    }

    /// Path records again if they were given back, before a trimmed or
    /// reclaimed peer sends or takes a packet (every other use of a peer's
    /// paths follows one of those): from a trimmed peer's summary, each
    /// path with its RTT (its variation half of it) and a bad path bad (it
    /// is probed at its first pick), else fresh.
    #[inline]
    pub fn ensure(&mut self) {
        if self.paths.is_empty() {
            self.rebuild();
        }
    }

    /// `ensure`'s work, out of line (rare: once per trimmed peer woken).
    #[cold]
    fn rebuild(&mut self) {
        self.touch();
        let summary = self.summary.take().unwrap_or_default();
        self.paths = (0..self.count)
            .map(|i| {
                let mut p = Path::new();
                if let Some(s) = summary.get(i) {
                    let srtt = rtt_decode(s.srtt & !SUMMARY_BAD);
                    if srtt > 0 {
                        p.srtt_ns = srtt;
                        p.rttvar_ns = srtt / 2;
                    }
                    if s.min_rtt > 0 {
                        p.min_rtt_ns = rtt_decode(s.min_rtt);
                    }
                    if s.srtt & SUMMARY_BAD != 0 {
                        p.health = Health::Bad;
                    }
                }
                p
            })
            .collect();
        self.recount_min_rtt();
    }

    /// The path for a control packet (a pure ACK, a PROBE), avoiding
    /// `avoid` when another will do: the next usable path after the last
    /// control packet's, first among those that carried something
    /// acknowledged, else any usable one, else any. Never a bad path's
    /// probe (`pick` spends its probe time on the next packet): nothing
    /// acknowledges a control packet, so it cannot tell whether the path
    /// came back, and an ACK or a probe's answer lost on a dead path cost
    /// the peer a retransmission timeout (doubling each time: rounds of
    /// 2 s with one ECMP link of 4 blackholed, `sim_dead_link`). Data's
    /// room and weights do not apply to a 48-byte packet.
    pub fn pick_control(&mut self, avoid: Option<u8>) -> u8 {
        let n = self.paths.len();
        if n <= 1 {
            // One path, or none held (a reclaimed peer, see `release`).
            return 0;
        }
        let start = usize::from(self.ctl_cursor) % n;
        for proven in [true, false] {
            for k in 0..n {
                let i = (start + k) % n;
                let p = &self.paths[i];
                if avoid != Some(i as u8) && p.usable() && (!proven || p.acked_seq > 0) {
                    self.ctl_cursor = ((i + 1) % n) as u8;
                    return i as u8;
                }
            }
        }
        let mut i = start;
        if avoid == Some(i as u8) {
            i = (i + 1) % n;
        }
        self.ctl_cursor = ((i + 1) % n) as u8;
        i as u8
    }

    /// `n` more fresh paths after the others (another rail's, `rails.rs`).
    pub fn add_paths(&mut self, n: usize) {
        self.count += n;
        // Released records (a reclaimed peer) come back all at once in `ensure`.
        if !self.paths.is_empty() {
            self.paths.extend((0..n).map(|_| Path::new()));
        }
        self.total_cache = None;
        self.room_path = NO_PATH;
        self.median_at = None;
    }

    /// Keep only the first `n` paths (at least one): the peer's other rails
    /// are gone (`rails.rs`). Nothing may still refer to the others.
    pub fn truncate(&mut self, n: usize) {
        self.count = n.max(1);
        self.paths.truncate(self.count);
        self.recount_min_rtt();
        self.cursor = 0;
        self.ctl_cursor = 0;
        self.flowlet = None;
        self.median_at = None;
        self.total_cache = None;
        self.room_path = NO_PATH;
    }

    /// `median_srtt`, recomputed at most every `MEDIAN_REUSE_NS`.
    pub fn median_srtt_at(&mut self, now: Instant) -> Option<u64> {
        let fresh = self
            .median_at
            .is_some_and(|t| now.saturating_since(t).as_nanos() < MEDIAN_REUSE_NS && t <= now);
        if !fresh {
            self.median_ns = self.median_srtt();
            self.median_at = Some(now);
        }
        self.median_ns
    }

    /// Forget all ordering state (send session reset); RTTs and health stay.
    pub fn reset_ordering(&mut self) {
        self.touch();
        for p in &mut self.paths {
            p.outstanding.clear();
            p.probing = false;
        }
        self.queued = 0;
    }

    /// Median smoothed RTT over the paths with samples that are not bad,
    /// ns (`None`: no such path).
    pub fn median_srtt(&self) -> Option<u64> {
        if let [p] = &self.paths[..] {
            // One path (a peer on this host): no sort, no 512-byte scratch.
            return (p.health != Health::Bad && p.srtt_ns != 0).then_some(p.srtt_ns);
        }
        let srtts = self
            .paths
            .iter()
            .filter(|p| p.srtt_ns != 0 && p.health != Health::Bad)
            .map(|p| p.srtt_ns);
        if self.paths.len() <= SMALL_SET {
            return median_small(srtts);
        }
        let mut v = [0u64; 64];
        let mut n = 0;
        for x in srtts.take(v.len()) {
            v[n] = x;
            n += 1;
        }
        if n == 0 {
            return None;
        }
        // The (n / 2)-th smallest, as a sort would place it, in linear time.
        let (_, m, _) = v[..n].select_nth_unstable(n / 2);
        Some(*m)
    }

    /// Smallest min-RTT over all paths, ns (`None` before any sample).
    pub fn min_rtt(&self) -> Option<u64> {
        // (A path's `min_rtt_ns` is `u64::MAX` before its first sample;
        // samples are at least 1 ns.)
        (self.min_rtt_ns != u64::MAX).then_some(self.min_rtt_ns)
    }

    /// Sum of the recent delivery rates of the usable paths, bytes/s.
    fn total_rate(&self, now: Instant) -> u64 {
        self.paths
            .iter()
            .filter(|p| p.usable())
            .filter_map(|p| p.recent_rate(now))
            .sum()
    }

    /// `total_rate(now)`, computed once per instant until a path changes.
    fn total_rate_at(&mut self, now: Instant) -> u64 {
        match self.total_cache {
            Some((t, total)) if t == now => total,
            _ => {
                let total = self.total_rate(now);
                self.total_cache = Some((now, total));
                // (`room_path` was an answer at the instant cached before.)
                self.room_path = NO_PATH;
                total
            }
        }
    }

    /// A path's rate, health or use changed (an ack, a loss, a packet on a
    /// suspect path): the next `total_rate_at` computes afresh.
    pub fn touch(&mut self) {
        self.total_cache = None;
        self.room_path = NO_PATH;
        self.goes_on_path = NO_PATH;
    }

    /// May another packet go on `p` now? Its in-flight cap is its share of
    /// the window by delivery rate (see `Path::cap_pkts`); no cap without a
    /// recent rate. This makes a path's share of the packets follow its
    /// delivery rate: a 10x slower link gets a tenth of the others' packets
    /// and only a short queue, so its last packets do not hold up the
    /// transfer's completion (its RTT alone reacts only once it queues).
    fn path_has_room(p: &Path, now: Instant, total_rate: u64, window_bytes: u64) -> bool {
        if p.inflight_pkts() == 0 {
            // (What `has_room_by_rate` answers first, without the rate.)
            return true;
        }
        match p.recent_rate(now) {
            Some(r) if total_rate > 0 && window_bytes > 0 => {
                p.has_room_by_rate(r, total_rate, window_bytes)
            }
            _ => true,
        }
    }

    /// May new data go out at `now` with a congestion window of
    /// `window_bytes`? False only when every usable path is at its in-flight
    /// cap (with no usable path at all, the picker's fallback round robin
    /// takes over, so true). Remembers the window for `pick`.
    pub fn has_room(&mut self, now: Instant, window_bytes: u64) -> bool {
        let kept = self.room_path != NO_PATH
            && self.window_bytes == window_bytes
            && (self.room_idle || self.total_cache.is_some_and(|(t, _)| t == now))
            && self
                .paths
                .get(usize::from(self.room_path))
                .is_some_and(|p| p.next_seq as u32 == self.room_seq);
        if kept {
            return true;
        }
        self.window_bytes = window_bytes;
        // The paths' total rate only once a path with packets in flight
        // needs it: the first path looked at is usually idle (a burst's
        // second packet, its flowlet on another path), and the total is a
        // walk over every path's rate.
        let mut total = None;
        let mut any_usable = false;
        // From the path after the flowlet's: the answer is the same whichever
        // path has room, and the memo of one the flowlet does not use
        // outlives the flowlet's packets.
        let n = self.paths.len();
        let start = self.flowlet.map_or(0, |(i, _)| usize::from(i) + 1);
        let start = if start >= n { 0 } else { start };
        for k in 0..n {
            // (Not `% n`: a division per path.)
            let i = if start + k >= n {
                start + k - n
            } else {
                start + k
            };
            if !self.paths[i].usable() {
                continue;
            }
            any_usable = true;
            let idle = self.paths[i].inflight_pkts() == 0;
            let room = idle || {
                let t = match total {
                    Some(t) => t,
                    None => *total.insert(self.total_rate_at(now)),
                };
                Self::path_has_room(&self.paths[i], now, t, window_bytes)
            };
            if room {
                self.room_path = i as u8;
                self.room_seq = self.paths[i].next_seq as u32;
                self.room_idle = idle;
                return true;
            }
        }
        !any_usable
    }

    /// Path `i` got an RTT sample at `now`: move its picker weight towards
    /// an equal queueing delay on every path. Spreading by packets alone,
    /// a link that only one of our 16 ports hashes onto gets 1/16 of them
    /// and idles while the links of the other ports overflow (one flow
    /// over 4 links, one link lossy: 1 port on a good link, 5 and 3 on the
    /// others gave 926 vs 2600 packets per link). With the same queue on
    /// every link, each link carries what it can.
    pub fn adapt_weight(&mut self, i: usize, now: Instant) {
        if self.paths.len() == 1 {
            // Weights only share packets out between paths.
            return;
        }
        let median = self.median_srtt_at(now);
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        let Some(median) = median else {
            return;
        };
        if p.srtt_ns == 0 || p.health != Health::Good {
            return;
        }
        let band = (median / 2).max(WEIGHT_DEADBAND_NS);
        let step = (p.weight >> WEIGHT_STEP_SHIFT).max(1);
        if p.srtt_ns + band < median {
            p.weight = (p.weight + step).min(WEIGHT_MAX);
        } else if p.srtt_ns > median + band {
            p.weight = p.weight.saturating_sub(step).max(WEIGHT_MIN);
        }
    }

    /// A path for a packet moved off the slow path `avoid`: the usable path
    /// with the fewest packets in flight among those not much slower than
    /// the median (srtt at most twice it); else whatever `pick` gives.
    pub fn pick_fast(&mut self, now: Instant, avoid: u8) -> (u8, bool) {
        let median = self.median_srtt_at(now);
        let best = self
            .paths
            .iter()
            .enumerate()
            .filter(|&(i, p)| {
                i != usize::from(avoid)
                    && p.usable()
                    && p.srtt_ns != 0
                    && median.is_some_and(|m| p.srtt_ns <= 2 * m)
            })
            .min_by_key(|&(_, p)| p.inflight_pkts())
            .map(|(i, _)| i as u8);
        match best {
            Some(i) => (i, false),
            None => self.pick(now, Some(avoid)),
        }
    }

    /// A flowlet's acks arrived: its last one `ack_span_ns` after its first,
    /// its packets having left within `send_span_ns`. Where its path is
    /// slower than the sender (a fabric of links slower than the host, a
    /// bottleneck on one of them), the flowlet queued there and its acks
    /// come spread at the path's rate; then flowlets halve, down to
    /// per-packet spraying. Where the spread is small against the base RTT
    /// they grow by a quarter. Paths faster than the sender (the usual
    /// fabric) spread nothing, and flowlets stay long. A longer RTT alone
    /// (work waiting for a busy host's CPU) does not shorten them.
    pub fn on_flowlet_acked(&mut self, ack_span_ns: u64, send_span_ns: u64) {
        // Before any RTT sample, the spread is judged on its own.
        let base = self.min_rtt().unwrap_or(0);
        let spread = ack_span_ns.saturating_sub(send_span_ns);
        if spread > base / 2 + FLOWLET_SPREAD_NS {
            self.flowlet_cap = (self.flowlet_cap / 2).max(1);
            self.flowlet_spread += 1;
        } else if spread < base / 4 + FLOWLET_SPREAD_NS / 2 {
            self.flowlet_cap = (self.flowlet_cap + self.flowlet_cap / 4 + 1).min(FLOWLET_CAP_MAX);
            self.flowlet_tight += 1;
        }
    }

    /// Longest flowlet now, packets.
    pub fn flowlet_cap(&self) -> u32 {
        self.flowlet_cap
    }

    /// New data packet `seq` of the current flowlet left on `path` at `now`.
    pub fn on_flowlet_sent(&mut self, path: u8, seq: u64, now: Instant) {
        let Some(p) = self.paths.get_mut(usize::from(path)) else {
            return;
        };
        match &mut p.flow {
            Some(f) => f.last = (seq, now),
            None => {
                p.flow = Some(Flowlet {
                    first: (seq, now),
                    last: (seq, now),
                    first_acked: None,
                })
            }
        }
    }

    /// Packet `seq`, sent once on `path`, was acknowledged at `now` by an
    /// ack whose newest packet the receiver held `hold_ns` before acking
    /// (what it reports): feeds `on_flowlet_acked` when it is the latest
    /// packet of a flowlet whose first one was acknowledged. The spread
    /// counts from `now - hold_ns`: a receiving host that reads a flowlet
    /// in slices (a busy CPU, acks every `ack_every` packets) spreads the
    /// acks of packets that arrived together, and halving every flowlet for
    /// it (1 MiB streams between 2 hosts at MTU 1500: the cap fell to a
    /// packet or two and the stream to a third of its rate, because a
    /// flowlet of one packet costs a path pick per packet) mistook the
    /// receiver's CPU for a queue on the path.
    pub fn on_flowlet_packet_acked(&mut self, path: u8, seq: u64, now: Instant, hold_ns: u64) {
        let now = Instant::from_nanos(now.as_nanos().saturating_sub(hold_ns));
        let Some(p) = self.paths.get_mut(usize::from(path)) else {
            return;
        };
        let Some(f) = &mut p.flow else { return };
        if seq == f.first.0 {
            f.first_acked = Some(now);
        }
        if seq != f.last.0 {
            return;
        }
        if f.last.0 == f.first.0 {
            // A flowlet of one packet cannot come back spread: it counts as
            // tight. (Giving no sample, it kept a cap of one packet for
            // good: once halved to 1, a stream stayed at a packet per pick.)
            p.flow = None;
            self.on_flowlet_acked(0, 0);
            return;
        }
        let sample = f.first_acked.map(|a| {
            (
                now.saturating_since(a).as_nanos() as u64,
                f.last.1.saturating_since(f.first.1).as_nanos() as u64,
            )
        });
        p.flow = None;
        if let Some((ack_span, send_span)) = sample {
            self.on_flowlet_acked(ack_span, send_span);
        }
    }

    /// The path for the next new data packet: the current flowlet's while it
    /// has packets left (of `flowlet` per turn) and its path stays usable
    /// with room, else the next path `pick` chooses, which starts a new
    /// flowlet. Consecutive packets on one path can leave as one segmented
    /// send and be coalesced at the receiver; the paths' shares are those of
    /// `pick`, counted in flowlets. A new flowlet has at least `floor` and
    /// `small` packets on a proven path (it has delivered and lost nothing
    /// since: RTT sample, good, no loss streak), `flowlet` otherwise. A bad path's
    /// probe only when `may_probe` (the sender has another packet to send
    /// after this one). `idle`: nothing of the peer's is in flight (see
    /// `pick_idle`). Returns (path, is_probe).
    #[allow(clippy::too_many_arguments)]
    pub fn pick_flowlet(
        &mut self,
        now: Instant,
        flowlet: u32,
        floor: u32,
        small: u32,
        may_probe: bool,
        tail: u32,
        idle: bool,
    ) -> (u8, bool) {
        if let Some((i, left)) = self.flowlet {
            // A burst from idle (`floor` > 1) starts a flowlet of its own:
            // continuing the remainder of the one before the pause split
            // a message over several paths, its remainder then sent while
            // its first packets were in flight (no floor).
            // A flowlet that ends a few packets short of the burst's end
            // (this one and `tail` queued behind it, at most a quarter
            // flowlet more) takes them along: a tail on a path of its own
            // cost the sender a send call and the receiver a receive of its
            // own (a 64 KiB message at MTU 1500 is a flowlet of 44 packets
            // and a tail of 3 or 4; at MTU 9000 a flowlet of 7 and 1), and
            // it arrived apart from the body.
            let left = if left == 0 && flowlet >= 4 && tail <= flowlet / 4 {
                tail + 1
            } else {
                left
            };
            if left > 0 && floor <= 1 && self.flowlet_goes_on(now, i) {
                self.flowlet = Some((i, left - 1));
                return (i, false);
            }
        }
        let idle_pick = if idle && !may_probe {
            self.pick_idle(now)
        } else {
            None
        };
        let (i, probe) = match idle_pick {
            Some(i) => (i, false),
            None => self.pick_with(now, None, may_probe),
        };
        let proven = self
            .paths
            .get(usize::from(i))
            .is_some_and(|p| p.srtt_ns > 0 && p.health == Health::Good && p.loss_streak == 0);
        let len = if proven {
            flowlet.max(floor).max(small)
        } else {
            flowlet
        }
        .min(self.flowlet_cap);
        // A probe of a bad path is one packet, not a flowlet.
        self.flowlet = (!probe).then(|| (i, len.saturating_sub(1)));
        if !probe {
            self.paths[usize::from(i)].flow = None;
        }
        (i, probe)
    }

    /// The path of a lone packet sent from idle (nothing of the peer's in
    /// flight, no bad path's probe wanted: a ping-pong's message) without
    /// `pick_with`'s weighted walk over every path: the next path in turn
    /// (`cursor`) or the one after it, if it is good with no loss streak,
    /// not much slower than the median path (or not sampled yet) and not
    /// weighted down below half a share; `None` leaves the choice to
    /// `pick_with`. With nothing
    /// in flight there is no queue of ours to share out by weight. Across
    /// hosts the engine runs from cold caches, and that walk read a cache
    /// line of each of 16 paths per message (`engine_speed`'s
    /// `timed_ping_pong_cost_8` from cold caches).
    fn pick_idle(&mut self, now: Instant) -> Option<u8> {
        let n = self.paths.len();
        if n <= 1 {
            return None;
        }
        let median = self.median_srtt_at(now)?;
        let mut i = if self.cursor < n { self.cursor } else { 0 };
        // The path in turn or the one after it (an unfit path is skipped
        // in the rotation, which `pick_with` would otherwise restart from
        // its own choice, crowding the paths after that one).
        for _ in 0..2 {
            let p = &self.paths[i];
            // An unsampled path takes its turn: lone packets are how it
            // gets its first RTT (and a path nothing visits is unknown the
            // day the others die, `sim_dead_link`).
            let fit = p.health == Health::Good
                && p.loss_streak == 0
                && p.srtt_ns <= 2 * median
                && 2 * p.weight >= WEIGHT_ONE;
            let next = if i + 1 < n { i + 1 } else { 0 };
            if fit {
                self.cursor = next;
                return Some(i as u8);
            }
            i = next;
        }
        None
    }

    /// May the flowlet under way on path `i` take another packet at `now`?
    /// It runs past its path's in-flight cap (a rate share of the window,
    /// often less than one flowlet with many paths) unless the path is
    /// clearly slower than most: the cap is there to keep a slow path's
    /// queue short.
    fn flowlet_goes_on(&mut self, now: Instant, i: u8) -> bool {
        if self.goes_on_path == i {
            return true;
        }
        let median = self.median_srtt_at(now);
        let p = &self.paths[usize::from(i)];
        let slow = median.is_some_and(|m| p.srtt_ns > 2 * m);
        let room = !slow || {
            let total = self.total_rate_at(now);
            Self::path_has_room(&self.paths[usize::from(i)], now, total, self.window_bytes)
        };
        let p = &self.paths[usize::from(i)];
        // Sending more on it changes neither answer of a good path that
        // is not slow (a suspect path's usability ends with its packet).
        if room && !slow && p.health == Health::Good {
            self.goes_on_path = i;
        }
        p.usable() && room
    }

    /// `pick_flowlet` for the next packet of the flowlet under way while
    /// packets are in flight (`floor` 1): its path, or `None` where
    /// `pick_flowlet` would do more than continue it (no flowlet, no packet
    /// left in it, its path no longer fit), and then nothing changed.
    pub fn continue_flowlet(&mut self, now: Instant) -> Option<u8> {
        let (i, left) = self.flowlet?;
        if left == 0 || !self.flowlet_goes_on(now, i) {
            return None;
        }
        self.flowlet = Some((i, left - 1));
        Some(i)
    }

    /// Pick the path for the next packet at `now`, avoiding `avoid` when
    /// another usable path exists. Returns (path, is_probe).
    pub fn pick(&mut self, now: Instant, avoid: Option<u8>) -> (u8, bool) {
        self.pick_with(now, avoid, avoid.is_none())
    }

    /// `pick`, probing a bad path whose time came only when `probe_bad`
    /// (never while avoiding a path).
    /// A probe is a data packet that a dead path loses: as the last packet
    /// of a burst nothing after it is acknowledged to show the loss, and it
    /// cost a tail probe and a retransmission timeout each time (a dead
    /// path's probe every few ms; `sim_dead_link`); followed by more data,
    /// the acks of the later packets declare it lost by time.
    fn pick_with(&mut self, now: Instant, avoid: Option<u8>, probe_bad: bool) -> (u8, bool) {
        let n = self.paths.len();
        if n == 0 {
            // No records held (a reclaimed peer, see `release`): path 0.
            return (0, false);
        }
        if n == 1 && self.paths[0].health != Health::Bad {
            // One path (a peer on this host): whatever its room or weight,
            // the rules below all end on it, and not as a probe.
            return (0, false);
        }
        // A bad path whose probe time came gets one packet.
        if probe_bad {
            for (i, p) in self.paths.iter_mut().enumerate() {
                if p.health == Health::Bad && !p.probing && p.probe_at <= now {
                    p.probing = true;
                    return (i as u8, true);
                }
            }
        }
        let median = self.median_srtt_at(now);
        // A path with nothing in flight has room whatever the rates: when
        // none has any (a ping-pong's message, a burst after a pause), the
        // rates are not needed (16 paths' rates, twice each, were half of a
        // pick's cost, once per message in a ping-pong).
        let total = if self.paths.iter().any(|p| p.inflight_pkts() > 0) {
            self.total_rate_at(now)
        } else {
            0
        };
        let window = self.window_bytes;
        // Smooth weighted round robin over the eligible paths (equal
        // weights: plain round robin from the cursor).
        let (mut best, mut best_wrr, mut sum) = (None, i64::MIN, 0i64);
        // From the cursor round to it, without a division per path (16 of
        // them cost more than the rest of a pick).
        let start = self.cursor % n;
        for k in 0..n {
            let i = if start + k < n {
                start + k
            } else {
                start + k - n
            };
            if avoid == Some(i as u8) && n > 1 {
                continue;
            }
            let p = &mut self.paths[i];
            // A suspect path's one more packet is not a burst's last (nor a
            // resend): lost there, no later ack would reveal it before a
            // timeout, as with a bad path's probe.
            let suspect_tail = p.health == Health::Suspect && !probe_bad;
            if !p.usable() || suspect_tail || !Self::path_has_room(p, now, total, window) {
                continue;
            }
            // A path much slower than the median gets a share inversely
            // proportional to its RTT (down to 1/32), so it does not hold
            // up completion.
            let w = match median {
                Some(m) if p.srtt_ns > 2 * m => {
                    let slow = (p.srtt_ns / m).min(32);
                    (u64::from(p.weight) / slow).max(1)
                }
                _ => u64::from(p.weight),
            } as i64;
            p.wrr += w;
            sum += w;
            if p.wrr > best_wrr {
                best_wrr = p.wrr;
                best = Some(i);
            }
        }
        if let Some(i) = best {
            self.cursor = (i + 1) % n;
            let p = &mut self.paths[i];
            // Bounded below: a path eligible again after a long while
            // (health, cap) must not owe an unbounded debt.
            p.wrr = (p.wrr - sum).max(-2 * i64::from(WEIGHT_MAX));
            return (i as u8, false);
        }
        // Every path is bad (or skipped): fall back to plain round robin.
        let mut i = self.cursor % n;
        if avoid == Some(i as u8) && n > 1 {
            i = (i + 1) % n;
        }
        self.cursor = (i + 1) % n;
        (i as u8, false)
    }
}

/// Path sets up to this size take their median by insertion sort into a
/// small array (`median_small`): the picker asks for the median once per
/// message in a ping-pong, and zeroing a 64-entry scratch and a selection
/// over it cost about 1100 instructions of a pick's 2600 with 16 paths.
const SMALL_SET: usize = 16;

/// The (n / 2)-th smallest of at most `SMALL_SET` values (the first
/// `SMALL_SET` of them), as a sort would place it; `None` for none.
fn median_small(vals: impl Iterator<Item = u64>) -> Option<u64> {
    let mut v = [0u64; SMALL_SET];
    let mut n = 0;
    for x in vals.take(SMALL_SET) {
        // Insert `x` in order.
        let mut j = n;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
        n += 1;
    }
    (n > 0).then(|| v[n / 2])
}

#[cfg(test)]
#[path = "path_tests.rs"]
mod tests;
