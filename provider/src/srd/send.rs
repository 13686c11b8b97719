//! Building packets for one peer: RESET, retransmissions, new data (window,
//! credit and pacing permitting), pure ACKs; every DATA piggybacks the ack.

use crate::muldiv::mul_div;
use core::time::Duration;

use super::cc::Controller;
use super::path::Health;
use super::peer::{Ctx, Params, Peer};
use super::timer::Timer;
use super::tx::{SlotState, WINDOW};
use super::Transmit;
use crate::time::Instant;

/// Idle this long before sending again, a sender's flight counts as a
/// first flight (see `Recovery::first_flight`), ns.
const FIRST_FLIGHT_QUIET_NS: u64 = 1_000_000;
/// A flowlet is what the pacing rate sends in this long, at most, ns.
const FLOWLET_NS: u64 = 100_000;
/// A burst from idle may leave the first flight at once as far as the
/// pacing rate sends it in this long, ns (see `paced_until`).
const FLIGHT_BURST_NS: u64 = 200_000;
/// ... and only when none of our packets was declared lost this long, ns.
const LOSS_QUIET_NS: u64 = 10_000_000;
/// Flowlets shorter than this are single packets, bytes (a pacing rate
/// below about 880 Mbit/s; see `flowlet_packets_at`).
const FLOWLET_MIN_BYTES: u64 = 11_000;
/// A burst that starts while nothing is in flight (an application's message
/// after a pause: a ping-pong, an MPI exchange) goes on one proven path in
/// flowlets of at least this many bytes (whole packets: 12 at MTU 1500, 2 at
/// 9000), whatever the rate, see `flowlet_floor`.
const FLOWLET_FLOOR_BYTES: usize = 16 * 1024;
/// Packets up to this size, SRD payload (an application's small messages:
/// up to 512 bytes and their 40-byte message header) go on one proven path
/// in flowlets of up to `SMALL_FLOWLET_BYTES`, whatever the rate, see
/// `small_flowlet`.
const SMALL_PACKET_BYTES: u64 = 552;
/// Bytes of a flowlet of small packets (about 40 packets of one 8-byte
/// message each).
const SMALL_FLOWLET_BYTES: u64 = 4096;
use crate::wire::srd::{flags, AckRepr, PacketType, Repr, CREDIT_UNLIMITED, MAX_SACK_EXT_BYTES};

impl Peer {
    /// The ack to piggyback, if we have received anything from this peer.
    fn take_ack(&mut self, now: Instant, full: bool, credit: u16, budget: u32) -> Option<AckRepr> {
        if !self.rx.any {
            return None;
        }
        self.rx.unacked = 0;
        // A piggybacked ack reports 64 PSNs; if the window spans more, a
        // complete pure ACK must follow so no received packet goes unreported.
        self.rx.ack_now = !full && self.rx.span() > 64;
        self.timers.stop(Timer::Ack);
        let ack = self.rx.ack(now, self.grant(credit, budget));
        self.rx.reported();
        Some(ack)
    }

    /// The credit to grant this peer: the receiver's fair share `fair`, but
    /// while the peer is young (fewer than `budget` packets received) at most
    /// one more than it has delivered, so its grant doubles per round trip.
    /// Senders that start together are thus admitted gradually while the
    /// receiver learns how many there are (the fair share shrinks as each
    /// one's first packet arrives).
    /// In scheduled mode (`fair` = 0) it is 1 packet if the peer holds one
    /// of the budget's slots, else 0.
    fn grant(&self, fair: u16, budget: u32) -> u16 {
        if fair == 0 {
            return u16::from(self.rx_admitted);
        }
        let fair = if fair == CREDIT_UNLIMITED {
            fair
        } else {
            (fair + u16::from(self.rx_credit_extra)).min(CREDIT_UNLIMITED - 1)
        };
        let ramp = self.rx.received.saturating_add(1);
        if ramp >= budget {
            fair
        } else {
            // Below 0xFFFF (= unlimited) whatever the configured budget.
            fair.min(ramp.min(u32::from(u16::MAX - 1)) as u16)
        }
    }

    pub(super) fn header(&self, ctx: &Ctx<'_>, ty: PacketType, path: u8) -> Repr {
        Repr {
            ty,
            flags: 0,
            path,
            src_port: ctx.p.port,
            src_nonce: ctx.p.nonce,
            dst_token: self.token,
            psn: 0,
            psn_floor: 0,
            ack: None,
            payload_len: 0,
        }
    }

    /// May one more packet go out under the receiver's credit? Always when
    /// nothing is in flight, unless the receiver granted 0 (it schedules
    /// its senders: this one waits for a grant, probing now and then).
    pub(super) fn credit_ok(&self) -> bool {
        match self.tx.credit {
            None => true,
            Some(c) => self.tx.pkts_in_flight < c || (self.tx.pkts_in_flight == 0 && c > 0),
        }
    }

    /// Going busy after idling: a credit heard long ago is stale (the
    /// receiver stopped counting us as an active sender after its 1 ms
    /// activity window and shares its budget among the others). Fall back
    /// to the unscheduled allowance until a fresh credit arrives, so many
    /// senders resuming together do not each bring their old share.
    pub(crate) fn expire_credit(&mut self, ctx: &Ctx<'_>, now: Instant) {
        const STALE_NS: u64 = 1_000_000;
        if self.tx.pkts_in_flight != 0
            || now.saturating_since(self.credit_heard_at).as_nanos() < u128::from(STALE_NS)
        {
            return;
        }
        self.tx.credit = Some(ctx.p.unscheduled);
    }

    /// Anything to send after the packet just taken (flag MORE)?
    pub(super) fn has_more(&self) -> bool {
        self.tx.next_send != self.tx.next_psn || !self.tx.retx.is_empty()
    }

    /// Held at 0 credit with nothing in flight and something to send: arm
    /// the credit-probe timer (a lost grant, or a receiver that forgot us,
    /// must not stall us forever). The wait backs off while the receiver
    /// keeps answering 0.
    fn arm_credit_probe(&mut self, ctx: &Ctx<'_>, now: Instant) {
        const MAX_WAIT_NS: u64 = 16_000_000;
        let waiting = self.tx.credit == Some(0) && self.tx.pkts_in_flight == 0 && self.has_more();
        if !waiting {
            self.timers.stop(Timer::Credit);
            return;
        }
        if self.timers.get(Timer::Credit).is_some() {
            return;
        }
        let base = ctx.p.min_rto_ns.max(4 * self.rtt_ns());
        let wait = (base << self.credit_probes.min(4)).min(MAX_WAIT_NS.max(base));
        self.timers
            .set(Timer::Credit, now + Duration::from_nanos(wait));
    }

    /// Path of the oldest packet in flight.
    pub(super) fn oldest_in_flight_path(&self) -> Option<u8> {
        let mut psn = self.tx.una;
        while psn != self.tx.next_send {
            let slot = self.tx.slot(psn);
            if slot.state == SlotState::InFlight {
                return Some(slot.path);
            }
            psn = psn.wrapping_add(1);
        }
        None
    }

    /// Will the receiver's credit hold back what is queued behind the packet
    /// just taken for sending (`next_send` already moved past it), as it
    /// uses half the credit or more? Then it asks for an
    /// immediate ack: a sender held to a few packets would otherwise idle
    /// for the receiver's delayed-ack time every round trip. A ping-pong
    /// (nothing queued behind) keeps its acks piggybacked.
    fn credit_stalls(&self) -> bool {
        let more = self.tx.next_send != self.tx.next_psn;
        more && self
            .tx
            .credit
            .is_some_and(|c| 2 * (self.tx.pkts_in_flight + 1) >= c)
    }

    /// Refill pacing tokens; returns the release time if new data must wait.
    ///
    /// The bucket holds 16 packets or 100 us at the pacing rate. When a
    /// burst starts with nothing in flight (a message after a pause: a
    /// ping-pong, a collective's next exchange) it also holds the first
    /// flight (`pacing_burst`: 64 packets or 128 KiB, the window's floor,
    /// 88 KiB at MTU 1500), which the window already lets go without an ack,
    /// as far as `FLIGHT_BURST_NS` at the rate carries it and unless a packet
    /// was declared lost in the last `LOSS_QUIET_NS`.
    ///
    /// Paced more finely, such a message left its first 16 packets at once
    /// and the rest one packet at a time as tokens came in, a send call
    /// each: Intel MPI's Alltoall of 64 KiB among 4 hosts on 2 CPUs made
    /// three quarters of its send calls for single DATA packets (12 900 a
    /// rank per run against 306 whole flowlets), pacing at a rate its
    /// application-limited exchanges keep low. The bounds:
    /// - nothing in flight: a flow that waits for acks with data queued
    ///   gathers tokens while its window is full, and a bucket that size let
    ///   a burst onto a slow path each time the window opened (`sim_badpath`,
    ///   one link 10x slower: 1.29x the ideal completion against 1.15x);
    /// - `FLIGHT_BURST_NS`: through the 500 Mbit/s downlinks and 64 KiB
    ///   buffers of the incast testbed (3 senders a receiver, each paced near
    ///   its share of the link) whole flights from idle overflowed the
    ///   buffer: tail probes a run 244-281 -> 628-767, and a retransmission
    ///   timeout;
    /// - `LOSS_QUIET_NS`: with the rate bound alone that testbed still saw a
    ///   timeout in 1 of 9 runs (none in 9 without the bonus); its buffers
    ///   drop a packet every few ms, where a fabric that queues nothing
    ///   drops none.
    fn paced_until(&mut self, now: Instant, mss: u64) -> Option<Instant> {
        let rate = self.cc.pacing_rate()?.max(1);
        let mut burst = (16 * mss).max(rate / 10_000); // 16 packets or 100 µs
        let quiet = now.saturating_since(self.lost_at).as_nanos() > u128::from(LOSS_QUIET_NS);
        if self.tx.pkts_in_flight == 0 && quiet {
            let flight = mul_div(rate, FLIGHT_BURST_NS, 1_000_000_000);
            burst = burst.max(flight.min(u128::from(self.pacing_burst)) as u64);
        }
        let burst = burst as i64;
        let elapsed = now.saturating_since(self.pacing_at).as_nanos() as u64;
        if elapsed == 0 && (0..burst).contains(&self.pacing_tokens) {
            // The packets of one flush after the first (same instant): no
            // time passed, so the branch below would add nothing and move
            // nothing, at the cost of two divisions.
            return None;
        }
        let add = mul_div(elapsed, rate, 1_000_000_000);
        if self.pacing_tokens as i128 + add as i128 >= burst as i128 {
            // Never below what an idle start granted and the flight has
            // not used yet.
            self.pacing_tokens = self.pacing_tokens.max(burst);
            self.pacing_at = now;
        } else {
            // Advance the clock only by the time the added tokens stand for,
            // so fractions of a byte carry over instead of being lost.
            self.pacing_tokens += add as i64;
            // (add < burst - tokens here: it fits 64 bits.)
            let used = mul_div(add as u64, 1_000_000_000, rate) as u64;
            self.pacing_at = self.pacing_at + Duration::from_nanos(used);
        }
        if self.pacing_tokens >= 0 {
            return None;
        }
        let wait = mul_div(self.pacing_tokens.unsigned_abs(), 1_000_000_000, rate) + 1;
        Some(now + Duration::from_nanos(wait as u64))
    }

    /// Least packets of a flowlet that starts while nothing is in flight:
    /// `FLOWLET_FLOOR_BYTES`, within 1 and `Params::flowlet`. Such a burst is
    /// an application's message, handed over at once; its app-limited rate
    /// sprayed it packet by packet, which cost a send call on the sender
    /// and a receive call on the receiver per packet instead of one of each
    /// (Intel MPI's PingPong of 16 KiB across 2 hosts at MTU 1500 went over
    /// 12 paths: 137 us; as one flowlet 56 us). `PathSet::pick_flowlet`
    /// gives it only to a path that has delivered and lost nothing since:
    /// on an unproven path (a dead link not found yet) a whole message
    /// would be lost at once, where single packets lose one and the acks of
    /// the others reveal it. Bulk flows keep the rate's flowlets (slow
    /// paths' queues, see `flowlet_packets`).
    fn flowlet_floor(&self, p: &Params) -> u32 {
        if self.tx.pkts_in_flight > 0 {
            return 1;
        }
        (FLOWLET_FLOOR_BYTES.div_ceil(p.max_payload.max(1)) as u32).clamp(1, p.flowlet.max(1))
    }

    /// Packets of a flowlet of small packets of `len` bytes each (1 for
    /// larger ones): a stream of small messages (8 bytes each, IMB Uniband,
    /// a message-rate benchmark) has a low byte rate and was sprayed packet
    /// by packet, so that the packets a batch of posts queued at once
    /// (`post_hold_us` in the provider) went out in one send call per path
    /// instead of one segmented send (UDP GSO takes a run of equal-size
    /// datagrams to one destination on one socket). A flowlet of 4 KiB of
    /// small packets queues nothing worth the name on any path. Proven
    /// paths only, as `flowlet_floor`. At most the packets queued now (this
    /// one and `tail` behind it): a flowlet outlives its batch only by what
    /// the window holds back. Sized by the packet alone, a lone control
    /// packet (a CREDIT returning eager credit, an RTS, a CTS) left a
    /// flowlet of 40 more behind it, which every later one took to the same
    /// path, seconds on: when that path died (its NIC went down) each was
    /// lost there in turn until the path was found bad, and a sender waiting
    /// for its credit stalled (`ffi_rails`: 131 MB in 23 s after the NIC
    /// died, where 3 s is usual).
    fn small_flowlet(p: &Params, len: u64, tail: u32) -> u32 {
        if len == 0 || len > SMALL_PACKET_BYTES {
            return 1;
        }
        let cap = u64::from(p.flowlet.max(1)).min(u64::from(tail) + 1);
        (SMALL_FLOWLET_BYTES / len).clamp(1, cap) as u32
    }

    /// New data is about to be queued. With nothing waiting to be sent, no
    /// loss to repair and room in the window, the sender is
    /// application-limited (BBR's rule): what it sends until everything now
    /// in flight is delivered goes at the application's pace, and the rate
    /// samples of those packets may raise the bandwidth estimate but not
    /// age it out (`Bbr::on_ack`). Without the rule 50 ms of 8-byte
    /// ping-pongs aged a 480 MB/s estimate to 2.3 MB/s, and the next 64 KiB
    /// message left paced and sprayed packet by packet (45 packets at once
    /// over 34 runs of one path, a send call each on a host) instead of
    /// whole on one path (`engine_pacing_burst.rs`).
    pub(super) fn note_queued(&mut self) {
        if self.tx.next_send == self.tx.next_psn
            && self.tx.retx.is_empty()
            && self.tx.bytes_in_flight < self.cc.window()
        {
            self.tx.app_limited = (self.tx.delivered + self.tx.bytes_in_flight).max(1);
        }
    }

    /// Packets of the next flowlet (new data on one path in a row): what
    /// the pacing rate sends in `FLOWLET_NS`, within 1 and `Params::flowlet`
    /// (as a TCP sender sizes its TSO bursts). A flowlet enters its path at
    /// the peer's whole rate while the path drains at its share of it: at
    /// 100 Mbit/s per path, a 64 KiB flowlet would fill a 64 KiB switch
    /// buffer, and a slow or young flow sprays packet by packet.
    fn flowlet_packets(&mut self, p: &Params) -> u32 {
        let Some(rate) = self.cc.pacing_rate() else {
            return 1;
        };
        if self.flowlet_memo.0 == rate {
            return self.flowlet_memo.1;
        }
        let n = Self::flowlet_packets_at(rate, p);
        self.flowlet_memo = (rate, n);
        n
    }

    /// `flowlet_packets` at pacing rate `rate` (bytes/s, > 0).
    fn flowlet_packets_at(rate: u64, p: &Params) -> u32 {
        // rate x FLOWLET_NS / 1 s, exactly (FLOWLET_NS divides 1 s), in
        // 64 bits: this runs for every packet.
        let bytes = rate / (1_000_000_000 / FLOWLET_NS);
        // A slow flow sprays packet by packet: its window is a few packets
        // over many paths, and a flowlet would put much of it on one path
        // (with 100 Mbit/s links, flowlets of 3-4 packets lost whole
        // flights to a dead link, `sim_dead_link`, and queued on a slow one,
        // `sim_badpath`). Not above 110 MB/s: every send call costs the
        // sending host a trip through its stack (~5 us between the
        // testbed's namespaces), and with the floor at 22 kB Intel MPI's
        // Alltoall of 64 KiB among 4 hosts on 2 CPUs started 3-10 K of its
        // 17-24 K flowlets a rank per run as single packets (rate below
        // 220 MB/s), 12 K single-packet sends a rank per run in all (median
        // of 6, up to 15.7 K; 10.5 K with the floor at 11 kB, 9.9-11.5 K).
        if bytes < FLOWLET_MIN_BYTES {
            return 1;
        }
        (bytes / p.max_payload.max(1) as u64).clamp(1, u64::from(p.flowlet)) as u32
    }

    /// The next packet for this peer, written into `buf`, in order of
    /// precedence: handshake, rails, probes (credit, a probe's answer, stall,
    /// tail ask), resends, new data, a pure ACK. (`poll_train` checks the
    /// same list before new data: a new kind of packet goes in both.)
    pub fn poll_transmit(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        if let Some(t) = self.poll_hello(ctx.p, now, buf) {
            ctx.stats.tx_packets += 1;
            ctx.stats.tx_bytes += t.len as u64;
            return Some(t);
        }
        if self.remote_nonce == 0 {
            // No session: nothing but the HELLO may leave.
            return None;
        }
        if self.rails.is_some() {
            if let Some(t) = self.poll_rails(ctx, now, buf) {
                return Some(t);
            }
        }
        if self.credit_probe_due {
            return self.credit_probe(ctx, buf);
        }
        if self.probe_to_answer && self.rx.any {
            // A PROBE's answer goes at once and on its own (not piggybacked
            // on DATA): only a flagged pure ACK tells the prober it answers.
            return self.pure_ack(ctx, now, buf);
        }
        if self.recovery.stall_probe_due {
            return self.stall_probe(ctx, now, buf);
        }
        if self.recovery.tail_ask_due {
            return self.tail_ask(ctx, buf);
        }
        if self.tx.next_send == self.tx.next_psn
            && self.tx.retx.is_empty()
            && self.tx.pkts_in_flight > 0
        {
            self.hedge_slow_tail(ctx, now);
        }
        let window = self.cc.window();
        if let Some(t) = self.poll_resend(ctx, now, buf, window) {
            return Some(t);
        }
        if let Some(t) = self.poll_new_data(ctx, now, buf, window, false) {
            return Some(t);
        }
        self.arm_credit_probe(ctx, now);
        let due = self.timers.due(Timer::Ack, now);
        if self.rx.any && (self.rx.ack_due_now(ctx.p.ack_every) || due) {
            return self.pure_ack(ctx, now, buf);
        }
        None
    }

    /// A credit probe (PROBE with MORE): we hold data the receiver's zero
    /// grant keeps back (`arm_credit_probe`).
    fn credit_probe(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        self.credit_probe_due = false;
        self.credit_probes = self.credit_probes.saturating_add(1);
        ctx.stats.credit_probes += 1;
        let path = self.paths.pick_control(None);
        let mut h = self.header(ctx, PacketType::Probe, path);
        h.flags = flags::MORE;
        h.psn = self.next_probe_no();
        self.finish(ctx, h, buf, None)
    }

    /// The next packet of the flowlet under way, where `poll_transmit`
    /// would send it: called right after this peer's last packet, at the
    /// same instant, with no input handled since (`Srd::poll_transmit`'s
    /// train). What comes before new data in `poll_transmit` is checked
    /// again (flags only: nothing became due without input or time); the
    /// path is the flowlet's, or `None` (nothing changed) where
    /// `pick_flowlet` would have to choose. A bulk sender's packets are
    /// nearly all such: this skips the peer walk and the path choice (with
    /// the room memo of `PathSet::has_room`, 1272 -> 1205 instructions a
    /// packet sent, `engine_speed` bulk over 8 paths). Its list of what goes
    /// first must follow `poll_transmit`'s.
    pub(super) fn poll_train(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let due = self.hs_due
            || self.remote_nonce == 0
            || self.rails.is_some()
            || self.credit_probe_due
            || (self.probe_to_answer && self.rx.any)
            || self.recovery.stall_probe_due
            || self.recovery.tail_ask_due
            || !self.tx.retx.is_empty()
            || self.tx.pkts_in_flight == 0;
        if due {
            return None;
        }
        let window = self.cc.window();
        self.poll_new_data(ctx, now, buf, window, true)
    }

    /// The next new DATA packet, if window, credit, send span, path room and
    /// pacing let it go now (else the pacing timer is armed, or nothing);
    /// with `train`, only one that continues the flowlet under way (see
    /// `poll_train`).
    fn poll_new_data(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        buf: &mut [u8],
        window: u64,
        train: bool,
    ) -> Option<Transmit> {
        if self.tx.next_send == self.tx.next_psn {
            return None;
        }
        let len = self.tx.slot(self.tx.next_send).len as u64;
        let window_ok = self.tx.pkts_in_flight == 0 || self.tx.bytes_in_flight + len <= window;
        let credit_ok = self.credit_ok();
        let span_ok = self.tx.next_send.wrapping_sub(self.tx.una) < WINDOW;
        // Every usable path at its in-flight cap: wait for an ack.
        let path_ok = self.tx.pkts_in_flight == 0 || self.paths.has_room(now, window);
        if !(window_ok && credit_ok && span_ok && path_ok) {
            // (A train's refusal is counted by the full poll that follows.)
            if !window_ok && !train {
                ctx.stats.window_limited += 1;
            }
            return None;
        }
        if let Some(t) = self.paced_until(now, ctx.p.max_payload as u64) {
            self.timers.set(Timer::Pacing, t);
            return None;
        }
        // (Its refill at `now` done, `paced_until` answers the same again.)
        let cont = if train {
            Some(self.paths.continue_flowlet(now)?)
        } else {
            None
        };
        self.timers.stop(Timer::Pacing);
        let psn = self.tx.next_send;
        self.tx.next_send = psn.wrapping_add(1);
        let flowlet = self.flowlet_packets(ctx.p);
        let floor = self.flowlet_floor(ctx.p);
        let more = self.has_more();
        // Packets queued behind this one (`next_send` already moved past it).
        let tail = self.tx.next_psn.wrapping_sub(self.tx.next_send);
        let small = Self::small_flowlet(ctx.p, len, tail);
        let idle = self.tx.pkts_in_flight == 0;
        let (path, probe) = match cont {
            Some(path) => (path, false),
            None => self
                .paths
                .pick_flowlet(now, flowlet, floor, small, more, tail, idle),
        };
        let mut fl = if probe || self.credit_stalls() {
            flags::ACK_NOW
        } else {
            0
        };
        if more || self.backlog {
            fl |= flags::MORE;
        }
        let t = self.send_data(ctx, now, psn, path, fl, buf);
        if !probe && (flowlet > 1 || small > 1) {
            let seq = self.paths.paths[usize::from(path)].next_seq - 1;
            self.paths.on_flowlet_sent(path, seq, now);
        }
        Some(t)
    }

    /// A pure ACK (header, SACK extension). One answering a PROBE carries
    /// ACK_NOW: the prober learns that it reflects all we had received when
    /// its probe arrived (its stall-or-loss question, `Peer::on_rto_timer`).
    fn pure_ack(&mut self, ctx: &mut Ctx<'_>, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let path = self.ack_path(ctx.p, now);
        let mut h = self.header(ctx, PacketType::Ack, path);
        if self.probe_to_answer {
            self.probe_to_answer = false;
            h.flags = flags::ACK_NOW;
            h.psn = self.rx_probe_no;
        }
        let ack = self.take_ack(now, true, ctx.credit, ctx.p.credit_budget);
        let ext = buf
            .get_mut(ctx.p.head..ctx.p.head + MAX_SACK_EXT_BYTES)
            .map_or(0, |b| self.rx.write_ext(b));
        h.payload_len = ext as u16;
        ctx.stats.tx_acks += 1;
        self.finish(ctx, h, buf, ack)
    }

    pub(super) fn finish(
        &mut self,
        ctx: &mut Ctx<'_>,
        mut h: Repr,
        buf: &mut [u8],
        ack: Option<AckRepr>,
    ) -> Option<Transmit> {
        h.ack = ack;
        h.flags |= ctx.p.mac_flag;
        let (dst, path) = self.route(ctx.p, h.path);
        h.path = path;
        if h.emit(buf).is_err() {
            return None;
        }
        let len = h.buffer_len();
        ctx.stats.tx_packets += 1;
        ctx.stats.tx_bytes += len as u64;
        Some(Transmit {
            dst,
            path: h.path,
            len,
            body: None,
        })
    }

    pub(super) fn send_data(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        psn: u32,
        path: u8,
        fl: u8,
        buf: &mut [u8],
    ) -> Transmit {
        let mut h = self.header(ctx, PacketType::Data, path);
        let (dst, wire_path) = self.route(ctx.p, path);
        h.flags = fl;
        if self.tx.slot(psn).body.ack_at_once && self.tx.next_send == self.tx.next_psn {
            // The last queued piece of a transfer sent from the application's
            // buffer that asked for it (rendezvous data, an RMA write): that
            // transfer completes on this ack and no reply will carry it, so it
            // must not wait for the receiver's delayed-ack timer.
            h.flags |= flags::ACK_NOW;
        }
        h.psn = psn;
        h.psn_floor = self.tx.una;
        self.note_answer(ctx.p, now);
        h.ack = self.take_ack(now, false, ctx.credit, ctx.p.credit_budget);
        let idle = self.tx.pkts_in_flight == 0;
        if idle {
            // Rate samples start from now after an idle period (the
            // bandwidth sample from the first ack back).
            self.tx.delivered_at = now;
            self.bw_from = Instant::ZERO;
        }
        let (delivered, delivered_at) = (self.tx.delivered, self.tx.delivered_at);
        let app_limited = self.tx.app_limited != 0;
        let p = &mut self.paths.paths[usize::from(path)];
        let pseq = p.next_seq;
        p.next_seq += 1;
        let good = p.health == Health::Good;
        self.paths.push_outstanding(path, psn, pseq);
        if !good {
            // A suspect path carries one packet (then it is not usable).
            self.paths.touch();
        }
        let slot = self.tx.slot_mut(psn);
        slot.state = SlotState::InFlight;
        slot.sent = now;
        slot.path = path;
        slot.pseq = pseq;
        if slot.sends == 0 {
            slot.first_sent = now;
            slot.first_path = (path, pseq);
        }
        slot.sends += 1;
        slot.delivered = delivered;
        slot.delivered_at = delivered_at;
        slot.app_limited = app_limited;
        // A resend asks for the usual ack: it repairs a loss, and the
        // loss timers of its copy wait for no lazy hold.
        let lazy = slot.lazy && slot.sends == 1;
        if lazy {
            h.flags |= flags::LAZY;
        }
        let len = slot.len;
        self.paths.paths[usize::from(path)].on_sent(len as u64, slot.sends > 1);
        h.payload_len = len as u16;
        // `buf` holds at least max_datagram bytes and len <= max_payload. Only
        // the head is copied here; a deferred body is appended by the caller.
        let head = len - slot.body.len;
        let body = (slot.body.len > 0).then_some(crate::dgram::Body {
            peer: self.id,
            token: slot.token,
            key: slot.body.key,
            len: slot.body.len,
        });
        let at = ctx.p.head;
        let total = at + len;
        h.flags |= ctx.p.mac_flag;
        h.path = wire_path;
        if h.emit(buf).is_ok() {
            if let Some(dst) = buf.get_mut(at..at + head) {
                dst.copy_from_slice(slot.head_bytes());
            }
        }
        if idle {
            self.recovery.rto_base = now;
            // Unless the receiver acknowledged something within the last
            // few ms, how many other senders just went busy with us is
            // unknown: see `Recovery::first_flight`.
            self.recovery.first_flight = now.saturating_since(self.tx.last_progress).as_nanos()
                > u128::from(FIRST_FLIGHT_QUIET_NS);
        }
        self.last_data_sent = now;
        self.last_data_lazy = lazy;
        self.tx.bytes_in_flight += len as u64;
        self.tx.pkts_in_flight += 1;
        self.pacing_tokens -= len as i64;
        self.cc.on_sent(now, len as u64);
        ctx.stats.tx_packets += 1;
        ctx.stats.tx_data += 1;
        ctx.stats.tx_bytes += total as u64;
        if let Some(c) = ctx.stats.path_sent.get_mut(usize::from(path)) {
            *c += 1;
        }
        // The RTO, tail-probe and unreachable timers follow at the end of
        // this peer's burst (`timers_stale`), not per packet.
        self.timers_stale = true;
        Transmit {
            dst,
            path: wire_path,
            len: at + head,
            body,
        }
    }
}
