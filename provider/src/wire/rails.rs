//! The payload of a RAILS packet (type 7, `PROTOCOL.md` §5.1): the sender's
//! rail addresses, one 16-byte entry per rail in rail order, each an IPv6
//! address or an IPv4 one mapped into IPv6 (`::ffff:a.b.c.d`). Every rail
//! receives on the sender's main port, so no port is carried. Entry 0 is the
//! sender's main IP as it sees it (informational: the receiver knows the
//! sender by the address its packets come from).

use core::net::{IpAddr, Ipv6Addr};

use super::WireError;

/// Bytes of one rail entry.
pub const ENTRY_LEN: usize = 16;
/// Most rails an endpoint has (and a RAILS packet lists).
pub const MAX_RAILS: usize = 8;

/// Is `payload_len` a RAILS payload length: 2..=`MAX_RAILS` entries?
pub fn len_ok(payload_len: usize) -> bool {
    payload_len.is_multiple_of(ENTRY_LEN) && (2..=MAX_RAILS).contains(&(payload_len / ENTRY_LEN))
}

/// A parsed RAILS payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RailsRepr {
    /// Rail `i`'s address (IPv4 ones unmapped).
    pub rails: Vec<IpAddr>,
}

impl RailsRepr {
    /// Parse a RAILS payload; `Malformed` unless its length is `len_ok`.
    /// Never panics.
    pub fn parse(payload: &[u8]) -> Result<RailsRepr, WireError> {
        if !len_ok(payload.len()) {
            return Err(WireError::Malformed);
        }
        let rails = payload
            .chunks_exact(ENTRY_LEN)
            .map(|c| {
                let mut a = [0u8; ENTRY_LEN];
                a.copy_from_slice(c);
                let v6 = Ipv6Addr::from(a);
                match v6.to_ipv4_mapped() {
                    Some(v4) => IpAddr::V4(v4),
                    None => IpAddr::V6(v6),
                }
            })
            .collect();
        Ok(RailsRepr { rails })
    }

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        self.rails.len() * ENTRY_LEN
    }

    /// Write into `buf[..buffer_len()]`; `Truncated` if it is shorter,
    /// `Malformed` for a count outside 2..=`MAX_RAILS`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        if !len_ok(self.buffer_len()) {
            return Err(WireError::Malformed);
        }
        let b = buf
            .get_mut(..self.buffer_len())
            .ok_or(WireError::Truncated)?;
        for (c, ip) in b.chunks_exact_mut(ENTRY_LEN).zip(&self.rails) {
            let v6 = match ip {
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                IpAddr::V6(v6) => *v6,
            };
            c.copy_from_slice(&v6.octets());
        }
        Ok(())
    }
}
