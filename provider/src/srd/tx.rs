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
    /// Slots indexed by `psn % WINDOW`.
    pub slots: Vec<Slot>,
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
            last_progress: Instant::ZERO,
            idle_until_poll: false,
            credit: Some(unscheduled),
            credit_heard: false,
        }
    }

    /// Slot of `psn`.
    pub fn slot(&self, psn: u32) -> &Slot {
        self.slots.get((psn % WINDOW) as usize).unwrap_or(&EMPTY)
    }
    /// Mutable slot of `psn` (allocating the ring up to it).
    pub fn slot_mut(&mut self, psn: u32) -> &mut Slot {
        let i = (psn % WINDOW) as usize;
        while self.slots.len() <= i {
            self.slots.push(Slot::empty());
        }
        &mut self.slots[i]
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
