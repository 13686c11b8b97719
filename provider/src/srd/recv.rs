//! The receive path of the SRD core: parsing, the session check (see
//! `session.rs`), acks, the receive window and receiver credits.

use core::net::SocketAddr;

use super::peer::{Params, Peer};
use super::rx::Arrival;
use super::timer::Timer;
use super::Srd;
use crate::dgram::PeerId;
use crate::time::Instant;
use crate::wire::srd::{
    flags, Packet, PacketType, Repr, CREDIT_UNLIMITED, FLAGS_AT, HEADER_LEN, PSN_AT,
};

/// A sender is active if it sent us new data this recently, ns.
const ACTIVE_NS: u64 = 1_000_000;

/// A sender that said it has more to send (flag MORE) counts as waiting for
/// this long without news from it, ns (waiting senders probe more often).
const WANT_NS: u64 = 50_000_000;

/// Scheduled mode: packets an admitted sender delivers before its slot goes
/// to the sender waiting longest (it queues again if it has more).
const QUANTUM_PACKETS: u32 = 8;

/// Scheduled mode: an admitted sender silent this long loses its slot, ns.
const RECLAIM_NS: u64 = 8_000_000;

/// The senders holding the budget's remainder (one packet above the fair
/// share each) move on by one this often, ns: one at a time, as a grant
/// taken back still has its packet in flight for a round trip.
const EXTRA_TURN_NS: u64 = 2_000_000;

/// Effective budget: a cut at most once per loss episode, ns; repairs are
/// also counted over windows this long (see `Budget::on_repair`).
const BUDGET_HOLD_NS: u64 = 4_000_000;
/// Effective budget: a window's repairs cut it only once they are at least
/// this many (random loss repairs in clusters: 4 repairs among 32 packets
/// came now and then at 1 % loss, `random_loss_does_not_cut_the_budget`)...
const REPAIRS_TO_CUT: u32 = 8;
/// ... and at least one in this many of the packets that arrived in the
/// window (repairs included; counted as `REPAIRS_TO_CUT` times this many
/// while fewer arrived).
const REPAIR_SHARE: u64 = 8;
/// Effective budget: grows back by one packet per this long without a cut, ns.
const BUDGET_GROW_NS: u64 = 20_000_000;
/// Effective budget: after a cut from n packets, growth stops below n for
/// this long (the loss showed where the buffer ends), ns.
const BUDGET_CEILING_NS: u64 = 2_000_000_000;
/// Effective budget: never cut below this many packets (nor the configured).
const BUDGET_MIN: u32 = 32;
/// Effective budget before any loss: one growth step above the configured
/// budget (an eighth) per this long while senders wait for credit, ns.
const BUDGET_ROOM_GROW_NS: u64 = 10_000_000;

/// The receiver's effective credit budget, packets: the configured one
/// (`rx_credit_packets`), cut by a quarter when retransmissions arrive
/// while several senders share it (the buffer in front of us is smaller
/// than budget minus BDP: every round trip would lose the excess, repaired
/// one tail probe at a time), and grown back by one packet per
/// `BUDGET_GROW_NS`. Only repairs that are a share of the traffic cut it
/// (`REPAIR_SHARE`): an overflowing buffer loses a share of every round
/// trip's flight, random loss (1 % of a lossy fabric, a rare drop) a
/// share too small to tell anything of the buffer. Cut on every repair,
/// such loss held the budget at its floor: 4 ranks on 4 hosts with 1 %
/// loss, IMB Alltoall 1 MiB took 28 ms where 22 ms without cuts.
/// The floor keeps what still looks like overflow from starving the senders.
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    /// Packets now.
    pub packets: u32,
    /// Last cut.
    cut_at: Option<Instant>,
    /// Last growth step (or cut).
    grown_at: Instant,
    /// Budget at the last cut: growth stays below it for `BUDGET_CEILING_NS`.
    cut_from: u32,
    /// Start of the current repair-counting window (its first repair).
    window_at: Option<Instant>,
    /// New packets received (all senders) before the window started.
    window_base: u64,
    /// Repairs received in the window.
    window_repairs: u32,
}

impl Budget {
    /// The configured budget, uncut.
    pub fn new(max: u32) -> Self {
        Budget {
            packets: max,
            cut_at: None,
            grown_at: Instant::ZERO,
            cut_from: max,
            window_at: None,
            window_base: 0,
            window_repairs: 0,
        }
    }

    /// A retransmission arrived, new to us, while several senders share the
    /// budget; `received` counts every new packet received so far (this one
    /// included). Cuts when the repairs of the current window are
    /// `REPAIRS_TO_CUT` or more and a `REPAIR_SHARE`th of what arrived;
    /// true if it cut.
    fn on_repair(&mut self, now: Instant, max: u32, received: u64) -> bool {
        let expired = self
            .window_at
            .is_none_or(|t| now.saturating_since(t).as_nanos() >= u128::from(BUDGET_HOLD_NS));
        if expired {
            self.window_at = Some(now);
            // (Counted from just before this repair.)
            self.window_base = received.saturating_sub(1);
            self.window_repairs = 0;
        }
        self.window_repairs = self.window_repairs.saturating_add(1);
        let repairs = u64::from(self.window_repairs);
        let arrived = (received - self.window_base.min(received))
            .max(u64::from(REPAIRS_TO_CUT) * REPAIR_SHARE);
        if self.window_repairs < REPAIRS_TO_CUT || repairs * REPAIR_SHARE < arrived {
            return false;
        }
        if self
            .cut_at
            .is_some_and(|t| now.saturating_since(t).as_nanos() < u128::from(BUDGET_HOLD_NS))
        {
            return false;
        }
        self.cut_from = self.packets;
        self.packets = (self.packets - self.packets / 4).max(BUDGET_MIN.min(max));
        self.cut_at = Some(now);
        self.grown_at = now;
        true
    }

    /// Has a loss ever cut it (is it measured rather than configured)?
    pub fn was_cut(&self) -> bool {
        self.cut_at.is_some()
    }

    /// Grow above the configured budget `max`, up to `room` times it, by an
    /// eighth per `BUDGET_ROOM_GROW_NS`, while no loss has cut the budget
    /// yet and `busy` (two or more senders said lately that they have more
    /// to send, flag MORE); kept while not busy. Once a loss cut it, as `grow`
    /// (down to `max` at once: the loss found the buffer in front of us).
    /// A configured budget sized for a switch's buffer held senders back
    /// where nothing was lost but the receiver answered late (4 ranks on 2
    /// CPUs: IMB Alltoall 1 MiB across 4 hosts 10.4 ms, 7.7 with this).
    fn grow_or_room(&mut self, now: Instant, max: u32, room: u32, busy: bool) {
        if self.cut_at.is_some() || self.packets < max {
            return self.grow(now, max);
        }
        let top = max.saturating_mul(room.max(1));
        if busy
            && self.packets < top
            && now.saturating_since(self.grown_at).as_nanos() >= u128::from(BUDGET_ROOM_GROW_NS)
        {
            self.packets = (self.packets + (self.packets / 8).max(1)).min(top);
            self.grown_at = now;
        }
    }

    /// Grow back towards `max` (below the last cut's level for a while).
    fn grow(&mut self, now: Instant, max: u32) {
        let recent_cut = self
            .cut_at
            .is_some_and(|t| now.saturating_since(t).as_nanos() < u128::from(BUDGET_CEILING_NS));
        let max = if recent_cut {
            max.min(self.cut_from.saturating_sub(1))
        } else {
            max
        };
        if self.packets >= max {
            self.packets = self.packets.min(max.max(BUDGET_MIN));
            self.grown_at = now;
        } else if now.saturating_since(self.grown_at).as_nanos() >= u128::from(BUDGET_GROW_NS) {
            self.packets += 1;
            self.grown_at = now;
        }
    }
}

impl Peer {
    /// Receiver side: did this sender send us new data in the last `ACTIVE_NS`?
    pub(crate) fn rx_active(&self, now: Instant) -> bool {
        self.rx_last_data
            .is_some_and(|t| now.saturating_since(t).as_nanos() < u128::from(ACTIVE_NS))
    }

    /// Receiver side: does this sender wait to send more (flag MORE, recent)?
    pub(crate) fn rx_wanting(&self, now: Instant) -> bool {
        self.rx_more && now.saturating_since(self.rx_more_at).as_nanos() < u128::from(WANT_NS)
    }

    /// Receiver: how long to hold the ack of a flight end (DATA without
    /// MORE) that arrived from this peer at `now`: `ack_soon`, or, while our
    /// answers lately followed such flight ends (a ping-pong whose
    /// application answers in more than `ack_soon`), 1.5 times their
    /// smoothed delay, at most `ack_delay`, so that the answer carries the
    /// ack instead of following a pure ACK of its own (one send and one
    /// receive call more per message on each host; Intel MPI's PingPong
    /// answered 10-15 us after the data arrived). Only a flight end that
    /// finds nothing of ours in flight waits for an answer: in an exchange
    /// (both send, each waits for the acks of its own before sending
    /// again) our next DATA follows the peer's ack of ours, and counting it
    /// as an answer would lengthen the very hold that delays that ack.
    pub(super) fn reply_hold(&mut self, p: &Params, now: Instant) -> u64 {
        if p.ack_soon_ns == 0 {
            // Configured to acknowledge a flight end at once.
            return 0;
        }
        if self.rx_reply_from != Instant::ZERO {
            // The previous flight end went unanswered.
            self.rx_reply_ns /= 2;
        }
        if self.tx.pkts_in_flight > 0 {
            self.rx_reply_from = Instant::ZERO;
            return p.ack_soon_ns;
        }
        self.rx_reply_from = now;
        (self.rx_reply_ns.saturating_mul(3) / 2).clamp(p.ack_soon_ns, p.ack_delay_ns)
    }

    /// Receiver: DATA of ours leaves at `now` and carries the ack; if it
    /// answers a flight end, note how long the answer took (`reply_hold`).
    /// An answer later than `ack_delay` counts as none.
    pub(super) fn note_answer(&mut self, p: &Params, now: Instant) {
        if self.rx_reply_from == Instant::ZERO {
            return;
        }
        let took = now.saturating_since(self.rx_reply_from).as_nanos() as u64;
        self.rx_reply_from = Instant::ZERO;
        self.rx_reply_ns = if took > p.ack_delay_ns {
            self.rx_reply_ns / 2
        } else if self.rx_reply_ns == 0 {
            took
        } else {
            (7 * self.rx_reply_ns + took) / 8
        };
    }

    /// Receiver side: note the sender's MORE flag from a new DATA or a PROBE
    /// at `now`. Returns whether the sender yields its scheduled slot.
    fn rx_note_more(&mut self, more: bool, data: bool, now: Instant) -> bool {
        if more && !self.rx_wanting(now) {
            self.rx_wait_since = now;
        }
        self.rx_more = more;
        self.rx_more_at = now;
        if !(data && self.rx_admitted) {
            return false;
        }
        self.rx_admit_used += 1;
        self.rx_admit_at = now;
        if !more || self.rx_admit_used >= QUANTUM_PACKETS {
            self.rx_admitted = false;
            self.rx_wait_since = now;
            return true;
        }
        false
    }
}

impl Peer {
    /// What `deliver` does for a new DATA packet `psn` with MORE, without
    /// RETRANSMIT or ACK_NOW, once `deliver_next` found the rest done at
    /// this instant: the window, the counters and the sender's MORE. False
    /// (and nothing changed) unless the packet is new.
    fn rx_lean(&mut self, psn: u32, now: Instant) -> bool {
        if self.rx.on_packet(psn, now) != Arrival::New {
            return false;
        }
        self.reclaimed = false;
        self.trimmed = false;
        self.answer_no = psn;
        self.rx.count_new(false, true);
        self.rx_note_more(true, true, now);
        true
    }
}

/// Is `d` a datagram with the header `head` but for its PSN, which is
/// `psn`, and a floor (the same as in `head`, `floor`) not after it? The
/// test of `continuation` and `Srd::handle_train`.
///
/// Its piggybacked ack may be flagged a repeat where `head`'s was not: a
/// sender's burst carries the same ack in every packet, fresh in the first
/// and a repeat in the rest (`AckRepr::repeat`), and the continuation does
/// not apply an ack again anyway. Compared byte for byte, the second packet
/// of every reply in a ping-pong missed the continuation (a 4 KiB message's
/// 3 packets all took the full path: OpenMPI 5's ping-pong across 2 hosts
/// continued 32 of 6341 packets). Only with an ack present: a repeat flag
/// without one is malformed (`Repr::parse` refuses it), and the shortcut
/// must take nothing the full path would drop.
fn continues(head: &[u8; HEADER_LEN], psn: u32, floor: u32, d: &[u8]) -> bool {
    let Some(h) = d.get(..HEADER_LEN) else {
        return false;
    };
    let f = head[FLAGS_AT];
    let repeat = f & flags::ACK_PRESENT != 0 && h[FLAGS_AT] == f | flags::ACK_REPEAT;
    h[..FLAGS_AT] == head[..FLAGS_AT]
        && (h[FLAGS_AT] == f || repeat)
        && h[FLAGS_AT + 1..PSN_AT] == head[FLAGS_AT + 1..PSN_AT]
        && h[PSN_AT..PSN_AT + 4] == psn.to_be_bytes()
        && h[PSN_AT + 4..] == head[PSN_AT + 4..]
        && (floor.wrapping_sub(psn) as i32) <= 0
}

/// The latest DATA packet `handle_datagram` delivered, for `continuation`.
pub(crate) struct RxLast {
    /// When and from where it came.
    at: Instant,
    from: SocketAddr,
    /// Its peer.
    id: PeerId,
    /// Its header as received, and the datagram's length.
    head: [u8; HEADER_LEN],
    len: usize,
    /// Its header parsed.
    h: Repr,
}

impl Srd {
    /// Receiver credit per sender at `now` (incast defence): unlimited with
    /// one active sender; with several, `credit_budget` packets beyond their
    /// cumulative acks shared among them (at least one each). A sender is
    /// active if it sent us new data in the last `ACTIVE_NS`, or said it has
    /// more (flag MORE) in the last `WANT_NS`. When more
    /// senders want to send than the budget has packets, the share would
    /// overcommit the budget (1-packet floor each): the receiver schedules
    /// instead (`credit` 0 = scheduled mode), see `admit`.
    #[inline]
    pub(crate) fn update_credit(&mut self, now: Instant) {
        const REFRESH_NS: u64 = 50_000;
        // Decided fresh at most every `REFRESH_NS` unless the set of senders
        // changed: this runs for every packet sent and received.
        let fresh = self
            .credit_at
            .is_some_and(|t| now.as_nanos().saturating_sub(t.as_nanos()) < REFRESH_NS);
        if fresh && !self.recount {
            return;
        }
        self.recount_credit(now);
    }

    /// `update_credit`'s work when due.
    fn recount_credit(&mut self, now: Instant) {
        self.credit_at = Some(now);
        self.recount = false;
        let (mut active, mut demand, mut waiting) = (0u32, 0u32, 0u32);
        let peers = &mut self.peers;
        self.senders.retain(|&i| {
            let p = &mut peers[i as usize];
            let recent = p.rx_active(now);
            let wanting = p.rx_wanting(now);
            active += u32::from(recent);
            demand += u32::from(recent || wanting);
            waiting += u32::from(wanting);
            // Off the list only with nothing a credit decision looks at.
            p.rx_listed = recent || wanting || p.rx_admitted;
            if !p.rx_listed {
                p.rx_credit_extra = false;
            }
            p.rx_listed
        });
        self.budget
            .grow_or_room(now, self.p.credit_budget, self.p.credit_room, waiting >= 2);
        if demand > self.budget.packets {
            self.credit = 0;
            self.reclaim(now);
            self.admit(now);
            return;
        }
        if self.credit == 0 {
            // Leaving scheduled mode: the senders held at 0 learn their
            // share from an ack at once instead of their next credit probe.
            for &i in &self.senders {
                let p = &mut self.peers[i as usize];
                if !p.rx_admitted && p.rx_wanting(now) {
                    p.rx.ack_now = true;
                }
                p.rx_admitted = false;
            }
            self.activate_acking();
        }
        // The share counts every sender that still has data (MORE), not only
        // those heard in the last 1 ms: held to a packet or two with a
        // queue-long RTT, a sender is heard less often than that, and
        // undercounting overcommits the budget.
        let n = active.max(demand);
        self.credit = if n <= 1 {
            CREDIT_UNLIMITED
        } else {
            (self.budget.packets / n).clamp(1, u32::from(CREDIT_UNLIMITED) - 1) as u16
        };
        self.share_remainder(now, n);
    }

    /// The budget's remainder over `n` sharing senders goes, one packet
    /// each, to `budget % n` of them, in turns (`EXTRA_TURN_NS`):
    /// without it the total granted jumps from n to 2n packets as the budget
    /// grows past 2n (32 senders: 32 -> 64 packets into a 44-packet buffer,
    /// a burst of ~20 drops every time the budget grew back after a cut),
    /// and with it the budget finds the buffer's limit a packet at a time.
    /// Only once a loss has cut the budget: until then it is the configured
    /// guess, and the share rounded down errs on the safe side (64 cut to 48
    /// for 32 senders: 32 in flight, where 48 would overflow a 44-packet
    /// buffer a second time and turn double losses into RTOs).
    fn share_remainder(&mut self, now: Instant, n: u32) {
        let rem =
            if n > 1 && self.credit != 0 && self.budget.was_cut() && self.budget.packets / n > 0 {
                self.budget.packets % n
            } else {
                0
            };
        if now.saturating_since(self.extra_turn.1).as_nanos() >= u128::from(EXTRA_TURN_NS) {
            self.extra_turn = (self.extra_turn.0.wrapping_add(1), now);
        }
        let mut k = 0u32;
        for &i in &self.senders {
            let p = &mut self.peers[i as usize];
            // Counted as in `update_credit`'s demand.
            let sharing = p.rx_active(now) || p.rx_wanting(now);
            p.rx_credit_extra = sharing && rem > 0 && k.wrapping_add(self.extra_turn.0) % n < rem;
            k += u32::from(sharing);
        }
    }

    /// Scheduled mode: hand the budget's free slots (one packet each) to the
    /// senders that wait longest; each new grant leaves in a pure ACK at once.
    fn admit(&mut self, now: Instant) {
        // Only `senders` can be admitted or wanting.
        let (peers, senders) = (&mut self.peers, &self.senders);
        let mut n = senders
            .iter()
            .filter(|&&i| peers[i as usize].rx_admitted)
            .count() as u32;
        // The budget was cut: the latest admitted give their slots back
        // (their next ack says 0).
        while n > self.budget.packets {
            let last = senders
                .iter()
                .map(|&i| i as usize)
                .filter(|&i| peers[i].rx_admitted)
                .max_by_key(|&i| peers[i].rx_admit_at);
            let Some(p) = last.map(|i| &mut peers[i]) else {
                break;
            };
            p.rx_admitted = false;
            p.rx_wait_since = now;
            n -= 1;
        }
        while n < self.budget.packets {
            let next = senders
                .iter()
                .map(|&i| i as usize)
                .filter(|&i| {
                    let p = &peers[i];
                    !p.rx_admitted && p.rx_wanting(now) && p.rx.any
                })
                .min_by_key(|&i| peers[i].rx_wait_since);
            let Some(p) = next.map(|i| &mut peers[i]) else {
                break;
            };
            p.rx_admitted = true;
            p.rx_admit_at = now;
            p.rx_admit_used = 0;
            p.rx.ack_now = true;
            n += 1;
        }
        self.activate_acking();
    }

    /// Scheduled mode: take the slot back from an admitted sender that sent
    /// nothing for `RECLAIM_NS` (its grant or its data was lost, or it has
    /// nothing left); it queues again behind the others.
    fn reclaim(&mut self, now: Instant) {
        for &i in &self.senders {
            let p = &mut self.peers[i as usize];
            if p.rx_admitted
                && now.saturating_since(p.rx_admit_at).as_nanos() >= u128::from(RECLAIM_NS)
            {
                p.rx_admitted = false;
                p.rx_wait_since = now;
            }
        }
    }

    /// May the next DATA packet of peer `id` take `continuation`? Not when
    /// admitting its packets takes more than the session check: a job key
    /// (every packet's tag is verified) or rails (the rail heard is noted).
    fn continues(&self, id: PeerId) -> bool {
        self.p.rx_continuation
            && self
                .peers
                .get(id.0 as usize)
                .is_some_and(|p| p.keys.is_none() && p.rails.is_none())
    }

    /// The next segment of a coalesced (GRO) datagram, handled without
    /// parsing, admitting or applying its ack again: the DATA packet just
    /// delivered (`rx_last`) came at the same instant from the same address
    /// and this one is the same length with the same header but for its PSN,
    /// one more. The header was valid and admitted; but for the PSN, so is
    /// this one (the floor is checked against the new PSN). Its ack, applied
    /// again at the same instant, would change nothing (`on_ack` is
    /// idempotent then: what it frees is freed, what it learns is learnt).
    /// `None`: take the full path.
    fn continuation<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a [u8],
    ) -> Option<Option<(PeerId, &'a [u8])>> {
        let last = self.rx_last.as_ref()?;
        if last.at != now || last.from != from || last.len != data.len() {
            return None;
        }
        let psn = last.h.psn.wrapping_add(1);
        if !continues(&last.head, psn, last.h.psn_floor, data) {
            return None;
        }
        let mut h = last.h;
        h.psn = psn;
        let id = last.id;
        let pkt = Packet::new_checked(data).ok()?;
        self.stats.rx_continued += 1;
        let delivered = match self.deliver_next(now, id, &h, &pkt) {
            Some(d) => d,
            None => self.deliver(now, id, &h, &pkt, false),
        };
        match (&delivered, &mut self.rx_last) {
            (Some(_), Some(last)) => {
                last.h.psn = psn;
                last.head[PSN_AT..PSN_AT + 4].copy_from_slice(&psn.to_be_bytes());
            }
            _ => self.rx_last = None,
        }
        Some(delivered)
    }

    /// The segments of one coalesced datagram that follow the DATA packet
    /// just delivered (`rx_last`), in `data` (the rest of the datagram,
    /// segments of `seg` bytes, the last possibly shorter): each one the
    /// same length with the same header but for its PSN, one more each
    /// time, new to the receive window, is delivered to `f` with its payload.
    /// Stops at the first that is anything else, or that `continuation`
    /// would not take as the lean case of `deliver_next`: the caller hands
    /// that one to `handle_datagram`. Returns the bytes taken (whole segments).
    ///
    /// What `deliver_next` checks of the peer's state holds for the whole
    /// train once it held for its first segment: the segments share the
    /// instant and the header's flags, nothing but this loop and `f` runs in
    /// between (`f` cannot reach the SRD), and what a lean delivery changes
    /// (the window, the counters, MORE noted at this same instant) leaves
    /// those checks true. So a segment after the first costs the header
    /// comparison and the window's update: a 1 MiB stream at MTU 1500 took
    /// about 350 instructions per packet through `handle_datagram` here.
    /// The same packets leave and the same counters count as when each
    /// segment goes through `handle_datagram` (`engine_rx_continuation`).
    pub fn handle_train<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a [u8],
        seg: usize,
        f: &mut dyn FnMut(PeerId, &'a [u8]),
    ) -> usize {
        self.train = None;
        if self.next_sweep.is_some_and(|t| t <= now) {
            return 0;
        }
        let Some(last) = self.rx_last.as_ref() else {
            return 0;
        };
        let len = last.len;
        if last.at != now || last.from != from || len != seg || len < HEADER_LEN {
            return 0;
        }
        let id = last.id;
        let (mut psn, floor) = (last.h.psn, last.h.psn_floor);
        let head = last.head;
        let mut h = last.h;
        let mut taken = 0;
        let mut lean = false;
        // Where the payload sits in each segment (the same header, the same place).
        let mut body = (0, 0);
        while let Some(d) = data.get(taken..taken + len) {
            let next = psn.wrapping_add(1);
            if !continues(&head, next, floor, d) {
                break;
            }
            if !lean {
                // The first: every check of `deliver_next`.
                h.psn = next;
                let Ok(pkt) = Packet::new_checked(d) else {
                    break;
                };
                let Some(Some((_, payload))) = self.deliver_next(now, id, &h, &pkt) else {
                    // Not the lean case, or not new (it changed nothing):
                    // `handle_datagram` takes it.
                    break;
                };
                let at = payload.as_ptr() as usize - d.as_ptr() as usize;
                body = (at, at + payload.len());
                lean = true;
                self.stats.rx_packets += 1;
                self.stats.rx_continued += 1;
                psn = next;
                taken += len;
                f(id, payload);
                continue;
            }
            let Some(peer) = self.peers.get_mut(id.0 as usize) else {
                break;
            };
            if !peer.rx_lean(next, now) {
                break;
            }
            self.stats.rx_delivered += 1;
            self.stats.rx_packets += 1;
            self.stats.rx_continued += 1;
            self.stats.rx_train += 1;
            psn = next;
            taken += len;
            f(id, &d[body.0..body.1]);
        }
        if taken > 0 {
            if let Some(last) = self.rx_last.as_mut() {
                last.h.psn = psn;
                last.head[PSN_AT..PSN_AT + 4].copy_from_slice(&psn.to_be_bytes());
            }
        }
        taken
    }

    /// `deliver` for the next segment of a coalesced datagram (`continuation`)
    /// in the common case, where most of it would find done what the segment
    /// before did at this same instant: the peer active and listed as a
    /// sender, the sweep armed, the credit counted, the ack timer set no
    /// later than this segment would set it (same flags, same instant). What
    /// is left is the receive window and the counters. Taken only for a
    /// segment with MORE (a flight end's ack hold is stateful, see
    /// `reply_hold`), without RETRANSMIT or ACK_NOW, from a sender not
    /// admitted by the scheduler (its quantum counts packets); `None`
    /// otherwise, and for anything but a new packet: then the caller takes
    /// `deliver`, which handles duplicates and the rest. The same packets
    /// leave either way (`engine_rx_continuation` compares them byte for
    /// byte, and the counters). Receiving a 1 MiB stream at MTU 1500 it
    /// took the engine's input from 1261 to 1178 instructions per packet
    /// (callgrind).
    fn deliver_next<'a>(
        &mut self,
        now: Instant,
        id: PeerId,
        h: &Repr,
        pkt: &Packet<&'a [u8]>,
    ) -> Option<Option<(PeerId, &'a [u8])>> {
        let lean = flags::MORE;
        if h.ty != PacketType::Data
            || h.flags & (flags::MORE | flags::RETRANSMIT | flags::ACK_NOW) != lean
            || self.sweep_wanted
            || !self.sweep_soon
            || !self.listed(id.0 as usize)
        {
            return None;
        }
        if self.recount {
            // The segment before made its sender active again (a
            // ping-pong's every message): its fair share, counted now
            // rather than before the next ack leaves, is what this segment
            // would find counted. Refused while pending, every segment
            // after such a first one took the full path.
            self.update_credit(now);
        }
        let peer = self.peers.get_mut(id.0 as usize)?;
        let held = peer
            .timers
            .get(Timer::Ack)
            .is_some_and(|t| t <= now + core::time::Duration::from_nanos(self.p.ack_delay_ns));
        if peer.rx_admitted
            || !peer.rx_listed
            || !held
            || peer.rx_last_data != Some(now)
            || !peer.rx_wanting(now)
            || !peer.rx.floor_passed(h.psn_floor)
        {
            return None;
        }
        if !peer.rx_lean(h.psn, now) {
            return None;
        }
        self.stats.rx_delivered += 1;
        Some(Some((id, pkt.payload_ref())))
    }

    /// A UDP datagram arrived from `from` (source IP and port). Returns the
    /// payload to deliver, if this packet carries new data.
    ///
    /// The receive pipeline in the order every packet passes it: parse, MAC,
    /// handshake types and admission here, each step returning early; then
    /// `deliver` (ACK processing, data delivery), which runs only for an
    /// admitted packet. The next segment of a coalesced datagram skips the
    /// first part and the ack (`continuation`): in a 64 KiB flowlet received
    /// at once, 43 of 44 packets repeat the first one's header but for the
    /// PSN.
    pub fn handle_datagram<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a [u8],
    ) -> Option<(PeerId, &'a [u8])> {
        self.train = None;
        self.stats.rx_packets += 1;
        if self.next_sweep.is_some_and(|t| t <= now) {
            self.sweep(now);
            self.rx_last = None;
        }
        if let Some(delivered) = self.continuation(now, from, data) {
            return delivered;
        }
        self.rx_last = None;
        let parsed = Packet::new_checked(data).and_then(|p| Repr::parse(&p).map(|r| (p, r)));
        let Ok((pkt, h)) = parsed else {
            self.stats.rx_malformed += 1;
            return None;
        };
        if h.ty == PacketType::Data && usize::from(h.payload_len) > self.p.max_payload {
            self.stats.rx_malformed += 1;
            return None;
        }
        if !self.mac_expected(&h) {
            return None;
        }
        let addr = SocketAddr::new(from.ip(), h.src_port);
        if matches!(
            h.ty,
            PacketType::Hello | PacketType::Challenge | PacketType::Reset
        ) && !self.handshake_tag_ok(&pkt)
        {
            return None;
        }
        match h.ty {
            PacketType::Hello => {
                self.on_hello(now, addr, &h, pkt.payload_ref());
                return None;
            }
            PacketType::Challenge => {
                self.on_challenge(addr, &h, pkt.payload_ref());
                return None;
            }
            PacketType::Reset => {
                self.on_reset(now, addr, &h);
                return None;
            }
            PacketType::Data | PacketType::Ack | PacketType::Probe | PacketType::Rails => {}
        }
        // Nothing below runs for a packet without a valid session token.
        let id = self.admit_packet(now, addr, &h, &pkt)?;
        let delivered = self.deliver(now, id, &h, &pkt, true);
        if delivered.is_some() && self.continues(id) {
            let mut head = [0u8; HEADER_LEN];
            head.copy_from_slice(&data[..HEADER_LEN]);
            self.rx_last = Some(RxLast {
                at: now,
                from,
                id,
                head,
                len: data.len(),
                h,
            });
        }
        delivered
    }

    /// The rest of `handle_datagram` for an admitted packet `h` of peer `id`:
    /// activity, credit, the ack it carries (unless not `apply_ack`: an
    /// identical one was just applied, see `continuation`), and what its
    /// type asks.
    fn deliver<'a>(
        &mut self,
        now: Instant,
        id: PeerId,
        h: &Repr,
        pkt: &Packet<&'a [u8]>,
        apply_ack: bool,
    ) -> Option<(PeerId, &'a [u8])> {
        if h.ty == PacketType::Rails {
            self.on_rails(now, id, h, pkt.payload_ref());
            return None;
        }
        self.activate(id.0 as usize);
        self.sweep_wanted = true;
        self.arm_sweep(now);
        if h.ty == PacketType::Data || h.ty == PacketType::Probe {
            self.update_credit(now);
            // Listed after the credit decision, which would take it off
            // again before this packet makes it active or wanting.
            self.list_sender(id.0 as usize);
        }
        let (peer, mut ctx) = self.split(id.0 as usize);
        peer.reclaimed = false;
        peer.trimmed = false;
        peer.paths.ensure();
        peer.last_active = now;
        // An ACK flagged ACK_NOW answers a PROBE of ours (see
        // `Peer::on_rto_timer`).
        peer.ack_answers_probe = h.ty == PacketType::Ack && h.flags & flags::ACK_NOW != 0;
        peer.answer_no = h.psn;
        if peer.recovery.stall_probe_at.is_some() && peer.answers(peer.recovery.stall_probe_no) {
            peer.recovery.last_answer = now;
        }
        if let Some(ack) = h.ack.as_ref().filter(|_| apply_ack) {
            let ext = if h.ty == PacketType::Ack {
                pkt.payload_ref()
            } else {
                &[]
            };
            peer.on_ack(&mut ctx, now, ack, ext);
        }
        match h.ty {
            PacketType::Reset
            | PacketType::Hello
            | PacketType::Challenge
            | PacketType::Ack
            | PacketType::Rails => None,
            PacketType::Probe => {
                peer.rx.ack_now = true;
                peer.probe_to_answer = true;
                peer.rx_probe_no = h.psn;
                if h.flags & flags::MORE != 0 && peer.rx.any {
                    // A sender held at 0 credit asks to be scheduled (or
                    // its grant was lost: the ack repeats it).
                    let fresh = !peer.rx_wanting(now);
                    peer.rx_note_more(true, false, now);
                    if fresh {
                        *ctx.recount = true;
                    }
                }
                None
            }
            PacketType::Data => {
                // `Repr::parse` refused a floor after the PSN, before the
                // session check and before the ack above was applied.
                peer.rx.advance_floor(h.psn_floor);
                match peer.rx.on_packet(h.psn, now) {
                    Arrival::New => {
                        let was_active = peer.rx_active(now);
                        peer.rx_last_data = Some(now);
                        // A LAZY flight end does not end the `ack_every`
                        // rule: no completion waits on its ack, but its
                        // sender's window may (a burst of small injects,
                        // each its own flight end as it leaves, stalled for
                        // the lazy hold once per window).
                        let more = h.flags & (flags::MORE | flags::LAZY) != 0;
                        peer.rx.count_new(h.flags & flags::ACK_NOW != 0, more);
                        // The last packet its sender had queued: it may wait
                        // on this ack to complete a send, so hold it only
                        // `ack_soon` (a prompt reply still carries it). Not
                        // while so many senders share our credit that each
                        // is held to fewer than `ack_every` packets: acks
                        // then carry an incast's grants on their schedule,
                        // and hastening them cost the 64-sender simulation
                        // (`sim_incast_sched`) retransmission timeouts. A
                        // few senders at once (an MPI exchange among 4
                        // ranks) keep it.
                        // LAZY: no completion waits on it (an inject), so
                        // the ack may wait longer still, for the next
                        // message to this peer to carry it: in a
                        // collective's exchanges that message comes within
                        // a step or two, and a pure ACK costs both hosts a
                        // system call (7 a rank per 4 KiB Alltoall among 4
                        // ranks on 2 CPUs, a third of its time). Not while
                        // the sender's credit still ramps (a young peer is
                        // granted one packet more per packet received):
                        // its next packets wait for this ack's grant.
                        let light = ctx.credit >= ctx.p.ack_every.min(u32::from(u16::MAX)) as u16;
                        let ramped = peer.rx.received >= ctx.p.credit_budget;
                        let hold = if h.flags & flags::LAZY != 0 && light && ramped {
                            ctx.p.ack_lazy_ns
                        } else if h.flags & flags::MORE == 0 && light {
                            peer.reply_hold(ctx.p, now)
                        } else {
                            ctx.p.ack_delay_ns
                        };
                        let at = now + core::time::Duration::from_nanos(hold);
                        if peer.timers.get(Timer::Ack).is_none_or(|t| t > at) {
                            peer.timers.set(Timer::Ack, at);
                        }
                        ctx.stats.rx_delivered += 1;
                        let was_wanting = peer.rx_wanting(now);
                        let more = h.flags & flags::MORE != 0;
                        let yielded = peer.rx_note_more(more, true, now);
                        if !was_active || (more && !was_wanting) {
                            // The set of active senders grew: recount the
                            // fair share before the next ack leaves.
                            *ctx.recount = true;
                        }
                        let shared = ctx.credit != CREDIT_UNLIMITED;
                        if yielded && ctx.credit == 0 {
                            self.admit(now);
                        }
                        if shared && h.flags & flags::RETRANSMIT != 0 {
                            let received = self.stats.rx_delivered;
                            if self.budget.on_repair(now, self.p.credit_budget, received) {
                                self.stats.budget_cuts += 1;
                                self.stats.budget_after_cut = u64::from(self.budget.packets);
                            }
                        }
                        Some((id, pkt.payload_ref()))
                    }
                    Arrival::Duplicate => {
                        ctx.stats.rx_duplicates += 1;
                        peer.rx.ack_now = true;
                        None
                    }
                    Arrival::OutOfWindow => {
                        ctx.stats.rx_out_of_window += 1;
                        peer.rx.ack_now = true;
                        None
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    fn ms(t: u64) -> Instant {
        Instant::from_nanos(t * 1_000_000)
    }

    #[test]
    fn grows_above_the_configured_budget_until_a_loss() {
        let mut b = Budget::new(64);
        // Senders waiting, nothing lost: an eighth per 10 ms, up to 4 x.
        b.grow_or_room(ms(10), 64, 4, true);
        assert_eq!(b.packets, 72);
        b.grow_or_room(ms(15), 64, 4, true);
        assert_eq!(b.packets, 72, "one step per 10 ms");
        for k in 2..40 {
            b.grow_or_room(ms(10 * k), 64, 4, true);
        }
        assert_eq!(b.packets, 256);
        // Nobody waiting: kept.
        b.grow_or_room(ms(500), 64, 4, false);
        assert_eq!(b.packets, 256);
        // Overflow (8 repairs among 36 packets) cuts it, and it is back at
        // the configured budget at once.
        for k in 1..=8u64 {
            b.on_repair(ms(501), 64, 1000 + 5 * k);
        }
        assert_eq!(b.packets, 192);
        b.grow_or_room(ms(502), 64, 4, true);
        assert_eq!(b.packets, 64);
        for k in 1..20 {
            b.grow_or_room(ms(502 + 10 * k), 64, 4, true);
        }
        assert!(b.packets <= 64, "after a loss, never above: {}", b.packets);
        // Room 1: never above the configured budget.
        let mut c = Budget::new(64);
        for k in 1..10 {
            c.grow_or_room(ms(10 * k), 64, 1, true);
        }
        assert_eq!(c.packets, 64);
    }

    /// Repairs cut the budget when they are 8 or more within a window and
    /// an eighth of the packets that arrived meanwhile: not fewer, not
    /// spread over the traffic, not across windows.
    #[test]
    fn cuts_only_on_a_share_of_repairs() {
        // 7 repairs among the first packets of a window: no cut.
        let mut b = Budget::new(64);
        for k in 1..=7u64 {
            b.on_repair(ms(1), 64, k);
        }
        assert_eq!(b.packets, 64);
        // The 8th within 64 packets: cut by a quarter.
        b.on_repair(ms(2), 64, 60);
        assert_eq!(b.packets, 48);
        // 8 repairs spread over 800 packets (1 %) in one window: no cut.
        let mut c = Budget::new(64);
        for k in 1..=8u64 {
            c.on_repair(ms(1), 64, 100 * k);
        }
        assert_eq!(c.packets, 64);
        // 4 repairs in each of two windows (4 ms apart): no cut.
        let mut d = Budget::new(64);
        for k in 1..=4u64 {
            d.on_repair(ms(1), 64, k);
        }
        for k in 1..=4u64 {
            d.on_repair(ms(6), 64, 10 + k);
        }
        assert_eq!(d.packets, 64);
    }
}

#[cfg(test)]
mod continues_tests {
    use super::*;

    /// A DATA header with `fl` flags and PSN `psn`, the rest fixed.
    fn header(fl: u8, psn: u32) -> [u8; HEADER_LEN] {
        let mut h = [7u8; HEADER_LEN];
        h[FLAGS_AT] = fl;
        h[PSN_AT..PSN_AT + 4].copy_from_slice(&psn.to_be_bytes());
        h
    }

    #[test]
    fn a_repeat_of_the_same_ack_continues_and_nothing_else_does() {
        let ack = flags::ACK_PRESENT | flags::MORE;
        let head = header(ack, 10);
        let floor = 10;
        // The next PSN, same flags or the ack flagged a repeat: continues.
        assert!(continues(&head, 11, floor, &header(ack, 11)));
        assert!(continues(
            &head,
            11,
            floor,
            &header(ack | flags::ACK_REPEAT, 11)
        ));
        // Any other flag changed, or another PSN: does not.
        assert!(!continues(
            &head,
            11,
            floor,
            &header(ack | flags::ACK_NOW, 11)
        ));
        assert!(!continues(
            &head,
            11,
            floor,
            &header(flags::ACK_PRESENT, 11)
        ));
        assert!(!continues(&head, 11, floor, &header(ack, 12)));
        // A repeat flag with no ack present is malformed: the full path
        // drops it, so the shortcut must not take it.
        let bare = header(flags::MORE, 10);
        assert!(continues(&bare, 11, floor, &header(flags::MORE, 11)));
        assert!(!continues(
            &bare,
            11,
            floor,
            &header(flags::MORE | flags::ACK_REPEAT, 11)
        ));
        // A byte elsewhere in the header changed: does not.
        let mut other = header(ack, 11);
        other[HEADER_LEN - 1] ^= 1;
        assert!(!continues(&head, 11, floor, &other));
    }
}
