//! Message-layer header inside an SRD payload: Packet/Repr view (layout in `PROTOCOL.md`).
//!
//! One fixed 40-byte big-endian header for every message-layer datagram:
//!
//! ```text
//! 0       version (1)
//! 1       type (1 DATA, 2 RTS, 3 CTS, 4 RDATA, 5 CREDIT, 6 ABORT, 7 WRITE, 8 READ_REQ,
//!         9 READ_RESP, 10 ATOMIC, 11 ATOMIC_RESP, 12 WRITE_DONE, 13 RMA_NAK, 14 RMA_ABORT;
//!         0 and >14 reserved)
//! 2       flags (bit0 TAGGED, bit1 HAS_DATA; other bits must be 0)
//! 3       reserved, 0
//! 4..8    msg_seq   per-peer message sequence number (u32, wrapping)
//! 8..16   total     message length in bytes (CTS: granted bytes; CREDIT: credited bytes)
//! 16..24  offset    byte offset of this segment's payload in the message
//! 24..32  tag       message tag (0 when untagged)
//! 32..40  cq_data   remote CQ data (valid when HAS_DATA)
//! 40..    payload   segment bytes (DATA, RDATA, READ_RESP, ATOMIC_RESP); WRITE, READ_REQ
//!                   and ATOMIC start with a sub-header ([`RmaSub`], [`AtomicSub`])
//! ```
//!
//! RMA types (7..14) use `msg_seq` as the per-peer RMA op id (its own id space) and
//! never set TAGGED; only WRITE may set HAS_DATA (`fi_writedata`). See `PROTOCOL.md` §10.

use super::bytes::{be32, be64};
use super::WireError;

/// Protocol version carried in byte 0.
pub const VERSION: u8 = 1;
/// Length of the message header in bytes.
pub const HEADER_LEN: usize = 40;
/// Largest message length the header may declare, bytes (keeps `usize` math safe).
pub const MAX_TOTAL: u64 = 1 << 62;

/// Flag bit: the message is tagged.
pub const FLAG_TAGGED: u8 = 0x01;
/// Flag bit: the message carries remote CQ data.
pub const FLAG_HAS_DATA: u8 = 0x02;
const FLAGS_KNOWN: u8 = FLAG_TAGGED | FLAG_HAS_DATA;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const VERSION: usize = 0;
    pub const TYPE: usize = 1;
    pub const FLAGS: usize = 2;
    pub const RESERVED: usize = 3;
    pub const SEQ: Field = 4..8;
    pub const TOTAL: Field = 8..16;
    pub const OFFSET: Field = 16..24;
    pub const TAG: Field = 24..32;
    pub const DATA: Field = 32..40;
}

/// Where the offset field sits in the header: the segments of one message
/// have the same header but there.
pub const OFFSET_FIELD: core::ops::Range<usize> = field::OFFSET;

/// Message-layer datagram type (byte 1).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MsgType {
    /// Eager / medium segment (and every DGRAM-mode datagram); starts a record on its own.
    Data,
    /// Rendezvous request-to-send: header only.
    Rts,
    /// Rendezvous clear-to-send: `total` = bytes the receiver wants (≤ message length).
    Cts,
    /// Rendezvous data segment, placed by `offset`.
    RData,
    /// Eager credit returned to the sender: `total` = bytes.
    Credit,
    /// The sender gave up on its message `seq` (its datagrams failed): header only.
    Abort,
    /// RMA write segment: [`RmaSub`] then bytes `[offset, offset+len)` of the write.
    Write,
    /// RMA read request: [`RmaSub`] only; `total` = bytes to read.
    ReadReq,
    /// RMA read response segment: bytes `[offset, offset+len)` of the read.
    ReadResp,
    /// Atomic request: [`AtomicSub`], operands, comparands; `total` = bytes after the sub-header.
    Atomic,
    /// Atomic reply: the target's old values (empty for a plain atomic); `total` = their length.
    AtomicResp,
    /// The whole write op `seq` landed: header only; `total` = its length.
    WriteDone,
    /// The target refused RMA op `seq` (key, range, access): header only.
    RmaNak,
    /// The initiator gave up on its write `seq` (its datagrams failed): header only.
    RmaAbort,
}

impl MsgType {
    /// The wire code.
    pub fn code(self) -> u8 {
        match self {
            MsgType::Data => 1,
            MsgType::Rts => 2,
            MsgType::Cts => 3,
            MsgType::RData => 4,
            MsgType::Credit => 5,
            MsgType::Abort => 6,
            MsgType::Write => 7,
            MsgType::ReadReq => 8,
            MsgType::ReadResp => 9,
            MsgType::Atomic => 10,
            MsgType::AtomicResp => 11,
            MsgType::WriteDone => 12,
            MsgType::RmaNak => 13,
            MsgType::RmaAbort => 14,
        }
    }

    /// One of the one-sided (RMA / atomic) types, 7..=14.
    pub fn is_rma(self) -> bool {
        self.code() >= 7
    }

    /// The type for a wire code, if known.
    pub fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            1 => MsgType::Data,
            2 => MsgType::Rts,
            3 => MsgType::Cts,
            4 => MsgType::RData,
            5 => MsgType::Credit,
            6 => MsgType::Abort,
            7 => MsgType::Write,
            8 => MsgType::ReadReq,
            9 => MsgType::ReadResp,
            10 => MsgType::Atomic,
            11 => MsgType::AtomicResp,
            12 => MsgType::WriteDone,
            13 => MsgType::RmaNak,
            14 => MsgType::RmaAbort,
            _ => return None,
        })
    }
}

/// A checked view of a message-layer datagram.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap bytes without checking their length (accessors may panic if short).
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap bytes, checking they hold a whole header; after this no accessor panics.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` when shorter than the header.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Protocol version.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    /// Raw type code.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    /// Flag bits.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// Reserved byte.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }
    /// Per-peer message sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ)
    }
    /// Message length (CTS: granted bytes; CREDIT: credited bytes).
    pub fn total(&self) -> u64 {
        be64(self.buffer.as_ref(), field::TOTAL)
    }
    /// Byte offset of the payload in the message.
    pub fn offset(&self) -> u64 {
        be64(self.buffer.as_ref(), field::OFFSET)
    }
    /// Tag.
    pub fn tag(&self) -> u64 {
        be64(self.buffer.as_ref(), field::TAG)
    }
    /// Remote CQ data.
    pub fn cq_data(&self) -> u64 {
        be64(self.buffer.as_ref(), field::DATA)
    }
    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn put(&mut self, r: core::ops::Range<usize>, v: &[u8]) {
        self.buffer.as_mut()[r].copy_from_slice(v);
    }
    /// Set the version byte.
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }
    /// Set the type code.
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }
    /// Set the flag bits.
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }
    /// Set the reserved byte.
    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESERVED] = v;
    }
    /// Set the message sequence number.
    pub fn set_seq(&mut self, v: u32) {
        self.put(field::SEQ, &v.to_be_bytes());
    }
    /// Set the total length.
    pub fn set_total(&mut self, v: u64) {
        self.put(field::TOTAL, &v.to_be_bytes());
    }
    /// Set the offset.
    pub fn set_offset(&mut self, v: u64) {
        self.put(field::OFFSET, &v.to_be_bytes());
    }
    /// Set the tag.
    pub fn set_tag(&mut self, v: u64) {
        self.put(field::TAG, &v.to_be_bytes());
    }
    /// Set the CQ data.
    pub fn set_cq_data(&mut self, v: u64) {
        self.put(field::DATA, &v.to_be_bytes());
    }
}

/// `Repr::parse` for the segments of a message as they arrive one after
/// another: a DATA or RDATA segment that repeats the last such header parsed
/// but for its offset is parsed by reading the offset and checking the
/// segment's end against the length (what `Repr::parse` checks of a segment
/// whose other fields passed before). The other 32 bytes are compared, so
/// the result is `Repr::parse`'s for every input, only cheaper for a stream
/// (a 64 KiB flowlet at MTU 1500 is 44 segments of one message).
#[derive(Clone, Debug, Default)]
pub struct ParseMemo {
    /// The last DATA or RDATA header parsed whole, and its parse.
    last: Option<([u8; HEADER_LEN], Repr)>,
}

impl ParseMemo {
    /// `Repr::parse(p)`.
    pub fn parse<T: AsRef<[u8]>>(&mut self, p: &Packet<T>) -> Result<Repr, WireError> {
        let b = p.buffer.as_ref();
        if let (Some((head, r)), Some(h)) = (&self.last, b.get(..HEADER_LEN)) {
            let (o0, o1) = (field::OFFSET.start, field::OFFSET.end);
            if h[..o0] == head[..o0] && h[o1..] == head[o1..] {
                let offset = p.offset();
                let plen = (b.len() - HEADER_LEN) as u64;
                let end = offset.checked_add(plen).ok_or(WireError::Malformed)?;
                if end > r.total {
                    return Err(WireError::Malformed);
                }
                return Ok(Repr { offset, ..*r });
            }
        }
        let r = Repr::parse(p)?;
        if matches!(r.ty, MsgType::Data | MsgType::RData) {
            let mut head = [0u8; HEADER_LEN];
            head.copy_from_slice(&b[..HEADER_LEN]);
            self.last = Some((head, r));
        }
        Ok(r)
    }
}

/// The parsed message header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Datagram type.
    pub ty: MsgType,
    /// Per-peer message sequence number.
    pub seq: u32,
    /// Message length in bytes (CTS: granted; CREDIT: credited).
    pub total: u64,
    /// Byte offset of the payload within the message.
    pub offset: u64,
    /// `Some(tag)` for tagged messages.
    pub tag: Option<u64>,
    /// Remote CQ data.
    pub data: Option<u64>,
}

impl Repr {
    /// Parse and validate a header; `payload_len` is the number of bytes after it.
    /// Never panics.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, WireError> {
        p.check_len()?;
        if p.version() != VERSION {
            return Err(WireError::BadVersion);
        }
        let ty = MsgType::from_code(p.msg_type()).ok_or(WireError::BadType)?;
        let flags = p.flags();
        if flags & !FLAGS_KNOWN != 0 || p.reserved() != 0 {
            return Err(WireError::Malformed);
        }
        let total = p.total();
        let offset = p.offset();
        let plen = p.payload().len() as u64;
        if total > MAX_TOTAL {
            return Err(WireError::Malformed);
        }
        match ty {
            MsgType::Data | MsgType::RData => {
                let end = offset.checked_add(plen).ok_or(WireError::Malformed)?;
                if end > total {
                    return Err(WireError::Malformed);
                }
            }
            MsgType::Rts
            | MsgType::Cts
            | MsgType::Credit
            | MsgType::Abort
            | MsgType::WriteDone
            | MsgType::RmaNak
            | MsgType::RmaAbort => {
                if plen != 0 || offset != 0 {
                    return Err(WireError::Malformed);
                }
            }
            MsgType::Write => {
                let bytes = plen
                    .checked_sub(RMA_SUB_LEN as u64)
                    .ok_or(WireError::Truncated)?;
                let end = offset.checked_add(bytes).ok_or(WireError::Malformed)?;
                if end > total {
                    return Err(WireError::Malformed);
                }
            }
            MsgType::ReadReq => {
                if plen != RMA_SUB_LEN as u64 || offset != 0 {
                    return Err(WireError::Malformed);
                }
            }
            MsgType::ReadResp => {
                let end = offset.checked_add(plen).ok_or(WireError::Malformed)?;
                if end > total {
                    return Err(WireError::Malformed);
                }
            }
            MsgType::Atomic => {
                let bytes = plen
                    .checked_sub(ATOMIC_SUB_LEN as u64)
                    .ok_or(WireError::Truncated)?;
                if offset != 0 || bytes != total {
                    return Err(WireError::Malformed);
                }
            }
            MsgType::AtomicResp => {
                if offset != 0 || plen != total {
                    return Err(WireError::Malformed);
                }
            }
        }
        if ty.is_rma() && (flags & FLAG_TAGGED != 0 || (ty != MsgType::Write && flags != 0)) {
            // RMA is never tagged; only a write carries remote CQ data.
            return Err(WireError::Malformed);
        }
        let tag = (flags & FLAG_TAGGED != 0).then(|| p.tag());
        if tag.is_none() && p.tag() != 0 {
            return Err(WireError::Malformed);
        }
        let data = (flags & FLAG_HAS_DATA != 0).then(|| p.cq_data());
        Ok(Repr {
            ty,
            seq: p.seq(),
            total,
            offset,
            tag,
            data,
        })
    }

    /// Header length in bytes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into the first `HEADER_LEN` bytes of `p`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_version(VERSION);
        p.set_msg_type(self.ty.code());
        let mut flags = 0;
        if self.tag.is_some() {
            flags |= FLAG_TAGGED;
        }
        if self.data.is_some() {
            flags |= FLAG_HAS_DATA;
        }
        p.set_flags(flags);
        p.set_reserved(0);
        p.set_seq(self.seq);
        p.set_total(self.total);
        p.set_offset(self.offset);
        p.set_tag(self.tag.unwrap_or(0));
        p.set_cq_data(self.data.unwrap_or(0));
    }

    /// Write the header into `buf` if it is long enough; false otherwise.
    pub fn emit_into(&self, buf: &mut [u8]) -> bool {
        match buf.get_mut(..HEADER_LEN) {
            Some(h) => {
                self.emit(&mut Packet::new_unchecked(h));
                true
            }
            None => false,
        }
    }
}

/// Length of the RMA sub-header at the start of WRITE and READ_REQ payloads, bytes.
pub const RMA_SUB_LEN: usize = 16;
/// Length of the atomic sub-header at the start of ATOMIC payloads, bytes.
pub const ATOMIC_SUB_LEN: usize = 24;
/// Atomic sub-header flag: the initiator wants the old values back (fetch).
pub const ATOMIC_FETCH: u8 = 0x01;
/// Atomic sub-header flag: comparands follow the operands (compare ops; implies fetch).
pub const ATOMIC_COMPARE: u8 = 0x02;

/// The RMA sub-header: which registered memory a WRITE or READ_REQ addresses.
///
/// ```text
/// 0..8    key    remote memory key
/// 8..16   addr   remote address of the op's byte 0 (as the target's MR mode defines it)
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RmaSub {
    /// Remote memory key.
    pub key: u64,
    /// Remote address of the first byte of the whole op (not of this segment).
    pub addr: u64,
}

impl RmaSub {
    /// Parse the sub-header at the start of `payload`; returns it and the bytes after it.
    /// Never panics.
    pub fn parse(payload: &[u8]) -> Result<(RmaSub, &[u8]), WireError> {
        if payload.len() < RMA_SUB_LEN {
            return Err(WireError::Truncated);
        }
        let (h, rest) = payload.split_at(RMA_SUB_LEN);
        Ok((
            RmaSub {
                key: be64(h, 0..8),
                addr: be64(h, 8..16),
            },
            rest,
        ))
    }

    /// Sub-header length in bytes.
    pub fn buffer_len(&self) -> usize {
        RMA_SUB_LEN
    }

    /// Write the sub-header into the first `RMA_SUB_LEN` bytes of `buf`; false if shorter.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(h) = buf.get_mut(..RMA_SUB_LEN) else {
            return false;
        };
        h[0..8].copy_from_slice(&self.key.to_be_bytes());
        h[8..16].copy_from_slice(&self.addr.to_be_bytes());
        true
    }
}

/// The atomic sub-header at the start of an ATOMIC payload.
///
/// ```text
/// 0..8    key      remote memory key
/// 8..16   addr     remote address of element 0
/// 16      op       libfabric `enum fi_op` value (0 MIN .. 18 MSWAP)
/// 17      datatype libfabric `enum fi_datatype` value (0 INT8 .. 9 DOUBLE)
/// 18      flags    bit0 FETCH, bit1 COMPARE (implies FETCH); other bits 0
/// 19      reserved 0
/// 20..24  count    number of elements
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AtomicSub {
    /// Remote memory key.
    pub key: u64,
    /// Remote address of element 0.
    pub addr: u64,
    /// Operation code (`enum fi_op`); checked by the message layer.
    pub op: u8,
    /// Datatype code (`enum fi_datatype`); checked by the message layer.
    pub dt: u8,
    /// `ATOMIC_FETCH` / `ATOMIC_COMPARE` bits.
    pub flags: u8,
    /// Number of elements.
    pub count: u32,
}

impl AtomicSub {
    /// Parse the sub-header at the start of `payload`; returns it and the bytes after it
    /// (operands, then comparands). Checks flags and the reserved byte. Never panics.
    pub fn parse(payload: &[u8]) -> Result<(AtomicSub, &[u8]), WireError> {
        if payload.len() < ATOMIC_SUB_LEN {
            return Err(WireError::Truncated);
        }
        let (h, rest) = payload.split_at(ATOMIC_SUB_LEN);
        let flags = h[18];
        let known = ATOMIC_FETCH | ATOMIC_COMPARE;
        if flags & !known != 0 || flags == ATOMIC_COMPARE || h[19] != 0 {
            return Err(WireError::Malformed);
        }
        Ok((
            AtomicSub {
                key: be64(h, 0..8),
                addr: be64(h, 8..16),
                op: h[16],
                dt: h[17],
                flags,
                count: be32(h, 20..24),
            },
            rest,
        ))
    }

    /// Sub-header length in bytes.
    pub fn buffer_len(&self) -> usize {
        ATOMIC_SUB_LEN
    }

    /// Write the sub-header into the first `ATOMIC_SUB_LEN` bytes of `buf`; false if shorter.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(h) = buf.get_mut(..ATOMIC_SUB_LEN) else {
            return false;
        };
        h[0..8].copy_from_slice(&self.key.to_be_bytes());
        h[8..16].copy_from_slice(&self.addr.to_be_bytes());
        h[16] = self.op;
        h[17] = self.dt;
        h[18] = self.flags;
        h[19] = 0;
        h[20..24].copy_from_slice(&self.count.to_be_bytes());
        true
    }
}

#[cfg(test)]
#[path = "msg_memo_tests.rs"]
mod memo_tests;
