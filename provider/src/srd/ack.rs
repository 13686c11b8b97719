//! Sender side of acknowledgements: marking PSNs acked, RTT and delivery-rate
//! samples, and loss detection (per-path RACK, overdue packets, RTO).

use core::time::Duration;

use super::cc::{AckSample, Controller};
use super::path::Health;
use super::peer::{Ctx, Peer};
use super::timer::Timer;
use super::tx::SlotState;
use crate::dgram::DgramEvent;
use crate::time::Instant;
use crate::wire::srd::{sack_word, AckRepr, CREDIT_UNLIMITED};

/// Hedged PSNs remembered for the RTT correction of their slow path.
const MAX_HEDGED: usize = 64;

/// Later packets acked on the same path that declare an earlier one lost.
const REORDER_PACKETS: u64 = 3;

/// A packet is overdue (lost) at most this many median path RTTs (doubled,
/// plus variation) after its send once later ones were acked, however slow
/// its own path (see `detect_losses`).
const OVERDUE_MEDIANS: u64 = 2;

impl Peer {
    /// Process an acknowledgement that arrived at `now`.
    /// `ext` holds the extra SACK words of an ACK packet (empty otherwise).
    pub fn on_ack(&mut self, ctx: &mut Ctx<'_>, now: Instant, ack: &AckRepr, ext: &[u8]) {
        // Paths' rates and health may change below.
        self.paths.touch();
        let span = self.tx.next_send.wrapping_sub(self.tx.una);
        let cum_d = ack.cum.wrapping_sub(self.tx.una);
        if (cum_d as i32) > 0 && cum_d > span {
            // Acknowledges PSNs never sent: corrupt or foreign; ignore it.
            ctx.stats.rx_bad_ack += 1;
            return;
        }
        let mut acked_bytes = 0u64;
        let mut rate: Option<(u64, Instant)> = None;
        if (cum_d as i32) > 0 {
            let mut psn = self.tx.una;
            while psn != ack.cum {
                self.ack_one(ctx, now, psn, ack, &mut acked_bytes, &mut rate);
                psn = psn.wrapping_add(1);
            }
        }
        let words = core::iter::once(ack.sack_bits)
            .chain((0..ext.len() / 8).filter_map(|k| sack_word(ext, k)));
        for (k, mut bits) in words.enumerate() {
            let base = ack.sack_base.wrapping_add(64 * k as u32);
            while bits != 0 {
                let i = bits.trailing_zeros();
                bits &= bits - 1;
                let psn = base.wrapping_add(i);
                if self.tx.is_sent(psn) {
                    self.ack_one(ctx, now, psn, ack, &mut acked_bytes, &mut rate);
                }
            }
        }
        self.tx.credit = if ack.credit == CREDIT_UNLIMITED {
            None
        } else {
            Some(u32::from(ack.credit))
        };
        self.tx.credit_heard = true;
        self.credit_heard_at = now;
        if self.tx.credit != Some(0) {
            self.timers.stop(Timer::Credit);
            self.credit_probes = 0;
            self.credit_probe_due = false;
        }
        if acked_bytes > 0 {
            self.rto_fired = None;
            self.first_flight = false;
            self.tx.delivered += acked_bytes;
            self.tx.delivered_at = now;
            self.tx.last_progress = now;
            self.rto_base = now;
            self.tx.rto_backoff = 0;
            self.tlp_count = 0;
            self.tx.advance_una();
            let mut s = AckSample {
                acked_bytes,
                min_rtt_ns: self.paths.min_rtt(),
                median_srtt_ns: self.paths.median_srtt_at(now),
                // A repeat's delay is the age of a packet whose first ack
                // was lost, not a hold: taken as one, a lost ack then a
                // probe's answer 30 ms later made every later timeout wait
                // 30 ms more, doubling (`sim_dead_link`).
                peer_delay_ns: if ack.repeat {
                    0
                } else {
                    u64::from(ack.delay_us) * 1000
                },
                ..AckSample::default()
            };
            if let Some((d0, t0)) = rate {
                s.delivered_bytes = self.tx.delivered - d0;
                s.interval_ns = now.saturating_since(t0).as_nanos() as u64;
            }
            if let Some((bytes, ns)) = self.bw_sample(now) {
                s.avg_bytes = bytes;
                s.avg_interval_ns = ns;
            }
            s.receiver_limited = self.tx.credit.is_some();
            self.cc.on_ack(now, &s);
        }
        if let Some(t) = self.stall_probe_at {
            if acked_bytes > 0 || self.tx.pkts_in_flight == 0 {
                // The flight was late, not lost: the receiver was stalled.
                self.stall_probe_at = None;
                self.stall_probe_path = None;
            } else if self.answers(self.stall_probe_no)
                && now.saturating_since(t).as_nanos() as u64 >= self.probe_answer_ns()
            {
                // The receiver runs and answered, yet lacks our oldest packet
                // (sent an RTO ago, before the probe): a real loss. (Other
                // acks may have left it before it read our flight: a receiver
                // back from a stall grants and acks as it reads its backlog.)
                self.stall_probe_at = None;
                self.stall_probe_path = None;
                self.on_rto(ctx, now);
            }
        }
        self.check_tail_ask(ctx, now);
        self.detect_losses(ctx, now);
        self.update_timers(ctx.p);
    }

    fn ack_one(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        psn: u32,
        ack: &AckRepr,
        acked_bytes: &mut u64,
        rate: &mut Option<(u64, Instant)>,
    ) {
        let slot = self.tx.slot_mut(psn);
        let was = slot.state;
        if was != SlotState::InFlight && was != SlotState::Lost {
            return;
        }
        slot.state = SlotState::Free;
        let len = slot.len as u64;
        let (sent, path, pseq, sends, token) =
            (slot.sent, slot.path, slot.pseq, slot.sends, slot.token);
        let (d0, t0) = (slot.delivered, slot.delivered_at);
        let (first_sent, first_path) = (slot.first_sent, slot.first_path);
        let buf = core::mem::take(&mut slot.buf);
        ctx.pool.give(buf);
        if was == SlotState::InFlight {
            self.tx.bytes_in_flight -= len;
            self.tx.pkts_in_flight -= 1;
        } else {
            // Declared lost, yet it arrived: the loss (and any resend) was spurious.
            ctx.stats.spurious_losses += 1;
        }
        *acked_bytes += len;
        // A resent packet may be acked for its first copy moments after
        // the resend: its rate sample would span microseconds (165 MB/s
        // read on a 50 MB/s fabric). Such an ack (sooner than half its
        // path's min RTT after the resend) gives no sample; other resent
        // packets do: where most acked packets are resends (a fan-in with
        // many probes), the estimate must still be able to recover from
        // timeout cuts, or pacing crawls and the sender stalls.
        let too_soon = sends > 1 && {
            let p = &self.paths.paths[usize::from(path)];
            p.min_rtt_ns != u64::MAX
                && (now.saturating_since(sent).as_nanos() as u64) < p.min_rtt_ns / 2
        };
        if !too_soon && rate.is_none_or(|(d, _)| d0 >= d) {
            *rate = Some((d0, t0));
        }
        if sent > self.largest_acked_sent {
            self.largest_acked_sent = sent;
        }
        let delay = u64::from(ack.delay_us) * 1000;
        let elapsed = now.saturating_since(sent).as_nanos() as u64;
        let p = &mut self.paths.paths[usize::from(path)];
        // Sent once: whether still in flight or (wrongly) declared lost, this
        // ack is unambiguous for its path. Resent: we cannot tell which copy
        // arrived; crediting the resend's path would make its earlier packets
        // look overtaken (declared lost wrongly, a cascade when the first copy
        // went on a slow path), so per-path order learns nothing from it.
        if sends == 1 {
            p.on_acked(pseq, sent);
            p.on_delivered(now, len);
            if self.rto_fired.is_some_and(|t| sent < t) {
                // Sent once, before the timeout, and it arrived: the flight
                // was late (a receiver off the CPU), not lost.
                self.rto_fired = None;
                ctx.stats.spurious_timeouts += 1;
                self.cc.on_timeout_undone();
            }
        }
        let p_min_rtt = p.min_rtt_ns;
        if sends == 1 {
            self.paths
                .on_flowlet_packet_acked(path, pseq, now, u64::from(ack.delay_us) * 1000);
        }
        if sends > 1 && p_min_rtt != u64::MAX && elapsed < p_min_rtt / 2 {
            // Acked sooner than the resent copy could have travelled: the
            // first copy arrived. Credit its path (a late, not a lossy one)
            // with its RTT, so the same mistake is not made again.
            ctx.stats.spurious_retransmits += 1;
            let fp = &mut self.paths.paths[usize::from(first_path.0)];
            fp.on_acked(first_path.1, first_sent);
            let since_first = now.saturating_since(first_sent).as_nanos() as u64;
            fp.on_rtt(
                since_first.saturating_sub(delay).max(1),
                2 * delay <= since_first,
            );
        }
        let fan_in = self.fan_in_limited();
        let first_path_good = self.paths.paths[usize::from(first_path.0)].health == Health::Good;
        let p = &mut self.paths.paths[usize::from(path)];
        if sends == 1 {
            // `delay_us` is exact for `recent` only; every other packet of this
            // ack arrived earlier and waited at least as long, so the same
            // subtraction gives an upper bound of its RTT: good enough to rank
            // paths (each path needs samples, and `recent` is rarely on a slow
            // one), while the peer-wide RTT behind the timers takes exact ones.
            //
            // Except where the receiver's arrival time of `recent` is early:
            // a coalesced (GRO) datagram carries the arrival time of its
            // first segment for all, and packets sent after that moment can
            // come back acked with a longer hold than their whole round
            // trip (937 us elapsed, 981 us held, across two hosts). Such a
            // sample says nothing; and only one held less than half its
            // round trip may lower the min RTT (which sets the window and
            // tells queueing from not): clamped to 1 ns, one made the min
            // RTT 1 ns and every RTT look like congestion.
            if elapsed > delay {
                let sample = elapsed - delay;
                p.on_rtt(sample, 2 * delay <= elapsed);
                self.paths.adapt_weight(usize::from(path), now);
                if psn == ack.recent {
                    self.on_rtt(sample);
                }
            }
        } else if psn == ack.recent
            && self.srtt_ns != 0
            && fan_in
            && self.rto_fired.is_none()
            && first_path_good
        {
            // Resent (Karn: no exact sample). Measured from the first send it
            // is an upper bound of the RTT; under fan-in use it only to raise
            // the estimate: when every packet gets probed spuriously (the RTT
            // outgrew the probe timeout in a queue of many senders and their
            // copies), no exact sample would ever come and the probes would
            // go on feeding the queue. Not after a timeout, nor when the
            // first copy's path has lost packets since: the first copy was
            // lost, not queued, and its age said nothing of the RTT (a young
            // peer's credit ramp counts as fan-in; with a dead ECMP link the
            // srtt became 16 ms where it was 30 us, and every timeout after
            // it waited 80 ms more, `sim_dead_link`).
            let sample = now
                .saturating_since(first_sent)
                .as_nanos()
                .saturating_sub(u128::from(delay)) as u64;
            if sample > self.srtt_ns + 4 * self.rttvar_ns {
                self.on_rtt(sample);
            }
        } else if psn == ack.recent && self.srtt_ns == 0 {
            // Every packet so far was resent (e.g. a first flight lost in an
            // incast): bootstrap the RTT from the resend just acked, or the
            // tail probe would never arm.
            let delay = u64::from(ack.delay_us) * 1000;
            let sample = elapsed.saturating_sub(delay);
            if sample >= 1000 {
                p.on_rtt(sample, 2 * delay <= elapsed);
                self.on_rtt(sample);
            }
        }
        if sends > 1 && !self.hedged.is_empty() {
            if let Some(k) = self.hedged.iter().position(|&x| x == psn) {
                self.hedged.swap_remove(k);
                // A hedged packet: its slow-path original had not arrived
                // when the copy's ack left (or just had), so its RTT there
                // is at least this. Without it that path would sample only
                // its short-queued packets and look faster than it is.
                let s = (now.saturating_since(first_sent).as_nanos() as u64).saturating_sub(delay);
                let fp = &mut self.paths.paths[usize::from(first_path.0)];
                if s > fp.srtt_ns {
                    fp.on_rtt(s, false);
                }
            }
        }
        ctx.stats.acked += 1;
        ctx.events.push_back(DgramEvent::Acked {
            peer: self.id,
            token,
        });
    }

    /// Declare lost what per-path ordering, overdue time or 3 later acks on
    /// the same path show lost; arm the loss timer for the earliest pending case.
    pub fn detect_losses(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        if self.tx.pkts_in_flight == 0 {
            // Nothing in flight (a receiver reading a piggybacked ack, a
            // sender between messages): no entry is valid; drop them all
            // without looking at each path's RTT.
            for p in &mut self.paths.paths {
                p.outstanding.clear();
            }
            self.timers.stop(Timer::Loss);
            return;
        }
        let mut next: Option<Instant> = None;
        let peer_rtt = self.rtt_ns();
        let ack_delay = ctx.p.ack_delay_ns;
        let median = self.paths.median_srtt_at(now);
        for pi in 0..self.paths.paths.len() {
            loop {
                let p = &self.paths.paths[pi];
                let Some(&(psn, pseq)) = p.outstanding.front() else {
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
                if !lost && self.largest_acked_sent > slot.sent {
                    // Something sent after it (on any path) was acked: it is
                    // overdue once well past its own path's RTT, but at most
                    // a few median path RTTs: a path 10x slower than the
                    // others (its queue holding most of the window) is as
                    // good as lossy, and waiting out its RTT stalls the
                    // transfer. Not under a receiver credit: there the
                    // paths share the receiver's queue, their RTTs differ
                    // by chance, and the cap took late packets for lost
                    // (25x the losses, and RTOs, at 64 senders).
                    // Nor is it overdue sooner than at the median path
                    // RTT: a path's own RTT can be stale (flowlets visit
                    // each path in turn, and several paths share a link's
                    // queue), while the median follows what most paths see
                    // now.
                    let slow = median > 0 && srtt > OVERDUE_MEDIANS * median;
                    let (srtt, var) = if slow && self.tx.credit.is_none() {
                        (srtt.min(OVERDUE_MEDIANS * median), var.min(median))
                    } else {
                        (srtt.max(median), var)
                    };
                    let t = slot.sent + Duration::from_nanos(2 * srtt + 4 * var + ack_delay);
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
        let median = self.paths.median_srtt_at(now);
        if median == 0 {
            return false;
        }
        // Only at the tail: the fast paths ran dry while slow ones still
        // hold packets (the newest of a slow queue would arrive last). One
        // copy at a time: it makes a fast path busy until acked.
        // A bad path's probe counts as slow: it carries data, and on a
        // path that went bad by queueing (a 10x slower link) it may sit
        // there for tens of ms, holding the cumulative ack.
        let is_slow = |p: &super::path::Path| p.srtt_ns > 2 * median || p.health == Health::Bad;
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
                let late_at =
                    self.tx.slot(psn).sent + Duration::from_nanos(median + ctx.p.ack_delay_ns);
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
                self.hedge_psn = Some(psn);
                if self.hedged.len() >= MAX_HEDGED {
                    self.hedged.remove(0);
                }
                self.hedged.push(psn);
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
        self.tlp_count += 1;
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
                if !on_bad && self.stall_probe_at.is_none() && self.tx.delivered > 0 {
                    ctx.stats.tail_asks += 1;
                    self.tail_ask_due = true;
                    self.tail_ask = Some((psn, now));
                    self.tail_ask_no = 0;
                } else {
                    self.tlp_psn = Some(psn);
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
    fn check_tail_ask(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        let Some((psn, at)) = self.tail_ask else {
            return;
        };
        if !self.tx.is_sent(psn) || self.tx.slot(psn).state != SlotState::InFlight {
            self.tail_ask = None;
        } else if self.answers(self.tail_ask_no)
            && now.saturating_since(at).as_nanos() as u64 >= self.probe_answer_ns()
        {
            self.tail_ask = None;
            self.tlp_psn = Some(psn);
            self.mark_lost(ctx, now, psn, false);
        }
    }

    /// Soonest an answer to a probe sent now can come back, ns: an ack
    /// arriving earlier left the peer before the probe arrived.
    fn probe_answer_ns(&self) -> u64 {
        let min = self.paths.min_rtt();
        let min = if min == 0 || min == u64::MAX {
            self.srtt_ns
        } else {
            min
        };
        min / 2
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
        let answered = self.stall_probe_at.is_some_and(|t| self.last_answer > t);
        if answered || self.tx.delivered == 0 || self.tx.pkts_in_flight == 0 {
            self.stall_probe_at = None;
            self.stall_probe_path = None;
            self.on_rto(ctx, now);
            return;
        }
        ctx.stats.stall_probes += 1;
        self.stall_probe_due = true;
        self.stall_probe_at = Some(now);
        self.stall_probe_no = 0;
        self.tx.rto_backoff = (self.tx.rto_backoff + 1).min(16);
        self.rto_base = now;
        self.update_timers(ctx.p);
    }

    /// The retransmission timer fired: the oldest packet in flight is
    /// declared lost (one, like TCP: the ack of its resend brings an RTT,
    /// credit and the per-path rules that find the rest; resending the whole
    /// flight would re-flood a congested receiver), and the timer backs off.
    pub fn on_rto(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        ctx.stats.timeouts += 1;
        self.paths.rtos += 1;
        self.rto_fired = Some(now);
        let mut psn = self.tx.una;
        while psn != self.tx.next_send {
            if self.tx.slot(psn).state == SlotState::InFlight {
                ctx.stats.rto_lost += 1;
                self.mark_lost(ctx, now, psn, true);
                // It goes first and ignores window and credit: the flight
                // they count may be all lost, and nothing else would move.
                self.tx.retx.retain(|&x| x != psn);
                self.tx.retx.push_front(psn);
                self.tlp_psn = Some(psn);
                self.cc.on_timeout(now);
                break;
            }
            psn = psn.wrapping_add(1);
        }
        self.tx.rto_backoff = (self.tx.rto_backoff + 1).min(16);
        self.rto_base = now;
        self.update_timers(ctx.p);
    }
}
