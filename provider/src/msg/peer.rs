//! Per-peer message-layer state: sequence numbers, send queue, control queue, eager credit.

use std::collections::VecDeque;

use super::MsgLayer;
use crate::buf::UserBuf;
use crate::dgram::PeerId;

/// A control message waiting to go to a peer (sent before data, header only).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ctrl {
    /// Rendezvous clear-to-send for the peer's message `seq`: send `grant` bytes.
    Cts { seq: u32, grant: u64, tries: u8 },
    /// Return `bytes` of eager credit.
    Credit { bytes: u64 },
    /// Our message `seq` failed: the peer must stop waiting for it. `tries` counts
    /// earlier attempts that failed too.
    Abort { seq: u32, tries: u8 },
    /// Are you there? (an empty CREDIT; see `keepalive.rs`).
    Keepalive,
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
    /// Sequence number of the last message we sent an ABORT for.
    pub last_abort_seq: Option<u32>,
    /// One-sided operations with this peer (own id space, not ordered with messages).
    pub rma: super::rma::RmaPeer,
}

impl PeerState {
    pub(crate) fn new(credit_bytes: usize) -> Self {
        PeerState {
            next_send_seq: 0,
            next_match_seq: 0,
            queue: VecDeque::new(),
            ctrl: VecDeque::new(),
            in_ready: false,
            send_credit_bytes: credit_bytes,
            credit_owed_bytes: 0,
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
            let c = self.init_credit_bytes;
            self.peers.resize_with(i + 1, || PeerState::new(c));
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

    /// Note `bytes` of the peer's eager data left unexpected memory; credit them back in batches.
    pub(crate) fn owe_credit(&mut self, peer: PeerId, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let batch = self.credit_batch_bytes;
        let st = self.peer_mut(peer);
        st.credit_owed_bytes += bytes;
        if st.credit_owed_bytes >= batch {
            let b = core::mem::take(&mut st.credit_owed_bytes);
            self.push_ctrl(peer, Ctrl::Credit { bytes: b as u64 });
        }
    }
}
