//! The message layer: RDM semantics above the SRD datagram service.
//!
//! Tagged and untagged matching (posted and unexpected queues), send-order
//! matching per peer (`FI_ORDER_SAS`) although datagrams arrive in any order,
//! segmentation and reassembly with placement by offset, truncation, cancel,
//! peek/claim/discard, and completions.

pub mod op;

pub use op::{CompError, CompKind, Completion, OpError, RecvFlags, RecvOp, SendOp};

use crate::buf::UserBuf;
use crate::config::Config;
use crate::dgram::{Datagrams, DgramEvent, PeerId};

/// Per-endpoint message-layer state.
pub struct MsgLayer<B: UserBuf> {
    _b: core::marker::PhantomData<B>,
}

impl<B: UserBuf> MsgLayer<B> {
    /// A message layer for an endpoint configured by `cfg`
    /// (`cfg.mode` selects RDM or DGRAM semantics).
    pub fn new(cfg: &Config) -> Self {
        let _ = cfg;
        unimplemented!("msg worktree")
    }

    /// Largest message accepted by `post_send`, in bytes.
    pub fn max_msg_size(&self) -> usize {
        unimplemented!("msg worktree")
    }

    /// Queue a send. It leaves through `pump`; its completion comes from `poll_completion`.
    pub fn post_send(&mut self, op: SendOp<B>) -> Result<(), OpError> {
        let _ = op;
        unimplemented!("msg worktree")
    }

    /// Post a receive; it may match an unexpected message at once.
    pub fn post_recv(&mut self, op: RecvOp<B>) -> Result<(), OpError> {
        let _ = op;
        unimplemented!("msg worktree")
    }

    /// Cancel the posted receive (or queued send not yet started) with `context`;
    /// true if found (an `FI_ECANCELED` error completion follows).
    pub fn cancel(&mut self, context: u64) -> bool {
        let _ = context;
        unimplemented!("msg worktree")
    }

    /// A datagram payload delivered by the SRD layer from `peer`.
    pub fn handle_payload(&mut self, peer: PeerId, payload: &[u8]) {
        let _ = (peer, payload);
        unimplemented!("msg worktree")
    }

    /// An acknowledgement or failure report from the SRD layer.
    pub fn handle_event(&mut self, ev: DgramEvent) {
        let _ = ev;
        unimplemented!("msg worktree")
    }

    /// Push queued message segments (and control messages) into `dg` while it has room.
    pub fn pump(&mut self, dg: &mut dyn Datagrams) {
        let _ = dg;
        unimplemented!("msg worktree")
    }

    /// The next finished operation.
    pub fn poll_completion(&mut self) -> Option<Completion<B>> {
        unimplemented!("msg worktree")
    }

    /// True while some send still has segments that `pump` has not handed down.
    pub fn has_pending_sends(&self) -> bool {
        unimplemented!("msg worktree")
    }

    /// Set the minimum free space of multi-recv buffers (`FI_OPT_MIN_MULTI_RECV`), bytes.
    pub fn set_min_multi_recv(&mut self, bytes: usize) {
        let _ = bytes;
        unimplemented!("msg worktree")
    }
}
