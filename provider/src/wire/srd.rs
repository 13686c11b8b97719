//! SRD packet header: Packet/Repr view (layout in `PROTOCOL.md`).
//!
//! One fixed 56-byte big-endian header, version and type first, followed by
//! `payload_len` bytes of payload (DATA: a datagram; ACK: SACK words; HELLO
//! and CHALLENGE: a `HandshakeRepr`). Every header carries the sender's
//! incarnation nonce and the session token the receiver checks. The
//! acknowledgement fields are meaningful only when `ACK_PRESENT` is set.
//! With flag `MAC` (an endpoint with a job key), a `TAG_LEN`-byte tag sits
//! between the header and the payload (see `srd/auth.rs`).

use super::bytes::{be16, be32, be64};
use super::WireError;

/// Protocol version carried in byte 0.
pub const VERSION: u8 = 2;
/// Header length in bytes.
pub const HEADER_LEN: usize = 56;
/// Offset of the 4-byte PSN in the header.
pub const PSN_AT: usize = field::PSN.start;
/// Offset of the flags byte in the header.
pub const FLAGS_AT: usize = field::FLAGS;
/// Bytes of the authentication tag that follows the header of a packet
/// flagged `MAC` (outside `payload_len`; the payload starts after it).
pub const TAG_LEN: usize = 16;
/// Payload of a HELLO or CHALLENGE, bytes (`HandshakeRepr`): equal sizes, so
/// a CHALLENGE never carries more than the HELLO that asked for it.
pub const HANDSHAKE_LEN: usize = 16;
/// Value of the credit field that means "no receiver limit".
pub const CREDIT_UNLIMITED: u16 = 0xFFFF;

/// Most bytes of extra SACK bitmap an ACK packet carries after the header
/// (63 words: with the header's word, 4096 PSNs, the whole window).
pub const MAX_SACK_EXT_BYTES: usize = 63 * 8;

/// Bit `i` of extension word `k` (0-based) of an ACK payload = PSN
/// `sack_base + 64 * (k + 1) + i` received.
pub fn sack_word(payload: &[u8], k: usize) -> Option<u64> {
    let b = payload.get(8 * k..8 * k + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_be_bytes(a))
}

/// Byte ranges of the header fields.
mod field {
    pub type Field = core::ops::Range<usize>;
    pub const VERSION: usize = 0;
    pub const TYPE: usize = 1;
    pub const FLAGS: usize = 2;
    pub const PATH: usize = 3;
    pub const SRC_PORT: Field = 4..6;
    pub const PAYLOAD_LEN: Field = 6..8;
    pub const SRC_NONCE: Field = 8..16;
    pub const DST_TOKEN: Field = 16..24;
    pub const PSN: Field = 24..28;
    pub const PSN_FLOOR: Field = 28..32;
    pub const ACK_CUM: Field = 32..36;
    pub const ACK_RECENT: Field = 36..40;
    pub const ACK_DELAY: Field = 40..42;
    pub const CREDIT: Field = 42..44;
    pub const SACK_BASE: Field = 44..48;
    pub const SACK_BITS: Field = 48..56;
}

/// Packet types. Values are never reused; 0 and 8..=255 are invalid.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PacketType {
    /// Carries one datagram (and a piggybacked ack).
    Data = 1,
    /// Acknowledgement only.
    Ack = 2,
    /// "I hold no session for the token you sent": echoes that token. Only
    /// ever starts a new handshake at its receiver, never a teardown.
    Reset = 3,
    /// Asks for an immediate acknowledgement (path probe / keepalive).
    Probe = 4,
    /// Opens a handshake: carries the sender's nonce and a fresh echo value.
    Hello = 5,
    /// Answers a HELLO statelessly: echoes its value in `dst_token` and
    /// carries the session token (a cookie) the initiator must use.
    Challenge = 6,
    /// In a session: the sender's rail addresses (one per NIC, see
    /// `wire::rails`); ACK_NOW asks for the receiver's own in return.
    Rails = 7,
}

impl PacketType {
    fn from_u8(v: u8) -> Option<PacketType> {
        match v {
            1 => Some(PacketType::Data),
            2 => Some(PacketType::Ack),
            3 => Some(PacketType::Reset),
            4 => Some(PacketType::Probe),
            5 => Some(PacketType::Hello),
            6 => Some(PacketType::Challenge),
            7 => Some(PacketType::Rails),
            _ => None,
        }
    }
}

/// Header flag bits.
pub mod flags {
    /// The ack fields are valid.
    pub const ACK_PRESENT: u8 = 0x01;
    /// The receiver should acknowledge at once (no delayed ack).
    pub const ACK_NOW: u8 = 0x02;
    /// This DATA packet is a retransmission.
    pub const RETRANSMIT: u8 = 0x04;
    /// DATA: the sender has more to send behind this packet (queued data or
    /// retransmissions); PROBE: the sender waits for credit. The receiver
    /// schedules its zero-credit grants among the senders that set it.
    pub const MORE: u8 = 0x08;
    /// A `TAG_LEN`-byte authentication tag follows the header (the sender
    /// has a job key; see `srd/auth.rs`). The payload starts after the tag.
    pub const MAC: u8 = 0x80;
    /// With `ACK_PRESENT` only: an earlier ack already reported the ack's
    /// `recent` packet, so `delay_us` is that packet's age, not how long
    /// the receiver held it (an RTT sample still, not a hold sample).
    pub const ACK_REPEAT: u8 = 0x10;
    /// DATA: no completion waits on this packet's ack (an inject the
    /// application asked no counter for): the receiver may hold the ack up
    /// to its lazy hold (`Config::ack_lazy`) for a reply to carry it.
    pub const LAZY: u8 = 0x20;
    /// Bits that are defined; the others must be zero.
    pub const KNOWN: u8 = ACK_PRESENT | ACK_NOW | RETRANSMIT | MORE | MAC | ACK_REPEAT | LAZY;
}

/// A checked view over the bytes of one SRD packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking (accessors may panic on short buffers).
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap and check that the header and the declared payload fit.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` unless the buffer holds the header, the tag (flag `MAC`)
    /// and `payload_len` bytes.
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b.len() < self.payload_offset() + usize::from(self.payload_len()) {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// Where the payload starts: after the header, and the tag if flagged `MAC`.
    pub fn payload_offset(&self) -> usize {
        if self.flags() & flags::MAC != 0 {
            HEADER_LEN + TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The authentication tag (after `check_len`; `None` without flag `MAC`).
    pub fn tag(&self) -> Option<&[u8]> {
        (self.flags() & flags::MAC != 0)
            .then(|| &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + TAG_LEN])
    }

    /// Version byte.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    /// Raw type byte.
    pub fn packet_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    /// Flag bits.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// Sender's path (entropy) index.
    pub fn path(&self) -> u8 {
        self.buffer.as_ref()[field::PATH]
    }
    /// Sender's main UDP port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }
    /// Payload length in bytes.
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }
    /// Sender's incarnation nonce.
    pub fn src_nonce(&self) -> u64 {
        be64(self.buffer.as_ref(), field::SRC_NONCE)
    }
    /// Session token the receiver checks (HELLO: 0; CHALLENGE: the HELLO's
    /// echo value; RESET: the refused packet's token).
    pub fn dst_token(&self) -> u64 {
        be64(self.buffer.as_ref(), field::DST_TOKEN)
    }
    /// Packet sequence number (DATA).
    pub fn psn(&self) -> u32 {
        be32(self.buffer.as_ref(), field::PSN)
    }
    /// Sender's lowest unacknowledged PSN (DATA).
    pub fn psn_floor(&self) -> u32 {
        be32(self.buffer.as_ref(), field::PSN_FLOOR)
    }
    /// Every PSN below this has been received.
    pub fn ack_cum(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK_CUM)
    }
    /// PSN of the most recently received data packet.
    pub fn ack_recent(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK_RECENT)
    }
    /// Microseconds between the arrival of `ack_recent` and this packet's departure.
    pub fn ack_delay(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ACK_DELAY)
    }
    /// Packets the sender may have in flight (receiver credit).
    pub fn credit(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CREDIT)
    }
    /// First PSN of the selective-ack bitmap.
    pub fn sack_base(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SACK_BASE)
    }
    /// Bit i set = PSN `sack_base + i` received.
    pub fn sack_bits(&self) -> u64 {
        be64(self.buffer.as_ref(), field::SACK_BITS)
    }
    /// The payload (after `check_len`).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let at = self.payload_offset();
        &b[at..at + usize::from(self.payload_len())]
    }

    /// The header bytes (`HEADER_LEN`; after `check_len`).
    pub fn header_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[..HEADER_LEN]
    }
}

impl<'a> Packet<&'a [u8]> {
    /// The payload with the buffer's lifetime (after `check_len`).
    pub fn payload_ref(&self) -> &'a [u8] {
        let b: &'a [u8] = self.buffer;
        let at = self.payload_offset();
        &b[at..at + usize::from(self.payload_len())]
    }
}

/// The acknowledgement carried in a header.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct AckRepr {
    /// Every PSN below this has been received.
    pub cum: u32,
    /// PSN of the most recently received data packet (RTT sample).
    pub recent: u32,
    /// Microseconds `recent` waited at the receiver before this ack left.
    pub delay_us: u16,
    /// Packets the sender may have in flight (`CREDIT_UNLIMITED` = no limit).
    pub credit: u16,
    /// First PSN of `sack_bits`.
    pub sack_base: u32,
    /// Bit i set = PSN `sack_base + i` received.
    pub sack_bits: u64,
    /// `recent` was reported by an earlier ack (flag `ACK_REPEAT`).
    pub repeat: bool,
}

/// A parsed SRD header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Packet type.
    pub ty: PacketType,
    /// `ACK_NOW` / `RETRANSMIT` / `MORE` / `MAC` bits (`ACK_PRESENT` is
    /// implied by `ack`). `MAC`: a tag follows the header (`emit` leaves its
    /// bytes to the caller, see `srd/auth.rs`).
    pub flags: u8,
    /// Sender's path index.
    pub path: u8,
    /// Sender's main UDP port.
    pub src_port: u16,
    /// Sender's incarnation nonce (never 0).
    pub src_nonce: u64,
    /// Session token (see `Packet::dst_token`).
    pub dst_token: u64,
    /// Packet sequence number (DATA; 0 otherwise).
    pub psn: u32,
    /// Sender's lowest unacknowledged PSN (DATA; 0 otherwise).
    pub psn_floor: u32,
    /// Piggybacked or pure acknowledgement.
    pub ack: Option<AckRepr>,
    /// Payload length in bytes (DATA only).
    pub payload_len: u16,
}

impl Repr {
    /// Parse a checked packet; never panics.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, WireError> {
        p.check_len()?;
        if p.version() != VERSION {
            return Err(WireError::BadVersion);
        }
        let ty = PacketType::from_u8(p.packet_type()).ok_or(WireError::BadType)?;
        let fl = p.flags();
        if fl & !flags::KNOWN != 0 || p.src_nonce() == 0 {
            return Err(WireError::Malformed);
        }
        let plen = usize::from(p.payload_len());
        let ok = match ty {
            // The floor (lowest PSN the sender still cares about) is never
            // after the packet's own PSN (serial number order).
            PacketType::Data => (p.psn_floor().wrapping_sub(p.psn()) as i32) <= 0,
            // An ACK's payload is extra SACK bitmap words (see `sack_words`).
            PacketType::Ack => plen % 8 == 0 && plen <= MAX_SACK_EXT_BYTES,
            PacketType::Probe => plen == 0,
            // Session-less packets: no flags but MAC, no ack; a RESET and
            // a CHALLENGE name a token, a HELLO has none yet.
            PacketType::Reset => plen == 0 && fl & !flags::MAC == 0 && p.dst_token() != 0,
            PacketType::Hello => {
                plen == HANDSHAKE_LEN && fl & !flags::MAC == 0 && p.dst_token() == 0
            }
            PacketType::Challenge => {
                plen == HANDSHAKE_LEN && fl & !flags::MAC == 0 && p.dst_token() != 0
            }
            // In a session (a token), no ack; 2..=MAX_RAILS addresses.
            PacketType::Rails => {
                super::rails::len_ok(plen)
                    && fl & !(flags::ACK_NOW | flags::MAC) == 0
                    && p.dst_token() != 0
            }
        };
        if !ok {
            return Err(WireError::Malformed);
        }
        // An ACK carries an ack; ACK_REPEAT qualifies one.
        if (ty == PacketType::Ack || fl & flags::ACK_REPEAT != 0) && fl & flags::ACK_PRESENT == 0 {
            return Err(WireError::Malformed);
        }
        let ack = if fl & flags::ACK_PRESENT != 0 {
            Some(AckRepr {
                cum: p.ack_cum(),
                recent: p.ack_recent(),
                delay_us: p.ack_delay(),
                credit: p.credit(),
                sack_base: p.sack_base(),
                sack_bits: p.sack_bits(),
                repeat: fl & flags::ACK_REPEAT != 0,
            })
        } else {
            None
        };
        Ok(Repr {
            ty,
            flags: fl & !(flags::ACK_PRESENT | flags::ACK_REPEAT),
            path: p.path(),
            src_port: p.src_port(),
            src_nonce: p.src_nonce(),
            dst_token: p.dst_token(),
            psn: p.psn(),
            psn_floor: p.psn_floor(),
            ack,
            payload_len: p.payload_len(),
        })
    }

    /// Header, tag (flag `MAC`) and payload length in bytes.
    pub fn buffer_len(&self) -> usize {
        self.payload_offset() + usize::from(self.payload_len)
    }

    /// Where the payload starts: `HEADER_LEN`, plus `TAG_LEN` with flag `MAC`.
    pub fn payload_offset(&self) -> usize {
        if self.flags & flags::MAC != 0 {
            HEADER_LEN + TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Write the header into `buf[..HEADER_LEN]` (the caller writes the tag
    /// and the payload).
    /// Returns `Truncated` if `buf` is shorter than the header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let b = buf.get_mut(..HEADER_LEN).ok_or(WireError::Truncated)?;
        let ack = self.ack.unwrap_or_default();
        let fl = (self.flags & flags::KNOWN & !(flags::ACK_PRESENT | flags::ACK_REPEAT))
            | match self.ack {
                Some(a) if a.repeat => flags::ACK_PRESENT | flags::ACK_REPEAT,
                Some(_) => flags::ACK_PRESENT,
                None => 0,
            };
        b[field::VERSION] = VERSION;
        b[field::TYPE] = self.ty as u8;
        b[field::FLAGS] = fl;
        b[field::PATH] = self.path;
        b[field::SRC_PORT].copy_from_slice(&self.src_port.to_be_bytes());
        b[field::PAYLOAD_LEN].copy_from_slice(&self.payload_len.to_be_bytes());
        b[field::SRC_NONCE].copy_from_slice(&self.src_nonce.to_be_bytes());
        b[field::DST_TOKEN].copy_from_slice(&self.dst_token.to_be_bytes());
        b[field::PSN].copy_from_slice(&self.psn.to_be_bytes());
        b[field::PSN_FLOOR].copy_from_slice(&self.psn_floor.to_be_bytes());
        b[field::ACK_CUM].copy_from_slice(&ack.cum.to_be_bytes());
        b[field::ACK_RECENT].copy_from_slice(&ack.recent.to_be_bytes());
        b[field::ACK_DELAY].copy_from_slice(&ack.delay_us.to_be_bytes());
        b[field::CREDIT].copy_from_slice(&ack.credit.to_be_bytes());
        b[field::SACK_BASE].copy_from_slice(&ack.sack_base.to_be_bytes());
        b[field::SACK_BITS].copy_from_slice(&ack.sack_bits.to_be_bytes());
        Ok(())
    }
}

/// `HandshakeRepr::caps` bit: the sender authenticates every packet with a
/// job key (flag `MAC`). Informational: a keyed endpoint refuses every packet
/// without a valid tag whatever the caps say, so nothing can be negotiated
/// down by an on-path attacker.
pub const CAP_MAC: u64 = 1;

/// `HandshakeRepr::caps` bit: the sender has several rails (NICs) and
/// speaks RAILS (type 7): a peer that has several too sends it its rail
/// addresses once the session is up (`PROTOCOL.md` §5.1). Endpoints with one
/// rail never set it.
pub const CAP_RAILS: u64 = 2;

/// The payload of a HELLO or CHALLENGE (`HANDSHAKE_LEN` bytes, big-endian).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct HandshakeRepr {
    /// HELLO: the echo value the CHALLENGE must return in `dst_token`
    /// (fresh per attempt, never 0). CHALLENGE: the session token (cookie)
    /// the initiator puts in `dst_token` from now on (never 0).
    pub value: u64,
    /// Feature bits the sender offers (a receiver ignores bits it does not
    /// know). Bit 0 (`CAP_MAC`): the sender has a job key.
    pub caps: u64,
}

impl HandshakeRepr {
    /// Parse the payload of a parsed HELLO / CHALLENGE; `Malformed` if the
    /// length is wrong or `value` is 0. Never panics.
    pub fn parse(payload: &[u8]) -> Result<HandshakeRepr, WireError> {
        if payload.len() != HANDSHAKE_LEN {
            return Err(WireError::Malformed);
        }
        let value = be64(payload, 0..8);
        if value == 0 {
            return Err(WireError::Malformed);
        }
        Ok(HandshakeRepr {
            value,
            caps: be64(payload, 8..16),
        })
    }

    /// Write into `buf[..HANDSHAKE_LEN]`; `Truncated` if it is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let b = buf.get_mut(..HANDSHAKE_LEN).ok_or(WireError::Truncated)?;
        b[..8].copy_from_slice(&self.value.to_be_bytes());
        b[8..].copy_from_slice(&self.caps.to_be_bytes());
        Ok(())
    }
}
