//! Keepalive: a peer that some operation waits on (an RMA reply, the CTS of a
//! rendezvous send, message credit for sends not started, the rest of a
//! message a receive was matched to) while nothing of ours is in flight to it
//! gets an empty CREDIT now and then. A peer that died
//! silently after acknowledging everything then shows up as a failed datagram
//! (the SRD's unreachable timeout), and the operations waiting on it fail
//! instead of hanging. The receive side matters as much as the send side: a
//! rank whose link dies after its own sends were acknowledged, while it waits
//! for a peer's rendezvous data, has nothing else that would ever fail; nor
//! has one blocked in a receive directed at a peer (`MPI_Recv` from a rank)
//! that died before sending anything: such a peer is probed too once a
//! session with it exists (`Engine::keepalive`), and its directed receives
//! fail when it is found unreachable. (A peer never heard from is not
//! probed: it may simply not have started yet.)
//!
//! On the wire a keepalive is a CREDIT with `total` 0 (`Ctrl::datagram`), and
//! stays so: the receiver need not tell it from a CREDIT (0 bytes back, and
//! the cumulative message count it carries changes nothing or makes good a
//! lost CREDIT); only we must, for its failure report, and its token says
//! which it was (`Token::Keepalive`). A type of its own would be a wire
//! change that receivers of this version count as `bad` (`PROTOCOL.md` §9).

use super::pump::Ctrl;
use super::recv::{InRec, Target};
use super::send::Proto;
use super::{CompError, MsgLayer};
use crate::buf::UserBuf;
use crate::dgram::{FailReason, PeerId};

/// Is this record matched to a receive that still waits for data from its
/// sender (eager segments, or the RDATA of a granted rendezvous)?
fn awaits_data(r: &InRec) -> bool {
    matches!(r.target, Target::Recv { .. }) && r.arrived_bytes < r.expect_bytes
}

impl<B: UserBuf> MsgLayer<B> {
    /// Peers that operations wait on for a reply (RMA replies, CTS), for
    /// message credit, or for the rest of a message a receive was matched to.
    pub fn waiting_peers(&self) -> Vec<PeerId> {
        let mut wait: Vec<bool> = self
            .peers
            .iter()
            .map(|st| st.rma.started > 0 || self.waits_for_credit(st))
            .collect();
        self.peers_owing_cts(&mut wait);
        for id in self.ins.indices_where(awaits_data) {
            if let Some(w) = self
                .ins
                .get(id)
                .and_then(|r| wait.get_mut(r.peer.0 as usize))
            {
                *w = true;
            }
        }
        (0..wait.len())
            .filter(|&i| wait[i])
            .map(|i| PeerId(i as u32))
            .collect()
    }

    /// Queue a keepalive to `p` (unless one is queued already).
    pub fn push_keepalive(&mut self, p: PeerId) {
        if !self.peer_mut(p).ctrl.contains(&Ctrl::Keepalive) {
            self.stats.keepalives += 1;
            self.push_ctrl(p, Ctrl::Keepalive);
        }
    }

    /// Does the next message to this peer wait for its message credit?
    fn waits_for_credit(&self, st: &super::peer::PeerState) -> bool {
        st.send_credit_msgs == 0
            && st
                .queue
                .front()
                .and_then(|&id| self.outs.get(id))
                .is_some_and(|m| m.proto == Proto::Unstarted)
    }

    /// Are receives waiting for some? (Keepalives run while this or
    /// `pending_initiated` is non-zero.)
    pub fn receiving(&self) -> bool {
        self.recvs.len() != 0
    }

    /// A keepalive to `p` failed: `p` is gone (RMA ops to it failed already,
    /// see `rma_peer_lost`). Sends waiting for its CTS fail; if it may come back,
    /// it is told to stop waiting for them (ABORT). Sends waiting for its
    /// message credit fail too (they never started: nothing to abort); after a
    /// restart they would instead go to the new incarnation. Receives matched
    /// to a message of `p` that is still arriving fail, and so do receives
    /// posted for `p` by name (unreachable only: a restart drops the former
    /// anyway, `reset_peer_recvs`, and the latter wait for the new incarnation).
    pub(crate) fn on_keepalive_failed(&mut self, p: PeerId, reason: FailReason) {
        if reason == FailReason::Unreachable {
            for id in self.ins.indices_where(|r| r.peer == p && awaits_data(r)) {
                self.fail_rec(id);
            }
            self.fail_directed_recvs(p, CompError::PeerUnreachable);
        }
        let stuck = reason == FailReason::Unreachable
            && self
                .peers
                .get(p.0 as usize)
                .is_some_and(|st| self.waits_for_credit(st));
        if stuck {
            let unstarted = self
                .outs
                .indices_where(|m| m.op.peer == p && m.proto == Proto::Unstarted);
            for id in unstarted {
                self.fail_send(id, CompError::PeerUnreachable);
            }
        }
        self.fail_sends_owed_cts(p, reason);
    }
}
