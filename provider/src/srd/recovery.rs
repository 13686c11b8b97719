//! Loss recovery, the sender's half: deciding a packet is lost (per-path
//! reordering, overdue time), the tail-loss probe and tail ask, the
//! retransmission timer and its stall probe, hedging a slow path's tail, and
//! the resend of what was declared lost. Its state is `Recovery`, one per
//! peer; acknowledgements (`ack.rs`) feed it.

use core::time::Duration;

use super::ack::Acked;
use super::cc::Controller;
use super::path::{Health, INITIAL_RTT};
use super::peer::{Ctx, Params, Peer};
use super::timer::Timer;
use super::tx::SlotState;
use super::Transmit;
use crate::time::Instant;
use crate::wire::srd::{flags, PacketType};

/// Hedged PSNs remembered for the RTT correction of their slow path.
const MAX_HEDGED: usize = 64;

/// Later packets acked on the same path that declare an earlier one lost.
const REORDER_PACKETS: u64 = 3;

/// A packet is overdue (lost) at most this many median path RTTs (doubled,
/// plus variation) after its send once later ones were acked, however slow
/// its own path (see `Peer::overdue_at`).
const OVERDUE_MEDIANS: u64 = 2;

/// Tail-loss probes before falling back to the RTO.
const MAX_TLP: u32 = 2;

/// Tail-loss probe time before any RTT sample, ns: well above a LAN's RTT,
/// far below the initial RTO, so a first packet lost in an incast's first
/// round trip (the unscheduled one) is resent soon.
const UNSAMPLED_PTO_NS: u64 = 200_000;

/// Under fan-in limits (`Peer::fan_in_limited`), the tail-loss probe waits at
/// least this many `min_rto`s...
const FAN_IN_TLP_MINS: u64 = 2;
/// ... and the retransmission timer at least this many.
const FAN_IN_RTO_MINS: u64 = 16;

/// A peer's loss-recovery state (the timers themselves are in `Peer::timers`).
pub struct Recovery {
    /// Retransmission-timer back-off exponent.
    pub rto_backoff: u32,
    /// Retransmission timer reference: last progress or idle→busy send.
    pub rto_base: Instant,
    /// Per-peer RTO stretch, percent (0..25): desynchronises the timeouts
    /// of many senders that lost their first flight together (incast).
    pub rto_jitter_pct: u64,
    /// Send time of the latest-sent packet acknowledged (any path).
    pub largest_acked_sent: Instant,
    /// Sending after a quiet spell and nothing acked since: the RTT of this
    /// flight is unknown (the receiver may have just been hit by many
    /// senders going busy at once, the start of an incast), so the
    /// retransmission timer gets the fan-in floor; the tail-loss probe
    /// still repairs a lost packet quickly. At 32-64 flows nearly all RTOs
    /// fired in the first 2 ms of the burst, on RTTs sampled while idle.
    pub first_flight: bool,
    /// Tail-loss probes sent since the last progress (at most `MAX_TLP`).
    pub tlp_count: u32,
    /// PSN the tail-loss probe resends: it goes out regardless of window and
    /// credit (with everything in flight lost, nothing else would).
    pub tlp_psn: Option<u32>,
    /// When the retransmission timer last fired, until an ack decides whether
    /// it was spurious (see `Peer::undo_spurious_timeout`).
    pub rto_fired: Option<Instant>,
    /// PSNs moved off a slow path and not yet acked (at most 64).
    pub hedged: Vec<u32>,
    /// When the latest answer to a PROBE of ours (an ACK with ACK_NOW)
    /// arrived.
    pub last_answer: Instant,
    /// A stall probe (PROBE, ACK_NOW) must go out.
    pub stall_probe_due: bool,
    /// When the stall probe awaiting its answer left (`None` = none): an
    /// answer without progress proves a live receiver lacking our packet.
    pub stall_probe_at: Option<Instant>,
    /// Number the pending stall probe went out with (0 = not sent yet).
    pub stall_probe_no: u32,
    /// The path of the latest stall probe while it has no answer: the next
    /// one goes elsewhere (a PROBE's loss marks no path, and the fast path
    /// chosen every time may be the dead one).
    pub stall_probe_path: Option<u8>,
    /// A tail ask (PROBE, ACK_NOW) must go out, see `Peer::on_tlp`.
    pub tail_ask_due: bool,
    /// The newest packet a tail ask asks about, and when the ask fired: an
    /// answer still lacking it proves it lost (the ask took its path, behind
    /// it), and it is resent at once.
    pub tail_ask: Option<(u32, Instant)>,
    /// Number the pending tail ask went out with (0 = not sent yet).
    pub tail_ask_no: u32,
}

impl Recovery {
    /// Fresh state; `rto_jitter_pct` stretches this peer's timeouts.
    pub fn new(rto_jitter_pct: u64) -> Self {
        Recovery {
            rto_backoff: 0,
            rto_base: Instant::ZERO,
            rto_jitter_pct,
            largest_acked_sent: Instant::ZERO,
            first_flight: false,
            tlp_count: 0,
            tlp_psn: None,
            rto_fired: None,
            hedged: Vec::new(),
            last_answer: Instant::ZERO,
            stall_probe_due: false,
            stall_probe_at: None,
            stall_probe_no: 0,
            stall_probe_path: None,
            tail_ask_due: false,
            tail_ask: None,
            tail_ask_no: 0,
        }
    }

    /// Something new was acked: the timeout and tail-probe back-offs end,
    /// the timer counts from `now`, and a pending timeout's spuriousness
    /// can no longer be told (`Peer::undo_spurious_timeout`).
    pub fn on_progress(&mut self, now: Instant) {
        self.rto_fired = None;
        self.first_flight = false;
        self.rto_base = now;
        self.rto_backoff = 0;
        self.tlp_count = 0;
    }
}

impl Peer {
    /// A packet sent once, before the last timeout, was acked: the flight
    /// was late (a receiver off the CPU), not lost; undo the timeout's cut.
    pub(super) fn undo_spurious_timeout(&mut self, ctx: &mut Ctx<'_>, sent: Instant) {
        if self.recovery.rto_fired.is_some_and(|t| sent < t) {
            self.recovery.rto_fired = None;
            ctx.stats.spurious_timeouts += 1;
            self.cc.on_timeout_undone();
        }
    }

    /// A resent packet was acked sooner than the resent copy could have
    /// travelled: the first copy arrived. Credit its path (a late, not a
    /// lossy one) with its RTT, so the same mistake is not made again.
    pub(super) fn credit_first_copy(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        a: &Acked,
        delay: u64,
    ) {
        ctx.stats.spurious_retransmits += 1;
        let first = usize::from(a.first_path.0);
        self.paths.paths[first].on_acked(a.first_path.1, a.first_sent);
        let since_first = now.saturating_since(a.first_sent).as_nanos() as u64;
        self.paths.on_rtt(
            first,
            since_first.saturating_sub(delay).max(1),
            2 * delay <= since_first,
        );
    }

    /// A resent packet was acked: if it was hedged (`hedge_slow_tail`), its
    /// slow-path original had not arrived when the copy's ack left (or just
    /// had), so its RTT there is at least the time since the first send.
    /// Without it that path would sample only its short-queued packets and
    /// look faster than it is.
    pub(super) fn correct_hedged_rtt(&mut self, now: Instant, psn: u32, a: &Acked, delay: u64) {
        if self.recovery.hedged.is_empty() {
            return;
        }
        if let Some(k) = self.recovery.hedged.iter().position(|&x| x == psn) {
            self.recovery.hedged.swap_remove(k);
            let s = (now.saturating_since(a.first_sent).as_nanos() as u64).saturating_sub(delay);
            let first = usize::from(a.first_path.0);
            if s > self.paths.paths[first].srtt_ns {
                self.paths.on_rtt(first, s, false);
            }
        }
    }

    /// After an ack: settle a pending stall probe (`on_rto_timer`).
    /// `progress` = the ack acked something new.
    pub(super) fn settle_stall_probe(&mut self, ctx: &mut Ctx<'_>, now: Instant, progress: bool) {
        let Some(t) = self.recovery.stall_probe_at else {
            return;
        };
        if progress || self.tx.pkts_in_flight == 0 {
            // The flight was late, not lost: the receiver was stalled.
            self.recovery.stall_probe_at = None;
            self.recovery.stall_probe_path = None;
        } else if self.answers(self.recovery.stall_probe_no)
            && now.saturating_since(t).as_nanos() as u64 >= self.probe_answer_ns()
        {
            // The receiver runs and answered, yet lacks our oldest packet
            // (sent an RTO ago, before the probe): a real loss. (Other
            // acks may have left it before it read our flight: a receiver
            // back from a stall grants and acks as it reads its backlog.)
            self.recovery.stall_probe_at = None;
            self.recovery.stall_probe_path = None;
            self.on_rto(ctx, now);
        }
    }

    /// Current retransmission timeout, ns, with back-off.
    pub fn rto_ns(&self, p: &Params) -> u64 {
        let base = if self.srtt_ns == 0 {
            3 * INITIAL_RTT.as_nanos() as u64
        } else {
            // RTT samples leave out how long the receiver held packets before
            // acking (descheduled on a busy host), but the timer must not: a
            // receiver off the CPU for a few ms is not a loss. Its recent
            // peak, uncapped: with 65 busy processes on 2 CPUs a receiver
            // waits tens of ms for its turn, and the senders' timers then
            // expired (almost all of the RTOs at 32-64 flows were spurious).
            self.srtt_ns + 4 * self.rttvar_ns + p.ack_delay_ns.max(self.cc.host_delay_peak())
        };
        let floor = if self.fan_in_limited() || self.recovery.first_flight {
            FAN_IN_RTO_MINS * p.min_rto_ns
        } else {
            p.min_rto_ns
        };
        let b = base.clamp(floor.min(p.max_rto_ns), p.max_rto_ns);
        let b = b + b / 100 * self.recovery.rto_jitter_pct;
        b.saturating_mul(1 << self.recovery.rto_backoff.min(16))
            .min(p.max_rto_ns)
    }

    /// Re-arm the RTO, tail-loss probe and unreachable timers from the
    /// current state.
    pub fn update_timers(&mut self, p: &Params) {
        self.timers_stale = false;
        if self.tx.pkts_in_flight == 0 {
            self.recovery.rto_backoff = 0;
        }
        let [rto, tlp, unreachable] = self.timer_plan(p);
        self.timers.put(Timer::Rto, rto);
        self.timers.put(Timer::Tlp, tlp);
        self.timers.put(Timer::Unreachable, unreachable);
    }

    /// What `update_timers` arms from the current state: the RTO, tail-loss
    /// probe and unreachable deadlines (`None`: stopped).
    fn timer_plan(&self, p: &Params) -> [Option<Instant>; 3] {
        let (rto, tlp) = if self.tx.pkts_in_flight > 0 {
            let rto_at = self.recovery.rto_base + Duration::from_nanos(self.rto_ns(p));
            let tlp_at = self.last_data_sent + Duration::from_nanos(self.pto_ns(p));
            let tlp = (self.recovery.tlp_count < MAX_TLP && tlp_at < rto_at).then_some(tlp_at);
            (Some(rto_at), tlp)
        } else {
            (None, None)
        };
        let unreachable = (self.tx.busy() && !self.tx.idle_until_poll)
            .then(|| self.tx.last_progress + Duration::from_nanos(p.unreachable_ns));
        [rto, tlp, unreachable]
    }

    /// The earliest deadline of this peer's timers; with `timers_stale`, the
    /// three `update_timers` would re-arm taken as it would arm them.
    pub fn next_deadline(&self, p: &Params) -> Option<Instant> {
        if !self.timers_stale {
            return self.timers.next();
        }
        let mut t = self.timers.clone();
        let [rto, tlp, unreachable] = self.timer_plan(p);
        t.put(Timer::Rto, rto);
        t.put(Timer::Tlp, tlp);
        t.put(Timer::Unreachable, unreachable);
        t.next()
    }

    /// How long the receiver may hold the ack of our latest DATA, ns: its
    /// lazy hold if that packet was flagged LAZY, else its ack delay.
    fn tail_hold_ns(&self, p: &Params) -> u64 {
        if self.last_data_lazy {
            p.ack_lazy_ns
        } else {
            p.ack_delay_ns
        }
    }

    /// Tail-loss probe wait after the latest send, ns, with back-off.
    fn pto_ns(&self, p: &Params) -> u64 {
        // Far sooner than the RTO when the RTT is known, so a lost last
        // packet (e.g. in a ping-pong) costs ~2 RTTs. A second probe (after
        // twice the wait) covers a lost first one.
        let base = if self.srtt_ns == 0 {
            // Stretched like the RTO, so the losers of a first burst
            // do not all come back at the same instant; plus a lazy hold
            // beyond the ack delay.
            UNSAMPLED_PTO_NS
                + UNSAMPLED_PTO_NS / 100 * self.recovery.rto_jitter_pct
                + (self.tail_hold_ns(p) - p.ack_delay_ns)
        } else if self.tx.pkts_in_flight > 2 {
            // A whole flight going silent is a receiver off the CPU far
            // more often than a lost tail: wait out its usual hold (its
            // later acks would reveal a real loss anyway).
            2 * self.srtt_ns + 4 * self.rttvar_ns + self.tail_hold_ns(p).max(self.cc.host_delay())
        } else {
            2 * self.srtt_ns + 4 * self.rttvar_ns + self.tail_hold_ns(p)
        };
        let base = if self.fan_in_limited() {
            base.max(FAN_IN_TLP_MINS * p.min_rto_ns)
        } else {
            base
        };
        base << self.recovery.tlp_count.min(4)
    }

    /// Declare lost what per-path ordering, overdue time or 3 later acks on
    /// the same path show lost; arm the loss timer for the earliest pending case.
    pub fn detect_losses(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        if self.tx.pkts_in_flight == 0 {
            // Nothing in flight (a receiver reading a piggybacked ack, a
            // sender between messages): no entry is valid; drop them all
            // without looking at each path's RTT, and only on the paths
            // that took any.
            self.paths.clear_outstanding();
            self.timers.stop(Timer::Loss);
            return;
        }
        let mut next: Option<Instant> = None;
        let peer_rtt = self.rtt_ns();
        let ack_delay = ctx.p.ack_delay_ns;
        let median = self.paths.median_srtt_at(now);
        for pi in 0..self.paths.paths.len() {
            if !self.paths.may_hold_outstanding(pi) {
                continue;
            }
            loop {
                let p = &self.paths.paths[pi];
                let Some(&(psn, pseq)) = p.outstanding.front() else {
                    self.paths.outstanding_drained(pi);
                    break;
                };
                let slot = self.tx.slot(psn);
                let valid = self.tx.is_sent(psn)
                    && slot.state == SlotState::InFlight
                    && usize::from(slot.path) == pi
                    && slot.pseq == pseq;
                if !valid {
                    self.paths.paths[pi].outstanding.pop_front();
                    continue;
                }
                let srtt = p.srtt_or(peer_rtt);
                let var = if p.srtt_ns == 0 {
                    srtt / 2
                } else {
                    p.rttvar_ns
                };
                let later_acked = p.acked_seq > pseq + 1;
                let mut lost = false;
                let mut deadline: Option<Instant> = None;
                if p.acked_seq >= pseq + 1 + REORDER_PACKETS {
                    ctx.stats.lost_by_count += 1;
                    lost = true;
                } else if later_acked {
                    let t = slot.sent + Duration::from_nanos(srtt + srtt / 4 + var);
                    if now >= t {
                        ctx.stats.lost_by_time += 1;
                        lost = true;
                    }
                    deadline = Some(t);
                }
                if !lost && self.recovery.largest_acked_sent > slot.sent {
                    // Something sent after it (on any path) was acked.
                    let t = self.overdue_at(slot.sent, srtt, var, median, ack_delay);
                    if now >= t {
                        ctx.stats.lost_overdue += 1;
                        lost = true;
                    }
                    deadline = Some(deadline.map_or(t, |d| d.min(t)));
                }
                if lost {
                    self.paths.paths[pi].outstanding.pop_front();
                    self.mark_lost(ctx, now, psn, true);
                    continue;
                }
                if let Some(d) = deadline {
                    next = Some(next.map_or(d, |n| n.min(d)));
                }
                break;
            }
        }
        match next {
            Some(t) => self.timers.set(Timer::Loss, t),
            None => self.timers.stop(Timer::Loss),
        }
    }

    /// When a packet sent at `sent` on a path of `srtt` and `var` (ns) is
    /// overdue, given that something sent after it was acked: once well
    /// past its own path's RTT, but at most a few median path RTTs (`median`):
    /// a path 10x slower than the others (its queue holding most of the
    /// window) is as good as lossy, and waiting out its RTT stalls the
    /// transfer. Not under a receiver credit: there the paths share the
    /// receiver's queue, their RTTs differ by chance, and the cap took late
    /// packets for lost (25x the losses, and RTOs, at 64 senders). Nor is it
    /// overdue sooner than at the median path RTT: a path's own RTT can be
    /// stale (flowlets visit each path in turn, and several paths share a
    /// link's queue), while the median follows what most paths see now.
    fn overdue_at(
        &self,
        sent: Instant,
        srtt: u64,
        var: u64,
        median: Option<u64>,
        ack_delay: u64,
    ) -> Instant {
        let (srtt, var) = match median {
            Some(m) if srtt > OVERDUE_MEDIANS * m && self.tx.credit.is_none() => {
                (srtt.min(OVERDUE_MEDIANS * m), var.min(m))
            }
            Some(m) => (srtt.max(m), var),
            None => (srtt, var),
        };
        sent + Duration::from_nanos(2 * srtt + 4 * var + ack_delay)
    }

    /// Queue `psn` for retransmission; `confirmed` = evidence of loss (not a
    /// probe), which counts against its path's health.
    fn mark_lost(&mut self, ctx: &mut Ctx<'_>, now: Instant, psn: u32, confirmed: bool) {
        let rtt = self.rtt_ns();
        let slot = self.tx.slot_mut(psn);
        slot.state = SlotState::Lost;
        let len = slot.len as u64;
        let path = usize::from(slot.path);
        self.tx.bytes_in_flight -= len;
        self.tx.pkts_in_flight -= 1;
        if !confirmed {
            // A probe goes first (see `tlp_psn`).
            self.tx.retx.push_front(psn);
            return;
        }
        self.tx.retx.push_back(psn);
        self.lost_at = now;
        self.paths.touch();
        self.paths.paths[path].on_lost(now, rtt);
        self.cc.on_loss(now, len);
        ctx.stats.lost += 1;
        if let Some(c) = ctx.stats.path_lost.get_mut(path) {
            *c += 1;
        }
    }

    /// Nothing new to send, the fast paths idle, while packets sit in a slow
    /// path's queue (its srtt over twice the median): send the newest of
    /// them again on a fast path, so the transfer's last packets do not
    /// wait behind a slow link. The copy goes as a retransmission (window
    /// and credit permitting); the receiver drops whichever arrives second.
    /// Returns whether a packet was queued for resending.
    pub fn hedge_slow_tail(&mut self, ctx: &mut Ctx<'_>, now: Instant) -> bool {
        let Some(median) = self.paths.median_srtt_at(now) else {
            return false;
        };
        // Only at the tail: the fast paths ran dry while slow ones still
        // hold packets (the newest of a slow queue would arrive last). One
        // copy at a time: it makes a fast path busy until acked.
        // A bad path's probe counts as slow: it carries data, and on a
        // path that went bad by queueing (a 10x slower link) it may sit
        // there for tens of ms, holding the cumulative ack.
        let is_slow = |p: &super::path::Path| p.srtt_ns > 2 * median || p.health == Health::Bad;
        // The latest flowlet's path first: in flight there and fast, it
        // decides the answer without the walk over every path below (a
        // cache line of each, per message sent in a ping-pong).
        if let Some(p) = self
            .paths
            .flowlet_path()
            .map(|i| &self.paths.paths[usize::from(i)])
        {
            if !is_slow(p) && p.inflight_pkts() > 0 {
                return false;
            }
        }
        let (mut fast, mut slow) = (0u64, 0u64);
        for p in &self.paths.paths {
            if is_slow(p) {
                slow += p.inflight_pkts();
            } else {
                fast += p.inflight_pkts();
            }
        }
        if fast != 0 || slow == 0 {
            return false;
        }
        for pi in 0..self.paths.paths.len() {
            let p = &self.paths.paths[pi];
            if !is_slow(p) {
                continue;
            }
            let found = p.outstanding.iter().rev().copied().find(|&(psn, pseq)| {
                let slot = self.tx.slot(psn);
                self.tx.is_sent(psn)
                    && slot.state == SlotState::InFlight
                    && usize::from(slot.path) == pi
                    && slot.pseq == pseq
                    && slot.sends == 1
            });
            if let Some((psn, _)) = found {
                // Not before it is late: a fast path would have had it acked
                // by now. A path's srtt rests on few samples when a ping-pong
                // sprays one packet per round trip over many paths, and one
                // sample from a descheduled host (ms where the fabric takes
                // µs) makes a path look slow: a copy at once was a duplicate
                // (70 of 1305 packets of an IMB PingPong across two hosts).
                let slot = self.tx.slot(psn);
                let hold = if slot.lazy {
                    ctx.p.ack_lazy_ns
                } else {
                    ctx.p.ack_delay_ns
                };
                let late_at = slot.sent + Duration::from_nanos(median + hold);
                if now < late_at {
                    let at = self
                        .timers
                        .get(Timer::Loss)
                        .map_or(late_at, |t| t.min(late_at));
                    self.timers.set(Timer::Loss, at);
                    return false;
                }
                let rtt = self.rtt_ns();
                self.paths.touch();
                self.paths.paths[pi].probe_unanswered(now, rtt);
                ctx.stats.tail_hedges += 1;
                self.mark_lost(ctx, now, psn, false);
                if self.recovery.hedged.len() >= MAX_HEDGED {
                    self.recovery.hedged.remove(0);
                }
                self.recovery.hedged.push(psn);
                return true;
            }
        }
        false
    }

    /// The tail-loss probe fired: resend the newest packet in flight (on
    /// another path, asking for an immediate ack). A sender held to a
    /// packet or two by a receiver's fan-in asks first instead: its tail
    /// is far more often queued behind the other senders' packets (or
    /// behind a receiver off the CPU) than lost, and a copy from each of
    /// 32-64 senders at once overflows the very buffer the credits keep
    /// below its limit (the copies were ~95 % duplicates at 64 flows on the
    /// testbed, and the drops they caused became RTOs). The ask is a PROBE
    /// (ACK_NOW) on the newest packet's path, behind it: an answer lacking
    /// it proves the loss, and it is resent at once (`check_tail_ask`).
    pub fn on_tlp(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        self.recovery.tlp_count += 1;
        let mut psn = self.tx.next_send;
        while psn != self.tx.una {
            psn = psn.wrapping_sub(1);
            if self.tx.slot(psn).state == SlotState::InFlight {
                ctx.stats.tail_probes += 1;
                self.paths.tail_probes += 1;
                // A packet on a path that lost one already (suspect) or is
                // bad (this was its probe): unacked by now, it died with the
                // path, and a tail ask would follow it there and die too,
                // leaving a retransmission timeout to find it.
                let on_bad =
                    self.paths.paths[usize::from(self.tx.slot(psn).path)].health != Health::Good;
                if !on_bad && self.recovery.stall_probe_at.is_none() && self.tx.delivered > 0 {
                    ctx.stats.tail_asks += 1;
                    self.recovery.tail_ask_due = true;
                    self.recovery.tail_ask = Some((psn, now));
                    self.recovery.tail_ask_no = 0;
                } else {
                    self.recovery.tlp_psn = Some(psn);
                    self.mark_lost(ctx, now, psn, false);
                }
                break;
            }
        }
        self.update_timers(ctx.p);
    }

    /// After an ack: settle a pending tail ask. Its packet acked (or
    /// declared lost meanwhile): done. The answer to the ask without it: the
    /// ask followed it on its path, so it is lost; resend it now, ahead of
    /// window and credit like a tail-loss probe.
    pub(super) fn check_tail_ask(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        let Some((psn, at)) = self.recovery.tail_ask else {
            return;
        };
        if !self.tx.is_sent(psn) || self.tx.slot(psn).state != SlotState::InFlight {
            self.recovery.tail_ask = None;
        } else if self.answers(self.recovery.tail_ask_no)
            && now.saturating_since(at).as_nanos() as u64 >= self.probe_answer_ns()
        {
            self.recovery.tail_ask = None;
            self.recovery.tlp_psn = Some(psn);
            self.mark_lost(ctx, now, psn, false);
        }
    }

    /// Soonest an answer to a probe sent now can come back, ns: an ack
    /// arriving earlier left the peer before the probe arrived.
    fn probe_answer_ns(&self) -> u64 {
        self.paths.min_rtt().unwrap_or(self.srtt_ns) / 2
    }

    /// The retransmission timer fired. A loss, or a receiver that does not
    /// run (a busy host deschedules a process for tens to hundreds of ms:
    /// 0.3-0.8 s measured on the 2-CPU testbed while other work ran; every
    /// sender of an incast then timed out at once, several times each)?
    /// Silence cannot tell, so ask: a stall probe (PROBE, ACK_NOW) makes a
    /// running receiver answer at once with a flagged pure ACK reflecting
    /// everything it had received. Meanwhile nothing is resent (a copy into
    /// a stalled receiver's socket is pure waste), the timer backs off and
    /// the bandwidth estimate stays. The answer decides (`on_ack`): acks
    /// for the flight (late, not lost) or none (lost: `on_rto` at once).
    /// Other acks do not: a receiver back from a stall grants and acks as it
    /// reads its backlog, before it reaches our flight. The plain RTO runs
    /// when the peer never acked anything of ours (its first packet may be
    /// lost, and a receiver that has nothing of ours does not answer a
    /// PROBE), or when an answer came since our last stall probe.
    pub fn on_rto_timer(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        let answered = self
            .recovery
            .stall_probe_at
            .is_some_and(|t| self.recovery.last_answer > t);
        if answered || self.tx.delivered == 0 || self.tx.pkts_in_flight == 0 {
            self.recovery.stall_probe_at = None;
            self.recovery.stall_probe_path = None;
            self.on_rto(ctx, now);
            return;
        }
        ctx.stats.stall_probes += 1;
        self.recovery.stall_probe_due = true;
        self.recovery.stall_probe_at = Some(now);
        self.recovery.stall_probe_no = 0;
        self.recovery.rto_backoff = (self.recovery.rto_backoff + 1).min(16);
        self.recovery.rto_base = now;
        self.update_timers(ctx.p);
    }

    /// The retransmission timer fired: the oldest packet in flight is
    /// declared lost (one, like TCP: the ack of its resend brings an RTT,
    /// credit and the per-path rules that find the rest; resending the whole
    /// flight would re-flood a congested receiver), and the timer backs off.
    pub fn on_rto(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        ctx.stats.timeouts += 1;
        self.paths.rtos += 1;
        self.recovery.rto_fired = Some(now);
        let mut psn = self.tx.una;
        while psn != self.tx.next_send {
            if self.tx.slot(psn).state == SlotState::InFlight {
                ctx.stats.rto_lost += 1;
                self.mark_lost(ctx, now, psn, true);
                // It goes first and ignores window and credit: the flight
                // they count may be all lost, and nothing else would move.
                self.tx.retx.retain(|&x| x != psn);
                self.tx.retx.push_front(psn);
                self.recovery.tlp_psn = Some(psn);
                self.cc.on_timeout(now);
                break;
            }
            psn = psn.wrapping_add(1);
        }
        self.recovery.rto_backoff = (self.recovery.rto_backoff + 1).min(16);
        self.recovery.rto_base = now;
        self.update_timers(ctx.p);
    }

    /// The stall probe `on_rto_timer` asked for: the retransmission timer
    /// found the receiver silent, so ask for its ack state (48 bytes) on a
    /// fast path other than the one the oldest packet took, instead of
    /// resending data.
    pub(super) fn stall_probe(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        self.recovery.stall_probe_due = false;
        let avoid = self.oldest_in_flight_path();
        let path = match (self.recovery.stall_probe_path, avoid) {
            // The previous stall probe got no answer: the next path in
            // turn (a PROBE marks no path lost, so the fast path would
            // be chosen again, dead or not: a rank across a blackholed
            // link sent 23 in 8 s on one dead path until its peers
            // were declared unreachable).
            (Some(last), _) => self.paths.pick_control(Some(last)),
            // (`pick_fast` avoids a path, so never probes a bad one.)
            (None, Some(a)) => self.paths.pick_fast(now, a).0,
            (None, None) => self.paths.pick_control(None),
        };
        self.recovery.stall_probe_path = Some(path);
        let mut h = self.header(ctx, PacketType::Probe, path);
        h.flags = flags::ACK_NOW | if self.has_more() { flags::MORE } else { 0 };
        h.psn = self.next_probe_no();
        self.recovery.stall_probe_no = h.psn;
        self.finish(ctx, h, buf, None)
    }

    /// The tail ask `on_tlp` asked for: a PROBE on the asked packet's path,
    /// so it arrives after that packet unless the packet was lost.
    pub(super) fn tail_ask(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        self.recovery.tail_ask_due = false;
        let path = match self.recovery.tail_ask {
            Some((psn, _)) if self.tx.is_sent(psn) => self.tx.slot(psn).path,
            _ => self.paths.pick_control(None),
        };
        let mut h = self.header(ctx, PacketType::Probe, path);
        h.flags = flags::ACK_NOW | if self.has_more() { flags::MORE } else { 0 };
        h.psn = self.next_probe_no();
        self.recovery.tail_ask_no = h.psn;
        self.finish(ctx, h, buf, None)
    }

    /// Resend the first packet declared lost, if `window` and the credit
    /// allow (a tail-loss probe or RTO resend goes regardless: see
    /// `Recovery::tlp_psn`). Resends go before new data and bypass pacing.
    pub(super) fn poll_resend(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        buf: &mut [u8],
        window: u64,
    ) -> Option<Transmit> {
        while let Some(&psn) = self.tx.retx.front() {
            if !self.tx.is_sent(psn) || self.tx.slot(psn).state != SlotState::Lost {
                self.tx.retx.pop_front();
                continue;
            }
            let probe = self.recovery.tlp_psn == Some(psn);
            if !probe
                && (self.tx.pkts_in_flight > 0 && self.tx.bytes_in_flight >= window
                    || !self.credit_ok())
            {
                return None;
            }
            if probe {
                self.recovery.tlp_psn = None;
            }
            self.tx.retx.pop_front();
            let old_path = self.tx.slot(psn).path;
            // Like a hedge, a resend goes on a path no slower than most:
            // it holds up the cumulative ack (and with it the send window),
            // and one of several slow paths would hold it for their queue.
            let (path, _) = self.paths.pick_fast(now, old_path);
            ctx.stats.retransmits += 1;
            let more = if self.has_more() { flags::MORE } else { 0 };
            return Some(self.send_data(
                ctx,
                now,
                psn,
                path,
                flags::RETRANSMIT | flags::ACK_NOW | more,
                buf,
            ));
        }
        None
    }
}
