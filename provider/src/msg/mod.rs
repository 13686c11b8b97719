//! The message layer: RDM semantics above the SRD datagram service.
//!
//! Tagged and untagged matching (posted and unexpected queues), send-order
//! matching per peer (`FI_ORDER_SAS`) although datagrams arrive in any order,
//! segmentation and reassembly with placement by offset, truncation, cancel,
//! peek/claim/discard, rendezvous, and completions; one-sided RMA and
//! atomics. Protocol: `PROTOCOL.md` §9 and §10. Where each mechanism lives
//! (every file adds methods to `MsgLayer`; this one holds the state, the
//! event dispatch and the getters):
//!
//! | file | what |
//! |------|------|
//! | `pump.rs` | `pump`: whose datagram goes next (round-robin over peers; control messages `Ctrl` first) |
//! | `send.rs` | send queues, protocol choice, DATA segmentation, send completions |
//! | `rndv.rs` | rendezvous, sender and receiver: RTS, CTS, RDATA, direct placement guesses, CTS failures |
//! | `recv.rs` | incoming records, SAS hold-back, ABORT, placement by offset, receive completions |
//! | `matching.rs` | posted and unexpected queues (`Queues`), tag matching, peek / claim / discard, multi-recv, cancel |
//! | `peer.rs` | per-peer state, eager and message credit (`CreditPolicy`, CREDIT) |
//! | `keepalive.rs` | keepalives to peers that operations wait on |
//! | `token.rs` | the token each datagram carries through the SRD (`Token`) |
//! | `rma.rs`, `rma_target.rs`, `atomic.rs` | one-sided operations: initiator, target, atomic op table and arithmetic |
//! | `op.rs`, `completion.rs`, `slab.rs` | the operation and completion types, building completions, the slab |

pub mod atomic;
mod completion;
mod index;
mod keepalive;
mod matching;
pub mod op;
mod peer;
mod pump;
mod recv;
mod rma;
mod rma_target;
mod rndv;
mod send;
mod slab;
mod token;

pub use op::{
    atomic_valid, AtomicCall, AtomicOp, AtomicType, CompError, CompKind, Completion, OpError,
    OrderScope, RecvFlags, RecvOp, RmaKind, RmaOp, RmaOrder, SendOp, Started,
};

use std::collections::VecDeque;

use crate::buf::UserBuf;
use crate::config::{Config, EpMode};
use crate::dgram::{DgramEvent, FailReason, PeerId};
use crate::wire::msg::HEADER_LEN;

pub use rma::{RmaStats, MAX_RMA_INFLIGHT};

use matching::RecvEntry;
use peer::PeerState;
use recv::InRec;
use send::OutMsg;
use slab::Slab;
use token::Token;

/// Largest RDM message, bytes (1 TiB: "unlimited" for MPI, safe in every offset sum).
pub const MAX_RDM_MSG_BYTES: usize = 1 << 40;
/// Bytes of a UDP datagram assumed taken by the SRD header (`wire::srd::HEADER_LEN`, 56)
/// until `set_max_payload` or `pump` tells the real `max_payload` (only DGRAM mode's
/// `max_msg_size` depends on it).
pub const SRD_HEADER_RESERVE_BYTES: usize = crate::wire::srd::HEADER_LEN;
/// A sender's initial eager credit towards one peer is `max_unexpected_bytes / this`,
/// its message credit `max_unexpected_msgs / this`.
pub const CREDIT_SHARES: usize = 64;

/// How many times an ABORT or CTS is sent before the peer is given up for dead.
pub const MAX_ABORT_TRIES: u8 = 8;

/// Counters of the message layer (diagnostics; nothing here is an error the app sees).
#[derive(Clone, Debug, Default)]
pub struct MsgStats {
    /// Datagrams handed to the SRD layer.
    pub datagrams_sent: u64,
    /// Payloads that failed to parse.
    pub bad: u64,
    /// Well-formed datagrams that fit no state (stale, duplicate, unknown message).
    pub stray: u64,
    /// Message records held back behind an earlier message of their peer (SAS).
    pub held: u64,
    /// DGRAM datagrams dropped because nobody received them and memory was full.
    pub dropped: u64,
    /// Keepalives sent to peers we wait on (see `keepalive.rs`).
    pub keepalives: u64,
    /// Messages (eager, medium or RTS) that found no posted receive and were queued.
    pub unexpected: u64,
    /// Eager/medium bytes of those messages, each copied once more (through a bounce buffer).
    pub unexpected_bytes: u64,
    /// Times a message waited to start because its peer had no message credit
    /// left (that many of our messages sit unmatched there).
    pub credit_waits: u64,
    /// Times credit owed to senders was held back because this endpoint held
    /// `max_unexpected_msgs` messages or `max_unexpected_bytes` bytes.
    pub credit_withheld: u64,
    /// Most unexpected messages held at once (see `MsgLayer::unexpected_msgs`).
    pub unexpected_peak: u64,
}

/// Per-endpoint message-layer state.
pub struct MsgLayer<B: UserBuf> {
    mode: EpMode,
    eager_limit: usize,
    max_unexpected_bytes: usize,
    max_unexpected_msgs: usize,
    /// Credit we hand out and return (`peer.rs`).
    credit: peer::CreditPolicy,
    /// Most operations initiated and not completed (`Config::max_tx_ops`).
    max_tx_ops: usize,
    /// Most receives posted and not completed (`Config::max_rx_ops`).
    max_rx_ops: usize,
    /// Last `max_payload` the datagram service reported, bytes.
    payload_max: usize,
    min_multi_recv: usize,
    /// The payload being handled was placed already (`handle_payload_placed`).
    placed: bool,
    /// Bytes of its message still to come after the latest DATA or RDATA
    /// payload handled (see `Engine::rx_message_left`).
    rx_left: usize,
    peers: Vec<PeerState>,
    /// Peers with something to send, round-robin.
    ready: VecDeque<PeerId>,
    blocked: Vec<PeerId>,
    outs: Slab<OutMsg<B>>,
    recvs: Slab<RecvEntry<B>>,
    ins: Slab<InRec>,
    /// Incoming records by (peer, seq): O(1) per segment.
    in_map: index::InIndex,
    /// Parses received headers, the segments of a stream cheaply (`ParseMemo`).
    parse_memo: crate::wire::msg::ParseMemo,
    /// The last segment placed into a known record, which the next one of
    /// its message may follow (`next_segment`).
    seg_memo: Option<recv::SegMemo>,
    /// `next_segment` is on (`Config::rx_continuation`).
    seg_shortcut: bool,
    /// Posted receives and unexpected messages, in order (`matching.rs`).
    queues: matching::Queues,
    unexp_bytes: usize,
    peak_unexp_bytes: usize,
    /// Message records holding unexpected memory now (neither matched nor
    /// discarded: unexpected, held back for send order, or claimed).
    unexp_msgs: usize,
    bounce_pool: Vec<Vec<u8>>,
    /// Capacity of the buffers in `bounce_pool`, bytes (at most `BOUNCE_POOL_BYTES`).
    bounce_pooled: usize,
    comps: VecDeque<Completion<B>>,
    stats: MsgStats,
    /// Rendezvous, both sides (`rndv.rs`).
    rndv: rndv::Rndv,
    /// One-sided operations, both sides.
    rma: rma::RmaState<B>,
}

impl<B: UserBuf> MsgLayer<B> {
    /// A message layer for an endpoint configured by `cfg`
    /// (`cfg.mode` selects RDM or DGRAM semantics).
    pub fn new(cfg: &Config) -> Self {
        let init_credit = (cfg.max_unexpected_bytes / CREDIT_SHARES).max(1);
        let init_msgs = (cfg.max_unexpected_msgs / CREDIT_SHARES).max(1);
        MsgLayer {
            mode: cfg.mode,
            eager_limit: cfg.eager_limit,
            max_unexpected_bytes: cfg.max_unexpected_bytes,
            max_unexpected_msgs: cfg.max_unexpected_msgs.max(1),
            credit: peer::CreditPolicy {
                init_bytes: init_credit,
                batch_bytes: (init_credit / 4).max(1),
                init_msgs,
                // Half the share: a message stream matched as it arrives (every
                // ping-pong) costs one CREDIT per this many messages.
                batch_msgs: (init_msgs / 2).max(1),
                held_back: false,
            },
            max_tx_ops: cfg.max_tx_ops.max(1),
            max_rx_ops: cfg.max_rx_ops.max(1),
            placed: false,
            rx_left: 0,
            payload_max: cfg.max_datagram.saturating_sub(SRD_HEADER_RESERVE_BYTES),
            min_multi_recv: 0,
            peers: Vec::new(),
            ready: VecDeque::new(),
            blocked: Vec::new(),
            outs: Slab::new(),
            recvs: Slab::new(),
            ins: Slab::new(),
            in_map: index::InIndex::default(),
            parse_memo: crate::wire::msg::ParseMemo::default(),
            seg_memo: None,
            seg_shortcut: cfg.rx_continuation,
            queues: matching::Queues::default(),
            unexp_bytes: 0,
            peak_unexp_bytes: 0,
            unexp_msgs: 0,
            bounce_pool: Vec::new(),
            bounce_pooled: 0,
            comps: VecDeque::new(),
            stats: MsgStats::default(),
            rndv: rndv::Rndv::default(),
            rma: rma::RmaState::new(),
        }
    }

    /// Largest message accepted by `post_send`, in bytes.
    pub fn max_msg_size(&self) -> usize {
        match self.mode {
            EpMode::Rdm => MAX_RDM_MSG_BYTES,
            EpMode::Dgram => self.payload_max.saturating_sub(HEADER_LEN),
        }
    }

    /// Cancel the posted receive (or queued send not yet started) with `context`;
    /// true if found (an `FI_ECANCELED` error completion follows).
    pub fn cancel(&mut self, context: u64) -> bool {
        self.cancel_recv(context) || self.cancel_send(context)
    }

    /// Where the deferred body of a datagram lies: the send buffer and the byte offset
    /// in it, `None` if its message is gone (`Datagrams::send_with_body`).
    pub fn body(&self, peer: PeerId, token: u64, key: u64, len: usize) -> Option<(&B, usize)> {
        match Token::decode(token)? {
            Token::Msg { slot, seq } => self.send_body(slot, seq, key, len),
            Token::Rma { id } => self.rma_body(peer, id, key, len),
            _ => None,
        }
    }

    /// Is some rendezvous receive waiting for data (worth placing directly)?
    pub fn expects_rdata(&self) -> bool {
        debug_assert_eq!(
            self.rndv.placing,
            self.ins
                .indices_where(|r| r.rndv && matches!(r.target, recv::Target::Recv { .. }))
                .len(),
            "rendezvous records waiting for data miscounted"
        );
        self.rndv.placing > 0
            || !self.rma.out_map.is_empty()
            || self.rma.target.writes_in_progress()
    }

    /// An acknowledgement or failure report from the SRD layer.
    pub fn handle_event(&mut self, ev: DgramEvent) {
        match ev {
            DgramEvent::Acked { peer, token, count } => {
                if let Some(Token::Msg { slot, seq }) = Token::decode(token) {
                    self.on_send_acked(peer, slot, seq, count);
                }
            }
            DgramEvent::Failed {
                peer,
                token,
                reason,
            } => {
                let token = Token::decode(token);
                // Failed = the peer is unreachable or restarted: its RMA state goes too.
                self.rma_peer_lost(peer, Some(reason), token);
                let retry = reason == FailReason::Unreachable;
                match token {
                    Some(Token::Msg { slot, seq }) => self.on_send_failed(peer, slot, seq, reason),
                    Some(Token::Cts {
                        seq,
                        tries,
                        zero_grant,
                    }) => self.on_cts_failed(peer, seq, tries, zero_grant, reason),
                    Some(Token::Keepalive) => self.on_keepalive_failed(peer, reason),
                    Some(Token::Credit { bytes, tries }) if retry => {
                        // Credit lost with it would hold the peer's later messages
                        // back for good: send it again (a few times, as an ABORT).
                        let tries = tries.saturating_add(1);
                        if tries < MAX_ABORT_TRIES {
                            let bytes = bytes as u64;
                            self.push_ctrl(peer, pump::Ctrl::Credit { bytes, tries });
                        }
                    }
                    Some(Token::Abort { seq, tries }) if retry => {
                        // The peer must learn of the abort or it waits for that message
                        // forever; the SRD keeps the peer after an unreachable episode, so
                        // try again a few times (each try takes one unreachable timeout).
                        let tries = tries.saturating_add(1);
                        if tries < MAX_ABORT_TRIES {
                            self.push_ctrl(peer, pump::Ctrl::Abort { seq, tries });
                        }
                    }
                    _ => {}
                }
            }
            DgramEvent::PeerRestarted { peer } => {
                self.rma_peer_lost(peer, None, None);
                self.reset_peer_sends(peer);
                if self.mode == EpMode::Rdm {
                    self.reset_peer_recvs(peer);
                }
            }
        }
    }

    /// The next finished operation.
    pub fn poll_completion(&mut self) -> Option<Completion<B>> {
        self.comps.pop_front()
    }

    /// True while some send still has segments that `pump` has not handed down.
    pub fn has_pending_sends(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Bytes of its message still to come after the latest DATA or RDATA
    /// payload handled.
    pub fn rx_message_left(&self) -> usize {
        self.rx_left
    }

    /// Set the minimum free space of multi-recv buffers (`FI_OPT_MIN_MULTI_RECV`), bytes.
    pub fn set_min_multi_recv(&mut self, bytes: usize) {
        self.min_multi_recv = bytes;
    }

    /// Tell the layer the datagram service's `max_payload` (bytes) before the first `pump`,
    /// so DGRAM mode's `max_msg_size` is exact from the start.
    pub fn set_max_payload(&mut self, bytes: usize) {
        self.payload_max = bytes;
    }

    /// Bytes of unexpected (unmatched) eager/medium data held now.
    pub fn unexpected_bytes(&self) -> usize {
        self.unexp_bytes
    }

    /// Most unexpected bytes ever held at once.
    pub fn peak_unexpected_bytes(&self) -> usize {
        self.peak_unexp_bytes
    }

    /// Unexpected messages held now (unmatched, held back for send order, or
    /// claimed; rendezvous requests included).
    pub fn unexpected_msgs(&self) -> usize {
        self.unexp_msgs
    }

    /// Most unexpected messages ever held at once.
    pub fn peak_unexpected_msgs(&self) -> usize {
        self.stats.unexpected_peak as usize
    }

    /// Operations `post_send` / `post_rma` would still take now (`max_tx_ops`
    /// minus those not completed).
    pub fn tx_room(&self) -> usize {
        self.max_tx_ops.saturating_sub(self.pending_initiated())
    }

    /// Receives `post_recv` would still take now (`max_rx_ops` minus those
    /// posted and not completed).
    pub fn rx_room(&self) -> usize {
        self.max_rx_ops.saturating_sub(self.recvs.len())
    }

    /// Operations in flight: queued or unfinished sends, posted receives, incoming records.
    pub fn live_counts(&self) -> (usize, usize, usize) {
        (self.outs.len(), self.recvs.len(), self.ins.len())
    }

    /// Operations this endpoint initiated that have not completed: sends and
    /// one-sided ops, queued or in flight (`FI_FENCE` waits for 0).
    pub fn pending_initiated(&self) -> usize {
        self.outs.len() + self.rma.outs.len()
    }

    /// Counters.
    pub fn stats(&self) -> &MsgStats {
        &self.stats
    }

    /// RMA counters and live state sizes.
    pub fn rma_stats(&self) -> &RmaStats {
        &self.rma.stats
    }
}
