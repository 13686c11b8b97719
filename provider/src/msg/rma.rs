//! One-sided operations, initiator side: posting RMA writes, reads and atomics,
//! handing their datagrams down, and completing them on the target's reply.
//! (The target side is `rma_target.rs`; the protocol is `PROTOCOL.md` §10.)

use std::collections::VecDeque;

use crate::hash::FastMap;

use super::atomic::{op_code, op_has_operands, type_code};
use super::op::{
    atomic_valid, AtomicCall, AtomicType, CompError, CompKind, Completion, OpError, RmaKind, RmaOp,
    RmaOrder, Started,
};
use super::pump::{Step, DEFER_MIN_BYTES};
use super::rma_target::{Reply, TargetState};
use super::token::Token;
use super::MsgLayer;
use crate::buf::UserBuf;
use crate::config::EpMode;
use crate::dgram::{Datagrams, Deferred, FailReason, PeerId, SendError};
use crate::wire::msg::{
    AtomicSub, MsgType, Repr, RmaSub, ATOMIC_COMPARE, ATOMIC_FETCH, ATOMIC_SUB_LEN, HEADER_LEN,
    RMA_SUB_LEN,
};

/// Most RMA ops one initiator keeps started (sent, reply not yet back) towards one peer;
/// later ones wait in the queue. Bounds the target's per-peer state too.
pub const MAX_RMA_INFLIGHT: u32 = 4096;

// The target keeps room for twice what an honest initiator starts (PROTOCOL.md §10).
const _: () = assert!(
    super::rma_target::MAX_WRITES_IN_PER_PEER == 2 * MAX_RMA_INFLIGHT
        && super::rma_target::MAX_READS_PER_PEER == 2 * MAX_RMA_INFLIGHT as usize
);

/// Counters of the RMA engine (diagnostics).
#[derive(Clone, Debug, Default)]
pub struct RmaStats {
    /// Requests this endpoint refused as a target (NAK sent).
    pub refused: u64,
    /// RMA datagrams that fit no state (unknown op id, wrong kind, over a limit).
    pub stray: u64,
    /// RMA payloads whose sub-header or contents failed to parse.
    pub bad: u64,
    /// Initiator ops started and not yet completed, now.
    pub live_ops: usize,
    /// Target-side write byte counters held now.
    pub live_writes: usize,
    /// Target-side read responses still streaming now.
    pub live_reads: usize,
}

/// One posted one-sided operation (initiator side).
pub(crate) struct RmaOut<B> {
    pub op: RmaOp<B>,
    /// Per-peer RMA op id (valid once started).
    pub id: u32,
    /// Bytes of `op.buf`.
    pub len: usize,
    /// Has an id and sent (or is sending) its datagrams.
    pub started: bool,
    /// Write: next byte to hand down.
    pub next_off: usize,
    /// Every datagram of it handed down.
    pub handed_all: bool,
    /// Read: response bytes placed.
    pub arrived: usize,
    /// It reads target memory (a read, a fetching atomic): for `RmaOrder`.
    pub reads: bool,
    /// It writes target memory (a write, any atomic): for `RmaOrder`.
    pub writes: bool,
    /// An atomic (else a read or write): for `RmaOrder`.
    pub atomic: bool,
}

/// Per-peer RMA state (kept in the message layer's `PeerState`).
#[derive(Default)]
pub(crate) struct RmaPeer {
    /// Id of the next op we start towards this peer.
    pub next_id: u32,
    /// Our ops (slab ids) with datagrams still to hand down, in post order.
    pub queue: VecDeque<usize>,
    /// Our started, unfinished ops towards this peer.
    pub started: u32,
    /// Of those, the ones that read / write target memory, RMA and atomics apart.
    pub started_rw: Started,
    /// The queue's front op may not start yet: it waits for earlier ops to
    /// complete (`RmaOrder`; kept by `rma_refresh_hold`).
    pub hold: bool,
    /// Target side: small replies to send (WRITE_DONE, RMA_NAK, ATOMIC_RESP).
    pub replies: VecDeque<Reply>,
    /// Target side: reads being streamed back, front first.
    pub reads: VecDeque<super::rma_target::ReadOut>,
    /// Target side: write byte counters held for this peer.
    pub writes_in: u32,
    /// Alternation: RMA's turn over messages.
    pub turn: bool,
    /// Alternation: streaming reads' turn over our own ops.
    pub reads_turn: bool,
}

impl RmaPeer {
    /// Our own ops can send now (front started, or room to start another).
    fn can_start(&self) -> bool {
        !self.queue.is_empty() && !self.hold && self.started < MAX_RMA_INFLIGHT
    }

    /// Something for `pump` to hand down.
    pub(crate) fn has_work(&self) -> bool {
        !self.replies.is_empty() || !self.reads.is_empty() || self.can_start()
    }
}

/// The RMA engine's state inside the message layer.
pub(crate) struct RmaState<B> {
    pub outs: super::slab::Slab<RmaOut<B>>,
    /// Started ops by (peer, id), for reply lookup.
    pub out_map: FastMap<(u32, u32), usize>,
    pub target: TargetState<B>,
    pub stats: RmaStats,
    /// The orderings our ops keep (the endpoint's; default none).
    pub order: RmaOrder,
}

impl<B> RmaState<B> {
    pub(crate) fn new() -> Self {
        RmaState {
            outs: super::slab::Slab::new(),
            out_map: FastMap::default(),
            target: TargetState::new(),
            stats: RmaStats::default(),
            order: RmaOrder::default(),
        }
    }
}

impl<B: UserBuf> MsgLayer<B> {
    /// Largest element count one atomic of datatype `dt` may carry (operands and,
    /// for compare ops, comparands in one datagram).
    pub fn max_atomic_count(&self, dt: AtomicType, compare: bool) -> usize {
        let size = dt.size();
        let room = self.payload_max.saturating_sub(HEADER_LEN + ATOMIC_SUB_LEN);
        (room / (size.max(1) * if compare { 2 } else { 1 })).min(u32::MAX as usize)
    }

    /// Queue a one-sided operation (RMA write/read or atomic). It leaves through
    /// `pump`; its completion (kind `Write`, `Read` or `Atomic`) comes from
    /// `poll_completion`. `TooLarge` for an atomic whose operands do not fit one
    /// datagram (see `max_atomic_count`) or a write/read over `max_msg_size`;
    /// `Invalid` for an op/datatype pair `atomic_valid` refuses (and in DGRAM
    /// mode); `Again` while `max_tx_ops` operations are not completed (they
    /// share the transmit queue with sends).
    pub fn post_rma(&mut self, op: RmaOp<B>) -> Result<(), OpError> {
        if self.tx_room() == 0 && self.mode == EpMode::Rdm {
            return Err(OpError::Again);
        }
        if self.mode != EpMode::Rdm {
            return Err(OpError::Invalid);
        }
        let len = op.buf.len();
        let atomic = match &op.kind {
            RmaKind::Write { .. } | RmaKind::Read => None,
            RmaKind::Atomic { op, dt } => Some((*op, *dt, AtomicCall::Plain, None, None)),
            RmaKind::FetchAtomic { op, dt, result } => {
                Some((*op, *dt, AtomicCall::Fetch, Some(result.len()), None))
            }
            RmaKind::CompareAtomic {
                op,
                dt,
                compare,
                result,
            } => Some((
                *op,
                *dt,
                AtomicCall::Compare,
                Some(result.len()),
                Some(compare.len()),
            )),
        };
        match atomic {
            None if len > self.max_msg_size() => return Err(OpError::TooLarge),
            None => {}
            Some((aop, dt, call, result, compare)) => {
                let size = dt.size();
                if !atomic_valid(aop, dt, call) || len == 0 || !len.is_multiple_of(size) {
                    return Err(OpError::Invalid);
                }
                if result.is_some_and(|r| r < len) || compare.is_some_and(|c| c < len) {
                    return Err(OpError::Invalid);
                }
                if len / size > self.max_atomic_count(dt, call == AtomicCall::Compare) {
                    return Err(OpError::TooLarge);
                }
            }
        }
        let peer = op.peer;
        let (reads, writes) = match &op.kind {
            RmaKind::Write { .. } => (false, true),
            RmaKind::Read => (true, false),
            RmaKind::Atomic { .. } => (false, true),
            RmaKind::FetchAtomic { .. } | RmaKind::CompareAtomic { .. } => (true, true),
        };
        let atomic = !matches!(op.kind, RmaKind::Write { .. } | RmaKind::Read);
        let id = self.rma.outs.insert(RmaOut {
            op,
            id: 0,
            len,
            started: false,
            next_off: 0,
            handed_all: false,
            arrived: 0,
            reads,
            writes,
            atomic,
        });
        self.peer_mut(peer).rma.queue.push_back(id);
        self.rma_refresh_hold(peer);
        self.wake(peer);
        Ok(())
    }

    /// Set the orderings our one-sided ops keep (`RmaOrder`); before any is posted.
    pub fn set_rma_order(&mut self, order: RmaOrder) {
        self.rma.order = order;
    }

    /// Recompute whether `p`'s front op must wait for earlier ones (after the
    /// queue's front or the started counts changed).
    fn rma_refresh_hold(&mut self, p: PeerId) {
        let order = self.rma.order;
        let st = &self.peer_mut(p).rma;
        let front = st.queue.front().copied();
        let started = st.started_rw;
        let hold = front
            .and_then(|slot| self.rma.outs.get(slot))
            .is_some_and(|m| !m.started && order.must_wait(m.atomic, m.reads, m.writes, &started));
        self.peer_mut(p).rma.hold = hold;
    }

    /// `pump`'s RMA hook: hand one RMA datagram of `p` down if it is RMA's turn
    /// (alternating with messages); `None` lets the message queue go.
    pub(crate) fn rma_send_one(&mut self, p: PeerId, dg: &mut dyn Datagrams) -> Option<Step> {
        let msgs_waiting = !self.peer_mut(p).queue.is_empty();
        let st = &mut self.peer_mut(p).rma;
        if !st.has_work() {
            return None;
        }
        st.turn = !st.turn;
        if msgs_waiting && !st.turn {
            return None;
        }
        if !st.replies.is_empty() {
            return Some(self.send_reply(p, dg));
        }
        st.reads_turn = !st.reads_turn;
        let reads_turn = !st.reads.is_empty() && (st.reads_turn || !st.can_start());
        Some(if reads_turn {
            self.send_read_segment(p, dg)
        } else {
            self.send_own(p, dg)
        })
    }

    /// Hand down the next datagram of the op at the front of `p`'s RMA queue.
    fn send_own(&mut self, p: PeerId, dg: &mut dyn Datagrams) -> Step {
        let Some(&slot) = self.peer_mut(p).rma.queue.front() else {
            return Step::Idle;
        };
        let payload_max = self.payload_max;
        let Some(started) = self.rma.outs.get(slot).map(|m| m.started) else {
            self.peer_mut(p).rma.queue.pop_front();
            self.rma_refresh_hold(p);
            return Step::Idle;
        };
        if !started {
            if self.peer_mut(p).rma.hold {
                return Step::Idle;
            }
            self.start_op(p, slot);
        }
        let Some(m) = self.rma.outs.get(slot) else {
            return Step::Idle;
        };
        let r = match &m.op.kind {
            RmaKind::Write { data } => send_write_segment(dg, p, m, *data, payload_max),
            RmaKind::Read => send_read_req(dg, p, m),
            _ => send_atomic(dg, p, m, payload_max),
        };
        match r {
            Ok(n) => {
                self.stats.datagrams_sent += 1;
                let Some(m) = self.rma.outs.get_mut(slot) else {
                    return Step::Sent;
                };
                m.next_off += n;
                let done = !matches!(m.op.kind, RmaKind::Write { .. }) || m.next_off >= m.len;
                if done {
                    m.handed_all = true;
                    self.peer_mut(p).rma.queue.pop_front();
                    self.rma_refresh_hold(p);
                }
                Step::Sent
            }
            Err(SendError::WouldBlock) => Step::Blocked,
            Err(_) => {
                // The peer is gone or a datagram cannot carry the op (payload shrank).
                self.rma_finish(slot, Some(CompError::PeerUnreachable));
                Step::Sent
            }
        }
    }

    /// Give our op in `slot` (the front of `p`'s RMA queue) its id.
    fn start_op(&mut self, p: PeerId, slot: usize) {
        let (reads, writes, atomic) = self
            .rma
            .outs
            .get(slot)
            .map_or((false, false, false), |m| (m.reads, m.writes, m.atomic));
        let st = &mut self.peer_mut(p).rma;
        let id = st.next_id;
        st.next_id = id.wrapping_add(1);
        st.started += 1;
        let k = usize::from(atomic);
        st.started_rw.reads[k] += u32::from(reads);
        st.started_rw.writes[k] += u32::from(writes);
        self.rma.out_map.insert((p.0, id), slot);
        self.rma.stats.live_ops += 1;
        if let Some(m) = self.rma.outs.get_mut(slot) {
            m.started = true;
            m.id = id;
        }
    }

    /// Complete our op in `slot` (once) with `error` and forget it.
    pub(crate) fn rma_finish(&mut self, slot: usize, error: Option<CompError>) {
        let Some(m) = self.rma.outs.remove(slot) else {
            return;
        };
        let p = m.op.peer;
        if m.started {
            if self.rma.out_map.get(&(p.0, m.id)) == Some(&slot) {
                self.rma.out_map.remove(&(p.0, m.id));
            }
            self.rma.stats.live_ops = self.rma.stats.live_ops.saturating_sub(1);
        }
        let st = &mut self.peer_mut(p).rma;
        if m.started {
            st.started = st.started.saturating_sub(1);
            let (r, w) = (&mut st.started_rw.reads, &mut st.started_rw.writes);
            let k = usize::from(m.atomic);
            r[k] = r[k].saturating_sub(u32::from(m.reads));
            w[k] = w[k].saturating_sub(u32::from(m.writes));
        }
        if !m.handed_all {
            st.queue.retain(|&x| x != slot);
        }
        // A freed start slot (or a finished earlier op) may let a queued op go.
        self.rma_refresh_hold(p);
        self.wake(p);
        let kind = match m.op.kind {
            RmaKind::Write { .. } => CompKind::Write,
            RmaKind::Read => CompKind::Read,
            _ => CompKind::Atomic,
        };
        self.comps.push_back(Completion {
            context: m.op.context,
            kind,
            tagged: false,
            len: m.len,
            tag: 0,
            data: None,
            src: None,
            buf: Some(m.op.buf),
            offset: 0,
            multi_recv_done: false,
            error,
            olen: 0,
            report: m.op.report || error.is_some(),
        });
    }

    /// Our started op `id` towards `peer`, if live.
    fn rma_lookup(&mut self, peer: PeerId, id: u32) -> Option<usize> {
        let slot = self.rma.out_map.get(&(peer.0, id)).copied();
        if slot.is_none() {
            self.rma.stats.stray += 1;
        }
        slot
    }

    /// The buffer and offset of the deferred body `key` (a byte offset) of the RMA
    /// datagram of op `id` to `peer`: a WRITE segment's source bytes.
    pub(crate) fn rma_body(
        &self,
        peer: PeerId,
        id: u32,
        key: u64,
        len: usize,
    ) -> Option<(&B, usize)> {
        let slot = *self.rma.out_map.get(&(peer.0, id))?;
        let m = self.rma.outs.get(slot)?;
        if !matches!(m.op.kind, RmaKind::Write { .. }) {
            return None;
        }
        let off = usize::try_from(key).ok()?;
        (off.checked_add(len)? <= m.op.buf.len()).then_some((&m.op.buf, off))
    }

    /// Where `len` READ_RESP bytes of our read `repr.seq` go: `f(buf, offset,
    /// len)`; false if they do not belong to a live read (receive normally).
    pub(crate) fn rma_read_place(
        &self,
        peer: PeerId,
        repr: &Repr,
        len: usize,
        f: &mut dyn FnMut(&B, usize, usize),
    ) -> bool {
        let Some(m) = self
            .rma
            .out_map
            .get(&(peer.0, repr.seq))
            .and_then(|&slot| self.rma.outs.get(slot))
        else {
            return false;
        };
        let off = repr.offset as usize;
        if !matches!(m.op.kind, RmaKind::Read)
            || repr.total != m.len as u64
            || len == 0
            || off.checked_add(len).is_none_or(|end| end > m.len)
        {
            return false;
        }
        f(&m.op.buf, off, len);
        true
    }

    /// A reply from the target of our op `repr.seq`: WRITE_DONE, RMA_NAK, READ_RESP or
    /// ATOMIC_RESP.
    pub(crate) fn rma_on_reply(&mut self, peer: PeerId, repr: &Repr, data: &[u8]) {
        let Some(slot) = self.rma_lookup(peer, repr.seq) else {
            return;
        };
        let Some(m) = self.rma.outs.get_mut(slot) else {
            return;
        };
        let ok = match (repr.ty, &mut m.op.kind) {
            (MsgType::RmaNak, _) => {
                self.rma_finish(slot, Some(CompError::RemoteAccess));
                return;
            }
            (MsgType::WriteDone, RmaKind::Write { .. }) => {
                m.handed_all && repr.total == m.len as u64
            }
            (MsgType::ReadResp, RmaKind::Read) => {
                let off = repr.offset as usize;
                if repr.total != m.len as u64 || off + data.len() > m.len {
                    false
                } else {
                    if !self.placed {
                        m.op.buf.write_at(off, data);
                    }
                    m.arrived += data.len();
                    if m.arrived < m.len {
                        return;
                    }
                    true
                }
            }
            (MsgType::AtomicResp, RmaKind::Atomic { .. }) => data.is_empty(),
            (MsgType::AtomicResp, RmaKind::FetchAtomic { result, .. })
            | (MsgType::AtomicResp, RmaKind::CompareAtomic { result, .. })
                if data.len() == m.len =>
            {
                result.write_at(0, data);
                true
            }
            _ => false,
        };
        if ok {
            self.rma_finish(slot, None);
        } else {
            self.rma.stats.stray += 1;
        }
    }

    /// `peer` failed (an SRD `Failed` report with `reason` for datagram `token`, any
    /// datagram) or restarted (`reason` `None`): its target-side state is dropped and every started op towards
    /// it fails `PeerUnreachable`. If the peer may live on (`Unreachable`), each failed
    /// write gets an RMA_ABORT so the target frees its byte counter (a failed abort is
    /// sent again, up to `MAX_ABORT_TRIES` sends).
    pub(crate) fn rma_peer_lost(
        &mut self,
        peer: PeerId,
        reason: Option<FailReason>,
        token: Option<Token>,
    ) {
        let alive = reason == Some(FailReason::Unreachable);
        // The aborts queued by an earlier report of this batch must survive.
        self.rma_drop_target_state(peer, alive);
        if let (true, Some(Token::RmaAbort { id, tries })) = (alive, token) {
            let tries = tries.saturating_add(1);
            if tries < super::MAX_ABORT_TRIES {
                self.peer_mut(peer)
                    .rma
                    .replies
                    .push_back(Reply::Abort { id, tries });
                self.wake(peer);
            }
        }
        if self.peer_mut(peer).rma.started == 0 {
            return;
        }
        for slot in self
            .rma
            .outs
            .indices_where(|m| m.op.peer == peer && m.started)
        {
            let write = self
                .rma
                .outs
                .get(slot)
                .and_then(|m| matches!(m.op.kind, RmaKind::Write { .. }).then_some(m.id));
            if let (true, Some(id)) = (alive, write) {
                self.peer_mut(peer)
                    .rma
                    .replies
                    .push_back(Reply::Abort { id, tries: 0 });
            }
            self.rma_finish(slot, Some(CompError::PeerUnreachable));
        }
    }
}

/// The header of op `m`'s datagram of type `ty` (offset 0, no CQ data).
fn op_header<B: UserBuf>(m: &RmaOut<B>, ty: MsgType, total: u64) -> Repr {
    Repr {
        ty,
        seq: m.id,
        total,
        offset: 0,
        tag: None,
        data: None,
    }
}

/// Hand down the next WRITE segment of write `m` (`data`: its CQ data);
/// returns the bytes it carried.
fn send_write_segment<B: UserBuf>(
    dg: &mut dyn Datagrams,
    p: PeerId,
    m: &RmaOut<B>,
    data: Option<u64>,
    payload_max: usize,
) -> Result<usize, SendError> {
    let (key, addr, off, buf) = (m.op.key, m.op.addr, m.next_off, &m.op.buf);
    let room = payload_max.saturating_sub(HEADER_LEN + RMA_SUB_LEN);
    if room == 0 {
        return Err(SendError::TooLarge);
    }
    let n = room.min(m.len - off);
    let repr = Repr {
        offset: off as u64,
        data,
        ..op_header(m, MsgType::Write, m.len as u64)
    };
    let token = Token::Rma { id: m.id }.encode();
    let head = HEADER_LEN + RMA_SUB_LEN;
    if n >= DEFER_MIN_BYTES && dg.supports_body() {
        // Straight from the application's buffer, which stays valid until
        // the target's WRITE_DONE, i.e. until every byte arrived (a resend
        // after that finds the op gone and carries zeros the target drops
        // as a duplicate).
        dg.send_with_body(
            p,
            token,
            head,
            &mut |b: &mut [u8]| {
                if repr.emit_into(b) {
                    (RmaSub { key, addr }).emit(&mut b[HEADER_LEN..]);
                }
            },
            Deferred {
                key: off as u64,
                len: n,
                ack_at_once: true,
            },
        )
    } else {
        dg.send(p, token, head + n, &mut |b: &mut [u8]| {
            if repr.emit_into(b) && (RmaSub { key, addr }).emit(&mut b[HEADER_LEN..]) {
                if let Some(dst) = b.get_mut(head..) {
                    buf.read_at(off, dst);
                }
            }
        })
    }
    .map(|()| n)
}

/// Hand down read `m`'s READ_REQ; returns 0 (no bytes of the op carried).
fn send_read_req<B: UserBuf>(
    dg: &mut dyn Datagrams,
    p: PeerId,
    m: &RmaOut<B>,
) -> Result<usize, SendError> {
    let (key, addr) = (m.op.key, m.op.addr);
    let repr = op_header(m, MsgType::ReadReq, m.len as u64);
    let token = Token::Rma { id: m.id }.encode();
    dg.send(p, token, HEADER_LEN + RMA_SUB_LEN, &mut |b: &mut [u8]| {
        if repr.emit_into(b) {
            (RmaSub { key, addr }).emit(&mut b[HEADER_LEN..]);
        }
    })
    .map(|()| 0)
}

/// Hand down atomic `m`'s one ATOMIC datagram (operands, then comparands);
/// returns 0.
fn send_atomic<B: UserBuf>(
    dg: &mut dyn Datagrams,
    p: PeerId,
    m: &RmaOut<B>,
    payload_max: usize,
) -> Result<usize, SendError> {
    let (op, dt, flags, compare) = match &m.op.kind {
        RmaKind::Atomic { op, dt } => (*op, *dt, 0, None),
        RmaKind::FetchAtomic { op, dt, .. } => (*op, *dt, ATOMIC_FETCH, None),
        RmaKind::CompareAtomic {
            op, dt, compare, ..
        } => (*op, *dt, ATOMIC_FETCH | ATOMIC_COMPARE, Some(compare)),
        RmaKind::Write { .. } | RmaKind::Read => return Err(SendError::TooLarge),
    };
    let opnd = if op_has_operands(op) { m.len } else { 0 };
    let bytes = opnd + compare.map_or(0, |_| m.len);
    let sub = AtomicSub {
        key: m.op.key,
        addr: m.op.addr,
        op: op_code(op),
        dt: type_code(dt),
        flags,
        count: (m.len / dt.size()) as u32,
    };
    let repr = op_header(m, MsgType::Atomic, bytes as u64);
    let len = HEADER_LEN + ATOMIC_SUB_LEN + bytes;
    if len > payload_max {
        return Err(SendError::TooLarge);
    }
    let buf = &m.op.buf;
    let token = Token::Rma { id: m.id }.encode();
    dg.send(p, token, len, &mut |b: &mut [u8]| {
        if repr.emit_into(b) && sub.emit(&mut b[HEADER_LEN..]) {
            let at = HEADER_LEN + ATOMIC_SUB_LEN;
            if let Some(dst) = b.get_mut(at..at + opnd) {
                buf.read_at(0, dst);
            }
            if let (Some(c), Some(dst)) = (compare, b.get_mut(at + opnd..)) {
                c.read_at(0, dst);
            }
        }
    })
    .map(|()| 0)
}
