//! Sender side of acknowledgements: marking PSNs acked, the receiver's
//! credit, RTT and delivery-rate samples for the paths, the peer and the
//! congestion controller. What an ack says about losses is then left to
//! loss recovery (`recovery.rs`).

use super::cc::{AckSample, Controller};
use super::path::Health;
use super::peer::{Ctx, Peer};
use super::timer::Timer;
use super::tx::SlotState;
use crate::dgram::DgramEvent;
use crate::time::Instant;
use crate::wire::srd::{sack_word, AckRepr, CREDIT_UNLIMITED};

/// Where an ack's delivery-rate sample starts: the `delivered` mark and
/// its time when the sampled packet left, and whether the sender was then
/// application-limited (`Tx::app_limited`).
type RateStart = (u64, Instant, bool);

/// What one ack has taken so far, packet by packet (`ack_one`) or by
/// runs (`ack_run`).
#[derive(Default)]
struct Tally {
    /// Payload bytes acked.
    bytes: u64,
    /// Where its delivery-rate sample starts (see `note_rate`).
    rate: Option<RateStart>,
    /// The `Acked` event being gathered: (token, datagrams).
    run: Option<(u64, u32)>,
}

/// What an acked slot held, taken out as the slot is freed.
pub(super) struct Acked {
    /// Payload bytes.
    pub len: u64,
    /// When the copy last sent left.
    pub sent: Instant,
    /// Path and per-path sequence of the last copy.
    pub path: u8,
    pub pseq: u64,
    /// Copies sent (1 = never resent).
    pub sends: u32,
    /// The datagram's token (for the `Acked` event).
    pub token: u64,
    /// `tx.delivered` and its time when the last copy left (rate sample).
    pub delivered: u64,
    pub delivered_at: Instant,
    /// The last copy left while the sender was application-limited.
    pub app_limited: bool,
    /// When and where the first copy went.
    pub first_sent: Instant,
    pub first_path: (u8, u64),
    /// Sent once, flagged LAZY: the receiver may have held its ack up to
    /// its lazy hold.
    pub lazy: bool,
}

/// Whether `on_ack` takes runs of packets together (`Peer::ack_run`);
/// tests turn it off to compare with `ack_one` alone.
#[cfg(not(test))]
fn runs_on() -> bool {
    true
}

#[cfg(test)]
fn runs_on() -> bool {
    tests::RUNS.with(|r| r.get())
}

impl Peer {
    /// Process an acknowledgement that arrived at `now`.
    /// `ext` holds the extra SACK words of an ACK packet (empty otherwise).
    pub fn on_ack(&mut self, ctx: &mut Ctx<'_>, now: Instant, ack: &AckRepr, ext: &[u8]) {
        // Nothing of ours queued or unacknowledged since an ack settled it
        // all (the receiving side of a stream reads the sender's piggybacked
        // ack of its few packets on every DATA packet): this one can only
        // bring the credit. The full walk below (SACK words, probes, each
        // path's loss entries, timers) cost the receiver about 190
        // instructions per DATA packet.
        if self.ack_settled && !self.tx.busy() && ack.cum == self.tx.una {
            self.note_credit(now, ack);
            return;
        }
        // Paths' rates and health may change below.
        self.paths.touch();
        let span = self.tx.next_send.wrapping_sub(self.tx.una);
        let cum_d = ack.cum.wrapping_sub(self.tx.una);
        // Its delay is a lazy hold, not the receiving host's (see `feed_controller`).
        let recent = self.tx.slot(ack.recent);
        let recent_lazy = recent.state == SlotState::InFlight && recent.lazy && recent.sends == 1;
        if (cum_d as i32) > 0 && cum_d > span {
            // Acknowledges PSNs never sent: corrupt or foreign; ignore it.
            ctx.stats.rx_bad_ack += 1;
            return;
        }
        let mut t = Tally::default();
        if (cum_d as i32) > 0 {
            let mut psn = self.tx.una;
            while psn != ack.cum {
                let n = self.run_len(psn, ack);
                if n > 1 {
                    self.ack_run(ctx, now, psn, n, ack, &mut t);
                } else {
                    self.ack_one(ctx, now, psn, ack, &mut t);
                }
                psn = psn.wrapping_add(n.max(1));
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
                    self.ack_one(ctx, now, psn, ack, &mut t);
                }
            }
        }
        self.report_acked(ctx, t.run);
        self.note_credit(now, ack);
        let acked_bytes = t.bytes;
        if acked_bytes > 0 {
            self.recovery.on_progress(now);
            self.tx.delivered += acked_bytes;
            self.tx.delivered_at = now;
            if self.tx.app_limited != 0 && self.tx.delivered > self.tx.app_limited {
                self.tx.app_limited = 0;
            }
            self.tx.last_progress = now;
            self.tx.advance_una();
            self.feed_controller(now, ack, acked_bytes, t.rate, recent_lazy);
        }
        self.settle_stall_probe(ctx, now, acked_bytes > 0);
        self.check_tail_ask(ctx, now);
        self.detect_losses(ctx, now);
        self.update_timers(ctx.p);
        self.ack_settled = !self.tx.busy()
            && self.recovery.stall_probe_at.is_none()
            && self.recovery.tail_ask.is_none();
    }

    /// Take the receiver's credit from an ack; a nonzero grant ends the
    /// credit probing (`send.rs`).
    fn note_credit(&mut self, now: Instant, ack: &AckRepr) {
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
    }

    /// Give the congestion controller its sample of an ack that acked
    /// `acked_bytes`; `rate` is the delivery mark of the oldest packet that
    /// may start a rate sample (see `note_rate`).
    fn feed_controller(
        &mut self,
        now: Instant,
        ack: &AckRepr,
        acked_bytes: u64,
        rate: Option<RateStart>,
        recent_lazy: bool,
    ) {
        let mut s = AckSample {
            acked_bytes,
            min_rtt_ns: self.paths.min_rtt().unwrap_or(0),
            median_srtt_ns: self.paths.median_srtt_at(now).unwrap_or(0),
            // A repeat's delay is the age of a packet whose first ack
            // was lost, not a hold: taken as one, a lost ack then a
            // probe's answer 30 ms later made every later timeout wait
            // 30 ms more, doubling (`sim_dead_link`).
            // Nor is a lazy hold (flag LAZY), which the receiver chose: taken
            // as one, it made the window cover 500 us more and every
            // timeout wait that much longer for a second.
            peer_delay_ns: if ack.repeat || recent_lazy {
                0
            } else {
                u64::from(ack.delay_us) * 1000
            },
            ..AckSample::default()
        };
        if let Some((d0, t0, app_limited)) = rate {
            s.delivered_bytes = self.tx.delivered - d0;
            s.interval_ns = now.saturating_since(t0).as_nanos() as u64;
            s.app_limited = app_limited;
        }
        if let Some((bytes, ns)) = self.bw_sample(now) {
            s.avg_bytes = bytes;
            s.avg_interval_ns = ns;
        }
        s.receiver_limited = self.tx.credit.is_some();
        self.cc.on_ack(now, &s);
    }

    /// One PSN acked (cumulatively or selectively): free its slot, report
    /// it, and learn what its round trip says of its path and the peer.
    fn ack_one(&mut self, ctx: &mut Ctx<'_>, now: Instant, psn: u32, ack: &AckRepr, t: &mut Tally) {
        let Some(a) = self.free_acked(ctx, psn) else {
            return;
        };
        t.bytes += a.len;
        self.note_rate(now, &a, &mut t.rate);
        if a.sent > self.recovery.largest_acked_sent {
            self.recovery.largest_acked_sent = a.sent;
        }
        let delay = u64::from(ack.delay_us) * 1000;
        let elapsed = now.saturating_since(a.sent).as_nanos() as u64;
        // Sent once: whether still in flight or (wrongly) declared lost, this
        // ack is unambiguous for its path. Resent: we cannot tell which copy
        // arrived; crediting the resend's path would make its earlier packets
        // look overtaken (declared lost wrongly, a cascade when the first copy
        // went on a slow path), so per-path order learns nothing from it.
        if a.sends == 1 {
            let p = &mut self.paths.paths[usize::from(a.path)];
            p.on_acked(a.pseq, a.sent);
            p.on_delivered(now, a.len);
            self.undo_spurious_timeout(ctx, a.sent);
        }
        let p_min_rtt = self.paths.paths[usize::from(a.path)].min_rtt_ns;
        if a.sends == 1 {
            self.paths
                .on_flowlet_packet_acked(a.path, a.pseq, now, delay);
        }
        if a.sends > 1 && p_min_rtt != u64::MAX && elapsed < p_min_rtt / 2 {
            self.credit_first_copy(ctx, now, &a, delay);
        }
        self.sample_rtt(now, psn == ack.recent, &a, elapsed, delay);
        if a.sends > 1 {
            self.correct_hedged_rtt(now, psn, &a, delay);
        }
        ctx.stats.acked += 1;
        // Datagrams acked one after another with one token (a message's
        // segments) make one event: in a ping-pong of 64 KiB messages the
        // reply's ack covers 48 of them, and each event cost a push, a pop
        // and a lookup in the layer above before the reply's data was read.
        match &mut t.run {
            Some((token, n)) if *token == a.token && *n < u32::MAX => *n += 1,
            _ => {
                let prev = t.run.replace((a.token, 1));
                self.report_acked(ctx, prev);
            }
        }
    }

    /// How many packets from `psn` on (cumulatively acked by `ack`) make a
    /// run `ack_run` may take together: sent once, in flight, in one flush
    /// (the same instant) on one path one after another, with one token
    /// and the same LAZY flag, none of them the ack's `recent` packet (its
    /// exact RTT sample is `ack_one`'s). 0 or 1: take `psn` alone.
    fn run_len(&self, psn: u32, ack: &AckRepr) -> u32 {
        if !runs_on() || psn == ack.recent {
            return 0;
        }
        let s = self.tx.slot(psn);
        if s.state != SlotState::InFlight || s.sends != 1 {
            return 0;
        }
        let (path, pseq, sent, token, lazy) = (s.path, s.pseq, s.sent, s.token, s.lazy);
        let mut n = 1u32;
        loop {
            let q = psn.wrapping_add(n);
            if q == ack.cum || q == ack.recent {
                return n;
            }
            let s = self.tx.slot(q);
            if s.state != SlotState::InFlight
                || s.sends != 1
                || s.path != path
                || s.pseq != pseq + u64::from(n)
                || s.sent != sent
                || s.token != token
                || s.lazy != lazy
            {
                return n;
            }
            n += 1;
        }
    }

    /// `ack_one` for each of the `n` packets of a run from `psn` (see
    /// `run_len`), with the same result: what is the same for all of them
    /// (their send instant, path, token, RTT sample) is read and applied
    /// once where applying it again changes nothing (the path's acked
    /// mark and health, a spurious timeout's undoing, the rate sample's
    /// start: the last packet's, as delivery marks grow with the PSN), and
    /// per packet, in `ack_one`'s order, what builds up (the path's
    /// delivery count, the RTT averages and weight, the flowlet's ends).
    /// A 64 KiB message at MTU 1500 is 46 such packets, whose acks arrive
    /// together on the reply: taken one by one they cost ~360 instructions
    /// each (`engine_speed`), a third of the receiving host's work.
    // Not inlined: in `on_ack` it made every ack dearer (an 8-byte
    // ping-pong's ack of one packet by 36 instructions, `engine_speed`).
    #[inline(never)]
    fn ack_run(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        psn: u32,
        n: u32,
        ack: &AckRepr,
        t: &mut Tally,
    ) {
        let first = self.tx.slot(psn);
        let (path, pseq, sent, token, lazy) =
            (first.path, first.pseq, first.sent, first.token, first.lazy);
        let last = self.tx.slot(psn.wrapping_add(n - 1));
        let (delivered, delivered_at, app_limited) =
            (last.delivered, last.delivered_at, last.app_limited);
        if t.rate.is_none_or(|(d, _, _)| delivered >= d) {
            t.rate = Some((delivered, delivered_at, app_limited));
        }
        if sent > self.recovery.largest_acked_sent {
            self.recovery.largest_acked_sent = sent;
        }
        let delay = u64::from(ack.delay_us) * 1000;
        let elapsed = now.saturating_since(sent).as_nanos() as u64;
        // `sample_rtt`'s bound for a packet sent once that is not `recent`.
        let sample = (elapsed > delay && !lazy).then(|| (elapsed - delay, 2 * delay <= elapsed));
        let i = usize::from(path);
        self.paths.paths[i].on_acked(pseq + u64::from(n - 1), sent);
        self.undo_spurious_timeout(ctx, sent);
        // The flowlet's packets that `on_flowlet_packet_acked` acts on.
        let ends = self.paths.paths[i]
            .flow
            .as_ref()
            .map(|f| (f.first.0, f.last.0));
        let mut bytes = 0u64;
        for k in 0..n {
            let slot = self.tx.slot_mut(psn.wrapping_add(k));
            slot.state = SlotState::Free;
            let len = slot.len as u64;
            ctx.pool.give(core::mem::take(&mut slot.buf));
            bytes += len;
            self.paths.paths[i].on_delivered(now, len);
            let seq = pseq + u64::from(k);
            if ends.is_some_and(|(a, b)| seq == a || seq == b) {
                self.paths.on_flowlet_packet_acked(path, seq, now, delay);
            }
            if let Some((s, for_min)) = sample {
                self.paths.on_rtt(i, s, for_min);
                self.paths.adapt_weight(i, now);
            }
        }
        self.tx.bytes_in_flight -= bytes;
        self.tx.pkts_in_flight -= n;
        t.bytes += bytes;
        ctx.stats.acked += u64::from(n);
        #[cfg(test)]
        tests::TAKEN.with(|t| t.set(t.get() + u64::from(n)));
        match &mut t.run {
            Some((k, c)) if *k == token && c.checked_add(n).is_some() => *c += n,
            _ => {
                let prev = t.run.replace((token, n));
                self.report_acked(ctx, prev);
            }
        }
    }

    /// Report the datagrams gathered in `run` acked (see `ack_one`).
    fn report_acked(&self, ctx: &mut Ctx<'_>, run: Option<(u64, u32)>) {
        if let Some((token, count)) = run {
            ctx.events.push_back(DgramEvent::Acked {
                peer: self.id,
                token,
                count,
            });
        }
    }

    /// Free the slot of an acked `psn` and take out what the ack needs of
    /// it; `None` if it was not outstanding (acked before, or never sent).
    fn free_acked(&mut self, ctx: &mut Ctx<'_>, psn: u32) -> Option<Acked> {
        let slot = self.tx.slot_mut(psn);
        let was = slot.state;
        if was != SlotState::InFlight && was != SlotState::Lost {
            return None;
        }
        slot.state = SlotState::Free;
        let a = Acked {
            len: slot.len as u64,
            sent: slot.sent,
            path: slot.path,
            pseq: slot.pseq,
            sends: slot.sends,
            token: slot.token,
            delivered: slot.delivered,
            delivered_at: slot.delivered_at,
            app_limited: slot.app_limited,
            first_sent: slot.first_sent,
            first_path: slot.first_path,
            lazy: slot.lazy && slot.sends == 1,
        };
        let buf = core::mem::take(&mut slot.buf);
        ctx.pool.give(buf);
        if was == SlotState::InFlight {
            self.tx.bytes_in_flight -= a.len;
            self.tx.pkts_in_flight -= 1;
        } else {
            // Declared lost, yet it arrived: the loss (and any resend) was spurious.
            ctx.stats.spurious_losses += 1;
        }
        Some(a)
    }

    /// Let the acked packet start this ack's delivery-rate sample if it left
    /// earliest (by delivery mark) of those acked so far.
    fn note_rate(&self, now: Instant, a: &Acked, rate: &mut Option<RateStart>) {
        // A resent packet may be acked for its first copy moments after
        // the resend: its rate sample would span microseconds (165 MB/s
        // read on a 50 MB/s fabric). Such an ack (sooner than half its
        // path's min RTT after the resend) gives no sample; other resent
        // packets do: where most acked packets are resends (a fan-in with
        // many probes), the estimate must still be able to recover from
        // timeout cuts, or pacing crawls and the sender stalls.
        let too_soon = a.sends > 1 && {
            let p = &self.paths.paths[usize::from(a.path)];
            p.min_rtt_ns != u64::MAX
                && (now.saturating_since(a.sent).as_nanos() as u64) < p.min_rtt_ns / 2
        };
        if !too_soon && rate.is_none_or(|(d, _, _)| a.delivered >= d) {
            *rate = Some((a.delivered, a.delivered_at, a.app_limited));
        }
    }

    /// RTT samples from an acked packet, `elapsed` ns after its last send,
    /// held `delay` ns by the receiver; `recent` = it is the packet the
    /// ack's delay is exact for (`AckRepr::recent`).
    fn sample_rtt(&mut self, now: Instant, recent: bool, a: &Acked, elapsed: u64, delay: u64) {
        if a.sends == 1 {
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
            // A lazy packet other than `recent` may have been held far
            // longer than `recent` (up to the lazy hold): its bound says
            // nothing of its path.
            if elapsed > delay && (recent || !a.lazy) {
                let sample = elapsed - delay;
                self.paths
                    .on_rtt(usize::from(a.path), sample, 2 * delay <= elapsed);
                self.paths.adapt_weight(usize::from(a.path), now);
                if recent {
                    self.on_rtt(sample);
                }
            }
        } else if recent
            && self.srtt_ns != 0
            && self.fan_in_limited()
            && self.recovery.rto_fired.is_none()
            && self.paths.paths[usize::from(a.first_path.0)].health == Health::Good
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
                .saturating_since(a.first_sent)
                .as_nanos()
                .saturating_sub(u128::from(delay)) as u64;
            if sample > self.srtt_ns + 4 * self.rttvar_ns {
                self.on_rtt(sample);
            }
        } else if recent && self.srtt_ns == 0 {
            // Every packet so far was resent (e.g. a first flight lost in an
            // incast): bootstrap the RTT from the resend just acked, or the
            // tail probe would never arm.
            let sample = elapsed.saturating_sub(delay);
            if sample >= 1000 {
                self.paths
                    .on_rtt(usize::from(a.path), sample, 2 * delay <= elapsed);
                self.on_rtt(sample);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use core::cell::Cell;
    use core::time::Duration;

    use crate::sim::check::{config, payload};
    use crate::sim::{addr, LinkSpec, Sim, SrdNode};
    use crate::time::Instant;

    thread_local! {
        /// `runs_on` for this thread's engines.
        pub(super) static RUNS: Cell<bool> = const { Cell::new(true) };
        /// Packets `ack_run` took on this thread.
        pub(super) static TAKEN: Cell<u64> = const { Cell::new(0) };
    }

    /// Everything a transfer leaves behind that acks feed: events (with
    /// their times), deliveries, the cores' counters and every peer's and
    /// path's state (RTTs, weights, rates, window, flowlet cap), as text.
    fn transfer(seed: u64, spec: LinkSpec, runs: bool) -> String {
        RUNS.with(|r| r.set(runs));
        let (c0, c1) = (config(0, 8, 10), config(1, 8, 20));
        let nodes = vec![SrdNode::new(&c0), SrdNode::new(&c1)];
        let mut sim = Sim::new(seed, nodes, vec![spec; 4]);
        // Messages of 1 to 48 datagrams both ways (a token per message).
        let mut n = 0u64;
        for m in 0..40u64 {
            let size = 1 + (m * 7 + seed) % 48;
            for _ in 0..size {
                sim.nodes[0].push(addr(1), m, payload(n, 1000));
                sim.nodes[1].push(addr(0), m, payload(n, 1000));
                n += 1;
            }
        }
        sim.run_until(Instant::from_nanos(2_000_000_000), |s| {
            s.nodes.iter().all(|x| x.outbox.is_empty()) && s.in_network() == 0
        });
        RUNS.with(|r| r.set(true));
        let mut out = String::new();
        for (i, node) in sim.nodes.iter().enumerate() {
            out += &format!(
                "node {i}: {} arrived, events {:?}\nstats {:?}\npeers {:?}\n",
                node.arrived.len(),
                node.events,
                node.srd.stats(),
                node.srd.peer_stats()
            );
        }
        out
    }

    /// Taking a run of acked packets together changes nothing but the
    /// work: the same events at the same times, the same deliveries, and
    /// the same RTTs, weights, rates and window after transfers both ways
    /// over 4 links, with and without loss, duplicates and jitter.
    #[test]
    fn runs_ack_as_single_packets_would() {
        let mut lossy = LinkSpec::ideal(Duration::from_micros(20));
        lossy.bandwidth = 200_000_000;
        lossy.buffer = 64_000;
        lossy.jitter = Duration::from_micros(8);
        lossy.loss = 0.01;
        lossy.dup = 0.005;
        let mut clean = LinkSpec::ideal(Duration::from_micros(10));
        clean.bandwidth = 1_000_000_000;
        for seed in 1..=6u64 {
            for (name, spec) in [("clean", &clean), ("lossy", &lossy)] {
                TAKEN.with(|t| t.set(0));
                let with = transfer(seed, spec.clone(), true);
                let taken = TAKEN.with(|t| t.get());
                let without = transfer(seed, spec.clone(), false);
                assert_eq!(TAKEN.with(|t| t.get()), taken, "runs off took some");
                // Most packets of these flushes are acked in runs.
                // Runs were taken (147-314 of ~2000 packets in these).
                assert!(
                    taken >= 100,
                    "seed {seed}, {name}: {taken} packets acked in runs"
                );
                assert!(
                    with == without,
                    "seed {seed}, {name}: runs change the outcome\nwith:\n{with}\nwithout:\n{without}"
                );
            }
        }
    }
}
