//! Rendezvous, both sides, in the order it happens: a message that does not
//! go eagerly sends an RTS (header only); the receiver matches it like any
//! message and answers CTS(grant = the bytes that fit); the sender sends
//! RDATA for `[0, grant)`, which the receiver places by offset straight into
//! the matched buffer (and a driver may place before the headers are parsed:
//! `place_target`, `guess_rdata`). `PROTOCOL.md` §9 ("Sender state machine",
//! "Matching", "Failures and restarts").
//!
//! ```text
//! sender                                    receiver
//! start_send: Rndv (rndv_started)
//! send_segment: RTS ──────────────────────► on_msg_segment: record, SAS, MATCH
//!   (leaves its queue: waits for the CTS)    bind → grant_cts: expect min(total, room)
//! on_cts: back in its queue ◄── CTS(grant)   (discard_rec → refuse_cts: CTS(0))
//! send_segment: RDATA [0, grant) ─────────► on_rdata → place; all granted → done
//! failures: fail_sends_owed_cts             on_cts_failed: CTS again, or the receive fails
//! ```
//!
//! The rest of a rendezvous message's life (segmentation, acks, completion,
//! records, SAS hold-back, matching) is shared with eager messages and lives
//! in `send.rs`, `recv.rs` and `matching.rs`.

use crate::hash::FastMap;

use super::pump::Ctrl;
use super::recv::Target;
use super::send::{OutMsg, Proto};
use super::{CompError, MsgLayer, MAX_ABORT_TRIES};
use crate::buf::UserBuf;
use crate::dgram::{FailReason, PeerId};
use crate::wire::msg::{MsgType, Repr};

/// Rendezvous state of the message layer (what is not per message).
#[derive(Default)]
pub(crate) struct Rndv {
    /// Sender: our rendezvous sends by (peer, seq), for the CTS lookup.
    out_map: FastMap<(u32, u32), usize>,
    /// Receiver: records matched to a receive and waiting for RDATA. While
    /// any exist, the driver looks at each datagram's headers before
    /// receiving it, to place RDATA straight into the receive buffer.
    pub(crate) placing: usize,
    /// Receiver: the record that received RDATA last: (record, peer, seq)
    /// (see `guess_rdata`).
    last: Option<(usize, PeerId, u32)>,
    /// The largest RDATA payload seen, bytes.
    last_len: usize,
    /// That last piece began where the message's data so far ended.
    last_in_order: bool,
}

/// Is this send waiting for its CTS (RTS out, no data yet)?
pub(crate) fn awaits_cts<B>(m: &OutMsg<B>) -> bool {
    m.proto == Proto::Rndv && m.rts_sent && !m.sent_any && !m.handed_all
}

impl<B> OutMsg<B> {
    /// The next datagram of this rendezvous send (it is at its queue's
    /// front): (type, message offset, payload bytes) with at most `room`
    /// payload bytes. First the RTS; after the CTS, the granted bytes.
    pub(crate) fn rndv_segment(&self, room: usize) -> (MsgType, usize, usize) {
        if !self.rts_sent {
            (MsgType::Rts, 0, 0)
        } else {
            (
                MsgType::RData,
                self.next_off,
                room.min(self.end_bytes - self.next_off),
            )
        }
    }
}

impl<B: UserBuf> MsgLayer<B> {
    // ---- sender: RTS out ----

    /// Send `id` (message `seq` to `p`) goes by rendezvous: its CTS must find it.
    pub(crate) fn rndv_started(&mut self, p: PeerId, seq: u32, id: usize) {
        self.rndv.out_map.insert((p.0, seq), id);
    }

    /// Send `m` (in slot `id`) is finished: its CTS, if one still comes, is stray.
    pub(crate) fn rndv_finished(&mut self, id: usize, m: &OutMsg<B>) {
        let key = (m.op.peer.0, m.seq);
        if m.proto == Proto::Rndv && self.rndv.out_map.get(&key) == Some(&id) {
            self.rndv.out_map.remove(&key);
        }
    }

    // ---- receiver: the RTS matched, CTS out ----

    /// Record `id`, a rendezvous request, was bound to a receive with `cap`
    /// bytes of room: ask for the bytes that fit (truncated bytes never cross
    /// the network) and expect them.
    pub(crate) fn grant_cts(&mut self, id: usize, cap: usize) {
        let Some(rec) = self.ins.get_mut(id) else {
            return;
        };
        let grant = rec.total_bytes.min(cap);
        rec.expect_bytes = grant;
        let (peer, seq) = (rec.peer, rec.seq);
        self.rndv.placing += 1;
        self.push_ctrl(
            peer,
            Ctrl::Cts {
                seq,
                grant: grant as u64,
                tries: 0,
            },
        );
    }

    /// A record (`rndv`: a rendezvous one) bound to `target` stops waiting for
    /// data (done, discarded, failed): no more placement for it.
    pub(crate) fn rndv_unbound(&mut self, rndv: bool, target: Target) {
        if rndv && matches!(target, Target::Recv { .. }) {
            self.rndv.placing -= 1;
        }
    }

    /// Rendezvous record `(peer, seq)` was discarded: its sender still waits
    /// for a CTS, and gets one granting nothing (it completes without data).
    pub(crate) fn refuse_cts(&mut self, peer: PeerId, seq: u32) {
        self.push_ctrl(
            peer,
            Ctrl::Cts {
                seq,
                grant: 0,
                tries: 0,
            },
        );
    }

    // ---- sender: CTS in, RDATA out ----

    /// A CTS from `p` for our message `seq`: send `grant` bytes of it.
    pub(crate) fn on_cts(&mut self, p: PeerId, seq: u32, grant: u64) {
        let Some(&id) = self.rndv.out_map.get(&(p.0, seq)) else {
            self.stats.stray += 1;
            return;
        };
        let Some(m) = self.outs.get_mut(id) else {
            return;
        };
        if !m.rts_sent || m.handed_all || m.sent_any {
            self.stats.stray += 1;
            return;
        }
        m.end_bytes = (grant.min(m.total_bytes as u64)) as usize;
        if m.end_bytes == 0 {
            m.handed_all = true;
            self.maybe_complete_send(id);
        } else {
            // Behind the messages already started, ahead of those not started
            // yet: these may wait for message credit, and the receive this
            // data completes may be what lets the peer's application take
            // messages and return that credit.
            let outs = &self.outs;
            let at = self.peers.get(p.0 as usize).map_or(0, |st| {
                st.queue
                    .iter()
                    .position(|&x| outs.get(x).is_some_and(|m| m.proto == Proto::Unstarted))
                    .unwrap_or(st.queue.len())
            });
            self.peer_mut(p).queue.insert(at, id);
            self.wake(p);
        }
    }

    // ---- receiver: RDATA in ----

    /// RDATA of `peer`'s message `repr.seq` at offset `off`: place it, if that
    /// message is a rendezvous one we granted (matched or discarded).
    /// Returns its record (for `next_segment`).
    pub(crate) fn on_rdata(
        &mut self,
        peer: PeerId,
        repr: &Repr,
        off: usize,
        data: &[u8],
    ) -> Option<usize> {
        match self.in_map.find((peer.0, repr.seq)) {
            Some(id)
                if self
                    .ins
                    .get(id)
                    .is_some_and(|r| r.rndv && r.target != Target::None) =>
            {
                self.place(id, off, data);
                Some(id)
            }
            _ => {
                self.stats.stray += 1;
                None
            }
        }
    }

    /// RDATA bytes `[off, off + len)` of record `id` arrived (`place`): keep
    /// what `guess_rdata` needs. Guess only while pieces come in order (a
    /// reordering network would make most guesses wrong, each costing two
    /// copies).
    pub(crate) fn note_rdata(&mut self, id: usize, off: usize, len: usize) {
        let Some(rec) = self.ins.get_mut(id) else {
            return;
        };
        self.rndv.last_in_order = off == rec.rdata_hi_bytes;
        rec.rdata_hi_bytes = rec.rdata_hi_bytes.max(off.saturating_add(len));
        self.rndv.last = Some((id, rec.peer, rec.seq));
        self.rndv.last_len = self.rndv.last_len.max(len);
    }

    /// The receive buffer, offset and byte count for `len` RDATA bytes of
    /// `repr` (`place_target`).
    pub(crate) fn rdata_target(
        &self,
        peer: PeerId,
        repr: &Repr,
        len: usize,
    ) -> Option<(&B, usize, usize)> {
        let id = *self.in_map.get(&(peer.0, repr.seq))?;
        let rec = self.ins.get(id).filter(|r| r.rndv)?;
        let Target::Recv { id: rid, base, cap } = rec.target else {
            return None;
        };
        let off = usize::try_from(repr.offset).ok()?;
        if off >= cap || len == 0 {
            return None;
        }
        let e = self.recvs.get(rid)?;
        let n = len.min(cap - off);
        (base + off + n <= e.op.buf.len()).then_some((&e.op.buf, base + off, n))
    }

    /// Where the next RDATA datagram most likely goes, before its headers are
    /// seen: `(peer, buffer, offset in the buffer, bytes)` = right after the
    /// highest byte that arrived of the rendezvous message that received data
    /// last, one datagram's worth; once that message has all its data, the
    /// start of the peer's next one, if it is granted and nothing of it came
    /// yet (what an in-order stream sends next; none unless the last piece
    /// came in order). Those bytes of the buffer are still unwritten (nothing
    /// beyond them arrived), so a driver may receive the next datagram's
    /// payload there directly and check with `place_target` that it was this
    /// piece (else it moves it).
    pub fn guess_rdata(&self) -> Option<(PeerId, &B, usize, usize)> {
        self.guess_rdata_nth(0)
    }

    /// The `k`-th datagram's place after the one `guess_rdata` names (`k` = 0:
    /// that one), one datagram's worth each, within the same message (the
    /// message `guess_rdata` names): what an in-order stream sends next,
    /// `k + 1` datagrams ahead. None past that message's end. All of them
    /// are still unwritten, so a driver may receive several datagrams at once
    /// into their guessed places (see `Engine::guess_rdata_nth`).
    pub fn guess_rdata_nth(&self, k: usize) -> Option<(PeerId, &B, usize, usize)> {
        let (id, peer, seq) = self.rndv.last.filter(|_| self.rndv.last_in_order)?;
        if self.rndv.last_len == 0 {
            return None;
        }
        let skip = k.checked_mul(self.rndv.last_len)?;
        // (receive id, base, end, highest byte arrived) of a matched rendezvous message.
        let span = |id: usize, seq: u32| {
            let rec = self
                .ins
                .get(id)
                .filter(|r| r.rndv && r.seq == seq && r.peer == peer)?;
            let Target::Recv { id: rid, base, cap } = rec.target else {
                return None;
            };
            Some((rid, base, rec.expect_bytes.min(cap), rec.rdata_hi_bytes))
        };
        let place = |(rid, base, end, hi): (usize, usize, usize, usize)| {
            let at = hi.checked_add(skip).filter(|&a| a < end)?;
            let e = self.recvs.get(rid)?;
            let n = self.rndv.last_len.min(end - at);
            (base + at + n <= e.op.buf.len()).then_some((peer, &e.op.buf, base + at, n))
        };
        match span(id, seq) {
            // Data still to come: its k-th piece (None past its end).
            Some(sp) if sp.3 < sp.2 => return place(sp),
            Some(_) => {}
            None if k > 0 => return None,
            None => {}
        }
        // That message is done (or its data all came): the next one's start.
        let next = seq.wrapping_add(1);
        let &nid = self.in_map.get(&(peer.0, next))?;
        let fresh = self.ins.get(nid).is_some_and(|r| {
            r.arrived_bytes == 0 && r.expect_bytes != usize::MAX && r.expect_bytes > 0
        });
        if fresh {
            span(nid, next).and_then(place)
        } else {
            None
        }
    }

    // ---- failures ----

    /// Our CTS for (peer, seq) failed: that message will never arrive unless
    /// the CTS gets through. Sent again (same grant) while the SRD keeps the
    /// peer, up to `MAX_ABORT_TRIES` sends (`tries` earlier ones failed before
    /// this one); after that, or when the peer restarted, the receive fails.
    pub(crate) fn on_cts_failed(
        &mut self,
        peer: PeerId,
        seq: u32,
        tries: u8,
        zero_grant: bool,
        reason: FailReason,
    ) {
        let tries = tries.saturating_add(1);
        let retry = reason == FailReason::Unreachable && tries < MAX_ABORT_TRIES;
        let rec = self.in_map.get(&(peer.0, seq)).copied();
        match rec {
            Some(id) if retry => {
                let grant = self.ins.get(id).map_or(0, |r| r.expect_bytes) as u64;
                self.push_ctrl(peer, Ctrl::Cts { seq, grant, tries });
            }
            Some(id) => self.fail_rec(id),
            // A discarded message's record is gone; the sender still needs its CTS(0).
            None if retry && zero_grant => {
                self.push_ctrl(
                    peer,
                    Ctrl::Cts {
                        seq,
                        grant: 0,
                        tries,
                    },
                );
            }
            None => {}
        }
    }

    /// Mark in `wait` (indexed by peer) every peer one of our sends waits on
    /// for its CTS (`waiting_peers`).
    pub(crate) fn peers_owing_cts(&self, wait: &mut [bool]) {
        // One pass over the sends.
        let _ = self.outs.indices_where(|m| {
            if awaits_cts(m) {
                if let Some(w) = wait.get_mut(m.op.peer.0 as usize) {
                    *w = true;
                }
            }
            false
        });
    }

    /// A keepalive to `p` failed: sends waiting for its CTS fail; if it may
    /// come back, it is told to stop waiting for them (ABORT).
    pub(crate) fn fail_sends_owed_cts(&mut self, p: PeerId, reason: FailReason) {
        let waiting = self.outs.indices_where(|m| m.op.peer == p && awaits_cts(m));
        for id in waiting {
            let seq = self.outs.get(id).map(|m| m.seq);
            self.fail_send(id, CompError::PeerUnreachable);
            if let (Some(seq), FailReason::Unreachable) = (seq, reason) {
                self.push_ctrl(p, Ctrl::Abort { seq, tries: 0 });
            }
        }
    }
}
