//! Hostile SRD packets for tests and fuzzers: packets built through the wire
//! `Repr` API, structured mutations of real ones (every header field,
//! lengths, flags, types, tokens, bit flips, truncation, extension), an
//! independent reference validator written from `PROTOCOL.md` §2, and the
//! classification of a mutated packet by what a receiver must do with it.
//!
//! Mutations are plain values made from integers (`Mutation::from_words`), so
//! a seeded `Rng` (the network fuzzer, the stable property tests) and a
//! byte-driven fuzzer (`arbitrary`, libFuzzer) produce the same ones.

use core::ops::Range;

use crate::rng::Rng;
use crate::wire::srd::{
    AckRepr, HandshakeRepr, PacketType, Repr, HANDSHAKE_LEN, HEADER_LEN, MAX_SACK_EXT_BYTES,
};

/// A header field by name (the layout of `PROTOCOL.md` §2; kept apart from
/// `wire::srd`'s private table on purpose: a test compares the two).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Field {
    Version,
    Type,
    Flags,
    Path,
    SrcPort,
    PayloadLen,
    SrcNonce,
    DstToken,
    Psn,
    PsnFloor,
    AckCum,
    AckRecent,
    AckDelay,
    Credit,
    SackBase,
    SackBits,
}

/// Every field, in header order.
pub const FIELDS: [Field; 16] = [
    Field::Version,
    Field::Type,
    Field::Flags,
    Field::Path,
    Field::SrcPort,
    Field::PayloadLen,
    Field::SrcNonce,
    Field::DstToken,
    Field::Psn,
    Field::PsnFloor,
    Field::AckCum,
    Field::AckRecent,
    Field::AckDelay,
    Field::Credit,
    Field::SackBase,
    Field::SackBits,
];

impl Field {
    /// Byte range of the field in the header.
    pub fn range(self) -> Range<usize> {
        match self {
            Field::Version => 0..1,
            Field::Type => 1..2,
            Field::Flags => 2..3,
            Field::Path => 3..4,
            Field::SrcPort => 4..6,
            Field::PayloadLen => 6..8,
            Field::SrcNonce => 8..16,
            Field::DstToken => 16..24,
            Field::Psn => 24..28,
            Field::PsnFloor => 28..32,
            Field::AckCum => 32..36,
            Field::AckRecent => 36..40,
            Field::AckDelay => 40..42,
            Field::Credit => 42..44,
            Field::SackBase => 44..48,
            Field::SackBits => 48..56,
        }
    }

    /// Read the field (big-endian) from a buffer holding the whole header.
    pub fn get(self, b: &[u8]) -> Option<u64> {
        let r = b.get(self.range())?;
        Some(r.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
    }

    /// Write the low bytes of `v` into the field (big-endian); false if
    /// the buffer is shorter than the field's end.
    pub fn set(self, b: &mut [u8], v: u64) -> bool {
        let Some(r) = b.get_mut(self.range()) else {
            return false;
        };
        let n = r.len();
        for (i, x) in r.iter_mut().enumerate() {
            *x = (v >> (8 * (n - 1 - i))) as u8;
        }
        true
    }
}

/// An SRD packet as a forger holds it: header, payload, and whatever
/// follows the payload (nothing in a real packet today; the optional MAC
/// trailer of `PROTOCOL.md` §2 will go there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forged {
    /// The header (its `payload_len` is taken from `payload` by `to_bytes`).
    pub repr: Repr,
    /// Bytes after the header.
    pub payload: Vec<u8>,
    /// Bytes after the payload.
    pub trailer: Vec<u8>,
}

impl Forged {
    /// A well-formed packet of type `ty` from main port `src_port` with
    /// `nonce` and `token` (HELLO: no token), an ack where the type allows
    /// one, and `payload` (DATA), SACK words (ACK: `payload` rounded down
    /// to whole words) or a handshake record (`token` as its value).
    pub fn new(ty: PacketType, src_port: u16, nonce: u64, token: u64, payload: &[u8]) -> Forged {
        let bare = matches!(
            ty,
            PacketType::Reset | PacketType::Hello | PacketType::Challenge | PacketType::Rails
        );
        let ack = (!bare).then_some(AckRepr {
            cum: 1,
            recent: 0,
            delay_us: 0,
            credit: 16,
            sack_base: 1,
            sack_bits: 0,
            repeat: false,
        });
        let body = match ty {
            PacketType::Data => payload.to_vec(),
            PacketType::Ack => {
                let n = payload.len().min(MAX_SACK_EXT_BYTES) / 8 * 8;
                payload[..n].to_vec()
            }
            PacketType::Hello | PacketType::Challenge => {
                let mut b = vec![0u8; HANDSHAKE_LEN];
                let hs = HandshakeRepr {
                    value: token.max(1),
                    caps: 0,
                };
                let _ = hs.emit(&mut b);
                b
            }
            PacketType::Reset | PacketType::Probe => Vec::new(),
            PacketType::Rails => {
                // Two rails: 10.0.0.1 and 10.1.0.1, mapped into IPv6.
                let mut b = vec![0u8; 32];
                b[10..12].copy_from_slice(&[0xff, 0xff]);
                b[12..16].copy_from_slice(&[10, 0, 0, 1]);
                b[26..28].copy_from_slice(&[0xff, 0xff]);
                b[28..32].copy_from_slice(&[10, 1, 0, 1]);
                b
            }
        };
        Forged {
            repr: header(
                ty,
                src_port,
                nonce,
                if ty == PacketType::Hello {
                    0
                } else {
                    token.max(1)
                },
                ack,
            ),
            payload: body,
            trailer: Vec::new(),
        }
    }

    /// Header, payload and trailer as one datagram.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut r = self.repr;
        r.payload_len = self.payload.len().min(usize::from(u16::MAX)) as u16;
        let mut b = vec![0u8; HEADER_LEN];
        let _ = r.emit(&mut b);
        b.extend_from_slice(&self.payload[..usize::from(r.payload_len)]);
        b.extend_from_slice(&self.trailer);
        b
    }
}

/// The one place a `Repr` is written out field by field (a new header field
/// is one line here).
pub fn header(ty: PacketType, src_port: u16, nonce: u64, token: u64, ack: Option<AckRepr>) -> Repr {
    Repr {
        ty,
        flags: 0,
        path: 0,
        src_port,
        src_nonce: nonce,
        dst_token: token,
        psn: 0,
        psn_floor: 0,
        ack,
        payload_len: 0,
    }
}

/// One change to a datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Write `value` into a header field (if the datagram holds it).
    Set(Field, u64),
    /// Add `delta` to a header field (wrapping in its width).
    Add(Field, u64),
    /// Flip bit `bit` of byte `at % len`.
    FlipBit { at: usize, bit: u8 },
    /// Keep only the first `keep % (len + 1)` bytes.
    Truncate { keep: usize },
    /// Append bytes.
    Extend(Vec<u8>),
    /// Overwrite bytes from `at % len` with `bytes` (as far as they fit).
    Overwrite { at: usize, bytes: Vec<u8> },
}

impl Mutation {
    /// A mutation from three words (total: every input gives one), so that
    /// seeded and byte-driven fuzzers share the generator.
    pub fn from_words(kind: u8, a: u64, b: u64) -> Mutation {
        let field = FIELDS[(a % FIELDS.len() as u64) as usize];
        match kind % 8 {
            // Interesting values first: 0, 1, all ones, top bit, small.
            0 => Mutation::Set(
                field,
                match b % 6 {
                    0 => 0,
                    1 => 1,
                    2 => u64::MAX,
                    3 => 1 << 63 | 1 << 31 | 1 << 15 | 1 << 7,
                    4 => b >> 3 & 0xff,
                    _ => b,
                },
            ),
            1 => Mutation::Set(field, b),
            2 => Mutation::Add(field, if b & 1 == 0 { 1 } else { u64::MAX }),
            3 | 4 => Mutation::FlipBit {
                at: a as usize,
                bit: (b % 8) as u8,
            },
            5 => Mutation::Truncate { keep: a as usize },
            6 => Mutation::Extend(bytes_of(b, (a % 80) as usize)),
            _ => Mutation::Overwrite {
                at: a as usize,
                bytes: bytes_of(b, 1 + (a >> 32) as usize % 16),
            },
        }
    }

    /// A random mutation.
    pub fn random(rng: &mut Rng) -> Mutation {
        Mutation::from_words(rng.next_u64() as u8, rng.next_u64(), rng.next_u64())
    }

    /// Apply to `d`.
    pub fn apply(&self, d: &mut Vec<u8>) {
        match self {
            Mutation::Set(f, v) => {
                f.set(d, *v);
            }
            Mutation::Add(f, v) => {
                if let Some(x) = f.get(d) {
                    f.set(d, x.wrapping_add(*v));
                }
            }
            Mutation::FlipBit { at, bit } => {
                if !d.is_empty() {
                    let i = at % d.len();
                    d[i] ^= 1 << (bit % 8);
                }
            }
            Mutation::Truncate { keep } => d.truncate(keep % (d.len() + 1)),
            Mutation::Extend(b) => d.extend_from_slice(b),
            Mutation::Overwrite { at, bytes } => {
                if !d.is_empty() {
                    let i = at % d.len();
                    let n = bytes.len().min(d.len() - i);
                    d[i..i + n].copy_from_slice(&bytes[..n]);
                }
            }
        }
    }
}

/// `n` bytes from a seed (xorshift).
pub fn bytes_of(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `PROTOCOL.md` §2 "Validity", written from the document and not from
/// `Repr::parse`: what the parser must accept. (The handshake record's
/// `value` ≠ 0 and DATA `payload_len` ≤ the receiver's max payload are the
/// engine's checks: see `verdict`.)
pub fn spec_parses(b: &[u8]) -> bool {
    let get = |f: Field| f.get(b).unwrap_or(0);
    // Flag bit 7 (MAC): a 16-byte tag between the header and the payload.
    let tag = if b.len() > 2 && b[2] & 0x80 != 0 {
        16
    } else {
        0
    };
    if b.len() < HEADER_LEN || b.len() < HEADER_LEN + tag + get(Field::PayloadLen) as usize {
        return false;
    }
    let (ty, fl, plen, token) = (
        get(Field::Type),
        get(Field::Flags) as u8,
        get(Field::PayloadLen),
        get(Field::DstToken),
    );
    let ack_present = fl & 0x01 != 0;
    if get(Field::Version) != 2 || !(1..=7).contains(&ty) {
        return false;
    }
    // Bits 0..5 and 7 (MAC) are defined; bit 4 (ACK_REPEAT) only with bit
    // 0 (ACK_PRESENT).
    if fl & !0xbf != 0 || get(Field::SrcNonce) == 0 || fl & 0x10 != 0 && !ack_present {
        return false;
    }
    let other = fl & !0x80;
    let (psn, floor) = (get(Field::Psn) as u32, get(Field::PsnFloor) as u32);
    match ty {
        // DATA: the floor not after the PSN (serial number order).
        1 => (floor.wrapping_sub(psn) as i32) <= 0,
        2 => ack_present && plen % 8 == 0 && plen <= 504,
        3 => plen == 0 && other == 0 && token != 0,
        4 => plen == 0,
        5 => plen == 16 && other == 0 && token == 0,
        6 => plen == 16 && other == 0 && token != 0,
        // RAILS: 2..=8 16-byte addresses, flags ACK_NOW and MAC only.
        _ => plen % 16 == 0 && (32..=128).contains(&plen) && fl & !0x82 == 0 && token != 0,
    }
}

/// What a receiver holding a session with its peer must do with datagram
/// `b`: the session's peer has main port `port` and nonce `nonce`, the
/// datagram came from the peer's IP address (`from_peer_ip`) or another,
/// and `tokens` are the values only the session knows (the tokens its
/// packets carry, the echo values of its HELLOs).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Drop and count as `rx_malformed`.
    Malformed,
    /// A HELLO: answer statelessly (`tx_challenges` or `stateless_dropped`).
    Hello,
    /// Without the session's address, nonce and token: drop and count as
    /// `rx_bad_token` / `rx_no_session`.
    Forged,
    /// Carries the session's address, nonce and token: a replay, or what
    /// only an on-path attacker (who saw the token) can make.
    InSession,
}

/// The verdict for `b`, in the order the engine checks (`PROTOCOL.md` §2,
/// §3): parsing (a DATA packet's `psn_floor` not after its `psn` among
/// its rules); a DATA payload within `max_payload` bytes and a handshake
/// record's `value` ≠ 0; then the session check. Nothing that fails a
/// check touches session state, so a malformed packet with the session's
/// token is dropped like any other.
pub fn verdict(
    b: &[u8],
    from_peer_ip: bool,
    port: u16,
    nonce: u64,
    tokens: &[u64],
    max_payload: usize,
) -> Verdict {
    if !spec_parses(b) {
        return Verdict::Malformed;
    }
    let get = |f: Field| f.get(b).unwrap_or(0);
    // A tag where the receiver has no job key: refused before anything
    // else (counted `rx_mac_unexpected`).
    if get(Field::Flags) & 0x80 != 0 {
        return Verdict::Malformed;
    }
    let ty = get(Field::Type);
    if ty == 1 && get(Field::PayloadLen) as usize > max_payload {
        return Verdict::Malformed;
    }
    let value_ok = || {
        b.get(HEADER_LEN..HEADER_LEN + 8)
            .is_some_and(|v| v.iter().any(|&x| x != 0))
    };
    if (ty == 5 || ty == 6) && !value_ok() {
        return Verdict::Malformed;
    }
    if ty == 5 {
        return Verdict::Hello;
    }
    let own_addr = from_peer_ip && get(Field::SrcPort) == u64::from(port);
    let token_ok = tokens.contains(&get(Field::DstToken));
    let in_session = match ty {
        3 | 6 => own_addr && token_ok,
        _ => own_addr && token_ok && get(Field::SrcNonce) == nonce,
    };
    if !in_session {
        return Verdict::Forged;
    }
    Verdict::InSession
}

/// True if `b` says exactly what `orig` (a real packet) said: the same
/// bytes up to the end of its payload (anything after is not read).
pub fn is_replay(b: &[u8], orig: &[u8]) -> bool {
    let n = HEADER_LEN + Field::PayloadLen.get(orig).unwrap_or(0) as usize;
    n <= orig.len() && b.len() >= n && b[..n] == orig[..n]
}
