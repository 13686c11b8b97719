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
    /// Nothing waits for this send's completion (an inject with no counter
    /// bound to count it): its data may be acknowledged late
    /// (`Datagrams::set_lazy`), for a reply to carry the ack.
    pub lazy: bool,
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
    /// Initiator side of `fi_write` / `fi_writedata` / `fi_inject_write`.
    Write,
    /// Initiator side of `fi_read`.
    Read,
    /// Initiator side of `fi_atomic`, `fi_fetch_atomic`, `fi_compare_atomic`.
    Atomic,
    /// Target side of `fi_writedata`: the whole write has landed; carries the CQ data
    /// (`FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA`) and the source. No receive
    /// buffer is consumed (spray does not ask for `FI_RX_CQ_DATA`).
    RemoteWrite,
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
    /// The target refused an RMA or atomic: unknown key, range outside the region,
    /// or access not allowed (`FI_EACCES` on the initiator).
    RemoteAccess,
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

/// An atomic operation (`enum fi_op`), wire code = libfabric's value.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    Min,
    Max,
    Sum,
    Prod,
    Lor,
    Land,
    Bor,
    Band,
    Lxor,
    Bxor,
    /// `FI_ATOMIC_READ` (fetch only).
    Read,
    /// `FI_ATOMIC_WRITE`.
    Write,
    /// Compare ops: replace when `compare OP target` holds (`FI_CSWAP`, `FI_CSWAP_NE`, ...).
    Cswap,
    CswapNe,
    CswapLe,
    CswapLt,
    CswapGe,
    CswapGt,
    /// `FI_MSWAP`: `target = (operand & compare) | (target & !compare)`.
    Mswap,
}

/// An atomic datatype (`enum fi_datatype`), the ones spray supports.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AtomicType {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

/// What an RMA operation does.
#[derive(Debug)]
pub enum RmaKind<B> {
    /// Write `RmaOp::buf` to the target; `data` = remote CQ data (`fi_writedata`).
    Write { data: Option<u64> },
    /// Read the target into `RmaOp::buf`.
    Read,
    /// Apply `op` with the operands in `RmaOp::buf` (count = len / size of `dt`).
    Atomic { op: AtomicOp, dt: AtomicType },
    /// As `Atomic`, and return the target's old values into `result`.
    FetchAtomic {
        op: AtomicOp,
        dt: AtomicType,
        result: B,
    },
    /// Compare-and-swap family: `compare` holds the comparands, `result` gets the old values.
    CompareAtomic {
        op: AtomicOp,
        dt: AtomicType,
        compare: B,
        result: B,
    },
}

/// Which pairs of one-sided ops one ordering (RAW, WAR or WAW) covers:
/// libfabric's `FI_ORDER_RMA_x` orders RMA ops among themselves,
/// `FI_ORDER_ATOMIC_x` atomics among themselves, and the plain `FI_ORDER_x`
/// both and every RMA op against every atomic.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderScope {
    /// An RMA op (read, write) after an RMA op.
    pub rma: bool,
    /// An atomic after an atomic.
    pub atomic: bool,
    /// An RMA op after an atomic, or an atomic after an RMA op.
    pub cross: bool,
}

impl OrderScope {
    /// Every pair (the plain `FI_ORDER_x` bit).
    pub const ALL: OrderScope = OrderScope {
        rma: true,
        atomic: true,
        cross: true,
    };

    /// Does it order a later op (`later_atomic`) after an earlier one (`earlier_atomic`)?
    pub fn covers(self, earlier_atomic: bool, later_atomic: bool) -> bool {
        match (earlier_atomic, later_atomic) {
            (false, false) => self.rma,
            (true, true) => self.atomic,
            _ => self.cross,
        }
    }
}

/// Started, unfinished one-sided ops towards one peer, by what they do to
/// target memory: `[rma, atomic]` x (reads, writes).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Started {
    /// Ops that read target memory (RMA reads; fetching atomics).
    pub reads: [u32; 2],
    /// Ops that write it (RMA writes; every atomic).
    pub writes: [u32; 2],
}

/// The orderings of one-sided operations an initiator keeps towards each
/// peer (`FI_ORDER_RAW` / `WAR` / `WAW` and their `RMA_` / `ATOMIC_` forms,
/// each an `OrderScope`): an op that would read after (`raw`) or write after
/// (`waw`) a started write, or write after a started read (`war`), of a kind
/// the scope covers, waits until those earlier ops completed. A write or
/// atomic completes on the target's reply, after it applied every byte, and a
/// read once all its data came back, so the target applies the later op after
/// the earlier one, whatever paths their datagrams take. Reads after reads
/// never wait. Default: no ordering.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RmaOrder {
    /// Read after write.
    pub raw: OrderScope,
    /// Write after read.
    pub war: OrderScope,
    /// Write after write.
    pub waw: OrderScope,
}

impl RmaOrder {
    /// Every ordering, every pair.
    pub const ALL: RmaOrder = RmaOrder {
        raw: OrderScope::ALL,
        war: OrderScope::ALL,
        waw: OrderScope::ALL,
    };

    /// Must an op (`atomic` or RMA) that reads (`r`) and / or writes (`w`)
    /// target memory wait for the `started` ops before it?
    pub fn must_wait(self, atomic: bool, r: bool, w: bool, started: &Started) -> bool {
        [false, true].into_iter().any(|earlier| {
            let k = usize::from(earlier);
            let (reads, writes) = (started.reads[k] > 0, started.writes[k] > 0);
            (r && writes && self.raw.covers(earlier, atomic))
                || (w && reads && self.war.covers(earlier, atomic))
                || (w && writes && self.waw.covers(earlier, atomic))
        })
    }
}

/// A one-sided operation (`fi_write`, `fi_read`, `fi_atomic`, ... and their msg forms).
#[derive(Debug)]
pub struct RmaOp<B> {
    /// The target.
    pub peer: PeerId,
    /// Write / read / atomic.
    pub kind: RmaKind<B>,
    /// Local data: the source of a write or the operands of an atomic; the
    /// destination of a read. Handed back in the completion.
    pub buf: B,
    /// Remote memory key.
    pub key: u64,
    /// Remote address as the target's registration mode defines it (virtual address
    /// or offset into the region); passed to `RmaTarget::resolve` unchanged.
    pub addr: u64,
    /// The application's `op_context`.
    pub context: u64,
    /// Write a CQ entry on success (errors are always reported).
    pub report: bool,
}

impl AtomicType {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            AtomicType::I8 | AtomicType::U8 => 1,
            AtomicType::I16 | AtomicType::U16 => 2,
            AtomicType::I32 | AtomicType::U32 | AtomicType::F32 => 4,
            AtomicType::I64 | AtomicType::U64 | AtomicType::F64 => 8,
        }
    }
}

/// Which atomic call an op/datatype pair is checked for (`fi_atomicvalid`,
/// `fi_fetch_atomicvalid`, `fi_compare_atomicvalid`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AtomicCall {
    Plain,
    Fetch,
    Compare,
}

/// Whether spray supports `op` on `dt` for `call` (libfabric's rules: bitwise and
/// logical ops on integers only; READ only with fetch; compare ops only with compare).
pub fn atomic_valid(op: AtomicOp, dt: AtomicType, call: AtomicCall) -> bool {
    use AtomicOp::*;
    let float = matches!(dt, AtomicType::F32 | AtomicType::F64);
    match op {
        Min | Max | Sum | Prod | Write => call != AtomicCall::Compare,
        Lor | Land | Bor | Band | Lxor | Bxor => call != AtomicCall::Compare && !float,
        Read => call == AtomicCall::Fetch,
        Cswap | CswapNe | CswapLe | CswapLt | CswapGe | CswapGt => call == AtomicCall::Compare,
        Mswap => call == AtomicCall::Compare && !float,
    }
}
