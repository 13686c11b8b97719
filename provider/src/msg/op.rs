//! Operations the application posts and the completions it gets back.

use crate::dgram::PeerId;

/// A send (`fi_send`, `fi_tsend`, `fi_inject`, `fi_senddata`, ... and their msg forms).
#[derive(Debug)]
pub struct SendOp<B> {
    /// Destination.
    pub peer: PeerId,
    /// The payload; handed back in the completion.
    pub buf: B,
    /// `Some(tag)` for tagged sends.
    pub tag: Option<u64>,
    /// Remote CQ data (`FI_REMOTE_CQ_DATA`), if any.
    pub data: Option<u64>,
    /// The application's `op_context`, returned in the completion.
    pub context: u64,
    /// Write a CQ entry for this send (false for inject or selective completion
    /// without `FI_COMPLETION`); counters count it either way.
    pub report: bool,
    /// Complete only once the peer has the data (`FI_DELIVERY_COMPLETE`);
    /// otherwise complete once the provider holds its own copy.
    pub delivery_complete: bool,
}

/// What a receive does besides receiving.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RecvFlags {
    /// `FI_PEEK`: report whether a matching message has arrived, without taking it.
    pub peek: bool,
    /// `FI_CLAIM`: with `peek`, reserve the message for this context; without it,
    /// take the message reserved earlier by a peek with the same context.
    pub claim: bool,
    /// `FI_DISCARD`: with `claim` (or `peek`), drop the message's data.
    pub discard: bool,
    /// `FI_MULTI_RECV`: the buffer takes several messages until less than the
    /// minimum free space is left.
    pub multi_recv: bool,
}

/// A receive (`fi_recv`, `fi_trecv`, `fi_recvmsg`, ...).
#[derive(Debug)]
pub struct RecvOp<B> {
    /// Accept only messages from this peer (`FI_DIRECTED_RECV`); `None` = any.
    pub src: Option<PeerId>,
    /// Where the data goes; handed back in the completion.
    pub buf: B,
    /// `Some((tag, ignore))` for tagged receives: matches a message tag `m` when
    /// `m & !ignore == tag & !ignore`.
    pub tag: Option<(u64, u64)>,
    /// The application's `op_context`.
    pub context: u64,
    /// Peek / claim / discard / multi-recv.
    pub flags: RecvFlags,
    /// Write a CQ entry on success (errors are always reported).
    pub report: bool,
}

/// Which side of a transfer a completion belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CompKind {
    Send,
    Recv,
}

/// Why an operation completed in error.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CompError {
    /// The message was larger than the receive buffer (`FI_ETRUNC`); `len` bytes
    /// were placed and `olen` bytes dropped.
    Truncated,
    /// Cancelled by `fi_cancel` (`FI_ECANCELED`).
    Canceled,
    /// A peek found no matching message (`FI_ENOMSG`).
    NoMessage,
    /// The peer became unreachable or restarted before the data was delivered.
    PeerUnreachable,
}

/// A finished operation.
#[derive(Debug)]
pub struct Completion<B> {
    /// The `op_context` it was posted with.
    pub context: u64,
    /// Send or receive.
    pub kind: CompKind,
    /// Tagged operation.
    pub tagged: bool,
    /// Bytes transferred (for a receive: placed into the buffer).
    pub len: usize,
    /// The message's tag (receives; 0 for untagged).
    pub tag: u64,
    /// Remote CQ data carried by the message, if any.
    pub data: Option<u64>,
    /// The sender (receives).
    pub src: Option<PeerId>,
    /// The buffer the operation was posted with (absent for peeks that found a
    /// message but took no data, and for multi-recv entries that are not the last).
    pub buf: Option<B>,
    /// For a multi-recv buffer: byte offset of this message inside it.
    pub offset: usize,
    /// This completion releases a multi-recv buffer (`FI_MULTI_RECV` flag).
    pub multi_recv_done: bool,
    /// `None` on success.
    pub error: Option<CompError>,
    /// Bytes that did not fit (truncation), else 0.
    pub olen: usize,
    /// Write a CQ entry (errors are always written).
    pub report: bool,
}

/// Why an operation was refused at post time.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpError {
    /// Larger than `max_msg_size` or otherwise invalid (`-FI_EINVAL` / `-FI_EMSGSIZE`).
    TooLarge,
    /// Resources exhausted; retry after progress (`-FI_EAGAIN`).
    Again,
    /// Unknown peer (`-FI_EINVAL`).
    BadPeer,
    /// Flag combination not supported (`-FI_EINVAL`).
    Invalid,
}
