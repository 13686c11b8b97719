//! One-sided operations, target side: resolving keys through the installed
//! `RmaTarget`, applying writes and atomics, streaming read responses, counting
//! write bytes for WRITE_DONE / `fi_writedata`, and NAKs. (`PROTOCOL.md` §10.)

use crate::hash::FastMap;

use super::atomic::{apply, call_of, op_from_code, op_has_operands, type_from_code};
use super::op::{atomic_valid, AtomicCall, CompKind, Completion};
use super::pump::Step;
use super::token::Token;
use super::MsgLayer;
use crate::buf::{RmaAccess, RmaTarget, UserBuf};
use crate::dgram::{Datagrams, PeerId, SendError};
use crate::wire::msg::{
    AtomicSub, MsgType, Repr, RmaSub, ATOMIC_COMPARE, ATOMIC_FETCH, HEADER_LEN,
};

/// Most write byte counters a target holds for one peer (an honest initiator has at
/// most `MAX_RMA_INFLIGHT` ops started, half this; this bounds what a hostile one
/// can pin). `rma.rs` checks the ratio at compile time.
pub(crate) const MAX_WRITES_IN_PER_PEER: u32 = 8192;
/// Most reads a target streams (or queues) for one peer at once (as above).
pub(crate) const MAX_READS_PER_PEER: usize = 8192;
/// Reply buffers kept for reuse.
const POOL_MAX: usize = 64;

/// A small reply queued for a peer (target side).
pub(crate) enum Reply {
    /// The whole write `id` (`total` bytes) landed.
    Done { id: u32, total: u64 },
    /// Op `id` was refused.
    Nak { id: u32 },
    /// Atomic `id` applied; `vals` = old values (empty for a plain atomic).
    Atomic { id: u32, vals: Vec<u8> },
    /// Initiator side: our write `id` failed; `tries` earlier sends of this abort failed.
    Abort { id: u32, tries: u8 },
}

/// A read being streamed back to its initiator.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ReadOut {
    pub id: u32,
    pub key: u64,
    pub addr: u64,
    pub total: usize,
    pub next_off: usize,
}

/// Bytes of one incoming write seen so far.
struct WriteIn {
    total: usize,
    arrived: usize,
    refused: bool,
    data: Option<u64>,
}

/// Target-side state of the RMA engine.
pub(crate) struct TargetState<B> {
    /// The resolver of remote keys; `None` refuses everything.
    pub resolver: Option<Box<dyn RmaTarget<B>>>,
    /// Incoming writes by (peer, id).
    writes: FastMap<(u32, u32), WriteIn>,
    /// Reply buffers for reuse (no allocation per atomic once warm).
    pool: Vec<Vec<u8>>,
    /// Scratch for atomics: old and new target values.
    old: Vec<u8>,
    new: Vec<u8>,
}

impl<B> TargetState<B> {
    pub(crate) fn new() -> Self {
        TargetState {
            resolver: None,
            writes: FastMap::default(),
            pool: Vec::new(),
            old: Vec::new(),
            new: Vec::new(),
        }
    }

    /// Is some peer's multi-segment write under way (bytes still to come)?
    pub(crate) fn writes_in_progress(&self) -> bool {
        !self.writes.is_empty()
    }

    fn resolve(&self, key: u64, addr: u64, off: usize, len: usize, a: RmaAccess) -> Option<B>
    where
        B: UserBuf,
    {
        let addr = addr.checked_add(off as u64)?;
        addr.checked_add(len as u64)?;
        let b = self.resolver.as_ref()?.resolve(key, addr, len, a)?;
        // A resolver that hands back less than asked is treated as a refusal.
        (b.len() >= len).then_some(b)
    }
}

impl<B: UserBuf> MsgLayer<B> {
    /// Install the target-side resolver of remote keys (the domain's MR table).
    /// Without one every arriving RMA request is refused with `RemoteAccess`.
    pub fn set_rma_target(&mut self, t: Box<dyn RmaTarget<B>>) {
        self.rma.target.resolver = Some(t);
    }

    /// Where the bytes of a later segment of `peer`'s write `repr.seq` go (the
    /// first one sets the write up through the normal path): `f(region, 0, n)`
    /// with the resolved region; returns the sub-header length, `None` to receive
    /// normally. `data` = the bytes after the message header (sub-header first).
    pub(crate) fn rma_write_place(
        &self,
        peer: PeerId,
        repr: &Repr,
        data: &[u8],
        f: &mut dyn FnMut(&B, usize, usize),
    ) -> Option<usize> {
        let (sub, bytes) = RmaSub::parse(data).ok()?;
        let (total, off) = (
            usize::try_from(repr.total).ok()?,
            usize::try_from(repr.offset).ok()?,
        );
        let w = self.rma.target.writes.get(&(peer.0, repr.seq))?;
        if w.total != total
            || w.refused
            || bytes.is_empty()
            || off.checked_add(bytes.len())? > total
        {
            return None;
        }
        let b = self
            .rma
            .target
            .resolve(sub.key, sub.addr, off, bytes.len(), RmaAccess::Write)?;
        f(&b, 0, bytes.len());
        Some(crate::wire::msg::RMA_SUB_LEN)
    }

    /// An RMA datagram from `peer` (any of the types 7..=14).
    pub(crate) fn rma_on_payload(&mut self, peer: PeerId, repr: &Repr, data: &[u8]) {
        match repr.ty {
            MsgType::Write => self.on_write(peer, repr, data),
            MsgType::ReadReq => self.on_read_req(peer, repr, data),
            MsgType::Atomic => self.on_atomic(peer, repr, data),
            MsgType::RmaAbort => self.on_rma_abort(peer, repr.seq),
            _ => self.rma_on_reply(peer, repr, data),
        }
    }

    fn reply(&mut self, peer: PeerId, r: Reply) {
        if matches!(r, Reply::Nak { .. }) {
            self.rma.stats.refused += 1;
        }
        self.peer_mut(peer).rma.replies.push_back(r);
        self.wake(peer);
    }

    fn on_write(&mut self, peer: PeerId, repr: &Repr, data: &[u8]) {
        let Ok((sub, bytes)) = RmaSub::parse(data) else {
            self.rma.stats.bad += 1;
            return;
        };
        let (Ok(total), Ok(off)) = (usize::try_from(repr.total), usize::try_from(repr.offset))
        else {
            self.rma.stats.bad += 1;
            return;
        };
        let key = (peer.0, repr.seq);
        if !self.rma.target.writes.contains_key(&key) {
            if self.peer_mut(peer).rma.writes_in >= MAX_WRITES_IN_PER_PEER {
                // Refuse rather than drop: the initiator completes instead of waiting
                // (counters can leak when an initiator's segments failed unseen by us).
                self.reply(peer, Reply::Nak { id: repr.seq });
                return;
            }
            self.peer_mut(peer).rma.writes_in += 1;
            self.rma.stats.live_writes += 1;
            self.rma.target.writes.insert(
                key,
                WriteIn {
                    total,
                    arrived: 0,
                    refused: false,
                    data: repr.data,
                },
            );
        }
        let t = &mut self.rma.target;
        let Some(w) = t.writes.get(&key) else {
            return;
        };
        if w.total != total {
            self.rma.stats.stray += 1;
            return;
        }
        let placed = self.placed;
        let refused = match t.resolve(sub.key, sub.addr, off, bytes.len(), RmaAccess::Write) {
            Some(mut b) => {
                // Placed: the bytes are in the region already (`rma_write_place`).
                if !placed {
                    b.write_at(0, bytes);
                }
                false
            }
            None => true,
        };
        let Some(w) = t.writes.get_mut(&key) else {
            return;
        };
        w.refused |= refused;
        w.arrived = w.arrived.saturating_add(bytes.len());
        if w.arrived < w.total {
            return;
        }
        // Every byte accounted for: one reply, exactly once.
        let Some(w) = t.writes.remove(&key) else {
            return;
        };
        self.rma.stats.live_writes = self.rma.stats.live_writes.saturating_sub(1);
        let st = &mut self.peer_mut(peer).rma;
        st.writes_in = st.writes_in.saturating_sub(1);
        if w.refused {
            self.reply(peer, Reply::Nak { id: repr.seq });
            return;
        }
        if let Some(d) = w.data {
            self.comps.push_back(Completion {
                context: 0,
                kind: CompKind::RemoteWrite,
                tagged: false,
                len: w.total,
                tag: 0,
                data: Some(d),
                src: Some(peer),
                buf: None,
                offset: 0,
                multi_recv_done: false,
                error: None,
                olen: 0,
                report: true,
            });
        }
        let total = repr.total;
        self.reply(
            peer,
            Reply::Done {
                id: repr.seq,
                total,
            },
        );
    }

    /// The initiator failed its write `id`: the rest never comes, forget its counter.
    fn on_rma_abort(&mut self, peer: PeerId, id: u32) {
        if self.rma.target.writes.remove(&(peer.0, id)).is_some() {
            self.rma.stats.live_writes = self.rma.stats.live_writes.saturating_sub(1);
            let st = &mut self.peer_mut(peer).rma;
            st.writes_in = st.writes_in.saturating_sub(1);
        } else {
            self.rma.stats.stray += 1;
        }
    }

    fn on_read_req(&mut self, peer: PeerId, repr: &Repr, data: &[u8]) {
        let (Ok((sub, _)), Ok(total)) = (RmaSub::parse(data), usize::try_from(repr.total)) else {
            self.rma.stats.bad += 1;
            return;
        };
        let id = repr.seq;
        let ok = self
            .rma
            .target
            .resolve(sub.key, sub.addr, 0, total, RmaAccess::Read)
            .is_some();
        if !ok {
            self.reply(peer, Reply::Nak { id });
            return;
        }
        let st = &mut self.peer_mut(peer).rma;
        if st.reads.len() >= MAX_READS_PER_PEER {
            self.reply(peer, Reply::Nak { id });
            return;
        }
        st.reads.push_back(ReadOut {
            id,
            key: sub.key,
            addr: sub.addr,
            total,
            next_off: 0,
        });
        self.rma.stats.live_reads += 1;
        self.wake(peer);
    }

    fn on_atomic(&mut self, peer: PeerId, repr: &Repr, data: &[u8]) {
        let Ok((sub, rest)) = AtomicSub::parse(data) else {
            self.rma.stats.bad += 1;
            return;
        };
        let id = repr.seq;
        let (Some(op), Some(dt)) = (op_from_code(sub.op), type_from_code(sub.dt)) else {
            self.rma.stats.bad += 1;
            self.reply(peer, Reply::Nak { id });
            return;
        };
        let fetch = sub.flags & ATOMIC_FETCH != 0;
        let call = call_of(fetch, sub.flags & ATOMIC_COMPARE != 0);
        let n = (sub.count as usize).saturating_mul(dt.size());
        let opnd = if op_has_operands(op) { n } else { 0 };
        let cmp = if call == AtomicCall::Compare { n } else { 0 };
        // The old values must fit one reply datagram (and the scratch stays small).
        let fits = n <= self.payload_max.saturating_sub(HEADER_LEN);
        if !atomic_valid(op, dt, call) || n == 0 || !fits || rest.len() != opnd + cmp {
            self.rma.stats.bad += 1;
            self.reply(peer, Reply::Nak { id });
            return;
        }
        let t = &mut self.rma.target;
        let Some(mut b) = t.resolve(sub.key, sub.addr, 0, n, RmaAccess::Atomic) else {
            self.reply(peer, Reply::Nak { id });
            return;
        };
        t.old.clear();
        t.old.resize(n, 0);
        b.read_at(0, &mut t.old);
        t.new.clear();
        t.new.resize(n, 0);
        let (operands, compare) = rest.split_at(opnd);
        apply(op, dt, &t.old, operands, compare, &mut t.new);
        b.write_at(0, &t.new);
        let mut vals = t.pool.pop().unwrap_or_default();
        vals.clear();
        if fetch {
            vals.extend_from_slice(&t.old);
        }
        self.reply(peer, Reply::Atomic { id, vals });
    }

    /// Hand down `p`'s first small reply.
    pub(crate) fn send_reply(&mut self, p: PeerId, dg: &mut dyn Datagrams) -> Step {
        let Some(r) = self.peer_mut(p).rma.replies.front() else {
            return Step::Idle;
        };
        let (ty, id, total, vals): (_, _, _, &[u8]) = match r {
            Reply::Done { id, total } => (MsgType::WriteDone, *id, *total, &[]),
            Reply::Nak { id } => (MsgType::RmaNak, *id, 0, &[]),
            Reply::Atomic { id, vals } => (MsgType::AtomicResp, *id, vals.len() as u64, vals),
            Reply::Abort { id, .. } => (MsgType::RmaAbort, *id, 0, &[]),
        };
        let token = match r {
            Reply::Abort { id, tries } => Token::RmaAbort {
                id: *id,
                tries: *tries,
            },
            _ => Token::RmaReply { id },
        }
        .encode();
        let repr = Repr {
            ty,
            seq: id,
            total,
            offset: 0,
            tag: None,
            data: None,
        };
        let r = dg.send(p, token, HEADER_LEN + vals.len(), &mut |b: &mut [u8]| {
            if repr.emit_into(b) {
                if let Some(dst) = b.get_mut(HEADER_LEN..) {
                    dst.copy_from_slice(vals);
                }
            }
        });
        if r == Err(SendError::WouldBlock) {
            return Step::Blocked;
        }
        // Sent, or the peer is gone (nothing to tell it then).
        if r.is_ok() {
            self.stats.datagrams_sent += 1;
        }
        if let Some(Reply::Atomic { vals, .. }) = self.peer_mut(p).rma.replies.pop_front() {
            if self.rma.target.pool.len() < POOL_MAX {
                self.rma.target.pool.push(vals);
            }
        }
        Step::Sent
    }

    /// Hand down the next segment of `p`'s front read response.
    pub(crate) fn send_read_segment(&mut self, p: PeerId, dg: &mut dyn Datagrams) -> Step {
        let Some(&rd) = self.peer_mut(p).rma.reads.front() else {
            return Step::Idle;
        };
        let room = self.payload_max.saturating_sub(HEADER_LEN);
        let n = room.min(rd.total - rd.next_off);
        let t = &self.rma.target;
        let src = t.resolve(rd.key, rd.addr, rd.next_off, n, RmaAccess::Read);
        let Some(src) = src.filter(|_| room > 0) else {
            // The region went away (or no datagram fits a byte): refuse the rest.
            self.end_read(p);
            self.reply(p, Reply::Nak { id: rd.id });
            return Step::Idle;
        };
        let repr = Repr {
            ty: MsgType::ReadResp,
            seq: rd.id,
            total: rd.total as u64,
            offset: rd.next_off as u64,
            tag: None,
            data: None,
        };
        let token = Token::RmaReply { id: rd.id }.encode();
        let r = dg.send(p, token, HEADER_LEN + n, &mut |b: &mut [u8]| {
            if repr.emit_into(b) {
                if let Some(dst) = b.get_mut(HEADER_LEN..) {
                    src.read_at(0, dst);
                }
            }
        });
        match r {
            Ok(()) => {
                self.stats.datagrams_sent += 1;
                let next = rd.next_off + n;
                if next >= rd.total {
                    self.end_read(p);
                } else if let Some(f) = self.peer_mut(p).rma.reads.front_mut() {
                    f.next_off = next;
                }
                Step::Sent
            }
            Err(SendError::WouldBlock) => Step::Blocked,
            Err(_) => {
                self.end_read(p);
                Step::Sent
            }
        }
    }

    fn end_read(&mut self, p: PeerId) {
        if self.peer_mut(p).rma.reads.pop_front().is_some() {
            self.rma.stats.live_reads = self.rma.stats.live_reads.saturating_sub(1);
        }
    }

    /// Forget what `peer` asked of us: pending replies, reads, write counters
    /// (`keep_aborts`: keep our own queued RMA_ABORTs, the peer may still hear them).
    pub(crate) fn rma_drop_target_state(&mut self, peer: PeerId, keep_aborts: bool) {
        let st = &mut self.peer_mut(peer).rma;
        let reads = st.reads.len();
        st.reads.clear();
        st.replies
            .retain(|r| keep_aborts && matches!(r, Reply::Abort { .. }));
        let had_writes = core::mem::take(&mut st.writes_in) > 0;
        self.rma.stats.live_reads = self.rma.stats.live_reads.saturating_sub(reads);
        if had_writes {
            self.rma.target.writes.retain(|&(p, _), _| p != peer.0);
            self.rma.stats.live_writes = self.rma.target.writes.len();
        }
    }
}
