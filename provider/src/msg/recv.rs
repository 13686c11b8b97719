//! Receive side: incoming message records, send-order (SAS) hold-back, placement
//! of segments by offset (into the matched buffer or a bounce buffer), receive completions.

use super::completion::RecvInfo;
use super::op::CompError;
use super::MsgLayer;
use crate::buf::UserBuf;
use crate::dgram::PeerId;
use crate::wire::msg::{MsgType, Packet, Repr, HEADER_LEN, OFFSET_FIELD};

/// Most bytes of freed bounce buffers an endpoint keeps for reuse: what 64
/// buffers of the old 64 KiB eager limit held. With 256 KiB eager messages a
/// count alone let an endpoint keep 16 MiB after a burst of unexpected ones.
const BOUNCE_POOL_BYTES: usize = 4 << 20;

/// Where an incoming message's bytes go.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Not matched yet: eager/medium bytes go to the bounce buffer.
    None,
    /// Matched to receive entry `id`: bytes go to its buffer at `base + offset`,
    /// the first `cap` bytes of the message fit.
    Recv { id: usize, base: usize, cap: usize },
    /// Discarded (`FI_DISCARD`): remaining bytes are consumed and dropped.
    Discard,
}

/// One incoming message, from its first segment (any segment) until all its bytes arrived.
pub(crate) struct InRec {
    pub peer: PeerId,
    pub seq: u32,
    pub total_bytes: usize,
    pub tag: Option<u64>,
    pub data: Option<u64>,
    /// Rendezvous (RTS arrived; data only after our CTS).
    pub rndv: bool,
    /// Message bytes that arrived (placed or dropped).
    pub arrived_bytes: usize,
    /// Rendezvous: end of the highest RDATA piece that arrived (message
    /// offset, bytes): nothing of the message beyond it was written yet.
    pub rdata_hi_bytes: usize,
    /// Bytes that will arrive in all (rendezvous: our grant; `usize::MAX` before it).
    pub expect_bytes: usize,
    pub target: Target,
    /// Unexpected eager/medium data (len = `total_bytes`).
    pub bounce: Option<Vec<u8>>,
    /// Listed in `in_map` under (peer, seq).
    pub in_map: bool,
    /// Passed send-order hold-back: eligible for matching.
    pub ready: bool,
    /// Eager credit to return to the sender once the data left unexpected memory, bytes.
    pub charged_bytes: usize,
    /// One message credit to return to the sender once it left unexpected
    /// memory (false once returned, and for records of a past incarnation).
    pub charged_msg: bool,
    /// Counted in `unexp_msgs`: neither matched nor discarded nor aborted yet.
    pub counted: bool,
    /// The sender aborted it (ABORT): skipped, never matched, when its turn comes.
    pub aborted: bool,
}

/// The last DATA or RDATA segment placed into a known record, for
/// `next_segment`.
pub(crate) struct SegMemo {
    peer: PeerId,
    /// Its message header as received.
    head: [u8; HEADER_LEN],
    /// Its record, message seq and length, and whether it is RDATA.
    id: usize,
    seq: u32,
    total: usize,
    rdata: bool,
    /// Payload bytes, and the offset the next segment continues at.
    len: usize,
    next_off: usize,
}

impl<B: UserBuf> MsgLayer<B> {
    /// A datagram payload delivered by the SRD layer from `peer`.
    pub fn handle_payload(&mut self, peer: PeerId, payload: &[u8]) {
        if self.next_segment(peer, payload) {
            return;
        }
        let placed = self.handle_payload_parsed(peer, payload);
        let Some((id, repr)) = placed.filter(|_| self.seg_shortcut) else {
            return;
        };
        // What the next segment of this message will look like.
        let Some(head) = payload.get(..HEADER_LEN) else {
            return;
        };
        let len = payload.len() - HEADER_LEN;
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(head);
        self.seg_memo = Some(SegMemo {
            peer,
            head: h,
            id,
            seq: repr.seq,
            total: repr.total as usize,
            rdata: repr.ty == MsgType::RData,
            len,
            next_off: repr.offset as usize + len,
        });
    }

    /// The segment after the one `seg_memo` describes, of the same length,
    /// for a record that would still take it: placed without parsing its
    /// header (the same bytes but for the offset, which continues the last)
    /// or looking its record up by (peer, seq): what `handle_payload_parsed`
    /// would do with it, checked as it would be. False: not such a segment.
    /// A flowlet's segments of a large message are most of a stream's; this
    /// took their cost in the message layer from about 300 to 150
    /// instructions each (a 1 MiB stream at MTU 1500).
    fn next_segment(&mut self, peer: PeerId, payload: &[u8]) -> bool {
        let Some(m) = &self.seg_memo else {
            return false;
        };
        if m.peer != peer || payload.len() != HEADER_LEN + m.len {
            return false;
        }
        let (o0, o1) = (OFFSET_FIELD.start, OFFSET_FIELD.end);
        let h = &payload[..HEADER_LEN];
        let mut off = [0u8; 8];
        off.copy_from_slice(&h[o0..o1]);
        if u64::from_be_bytes(off) != m.next_off as u64
            || h[..o0] != m.head[..o0]
            || h[o1..] != m.head[o1..]
        {
            return false;
        }
        let (id, off, len, total) = (m.id, m.next_off, m.len, m.total);
        let end = off.saturating_add(len);
        if end > total || self.in_map.get(&(peer.0, m.seq)) != Some(&id) {
            return false;
        }
        // The checks `on_rdata` and `on_msg_segment` make of a known record.
        let takes = match self.ins.get(id) {
            Some(r) if m.rdata => r.rndv && r.target != Target::None,
            Some(r) => !r.rndv && r.total_bytes == total,
            None => false,
        };
        if !takes {
            return false;
        }
        if let Some(m) = self.seg_memo.as_mut() {
            m.next_off = end;
        }
        self.rx_left = total - end;
        self.place(id, off, &payload[HEADER_LEN..]);
        true
    }

    /// `handle_payload` for a payload `next_segment` does not take. Returns
    /// the known record a DATA or RDATA segment went into, with its header
    /// (what `next_segment` looks for next).
    fn handle_payload_parsed(&mut self, peer: PeerId, payload: &[u8]) -> Option<(usize, Repr)> {
        let pkt = match Packet::new_checked(payload) {
            Ok(p) => p,
            Err(_) => {
                self.stats.bad += 1;
                return None;
            }
        };
        let repr = match self.parse_memo.parse(&pkt) {
            Ok(r) => r,
            Err(_) => {
                self.stats.bad += 1;
                return None;
            }
        };
        let data = pkt.payload();
        let (Ok(total), Ok(off)) = (usize::try_from(repr.total), usize::try_from(repr.offset))
        else {
            self.stats.bad += 1;
            return None;
        };
        if self.mode == crate::config::EpMode::Dgram {
            if repr.ty == MsgType::Data && off == 0 && data.len() == total {
                self.dgram_in(peer, &repr, data);
            } else {
                self.stats.bad += 1;
            }
            return None;
        }
        if matches!(repr.ty, MsgType::Data | MsgType::RData) {
            self.rx_left = total.saturating_sub(off.saturating_add(data.len()));
        }
        let placed = match repr.ty {
            MsgType::Data | MsgType::Rts => self.on_msg_segment(peer, &repr, total, off, data),
            MsgType::RData => self.on_rdata(peer, &repr, off, data),
            MsgType::Cts => {
                self.on_cts(peer, repr.seq, repr.total);
                None
            }
            MsgType::Abort => {
                self.on_abort(peer, repr.seq);
                None
            }
            MsgType::Credit => {
                self.on_credit(peer, total, repr.seq);
                None
            }
            _ => {
                self.rma_on_payload(peer, &repr, data);
                None
            }
        };
        placed.map(|id| (id, repr))
    }

    /// A datagram payload whose RDATA bytes are already in the receive buffer
    /// (placed there by the driver at `place_target`'s direction): everything
    /// but the copy. `payload` holds the message header; its length is the
    /// payload's (bytes past the header are not read).
    pub fn handle_payload_placed(&mut self, peer: PeerId, payload: &[u8]) {
        self.placed = true;
        self.handle_payload(peer, payload);
        self.placed = false;
    }

    /// A DATA segment or RTS: start or continue the record of message (peer, seq).
    /// Returns the record of a DATA segment that continued one (for `next_segment`).
    fn on_msg_segment(
        &mut self,
        peer: PeerId,
        repr: &Repr,
        total: usize,
        off: usize,
        data: &[u8],
    ) -> Option<usize> {
        let rndv = repr.ty == MsgType::Rts;
        if !rndv && total > self.eager_limit.max(self.max_unexpected_bytes) {
            // No honest sender sends DATA this large (it must fit its eager credit);
            // refusing it keeps a bad header from allocating a huge bounce buffer.
            self.stats.bad += 1;
            return None;
        }
        // (An empty map, the common case, is not even hashed into.)
        let known = match self.in_map.is_empty() {
            true => None,
            false => self.in_map.find((peer.0, repr.seq)),
        };
        if let Some(id) = known {
            match self.ins.get(id) {
                Some(r) if !r.rndv && !rndv && r.total_bytes == total => {
                    self.place(id, off, data);
                    return Some(id);
                }
                _ => self.stats.stray += 1,
            }
            return None;
        }
        let next = self.peer_mut(peer).next_match_seq;
        let ahead = repr.seq.wrapping_sub(next);
        if ahead >= 1 << 31 {
            // A message we finished already: the sender cannot send it again.
            self.stats.stray += 1;
            return None;
        }
        // A whole message next in send order (an MPI ping-pong's every
        // message) needs no index entry unless it stays (unexpected): no
        // later segment will look for it.
        let whole_next = ahead == 0 && !rndv && off == 0 && data.len() == total;
        let id = self.ins.insert(InRec {
            peer,
            seq: repr.seq,
            total_bytes: total,
            tag: repr.tag,
            data: repr.data,
            rndv,
            arrived_bytes: 0,
            rdata_hi_bytes: 0,
            expect_bytes: if rndv { usize::MAX } else { total },
            target: Target::None,
            bounce: None,
            in_map: !whole_next,
            ready: false,
            charged_bytes: if rndv { 0 } else { total },
            charged_msg: true,
            counted: true,
            aborted: false,
        });
        self.count_msg();
        self.charge_msg(peer);
        if whole_next {
            self.peer_mut(peer).next_match_seq = next.wrapping_add(1);
            self.enter_matching(id);
            self.place(id, off, data);
            if let Some(r) = self.ins.get_mut(id) {
                // Unexpected: an ABORT of it must still find it.
                r.in_map = true;
                self.in_map.insert((peer.0, repr.seq), id);
            }
            self.release_in_order(peer);
            return None;
        }
        self.in_map.insert((peer.0, repr.seq), id);
        if ahead != 0 {
            // Held back behind an earlier message of this peer (SAS).
            self.stats.held += 1;
            if !rndv {
                let b = self.alloc_bounce(total);
                if let Some(r) = self.ins.get_mut(id) {
                    r.bounce = Some(b);
                }
                self.place(id, off, data);
            }
            return None;
        }
        self.peer_mut(peer).next_match_seq = next.wrapping_add(1);
        self.enter_matching(id);
        if !rndv {
            self.place(id, off, data);
        } else {
            self.check_done(id);
        }
        self.release_in_order(peer);
        None
    }

    /// Match (or skip, if aborted) held records of `peer` that are now next in send order.
    fn release_in_order(&mut self, peer: PeerId) {
        if self.in_map.is_empty() {
            return;
        }
        loop {
            let next = self.peer_mut(peer).next_match_seq;
            let Some(&id) = self.in_map.get(&(peer.0, next)) else {
                break;
            };
            let Some(aborted) = self.ins.get(id).filter(|r| !r.ready).map(|r| r.aborted) else {
                break;
            };
            self.peer_mut(peer).next_match_seq = next.wrapping_add(1);
            if aborted {
                self.remove_rec(id);
            } else {
                self.enter_matching(id);
                self.check_done(id);
            }
        }
    }

    /// The sender gave up on its message `seq`: fail or forget what we have of it and
    /// make sure later messages of the peer are not held back behind it.
    fn on_abort(&mut self, peer: PeerId, seq: u32) {
        if let Some(&id) = self.in_map.get(&(peer.0, seq)) {
            let Some(ready) = self.ins.get(id).map(|r| r.ready) else {
                return;
            };
            let (bytes, msgs) = self.settle(id);
            if ready {
                self.fail_rec(id);
            } else if let Some(r) = self.ins.get_mut(id) {
                r.aborted = true;
                if let Some(b) = r.bounce.take() {
                    self.free_bounce(b);
                }
            }
            self.owe_credit(peer, bytes, msgs);
            return;
        }
        let next = self.peer_mut(peer).next_match_seq;
        if seq.wrapping_sub(next) >= 1 << 31 {
            // Finished already (all its bytes arrived before the failure was seen).
            self.stats.stray += 1;
            return;
        }
        // Nothing of it ever came, but the sender spent a message credit on it.
        self.charge_msg(peer);
        self.owe_credit(peer, 0, 1);
        if seq == next {
            self.peer_mut(peer).next_match_seq = next.wrapping_add(1);
            self.release_in_order(peer);
            return;
        }
        // A tombstone, so the hold-back skips it.
        let id = self.ins.insert(InRec {
            peer,
            seq,
            total_bytes: 0,
            tag: None,
            data: None,
            rndv: false,
            arrived_bytes: 0,
            rdata_hi_bytes: 0,
            expect_bytes: 0,
            target: Target::None,
            bounce: None,
            in_map: true,
            ready: false,
            charged_bytes: 0,
            charged_msg: false,
            counted: false,
            aborted: true,
        });
        self.in_map.insert((peer.0, seq), id);
    }

    /// One more message record holds unexpected memory.
    fn count_msg(&mut self) {
        self.unexp_msgs += 1;
        let n = self.unexp_msgs as u64;
        self.stats.unexpected_peak = self.stats.unexpected_peak.max(n);
    }

    /// Record `id` stops holding unexpected memory (matched, discarded,
    /// aborted, removed): returns the credit it carried, (bytes, messages), for
    /// the caller to return to its sender.
    pub(crate) fn settle(&mut self, id: usize) -> (usize, usize) {
        let Some(r) = self.ins.get_mut(id) else {
            return (0, 0);
        };
        let bytes = core::mem::take(&mut r.charged_bytes);
        let msgs = usize::from(core::mem::take(&mut r.charged_msg));
        if core::mem::take(&mut r.counted) {
            self.unexp_msgs = self.unexp_msgs.saturating_sub(1);
        }
        (bytes, msgs)
    }

    /// A DGRAM-mode datagram: one whole message, matched in arrival order.
    fn dgram_in(&mut self, peer: PeerId, repr: &Repr, data: &[u8]) {
        let total = data.len();
        if self.find_posted(peer, repr.tag).is_none()
            && (self.unexp_bytes.saturating_add(total) > self.max_unexpected_bytes
                || self.unexp_msgs >= self.max_unexpected_msgs)
        {
            // DGRAM endpoints may drop what nobody receives; memory stays bounded.
            self.stats.dropped += 1;
            return;
        }
        let id = self.ins.insert(InRec {
            peer,
            seq: 0,
            total_bytes: total,
            tag: repr.tag,
            data: repr.data,
            rndv: false,
            arrived_bytes: 0,
            rdata_hi_bytes: 0,
            expect_bytes: total,
            target: Target::None,
            bounce: None,
            in_map: false,
            ready: false,
            charged_bytes: 0,
            charged_msg: false,
            counted: true,
            aborted: false,
        });
        self.count_msg();
        self.enter_matching(id);
        self.place(id, 0, data);
    }

    pub(crate) fn alloc_bounce(&mut self, n: usize) -> Vec<u8> {
        self.unexp_bytes += n;
        self.peak_unexp_bytes = self.peak_unexp_bytes.max(self.unexp_bytes);
        let mut b = self.bounce_pool.pop().unwrap_or_default();
        self.bounce_pooled = self.bounce_pooled.saturating_sub(b.capacity());
        b.clear();
        b.resize(n, 0);
        b
    }

    pub(crate) fn free_bounce(&mut self, b: Vec<u8>) {
        self.unexp_bytes = self.unexp_bytes.saturating_sub(b.len());
        let cap = b.capacity();
        if self.bounce_pool.len() < 64
            && cap <= self.eager_limit.max(4096)
            && self.bounce_pooled + cap <= BOUNCE_POOL_BYTES
        {
            self.bounce_pooled += cap;
            self.bounce_pool.push(b);
        }
    }

    /// Bytes of bounce buffers kept for reuse (see `BOUNCE_POOL_BYTES`).
    #[cfg(test)]
    pub(crate) fn bounce_pooled(&self) -> usize {
        self.bounce_pooled
    }

    /// Bytes `data` of record `id` at message offset `off`.
    pub(crate) fn place(&mut self, id: usize, off: usize, data: &[u8]) {
        let Some(rec) = self.ins.get_mut(id) else {
            return;
        };
        match rec.target {
            Target::Recv { id: rid, base, cap } => {
                if off < cap && !(self.placed && rec.rndv) {
                    let n = data.len().min(cap - off);
                    if let Some(e) = self.recvs.get_mut(rid) {
                        e.op.buf.write_at(base + off, &data[..n]);
                    }
                }
            }
            Target::None => {
                if let Some(dst) = rec
                    .bounce
                    .as_mut()
                    .and_then(|b| b.get_mut(off..off + data.len()))
                {
                    dst.copy_from_slice(data);
                }
            }
            Target::Discard => {}
        }
        rec.arrived_bytes = rec.arrived_bytes.saturating_add(data.len());
        if rec.rndv {
            self.note_rdata(id, off, data.len());
        }
        self.check_done(id);
    }

    /// Where the payload of `payload` (message header first; the bytes after the
    /// headers need not be there yet) from `peer` would be written, if it is bulk
    /// data for a buffer already known: `None` = receive it normally.
    /// (RDATA of a rendezvous message, READ_RESP of our RMA read, later WRITE
    /// segments of a peer's RMA write into our registered memory.) With the
    /// buffer, `f` gets the byte offset in it and how many bytes land there;
    /// returns how many bytes of `payload` are headers (the payload proper
    /// starts after them).
    pub fn place_target(
        &self,
        peer: PeerId,
        payload: &[u8],
        f: &mut dyn FnMut(&B, usize, usize),
    ) -> Option<usize> {
        let pkt = Packet::new_checked(payload).ok()?;
        let repr = Repr::parse(&pkt).ok()?;
        if self.mode != crate::config::EpMode::Rdm {
            return None;
        }
        let len = payload.len().checked_sub(HEADER_LEN)?;
        match repr.ty {
            MsgType::RData => {
                let (b, at, n) = self.rdata_target(peer, &repr, len)?;
                f(b, at, n);
                Some(HEADER_LEN)
            }
            MsgType::ReadResp => self
                .rma_read_place(peer, &repr, len, f)
                .then_some(HEADER_LEN),
            MsgType::Write => {
                let head = self.rma_write_place(peer, &repr, &payload[HEADER_LEN..], f)?;
                Some(HEADER_LEN + head)
            }
            _ => None,
        }
    }

    /// Finish record `id` when it is matched and all its bytes arrived.
    pub(crate) fn check_done(&mut self, id: usize) {
        match self.ins.get(id) {
            Some(r) if r.target != Target::None && r.arrived_bytes >= r.expect_bytes => {}
            _ => return,
        }
        if let Some(rec) = self.remove_rec(id) {
            if let Target::Recv { id: rid, base, cap } = rec.target {
                self.finish_recv(rid, &rec, base, cap, None);
            }
        }
    }

    /// Take record `id` out of every index (map, unexpected queues) and free its bounce buffer.
    pub(crate) fn remove_rec(&mut self, id: usize) -> Option<InRec> {
        // Whatever credit it still carried is not returned: its sender is gone
        // or restarted (its new incarnation starts with fresh credit).
        let _ = self.settle(id);
        let mut rec = self.ins.remove(id)?;
        self.rndv_unbound(rec.rndv, rec.target);
        let key = (rec.peer.0, rec.seq);
        if rec.in_map && self.in_map.get(&key) == Some(&id) {
            self.in_map.remove(&key);
        }
        if rec.ready && rec.target == Target::None {
            self.queues.unexp_tagged.retain(|&x| x != id);
            self.queues.unexp_untagged.retain(|&x| x != id);
            self.queues.claimed.retain(|&(_, x)| x != id);
        }
        if let Some(b) = rec.bounce.take() {
            self.free_bounce(b);
        }
        self.release_held_credit();
        Some(rec)
    }

    /// Complete receive entry `rid` for message `rec` placed at `base` with `cap` bytes of room.
    pub(crate) fn finish_recv(
        &mut self,
        rid: usize,
        rec: &InRec,
        base: usize,
        cap: usize,
        error: Option<CompError>,
    ) {
        let placed = rec.total_bytes.min(cap);
        let olen = rec.total_bytes - placed;
        let error = error.or((olen > 0).then_some(CompError::Truncated));
        let info = RecvInfo {
            len: placed,
            olen,
            tag: rec.tag.unwrap_or(0),
            data: rec.data,
            src: Some(rec.peer),
            offset: base,
        };
        let Some(e) = self.recvs.get_mut(rid) else {
            return;
        };
        let (ctx, tagged, report) = (e.op.context, e.op.tag.is_some(), e.op.report);
        if e.op.flags.multi_recv {
            e.inflight = e.inflight.saturating_sub(1);
            if e.posted || e.inflight > 0 {
                self.complete_recv(ctx, tagged, report, None, info, false, error);
                return;
            }
        }
        if let Some(e) = self.recvs.remove(rid) {
            let multi = e.op.flags.multi_recv;
            self.complete_recv(ctx, tagged, report, Some(e.op.buf), info, multi, error);
        }
    }

    /// Drop record `id` (peer gone); a receive it was matched to completes in error.
    pub(crate) fn fail_rec(&mut self, id: usize) {
        if let Some(rec) = self.remove_rec(id) {
            if let Target::Recv { id: rid, base, cap } = rec.target {
                self.finish_recv(rid, &rec, base, cap, Some(CompError::PeerUnreachable));
            }
        }
    }

    /// `p` restarted: drop its partial messages; whole unexpected ones stay receivable.
    pub(crate) fn reset_peer_recvs(&mut self, p: PeerId) {
        for id in self.ins.indices_where(|r| r.peer == p) {
            let keep = self.ins.get(id).is_some_and(|r| {
                r.ready && r.target == Target::None && !r.rndv && r.arrived_bytes >= r.expect_bytes
            });
            if keep {
                let key = (p.0, self.ins.get(id).map_or(0, |r| r.seq));
                if self.in_map.get(&key) == Some(&id) {
                    self.in_map.remove(&key);
                }
                if let Some(r) = self.ins.get_mut(id) {
                    r.in_map = false;
                    // Still held, but the peer's new incarnation starts with
                    // fresh credit: returning this would give it more.
                    r.charged_bytes = 0;
                    r.charged_msg = false;
                }
            } else {
                self.fail_rec(id);
            }
        }
        self.peer_mut(p).next_match_seq = 0;
    }

    /// Stop wanting the message of record `id`: drop its data, tell a rendezvous sender.
    pub(crate) fn discard_rec(&mut self, id: usize) {
        let Some(rec) = self.ins.get_mut(id) else {
            return;
        };
        let (peer, seq, rndv, was) = (rec.peer, rec.seq, rec.rndv, rec.target);
        rec.target = Target::Discard;
        if rndv {
            rec.expect_bytes = 0;
        }
        let bounce = rec.bounce.take();
        let (bytes, msgs) = self.settle(id);
        if let Some(b) = bounce {
            self.free_bounce(b);
        }
        self.rndv_unbound(rndv, was);
        if rndv {
            self.refuse_cts(peer, seq);
        }
        self.owe_credit(peer, bytes, msgs);
        self.check_done(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, EpMode};

    /// A burst of unexpected 256 KiB messages, freed: the pool keeps at most
    /// `BOUNCE_POOL_BYTES` of their buffers (a count of 64 alone kept 16 MiB).
    #[test]
    fn the_bounce_pool_is_bounded_in_bytes() {
        let cfg = Config::new(EpMode::Rdm, "127.0.0.1:1".parse().expect("address"));
        let mut m: MsgLayer<Vec<u8>> = MsgLayer::new(&cfg);
        let n = cfg.eager_limit;
        let bufs: Vec<Vec<u8>> = (0..64).map(|_| m.alloc_bounce(n)).collect();
        for b in bufs {
            m.free_bounce(b);
        }
        assert!(m.bounce_pooled() > 0, "freed buffers are reused");
        assert!(
            m.bounce_pooled() <= BOUNCE_POOL_BYTES,
            "{} bytes pooled",
            m.bounce_pooled()
        );
        // Reuse takes them out of the count again.
        let b = m.alloc_bounce(n);
        assert!(m.bounce_pooled() <= BOUNCE_POOL_BYTES - b.capacity());
    }
}
