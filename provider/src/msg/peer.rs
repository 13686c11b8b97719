//! Per-peer message-layer state: sequence numbers, send queue, control queue, eager credit.

use std::collections::VecDeque;

use super::pump::Ctrl;
use super::MsgLayer;
use crate::buf::UserBuf;
use crate::config::EpMode;
use crate::dgram::PeerId;

/// How much credit senders get and how it comes back (from the config).
pub(crate) struct CreditPolicy {
    /// A sender's eager credit towards us before any CREDIT, bytes
    /// (`max_unexpected_bytes / CREDIT_SHARES`).
    pub init_bytes: usize,
    /// Eager credit is returned in batches of this many bytes (a quarter of
    /// `init_bytes`).
    pub batch_bytes: usize,
    /// A sender's message credit towards us before any CREDIT, messages
    /// (`max_unexpected_msgs / CREDIT_SHARES`).
    pub init_msgs: usize,
    /// Message credit is returned in batches of this many messages.
    pub batch_msgs: usize,
    /// Some credit stayed owed because we held too much (`over_bound`): flush
    /// it once we are below the bounds again.
    pub held_back: bool,
}

/// What this endpoint knows about one peer.
pub(crate) struct PeerState {
    /// Sequence number the next message we start to this peer gets.
    pub next_send_seq: u32,
    /// Sequence number of the peer's next message to enter matching (SAS).
    pub next_match_seq: u32,
    /// Outgoing messages (slab ids) with datagrams to hand down, in order.
    pub queue: VecDeque<usize>,
    /// Control messages to send, before any data.
    pub ctrl: VecDeque<Ctrl>,
    /// Listed in the layer's round-robin `ready` ring.
    pub in_ready: bool,
    /// Eager/medium bytes we may still send to this peer; past it, rendezvous.
    pub send_credit_bytes: usize,
    /// Eager bytes the peer sent us that left unexpected memory, not yet credited back.
    pub credit_owed_bytes: usize,
    /// Messages we may still start towards this peer; at 0 the next one waits
    /// for a CREDIT (that many of ours are unmatched there).
    pub send_credit_msgs: usize,
    /// The peer's count of our messages it credited in all (from its last
    /// CREDIT; wrapping): a CREDIT raises `send_credit_msgs` by the difference,
    /// so a lost or reordered one is made good by any later one.
    pub credit_seen_msgs: u32,
    /// The peer's messages that left unexpected memory, not yet credited back.
    pub credit_owed_msgs: usize,
    /// The peer's messages that spent its message credit and that we have not
    /// credited back (held or owed): the peer's own view of what it used. At
    /// the full share the peer cannot send: whatever is owed goes at once.
    pub uncredited_msgs: usize,
    /// The peer's messages credited back in all (wrapping): what our CREDITs carry.
    pub credited_msgs: u32,
    /// Sequence number of the last message we sent an ABORT for.
    pub last_abort_seq: Option<u32>,
    /// One-sided operations with this peer (own id space, not ordered with messages).
    pub rma: super::rma::RmaPeer,
}

impl PeerState {
    pub(crate) fn new(credit_bytes: usize, credit_msgs: usize) -> Self {
        PeerState {
            next_send_seq: 0,
            next_match_seq: 0,
            queue: VecDeque::new(),
            ctrl: VecDeque::new(),
            in_ready: false,
            send_credit_bytes: credit_bytes,
            credit_owed_bytes: 0,
            send_credit_msgs: credit_msgs,
            credit_seen_msgs: 0,
            credit_owed_msgs: 0,
            uncredited_msgs: 0,
            credited_msgs: 0,
            last_abort_seq: None,
            rma: Default::default(),
        }
    }

    pub(crate) fn has_work(&self) -> bool {
        !self.queue.is_empty() || !self.ctrl.is_empty() || self.rma.has_work()
    }
}

impl<B: UserBuf> MsgLayer<B> {
    /// The state of `peer`, created on first use.
    pub(crate) fn peer_mut(&mut self, peer: PeerId) -> &mut PeerState {
        let i = peer.0 as usize;
        if self.peers.len() <= i {
            let (c, m) = (self.credit.init_bytes, self.credit.init_msgs);
            self.peers.resize_with(i + 1, || PeerState::new(c, m));
        }
        &mut self.peers[i]
    }

    /// Put `peer` on the round-robin ring if it has something to send.
    pub(crate) fn wake(&mut self, peer: PeerId) {
        let st = self.peer_mut(peer);
        if !st.in_ready && st.has_work() {
            st.in_ready = true;
            self.ready.push_back(peer);
        }
    }

    /// Queue a control message for `peer`.
    pub(crate) fn push_ctrl(&mut self, peer: PeerId, c: Ctrl) {
        self.peer_mut(peer).ctrl.push_back(c);
        self.wake(peer);
    }

    /// Note that `bytes` of the peer's eager data and `msgs` of its messages
    /// left unexpected memory; credit them back in batches (a quarter of the
    /// initial byte credit, half the message credit), unless this endpoint
    /// holds too much right now.
    pub(crate) fn owe_credit(&mut self, peer: PeerId, bytes: usize, msgs: usize) {
        if self.mode != EpMode::Rdm {
            return;
        }
        if bytes > 0 || msgs > 0 {
            let st = self.peer_mut(peer);
            st.credit_owed_bytes += bytes;
            st.credit_owed_msgs += msgs;
            if self.over_bound() {
                // Past a bound (more senders than CREDIT_SHARES flooding us at
                // once): no sender gets credit back until the application has
                // taken messages off; they wait, nothing is dropped.
                if !self.credit.held_back {
                    self.stats.credit_withheld += 1;
                }
                self.credit.held_back = true;
                return;
            }
            self.flush_credit(peer, false);
        }
        self.release_held_credit();
    }

    /// Does this endpoint hold as many unexpected messages or bytes as it may?
    pub(crate) fn over_bound(&self) -> bool {
        self.unexp_msgs >= self.max_unexpected_msgs || self.unexp_bytes >= self.max_unexpected_bytes
    }

    /// A message of `peer` that spent one of its message credits arrived (or
    /// was aborted before anything of it came). If that was its last credit,
    /// credit owed below a batch goes now: the peer waits for it.
    pub(crate) fn charge_msg(&mut self, peer: PeerId) {
        let st = self.peer_mut(peer);
        st.uncredited_msgs += 1;
        if st.credit_owed_msgs > 0 && !self.over_bound() {
            self.flush_credit(peer, false);
        }
    }

    /// Send `peer` the credit it is owed, once a batch has gathered, or any
    /// message credit once the peer has none left (it waits: its unreceived
    /// messages may be fewer than its share, a batch short of what it
    /// would take to reach one), or any amount with `all`.
    ///
    /// A batch of bytes alone waits for the next datagram to the peer
    /// (`credit_rides`), up to two batches: the peer still holds half its
    /// initial credit or more. Sent at once, it left before the completion
    /// of the message that made it due, every 4th 64 KiB message of a
    /// ping-pong (a 3.5 us send call between the receive and the reply on
    /// two hosts); riding, it is one more entry of the reply's send call.
    fn flush_credit(&mut self, peer: PeerId, all: bool) {
        let (bb, bm, share) = (
            self.credit.batch_bytes,
            self.credit.batch_msgs,
            self.credit.init_msgs,
        );
        let st = self.peer_mut(peer);
        let owed = st.credit_owed_bytes + st.credit_owed_msgs > 0;
        let starved = st.credit_owed_msgs > 0 && st.uncredited_msgs >= share;
        let bytes_due = st.credit_owed_bytes >= bb.saturating_mul(2)
            || (st.credit_owed_bytes >= bb && st.has_work());
        let due = bytes_due || st.credit_owed_msgs >= bm || starved || (all && owed);
        if !due {
            return;
        }
        let b = core::mem::take(&mut st.credit_owed_bytes);
        let m = core::mem::take(&mut st.credit_owed_msgs);
        st.uncredited_msgs = st.uncredited_msgs.saturating_sub(m);
        st.credited_msgs = st.credited_msgs.wrapping_add(m as u32);
        self.push_ctrl(
            peer,
            Ctrl::Credit {
                bytes: b as u64,
                tries: 0,
            },
        );
    }

    /// Before another datagram to `peer`: a batch of byte credit held back
    /// for it (see `flush_credit`) goes first, in the same send.
    pub(crate) fn credit_rides(&mut self, peer: PeerId) {
        if self.peer_mut(peer).credit_owed_bytes >= self.credit.batch_bytes && !self.over_bound() {
            self.flush_credit(peer, true);
        }
    }

    /// Back under the bounds after credit was held back: every peer gets what
    /// it is owed (rare: only with more senders flooding than `CREDIT_SHARES`).
    pub(crate) fn release_held_credit(&mut self) {
        if !self.credit.held_back || self.over_bound() {
            return;
        }
        self.credit.held_back = false;
        for i in 0..self.peers.len() {
            self.flush_credit(PeerId(i as u32), true);
        }
    }

    /// A CREDIT from `peer`: `bytes` of eager credit back, and `credited` of
    /// our messages credited in all. (A keepalive is a CREDIT of 0 bytes and
    /// lands here too: see `keepalive.rs`.)
    pub(crate) fn on_credit(&mut self, peer: PeerId, bytes: usize, credited: u32) {
        let st = self.peer_mut(peer);
        st.send_credit_bytes = st.send_credit_bytes.saturating_add(bytes);
        let more = credited.wrapping_sub(st.credit_seen_msgs);
        if more != 0 && more < 1 << 31 {
            st.credit_seen_msgs = credited;
            st.send_credit_msgs = st.send_credit_msgs.saturating_add(more as usize);
        }
        // Messages waiting for credit may start now.
        self.wake(peer);
    }
}
