//! Send side of one peer: the ring of datagram slots indexed by PSN
//! (queued, in flight, lost-awaiting-retransmission), and the retransmit queue.

use std::collections::VecDeque;

use crate::dgram::Deferred;
use crate::time::Instant;

/// Send window in packets: PSNs `una..una+WINDOW` may be in use. Equal to the
/// receiver's window so nothing sent can fall outside it.
pub const WINDOW: u32 = super::rx::WINDOW;

/// Lifecycle of one slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Free (never used, acked, or failed).
    Free,
    /// Queued, never sent.
    Queued,
    /// On the wire, counted in `bytes_in_flight`.
    InFlight,
    /// Declared lost, waiting in `retx` for a retransmission.
    Lost,
}

/// Longest head kept in the slot itself, bytes: the message layer's
/// headers (40 bytes, 56 with an RMA sub-header) in front of a deferred
/// body, or a whole small datagram.
pub const HEAD_INLINE: usize = 56;

/// One datagram the sender owns until it is acked or failed.
pub struct Slot {
    /// State.
    pub state: SlotState,
    /// The PSN this slot holds (or last held): the ring is smaller than the
    /// PSN window, so a lookup checks it (see `Tx::slot`).
    psn: u32,
    /// The caller's token.
    pub token: u64,
    /// The head (the payload but a deferred body) when it fits
    /// `HEAD_INLINE` bytes, `buf` then empty. Rendezvous data at MTU 1500
    /// is a 40-byte head per packet: kept in a pool buffer of its own,
    /// writing it at queueing and reading it at sending missed the cache
    /// twice a packet (137 ns of the sender's ~1.8 us in a profile).
    pub head: [u8; HEAD_INLINE],
    /// Payload buffer (from the pool, full capacity; the payload is
    /// `buf[..len]`), for heads longer than `HEAD_INLINE`; else empty.
    pub buf: Vec<u8>,
    /// Payload length, bytes (the head plus the deferred body).
    pub len: usize,
    /// The end of the payload that is not in `buf`: the layer above supplies
    /// it at each transmission (`Transmit::body`; length 0 = all in `buf`),
    /// and whether its last piece asks for an ack at once.
    pub body: Deferred,
    /// When the latest transmission left.
    pub sent: Instant,
    /// Path of the latest transmission.
    pub path: u8,
    /// Path sequence number of the latest transmission.
    pub pseq: u64,
    /// When the first transmission left.
    pub first_sent: Instant,
    /// Path and path sequence number of the first transmission.
    pub first_path: (u8, u64),
    /// Transmissions so far.
    pub sends: u32,
    /// No completion waits on its ack (`Datagrams::set_lazy`): its first
    /// transmission is flagged LAZY and the receiver may hold the ack up
    /// to `Params::ack_lazy_ns`, which the loss timers then allow for.
    pub lazy: bool,
    /// Sent while the sender was application-limited (`Tx::app_limited`):
    /// its rate sample measures the application, not the path.
    pub app_limited: bool,
    /// Peer's `delivered` bytes when this was sent (rate sampling).
    pub delivered: u64,
    /// Time of that `delivered` value.
    pub delivered_at: Instant,
}

impl Slot {
    /// The head: `len - body.len` bytes, inline or in `buf`.
    pub fn head_bytes(&self) -> &[u8] {
        let n = self.len - self.body.len;
        if self.buf.is_empty() {
            &self.head[..n.min(HEAD_INLINE)]
        } else {
            &self.buf[..n]
        }
    }
}

/// What a slot not yet allocated reads as.
static EMPTY: Slot = Slot::empty();

impl Slot {
    const fn empty() -> Self {
        Slot {
            state: SlotState::Free,
            psn: 0,
            token: 0,
            head: [0; HEAD_INLINE],
            buf: Vec::new(),
            len: 0,
            body: Deferred {
                key: 0,
                len: 0,
                ack_at_once: false,
            },
            sent: Instant::ZERO,
            path: 0,
            pseq: 0,
            first_sent: Instant::ZERO,
            first_path: (0, 0),
            sends: 0,
            lazy: false,
            app_limited: false,
            delivered: 0,
            delivered_at: Instant::ZERO,
        }
    }
}

/// The sender state of one peer.
pub struct Tx {
    /// Lowest PSN not yet acknowledged (or failed).
    pub una: u32,
    /// Next PSN never yet sent.
    pub next_send: u32,
    /// Next PSN to assign to a queued datagram.
    pub next_psn: u32,
    /// The ring: slot of `psn` at `psn & (len - 1)`; empty or a power of
    /// two long, at least the PSNs in use (`una..next_psn`). It grows with
    /// the flight (`slot_mut`) and is given back when the peer idles
    /// (`shrink`): sized to the window instead (4096 slots of 184 bytes),
    /// every peer that had ever been sent 6 MB held 754 KB until reclaimed,
    /// 772 MB per rank after an all-to-all of 6 MB among 1024 ranks.
    slots: Vec<Slot>,
    /// PSNs declared lost, in detection order (stale entries skipped).
    pub retx: VecDeque<u32>,
    /// Bytes on the wire not yet acked or declared lost.
    pub bytes_in_flight: u64,
    /// Packets on the wire not yet acked or declared lost.
    pub pkts_in_flight: u32,
    /// Total bytes acknowledged (delivery-rate sampling).
    pub delivered: u64,
    /// When `delivered` last grew.
    pub delivered_at: Instant,
    /// Application-limited until `delivered` passes this mark (0 = not):
    /// set when new data is queued behind nothing with room in the window,
    /// so that the packets sent until everything then in flight is acked
    /// give rate samples of the application's pace (see `Peer::note_queued`).
    pub app_limited: u64,
    /// Last acked-data progress, or when the peer went from idle to busy.
    pub last_progress: Instant,
    /// Went busy in `send` (no clock there): `last_progress` is stamped at the next poll.
    pub idle_until_poll: bool,
    /// Receiver credit: most packets we may have in flight (`None` = unlimited).
    /// Before the first ack it is the unscheduled allowance.
    pub credit: Option<u32>,
    /// A credit was received from the peer (this session).
    pub credit_heard: bool,
}

impl Tx {
    /// An empty send state starting at PSN 0, allowed `unscheduled` packets
    /// in flight until the peer's first credit.
    pub fn new(unscheduled: u32) -> Self {
        Tx {
            una: 0,
            next_send: 0,
            next_psn: 0,
            // Grown on first use, so an idle (or bogus) peer costs little.
            slots: Vec::new(),
            retx: VecDeque::new(),
            bytes_in_flight: 0,
            pkts_in_flight: 0,
            delivered: 0,
            delivered_at: Instant::ZERO,
            app_limited: 0,
            last_progress: Instant::ZERO,
            idle_until_poll: false,
            credit: Some(unscheduled),
            credit_heard: false,
        }
    }

    /// Index of `psn` in the ring (not empty).
    fn index(&self, psn: u32) -> usize {
        psn as usize & (self.slots.len() - 1)
    }

    /// Slot of `psn`: a free one unless `psn` is queued or outstanding
    /// (a PSN out of use, e.g. a stale retransmit entry, never reads the
    /// slot of another that shares its place in the ring).
    pub fn slot(&self, psn: u32) -> &Slot {
        if self.slots.is_empty() {
            return &EMPTY;
        }
        let s = &self.slots[self.index(psn)];
        if s.psn == psn {
            s
        } else {
            &EMPTY
        }
    }

    /// Mutable slot of `psn`, which is in use (queued or outstanding: its
    /// slot was taken by `slot_new`).
    pub fn slot_mut(&mut self, psn: u32) -> &mut Slot {
        let i = self.index(psn);
        let s = &mut self.slots[i];
        debug_assert!(s.psn == psn, "psn {psn} is not in use (slot of {})", s.psn);
        s
    }

    /// The free slot for `next_psn`, about to be queued: the ring grows to
    /// hold it.
    pub fn slot_new(&mut self) -> &mut Slot {
        let psn = self.next_psn;
        let span = psn.wrapping_sub(self.una).min(WINDOW - 1) as usize + 1;
        if span > self.slots.len() {
            self.grow(span);
        }
        let i = self.index(psn);
        let s = &mut self.slots[i];
        debug_assert!(
            s.state == SlotState::Free,
            "psn {psn}: slot of {} in use",
            s.psn
        );
        s.psn = psn;
        s
    }

    /// Queue the datagram for `next_psn`: `len` payload bytes, its head in
    /// `buf` (a pool buffer) or, `buf` empty, in the slot's inline head the
    /// caller fills through the slot returned.
    pub fn push_queued(
        &mut self,
        token: u64,
        len: usize,
        body: Deferred,
        buf: Vec<u8>,
        lazy: bool,
    ) -> &mut Slot {
        let psn = self.next_psn;
        let s = self.slot_new();
        s.state = SlotState::Queued;
        s.token = token;
        s.buf = buf;
        s.len = len;
        s.body = body;
        s.sends = 0;
        s.lazy = lazy;
        self.next_psn = psn.wrapping_add(1);
        let i = self.index(psn);
        &mut self.slots[i]
    }

    /// Grow the ring to hold `span` PSNs from `una` (a power of two: a peer
    /// sent one message at a time holds a slot or two), moving the slots in
    /// use to their new places.
    fn grow(&mut self, span: usize) {
        let cap = span.next_power_of_two().min(WINDOW as usize);
        let mut old = core::mem::take(&mut self.slots);
        self.slots = (0..cap).map(|_| Slot::empty()).collect();
        if old.is_empty() {
            return;
        }
        let mask = old.len() - 1;
        let mut psn = self.una;
        while psn != self.next_psn {
            let s = core::mem::replace(&mut old[psn as usize & mask], Slot::empty());
            let i = self.index(psn);
            self.slots[i] = s;
            psn = psn.wrapping_add(1);
        }
    }

    /// Give the ring back if nothing is queued or outstanding (an idle
    /// peer; the next datagram allocates a small one).
    pub fn shrink(&mut self) {
        if !self.busy() {
            self.slots = Vec::new();
            self.retx = VecDeque::new();
        }
    }

    /// Ring slots allocated (for memory accounting).
    pub fn ring_capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Datagrams queued or outstanding.
    pub fn outstanding(&self) -> u32 {
        self.next_psn.wrapping_sub(self.una)
    }

    /// Anything queued, in flight or awaiting retransmission?
    pub fn busy(&self) -> bool {
        self.next_psn != self.una
    }

    /// Is `psn` in `una..next_send` (sent at least once, not behind una)?
    pub fn is_sent(&self, psn: u32) -> bool {
        psn.wrapping_sub(self.una) < self.next_send.wrapping_sub(self.una)
    }

    /// Move `una` past freed slots.
    pub fn advance_una(&mut self) {
        while self.una != self.next_send && self.slot(self.una).state == SlotState::Free {
            self.una = self.una.wrapping_add(1);
        }
    }
}

impl Default for Tx {
    fn default() -> Self {
        Self::new(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queue `n` datagrams (token = PSN) as `Srd::queue` does.
    fn queue(tx: &mut Tx, n: u32) {
        for _ in 0..n {
            let psn = tx.next_psn;
            let s = tx.slot_new();
            assert_eq!(s.state, SlotState::Free);
            s.state = SlotState::Queued;
            s.token = u64::from(psn);
            tx.next_psn = psn.wrapping_add(1);
        }
    }

    /// Free `n` datagrams from `una` (acked).
    fn ack(tx: &mut Tx, n: u32) {
        for k in 0..n {
            tx.slot_mut(tx.una.wrapping_add(k)).state = SlotState::Free;
        }
        tx.next_send = tx.next_psn;
        tx.advance_una();
    }

    #[test]
    fn the_ring_follows_the_flight_across_psn_wrap() {
        let mut tx = Tx::new(1);
        let start = u32::MAX - 40;
        (tx.una, tx.next_send, tx.next_psn) = (start, start, start);
        assert_eq!(tx.ring_capacity(), 0);
        // Grown step by step while PSNs wrap; every live slot keeps its datagram.
        queue(&mut tx, 10);
        assert_eq!(tx.slots.len(), 16);
        queue(&mut tx, 2);
        assert_eq!(tx.slots.len(), 16);
        queue(&mut tx, 88);
        assert_eq!(tx.slots.len(), 128);
        for k in 0..100u32 {
            let psn = start.wrapping_add(k);
            assert_eq!(tx.slot(psn).token, u64::from(psn), "psn {psn}");
            assert_eq!(tx.slot(psn).state, SlotState::Queued);
        }
        // A PSN out of use never reads a live slot sharing its place.
        let stale = start.wrapping_sub(128);
        assert_eq!(tx.slot(stale).state, SlotState::Free);
        assert_eq!(
            tx.slot(start.wrapping_add(100 + 128)).state,
            SlotState::Free
        );
        // Acked ones free their places for later PSNs without growth.
        ack(&mut tx, 60);
        queue(&mut tx, 80);
        assert_eq!(tx.slots.len(), 128);
        assert_eq!(tx.slot(start.wrapping_add(59)).state, SlotState::Free);
        for k in 60..180u32 {
            let psn = start.wrapping_add(k);
            assert_eq!(tx.slot(psn).token, u64::from(psn), "psn {psn}");
        }
        // Busy: kept; idle: given back, and a new flight starts small.
        tx.shrink();
        assert_eq!(tx.slots.len(), 128);
        ack(&mut tx, 120);
        tx.shrink();
        assert_eq!(tx.ring_capacity(), 0);
        queue(&mut tx, 1);
        assert_eq!(tx.slots.len(), 1);
    }

    #[test]
    fn the_ring_is_at_most_the_window() {
        let mut tx = Tx::new(1);
        queue(&mut tx, WINDOW - 1);
        assert_eq!(tx.slots.len(), WINDOW as usize);
        assert_eq!(tx.slot(WINDOW - 2).token, u64::from(WINDOW - 2));
    }
}
