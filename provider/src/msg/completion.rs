//! Building completions: one place that fills every `Completion` field.

use super::op::{CompError, CompKind, Completion, RecvOp, SendOp};
use super::MsgLayer;
use crate::buf::UserBuf;
use crate::dgram::PeerId;

/// What a receive completion reports about the message it took.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct RecvInfo {
    pub len: usize,
    pub olen: usize,
    pub tag: u64,
    pub data: Option<u64>,
    pub src: Option<PeerId>,
    pub offset: usize,
}

impl<B: UserBuf> MsgLayer<B> {
    /// Complete a send (successfully when `error` is `None`).
    pub(crate) fn complete_send(&mut self, op: SendOp<B>, len: usize, error: Option<CompError>) {
        self.comps.push_back(Completion {
            context: op.context,
            kind: CompKind::Send,
            tagged: op.tag.is_some(),
            len,
            tag: 0,
            data: None,
            src: None,
            buf: Some(op.buf),
            offset: 0,
            multi_recv_done: false,
            error,
            olen: 0,
            report: op.report || error.is_some(),
        });
    }

    /// Complete a receive entry's operation.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn complete_recv(
        &mut self,
        context: u64,
        tagged: bool,
        report: bool,
        buf: Option<B>,
        info: RecvInfo,
        multi_recv_done: bool,
        error: Option<CompError>,
    ) {
        self.comps.push_back(Completion {
            context,
            kind: CompKind::Recv,
            tagged,
            len: info.len,
            tag: info.tag,
            data: info.data,
            src: info.src,
            buf,
            offset: info.offset,
            multi_recv_done,
            error,
            olen: info.olen,
            report: report || error.is_some(),
        });
    }

    /// Complete a receive op that never took a message (cancel, no message, ...).
    pub(crate) fn fail_recv_op(&mut self, op: RecvOp<B>, error: CompError, multi_done: bool) {
        let tagged = op.tag.is_some();
        self.complete_recv(
            op.context,
            tagged,
            op.report,
            Some(op.buf),
            RecvInfo::default(),
            multi_done,
            Some(error),
        );
    }
}
