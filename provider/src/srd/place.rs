//! Direct placement support: before a datagram is received, tell from its
//! headers alone whether it is new DATA from a known peer of this incarnation,
//! so the driver may receive its payload straight into an application buffer.

use core::net::SocketAddr;

use super::Srd;
use crate::dgram::PeerId;
use crate::wire::srd::{Packet, PacketType, Repr, HEADER_LEN};

impl Srd {
    /// If `data` (a datagram whose headers are valid; the payload bytes after
    /// them may not have been read yet, but `data` is as long as the datagram)
    /// is new DATA that `handle_datagram` would deliver, its peer and payload.
    /// Read-only: the datagram is handled afterwards as usual.
    pub fn peek_data<'a>(&self, from: SocketAddr, data: &'a [u8]) -> Option<(PeerId, &'a [u8])> {
        if self.keyed() {
            // With a job key the MAC must be checked before a payload may
            // land in application memory: no placement (PROTOCOL.md §8).
            return None;
        }
        let pkt = Packet::new_checked(data).ok()?;
        let h = Repr::parse(&pkt).ok()?;
        if h.ty != PacketType::Data || usize::from(h.payload_len) > self.p.max_payload {
            return None;
        }
        // Exactly as long as the header says. Bytes after the payload (junk
        // an on-path attacker appended to a replay) would otherwise be taken
        // for headers and shift the placed payload by their length; such a
        // datagram takes the copying path, which ignores them.
        if data.len() != HEADER_LEN + usize::from(h.payload_len) {
            return None;
        }
        let addr = SocketAddr::new(from.ip(), h.src_port);
        let id = match self.by_addr.get(&addr) {
            Some(&id) => id,
            None => self.rail_lookup(addr)?.0,
        };
        let peer = self.peers.get(id.0 as usize)?;
        // Only the steady state: a session with this incarnation, its token.
        if peer.remote_nonce == 0
            || h.src_nonce != peer.remote_nonce
            || (h.dst_token != peer.token && h.dst_token != peer.own_cookie)
        {
            return None;
        }
        if !peer.rx.is_new(h.psn, h.psn_floor) {
            return None;
        }
        Some((id, pkt.payload_ref()))
    }
}
