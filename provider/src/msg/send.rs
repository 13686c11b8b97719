//! Send side: per-peer send queues, protocol choice (eager or rendezvous,
//! `rndv.rs`), segmentation into datagrams, and send completions (handed
//! down or acked). `pump.rs` decides whose datagram goes next.

use super::op::{CompError, OpError, SendOp};
use super::pump::{Ctrl, Step, DEFER_MIN_BYTES};
use super::token::Token;
use super::MsgLayer;
use crate::buf::UserBuf;
use crate::config::EpMode;
use crate::dgram::{Datagrams, Deferred, FailReason, PeerId, SendError};
use crate::wire::msg::{MsgType, Repr, HEADER_LEN};

/// How a message travels.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Proto {
    /// Not started: no sequence number yet (cancellable).
    Unstarted,
    /// Eager / medium: DATA segments sent at once.
    Data,
    /// Rendezvous: RTS, wait for CTS, then RDATA segments.
    Rndv,
}

/// One outgoing message.
pub(crate) struct OutMsg<B> {
    pub op: SendOp<B>,
    pub total_bytes: usize,
    pub seq: u32,
    pub proto: Proto,
    /// Next byte to hand down.
    pub next_off: usize,
    /// Bytes to hand down in all (rendezvous: the receiver's grant).
    pub end_bytes: usize,
    pub rts_sent: bool,
    /// At least one DATA segment handed down (a 0-byte message still sends one).
    pub sent_any: bool,
    /// Every datagram of it handed down.
    pub handed_all: bool,
    /// Datagrams handed down and not yet acked.
    pub outstanding: u32,
    /// Some datagram of it was handed down with a deferred body (read from
    /// `op.buf` at each transmission): it completes only once all are acked.
    pub deferred: bool,
}

impl<B: UserBuf> MsgLayer<B> {
    /// The live, started message a datagram token (`Token::Msg`) names, if any.
    fn out_of_token(&self, peer: PeerId, id: usize, seq: u32) -> Option<usize> {
        self.outs
            .get(id)
            .filter(|m| m.op.peer == peer && m.seq == seq && m.proto != Proto::Unstarted)
            .map(|_| id)
    }

    /// Queue a send. It leaves through `pump`; its completion comes from `poll_completion`.
    /// `Again` while `max_tx_ops` operations are not completed.
    pub fn post_send(&mut self, op: SendOp<B>) -> Result<(), OpError> {
        if op.buf.len() > self.max_msg_size() {
            return Err(OpError::TooLarge);
        }
        if self.tx_room() == 0 {
            return Err(OpError::Again);
        }
        let peer = op.peer;
        let total = op.buf.len();
        let id = self.outs.insert(OutMsg {
            op,
            total_bytes: total,
            seq: 0,
            proto: Proto::Unstarted,
            next_off: 0,
            end_bytes: total,
            rts_sent: false,
            sent_any: false,
            handed_all: false,
            outstanding: 0,
            deferred: false,
        });
        self.peer_mut(peer).queue.push_back(id);
        self.wake(peer);
        Ok(())
    }

    /// The message at the front of `p`'s queue, started if it was not; `Err`
    /// with the step to report when no message can send now.
    fn front_message(&mut self, p: PeerId, room: usize) -> Result<usize, Step> {
        let Some(&id) = self.peer_mut(p).queue.front() else {
            return Err(Step::Idle);
        };
        let Some(m) = self.outs.get(id) else {
            self.peer_mut(p).queue.pop_front();
            return Err(Step::Idle);
        };
        if room == 0 || (self.mode == EpMode::Dgram && m.total_bytes > room) {
            // The datagram service cannot carry it (payload room shrank below the message).
            self.fail_send(id, CompError::PeerUnreachable);
            return Err(Step::Idle);
        }
        if m.proto == Proto::Unstarted {
            if self.mode == EpMode::Rdm && self.peer_mut(p).send_credit_msgs == 0 {
                // As many of our messages as the peer granted are unmatched
                // there: this one waits (it stays cancellable) rather than
                // growing the peer's unexpected memory.
                self.stats.credit_waits += 1;
                return Err(Step::Parked);
            }
            self.start_send(id, p);
        }
        Ok(id)
    }

    /// Hand down the next datagram (DATA, RTS or RDATA) of the message at the
    /// front of `p`'s queue.
    pub(crate) fn send_segment(&mut self, p: PeerId, dg: &mut dyn Datagrams) -> Step {
        let room = self.payload_max.saturating_sub(HEADER_LEN);
        let id = match self.front_message(p, room) {
            Ok(id) => id,
            Err(step) => return step,
        };
        let Some(m) = self.outs.get_mut(id) else {
            return Step::Idle;
        };
        let token = Token::Msg {
            slot: id,
            seq: m.seq,
        }
        .encode();
        let (ty, off, n) = match m.proto {
            Proto::Rndv => m.rndv_segment(room),
            _ => (
                MsgType::Data,
                m.next_off,
                room.min(m.total_bytes - m.next_off),
            ),
        };
        let repr = Repr {
            ty,
            seq: m.seq,
            total: m.total_bytes as u64,
            offset: off as u64,
            tag: m.op.tag,
            data: m.op.data,
        };
        let buf = &m.op.buf;
        // Data leaves straight from the application's buffer, which stays valid
        // until the send completes, and the send then waits for every ack:
        // rendezvous data always, eager data when the send completes on its acks
        // anyway (not FI_INJECT_COMPLETE: that one completes once handed down,
        // from its copy). Small segments are cheaper to copy once than to describe.
        let defer = (ty == MsgType::RData || (ty == MsgType::Data && m.op.delivery_complete))
            && n >= DEFER_MIN_BYTES
            && dg.supports_body();
        if m.op.lazy && ty == MsgType::Data {
            dg.set_lazy();
        }
        if defer {
            m.deferred = true;
            return self.send_deferred_run(p, dg, id, token, repr, room);
        }
        let r = dg.send(p, token, HEADER_LEN + n, &mut |b: &mut [u8]| {
            if repr.emit_into(b) {
                if let Some(dst) = b.get_mut(HEADER_LEN..HEADER_LEN + n) {
                    buf.read_at(off, dst);
                }
            }
        });
        match r {
            Ok(()) => self.segment_sent(p, id, ty == MsgType::Rts, n, 1),
            Err(SendError::WouldBlock) => Step::Blocked,
            Err(_) => {
                self.fail_send(id, CompError::PeerUnreachable);
                Step::Sent
            }
        }
    }

    /// Hand down the data segments of message `id` from `repr.offset` on as
    /// one run of deferred bodies (`Datagrams::send_run`): the full ones,
    /// and the last if it is long enough to defer (`DEFER_MIN_BYTES`). One
    /// at a time while another peer waits its turn (`pump` is round-robin)
    /// or this one has RMA work to alternate with. With the SRD's
    /// `queue_run` a segment costs the pump about 180 instructions, against
    /// 460 one `send_with_body` at a time (`engine_speed`, MTU 1500).
    #[inline(never)]
    fn send_deferred_run(
        &mut self,
        p: PeerId,
        dg: &mut dyn Datagrams,
        id: usize,
        token: u64,
        repr: Repr,
        room: usize,
    ) -> Step {
        let solo = self.ready.is_empty() && !self.peer_mut(p).rma.has_work();
        let Some(m) = self.outs.get(id) else {
            return Step::Idle;
        };
        let off = repr.offset as usize;
        let end = if repr.ty == MsgType::RData {
            m.end_bytes
        } else {
            m.total_bytes
        };
        let rem = end - off;
        let count = if solo {
            (rem / room + usize::from(rem % room >= DEFER_MIN_BYTES)).max(1)
        } else {
            1
        };
        // Rendezvous data has no reply to carry its ack. An eager message's
        // ack waits as that of a copied one does: for a reply (a ping-pong)
        // or the receiver's ack delay.
        let ack_at_once = repr.ty == MsgType::RData;
        let r = dg.send_run(
            p,
            token,
            HEADER_LEN,
            count,
            &mut |k, b: &mut [u8]| {
                let mut r = repr;
                r.offset = (off + k * room) as u64;
                r.emit_into(b);
            },
            &mut |k| {
                let o = off + k * room;
                Deferred {
                    key: o as u64,
                    len: room.min(end - o),
                    ack_at_once,
                }
            },
        );
        match r {
            Ok(k) => self.segment_sent(p, id, false, room.saturating_mul(k).min(rem), k),
            Err(SendError::WouldBlock) => Step::Blocked,
            Err(_) => {
                self.fail_send(id, CompError::PeerUnreachable);
                Step::Sent
            }
        }
    }

    /// `count` datagrams of message `id` to `p` (an RTS, or `n` bytes of
    /// data in all) were handed down.
    fn segment_sent(&mut self, p: PeerId, id: usize, is_rts: bool, n: usize, count: usize) -> Step {
        let Some(m) = self.outs.get_mut(id) else {
            return Step::Sent;
        };
        m.outstanding += count as u32;
        let done = if is_rts {
            m.rts_sent = true;
            false
        } else {
            m.next_off += n;
            m.sent_any = true;
            m.handed_all = m.next_off >= m.end_bytes;
            m.handed_all
        };
        self.stats.datagrams_sent += count as u64;
        if is_rts || done {
            // Finished here; a rendezvous message comes back with its CTS.
            self.peer_mut(p).queue.pop_front();
        }
        if done {
            self.maybe_complete_send(id);
        }
        Step::Sent
    }

    /// Give message `id` its sequence number and protocol (it is at its queue's front).
    fn start_send(&mut self, id: usize, p: PeerId) {
        let (eager_limit, mode) = (self.eager_limit, self.mode);
        let Some(total) = self.outs.get(id).map(|m| m.total_bytes) else {
            return;
        };
        let st = self.peer_mut(p);
        let seq = st.next_send_seq;
        if mode == EpMode::Rdm {
            // One message credit per message, whatever its protocol: a
            // rendezvous request takes a record at the receiver too.
            st.send_credit_msgs = st.send_credit_msgs.saturating_sub(1);
        }
        let proto = if mode == EpMode::Dgram {
            Proto::Data
        } else if total <= eager_limit && total <= st.send_credit_bytes {
            st.send_credit_bytes -= total;
            Proto::Data
        } else {
            Proto::Rndv
        };
        // DGRAM receivers ignore it, but it keeps tokens unique there too.
        st.next_send_seq = seq.wrapping_add(1);
        if proto == Proto::Rndv {
            self.rndv_started(p, seq, id);
        }
        if let Some(m) = self.outs.get_mut(id) {
            m.seq = seq;
            m.proto = proto;
        }
    }

    /// Complete send `id` if its completion condition holds.
    pub(crate) fn maybe_complete_send(&mut self, id: usize) {
        let Some(m) = self.outs.get(id) else {
            return;
        };
        if m.handed_all && ((!m.op.delivery_complete && !m.deferred) || m.outstanding == 0) {
            self.finish_send(id, None);
        }
    }

    /// Complete send `id` with `error` (once) and forget it.
    pub(crate) fn fail_send(&mut self, id: usize, error: CompError) {
        if let Some(m) = self.outs.get(id) {
            let p = m.op.peer;
            if let Some(q) = self.peers.get_mut(p.0 as usize).map(|s| &mut s.queue) {
                q.retain(|&x| x != id);
            }
        }
        self.finish_send(id, Some(error));
    }

    fn finish_send(&mut self, id: usize, error: Option<CompError>) {
        let Some(m) = self.outs.remove(id) else {
            return;
        };
        self.rndv_finished(id, &m);
        let len = m.total_bytes;
        self.complete_send(m.op, len, error);
    }

    /// The application buffer and byte offset of the deferred body `key` (an offset)
    /// of datagram `token`, `None` if the message is gone.
    pub(crate) fn send_body(
        &self,
        id: usize,
        seq: u32,
        key: u64,
        len: usize,
    ) -> Option<(&B, usize)> {
        let m = self
            .outs
            .get(id)
            .filter(|m| m.seq == seq && m.proto != Proto::Unstarted)?;
        let off = usize::try_from(key).ok()?;
        (off.checked_add(len)? <= m.op.buf.len()).then_some((&m.op.buf, off))
    }

    /// An `Acked` report for `count` datagrams of a message.
    pub(crate) fn on_send_acked(&mut self, peer: PeerId, slot: usize, seq: u32, count: u32) {
        if let Some(id) = self.out_of_token(peer, slot, seq) {
            if let Some(m) = self.outs.get_mut(id) {
                m.outstanding = m.outstanding.saturating_sub(count);
            }
            self.maybe_complete_send(id);
        }
    }

    /// A `Failed` report for a message datagram: the send fails (once), if it has not
    /// completed yet. If the peer may still be alive, tell it to stop waiting for the
    /// message (ABORT), also when the send already completed (it left on hand-down).
    pub(crate) fn on_send_failed(
        &mut self,
        peer: PeerId,
        slot: usize,
        seq: u32,
        reason: FailReason,
    ) {
        if let Some(id) = self.out_of_token(peer, slot, seq) {
            self.fail_send(id, CompError::PeerUnreachable);
        }
        if self.mode == EpMode::Rdm && reason == FailReason::Unreachable {
            let st = self.peer_mut(peer);
            // The datagrams of one message fail together: one ABORT is enough.
            if st.last_abort_seq != Some(seq) {
                st.last_abort_seq = Some(seq);
                self.push_ctrl(peer, Ctrl::Abort { seq, tries: 0 });
            }
        }
    }

    /// Cancel a queued send that has not started; true if found.
    pub(crate) fn cancel_send(&mut self, context: u64) -> bool {
        let found = self
            .outs
            .indices_where(|m| m.op.context == context && m.proto == Proto::Unstarted);
        match found.first() {
            Some(&id) => {
                self.fail_send(id, CompError::Canceled);
                true
            }
            None => false,
        }
    }

    /// `p` restarted: every started, unfinished send to it fails; sequence numbers restart.
    pub(crate) fn reset_peer_sends(&mut self, p: PeerId) {
        let started = self
            .outs
            .indices_where(|m| m.op.peer == p && m.proto != Proto::Unstarted);
        for id in started {
            self.fail_send(id, CompError::PeerUnreachable);
        }
        let (c, m) = (self.credit.init_bytes, self.credit.init_msgs);
        let st = self.peer_mut(p);
        st.next_send_seq = 0;
        st.ctrl.clear();
        st.send_credit_bytes = c;
        st.credit_owed_bytes = 0;
        st.send_credit_msgs = m;
        st.credit_seen_msgs = 0;
        st.credit_owed_msgs = 0;
        st.uncredited_msgs = 0;
        st.credited_msgs = 0;
        st.last_abort_seq = None;
    }
}
