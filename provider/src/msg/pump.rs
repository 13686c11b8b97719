//! Pacing: `pump` hands datagrams to the SRD round-robin over peers with
//! work, one per turn; within a peer, control messages (`Ctrl`) first, then
//! one-sided and message work in turn (`rma.rs`, `send.rs`).

use super::token::Token;
use super::MsgLayer;
use crate::buf::UserBuf;
use crate::dgram::{Datagrams, PeerId, SendError};
use crate::wire::msg::{MsgType, Repr, HEADER_LEN};

/// Segments at least this long are sent with a deferred body
/// (`Datagrams::send_with_body`) instead of being copied when queued, bytes:
/// rendezvous data, and eager data of a send that completes on its acks.
/// Below it a copy costs less than describing the body at every transmission.
/// It must stay well under an Ethernet MTU's payload (1376 B at MTU 1500): at
/// 2048 every packet of a 1500-byte network was copied twice (into the engine,
/// then into the datagram), a quarter of the sender's CPU.
pub(crate) const DEFER_MIN_BYTES: usize = 512;

/// Result of one attempt to hand a datagram to the SRD layer.
pub(crate) enum Step {
    Sent,
    Blocked,
    Idle,
    /// The next message may not start before the peer returns message credit:
    /// the peer leaves the ring until a CREDIT (or other work) wakes it.
    Parked,
}

/// A control message waiting to go to a peer (sent before data, header only).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ctrl {
    /// Rendezvous clear-to-send for the peer's message `seq`: send `grant` bytes.
    Cts { seq: u32, grant: u64, tries: u8 },
    /// Return `bytes` of eager credit, and announce how many of the peer's
    /// messages we have credited in all (`PeerState::credited_msgs`, read when
    /// it leaves). `tries` counts earlier sends of it that failed.
    Credit { bytes: u64, tries: u8 },
    /// Our message `seq` failed: the peer must stop waiting for it. `tries` counts
    /// earlier attempts that failed too.
    Abort { seq: u32, tries: u8 },
    /// Are you there? (an empty CREDIT; see `keepalive.rs`).
    Keepalive,
}

impl Ctrl {
    /// Its datagram: the header (control messages have no payload) and the
    /// token. `credited` = the peer's messages credited back in all, which
    /// every CREDIT and keepalive carries so that a lost one is made good by
    /// the next.
    pub(crate) fn datagram(self, credited: u32) -> (Repr, Token) {
        let header = |ty, seq, total| Repr {
            ty,
            seq,
            total,
            offset: 0,
            tag: None,
            data: None,
        };
        match self {
            Ctrl::Cts { seq, grant, tries } => (
                header(MsgType::Cts, seq, grant),
                Token::Cts {
                    seq,
                    tries,
                    zero_grant: grant == 0,
                },
            ),
            Ctrl::Abort { seq, tries } => {
                (header(MsgType::Abort, seq, 0), Token::Abort { seq, tries })
            }
            Ctrl::Credit { bytes, tries } => (
                header(MsgType::Credit, credited, bytes),
                Token::Credit {
                    bytes: bytes.min(u32::MAX as u64) as u32,
                    tries,
                },
            ),
            // A keepalive is a CREDIT returning no bytes (see `keepalive.rs`).
            Ctrl::Keepalive => (header(MsgType::Credit, credited, 0), Token::Keepalive),
        }
    }
}

impl<B: UserBuf> MsgLayer<B> {
    /// Push queued message segments (and control messages) into `dg` while it
    /// has room: round-robin over peers with work, one datagram per turn.
    pub fn pump(&mut self, dg: &mut dyn Datagrams) {
        if self.ready.is_empty() && self.blocked.is_empty() {
            // Nothing to hand down (it runs after every datagram received).
            return;
        }
        self.payload_max = dg.max_payload();
        let mut blocked = core::mem::take(&mut self.blocked);
        // Bounded: every turn either sends a datagram, retires the peer or blocks it.
        while let Some(p) = self.ready.pop_front() {
            if !dg.can_send(p) {
                dg.set_backlog(p, true);
                blocked.push(p);
                continue;
            }
            match self.send_one(p, dg) {
                Step::Blocked => {
                    dg.set_backlog(p, true);
                    blocked.push(p);
                }
                Step::Parked => self.peer_mut(p).in_ready = false,
                Step::Sent | Step::Idle => {
                    if self.peer_mut(p).has_work() {
                        self.ready.push_back(p);
                    } else {
                        dg.set_backlog(p, false);
                        self.peer_mut(p).in_ready = false;
                    }
                }
            }
        }
        if !blocked.is_empty() {
            // (VecDeque::extend costs ~150 instructions even from an empty drain.)
            self.ready.extend(blocked.drain(..));
        }
        self.blocked = blocked;
    }

    /// Hand one datagram of `p`'s work to `dg`: control messages first, then
    /// RMA and messages in turn.
    fn send_one(&mut self, p: PeerId, dg: &mut dyn Datagrams) -> Step {
        self.credit_rides(p);
        if let Some(&c) = self.peer_mut(p).ctrl.front() {
            return self.send_ctrl(p, c, dg);
        }
        if let Some(step) = self.rma_send_one(p, dg) {
            return step;
        }
        self.send_segment(p, dg)
    }

    /// Hand down control message `c`, the front of `p`'s control queue.
    fn send_ctrl(&mut self, p: PeerId, c: Ctrl, dg: &mut dyn Datagrams) -> Step {
        // Every CREDIT (and keepalive) carries how many of the peer's
        // messages we credited in all, so a lost one is made good by the next.
        let (repr, token) = c.datagram(self.peer_mut(p).credited_msgs);
        let r = dg.send(p, token.encode(), HEADER_LEN, &mut |b: &mut [u8]| {
            repr.emit_into(b);
        });
        if r == Err(SendError::WouldBlock) {
            return Step::Blocked;
        }
        // Sent, or the peer is gone (nothing to tell it then).
        self.peer_mut(p).ctrl.pop_front();
        Step::Sent
    }
}
