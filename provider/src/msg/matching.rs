//! Matching: posted-receive and unexpected-message queues (tagged and untagged apart),
//! tag ignore bits, directed receives, FIFO order, peek / claim / discard, multi-recv, cancel.

use std::collections::VecDeque;

use super::completion::RecvInfo;
use super::op::{CompError, OpError, RecvOp};
use super::recv::Target;
use super::MsgLayer;
use crate::buf::UserBuf;
use crate::dgram::PeerId;

/// The matching queues, tagged and untagged apart (slab ids, oldest first).
#[derive(Default)]
pub(crate) struct Queues {
    /// Posted receives (`recvs` ids) waiting for a message.
    pub posted_tagged: VecDeque<usize>,
    pub posted_untagged: VecDeque<usize>,
    /// Message records (`ins` ids) that no posted receive took yet.
    pub unexp_tagged: VecDeque<usize>,
    pub unexp_untagged: VecDeque<usize>,
    /// Messages claimed by `FI_PEEK | FI_CLAIM`: (context, record).
    pub claimed: Vec<(u64, usize)>,
}

/// A posted receive (or a multi-recv buffer still taking messages).
pub(crate) struct RecvEntry<B> {
    pub op: RecvOp<B>,
    /// Multi-recv: bytes of the buffer handed to messages so far.
    pub used_bytes: usize,
    /// Multi-recv: messages placed into it and not yet complete.
    pub inflight: u32,
    /// Still in a posted queue (multi-recv: still taking new messages).
    pub posted: bool,
}

/// Does a receive with `src` filter and `tag` spec accept a message?
fn accepts<B>(op: &RecvOp<B>, peer: PeerId, tag: Option<u64>) -> bool {
    if op.src.is_some_and(|s| s != peer) {
        return false;
    }
    match (op.tag, tag) {
        (Some((t, ignore)), Some(m)) => m & !ignore == t & !ignore,
        (None, None) => true,
        _ => false,
    }
}

impl<B: UserBuf> MsgLayer<B> {
    fn posted_queue(&mut self, tagged: bool) -> &mut VecDeque<usize> {
        if tagged {
            &mut self.queues.posted_tagged
        } else {
            &mut self.queues.posted_untagged
        }
    }

    /// Position in its posted queue of the earliest receive accepting a message.
    pub(crate) fn find_posted(&self, peer: PeerId, tag: Option<u64>) -> Option<usize> {
        let q = if tag.is_some() {
            &self.queues.posted_tagged
        } else {
            &self.queues.posted_untagged
        };
        q.iter().position(|&rid| {
            self.recvs
                .get(rid)
                .is_some_and(|e| accepts(&e.op, peer, tag))
        })
    }

    /// Position in its unexpected queue of the earliest message `op` accepts.
    fn find_unexpected(&self, op: &RecvOp<B>) -> Option<usize> {
        let q = if op.tag.is_some() {
            &self.queues.unexp_tagged
        } else {
            &self.queues.unexp_untagged
        };
        q.iter()
            .position(|&id| self.ins.get(id).is_some_and(|r| accepts(op, r.peer, r.tag)))
    }

    /// Record `id` passed send-order hold-back: match it to a posted receive or queue it.
    pub(crate) fn enter_matching(&mut self, id: usize) {
        let Some(rec) = self.ins.get_mut(id) else {
            return;
        };
        rec.ready = true;
        let (peer, tag, rndv, total) = (rec.peer, rec.tag, rec.rndv, rec.total_bytes);
        if let Some(pos) = self.find_posted(peer, tag) {
            let q = self.posted_queue(tag.is_some());
            let rid = q[pos];
            let multi = self.recvs.get(rid).is_some_and(|e| e.op.flags.multi_recv);
            if !multi {
                self.posted_queue(tag.is_some()).remove(pos);
            }
            self.bind(id, rid);
            return;
        }
        self.stats.unexpected += 1;
        if !rndv {
            self.stats.unexpected_bytes += total as u64;
        }
        if !rndv && self.ins.get(id).is_some_and(|r| r.bounce.is_none()) {
            let b = self.alloc_bounce(total);
            if let Some(r) = self.ins.get_mut(id) {
                r.bounce = Some(b);
            }
        }
        if tag.is_some() {
            self.queues.unexp_tagged.push_back(id);
        } else {
            self.queues.unexp_untagged.push_back(id);
        }
    }

    /// Match record `id` to receive entry `rid` (already out of the posted queue unless multi).
    pub(crate) fn bind(&mut self, id: usize, rid: usize) {
        let min_multi = self.min_multi_recv;
        let (Some(rec), Some(e)) = (self.ins.get_mut(id), self.recvs.get_mut(rid)) else {
            return;
        };
        let blen = e.op.buf.len();
        let multi = e.op.flags.multi_recv;
        let (base, cap) = if multi {
            let base = e.used_bytes.min(blen);
            (base, blen - base)
        } else {
            (0, blen)
        };
        let mut released = false;
        if multi {
            e.used_bytes = base + rec.total_bytes.min(cap);
            e.inflight += 1;
            // A full buffer is released even when the minimum is 0.
            if blen - e.used_bytes < min_multi.max(1) {
                e.posted = false;
                released = true;
            }
        }
        rec.target = Target::Recv { id: rid, base, cap };
        let bounce = rec.bounce.take();
        if let Some(b) = &bounce {
            let n = rec.total_bytes.min(cap).min(b.len());
            e.op.buf.write_at(base, &b[..n]);
        }
        let (peer, rndv) = (rec.peer, rec.rndv);
        let (bytes, msgs) = self.settle(id);
        if rndv {
            self.grant_cts(id, cap);
        }
        if let Some(b) = bounce {
            self.free_bounce(b);
        }
        if released {
            self.queues.posted_untagged.retain(|&x| x != rid);
            self.queues.posted_tagged.retain(|&x| x != rid);
        }
        self.owe_credit(peer, bytes, msgs);
    }

    /// Post a receive: peek / claim, or match the unexpected queue, or join
    /// the posted queue. `Again` while `max_rx_ops` receives are posted and
    /// not completed (a peek, which completes at once, is always taken).
    pub fn post_recv(&mut self, op: RecvOp<B>) -> Result<(), OpError> {
        let f = op.flags;
        if (f.multi_recv && (f.peek || f.claim || op.tag.is_some()))
            || (f.discard && !f.peek && !f.claim)
        {
            return Err(OpError::Invalid);
        }
        if !f.peek && self.rx_room() == 0 {
            return Err(OpError::Again);
        }
        if op.flags.peek {
            self.peek(op);
            return Ok(());
        }
        if op.flags.claim {
            self.claim(op);
            return Ok(());
        }
        let tagged = op.tag.is_some();
        let multi = op.flags.multi_recv;
        let rid = self.recvs.insert(RecvEntry {
            op,
            used_bytes: 0,
            inflight: 0,
            posted: true,
        });
        while let Some(pos) = self
            .recvs
            .get(rid)
            .and_then(|e| self.find_unexpected(&e.op))
        {
            let q = if tagged {
                &mut self.queues.unexp_tagged
            } else {
                &mut self.queues.unexp_untagged
            };
            let Some(id) = q.remove(pos) else {
                break;
            };
            self.bind(id, rid);
            self.check_done(id);
            if !multi || !self.recvs.get(rid).is_some_and(|e| e.posted) {
                return Ok(());
            }
        }
        self.posted_queue(tagged).push_back(rid);
        Ok(())
    }

    /// `FI_PEEK` (with `FI_CLAIM` / `FI_DISCARD`): report the first matching unexpected message.
    fn peek(&mut self, op: RecvOp<B>) {
        let Some(pos) = self.find_unexpected(&op) else {
            return self.fail_recv_op(op, CompError::NoMessage, false);
        };
        let tagged = op.tag.is_some();
        let q = if tagged {
            &mut self.queues.unexp_tagged
        } else {
            &mut self.queues.unexp_untagged
        };
        let id = q[pos];
        let Some(r) = self.ins.get(id) else {
            return self.fail_recv_op(op, CompError::NoMessage, false);
        };
        let info = RecvInfo {
            len: r.total_bytes,
            olen: 0,
            tag: r.tag.unwrap_or(0),
            data: r.data,
            src: Some(r.peer),
            offset: 0,
        };
        if op.flags.claim || op.flags.discard {
            let q = if tagged {
                &mut self.queues.unexp_tagged
            } else {
                &mut self.queues.unexp_untagged
            };
            q.remove(pos);
            if op.flags.discard {
                self.discard_rec(id);
            } else {
                self.queues.claimed.push((op.context, id));
            }
        }
        self.complete_recv(op.context, tagged, op.report, None, info, false, None);
    }

    /// `FI_CLAIM` without peek: take (or with `FI_DISCARD` drop) the message claimed by this context.
    fn claim(&mut self, op: RecvOp<B>) {
        let Some(i) = self
            .queues
            .claimed
            .iter()
            .position(|&(c, _)| c == op.context)
        else {
            return self.fail_recv_op(op, CompError::NoMessage, false);
        };
        let (_, id) = self.queues.claimed.remove(i);
        if op.flags.discard {
            let info = self.ins.get(id).map_or(RecvInfo::default(), |r| RecvInfo {
                tag: r.tag.unwrap_or(0),
                data: r.data,
                src: Some(r.peer),
                ..RecvInfo::default()
            });
            self.discard_rec(id);
            let tagged = op.tag.is_some();
            return self.complete_recv(
                op.context,
                tagged,
                op.report,
                Some(op.buf),
                info,
                false,
                None,
            );
        }
        let mut op = op;
        op.flags.multi_recv = false;
        let rid = self.recvs.insert(RecvEntry {
            op,
            used_bytes: 0,
            inflight: 0,
            posted: false,
        });
        self.bind(id, rid);
        self.check_done(id);
    }

    /// Posted receives directed at `p` (`src` = `p`) that wait for a message
    /// (their peer is unreachable): each completes with `error`.
    pub(crate) fn fail_directed_recvs(&mut self, p: PeerId, error: CompError) {
        for tagged in [true, false] {
            let q = core::mem::take(self.posted_queue(tagged));
            let mut keep = VecDeque::with_capacity(q.len());
            for rid in q {
                if self.recvs.get(rid).is_some_and(|e| e.op.src == Some(p)) {
                    self.unpost(rid, error);
                } else {
                    keep.push_back(rid);
                }
            }
            *self.posted_queue(tagged) = keep;
        }
    }

    /// A receive taken off its posted queue completes with `error`; a
    /// multi-recv buffer with messages still arriving stops taking new ones
    /// and is handed back by its last.
    fn unpost(&mut self, rid: usize, error: CompError) {
        let Some(e) = self.recvs.get_mut(rid) else {
            return;
        };
        e.posted = false;
        if e.inflight > 0 {
            return;
        }
        if let Some(e) = self.recvs.remove(rid) {
            let multi = e.op.flags.multi_recv;
            self.fail_recv_op(e.op, error, multi);
        }
    }

    /// Peers that posted receives wait on by name (`src` given, no message
    /// matched yet), each once: the keepalive probes them while a session
    /// with them exists (`Engine::keepalive`).
    pub fn recv_waiting_peers(&self) -> Vec<PeerId> {
        let mut peers: Vec<PeerId> = self
            .queues
            .posted_tagged
            .iter()
            .chain(self.queues.posted_untagged.iter())
            .filter_map(|&rid| self.recvs.get(rid).and_then(|e| e.op.src))
            .collect();
        peers.sort_unstable_by_key(|p| p.0);
        peers.dedup();
        peers
    }

    /// Cancel the posted receive with `context`; true if found.
    pub(crate) fn cancel_recv(&mut self, context: u64) -> bool {
        for tagged in [true, false] {
            let q = if tagged {
                &self.queues.posted_tagged
            } else {
                &self.queues.posted_untagged
            };
            let pos = q
                .iter()
                .position(|&rid| self.recvs.get(rid).is_some_and(|e| e.op.context == context));
            let Some(pos) = pos else {
                continue;
            };
            let Some(rid) = self.posted_queue(tagged).remove(pos) else {
                continue;
            };
            self.unpost(rid, CompError::Canceled);
            return true;
        }
        false
    }
}
