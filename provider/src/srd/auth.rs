//! Optional per-packet authentication with a job key: key derivation, tags
//! and their check. A tag is the first `TAG_LEN` bytes of a BLAKE3 keyed
//! hash of the header and the payload (the payload stays in clear), keyed
//! per session and direction from the job key and both incarnations'
//! nonces; HELLO, CHALLENGE and RESET, which precede or lack a session, use
//! a key derived from the job key alone. Why BLAKE3 (a PRF: no per-packet
//! nonce to get wrong, fastest measured from 1 KiB up, streams a body that
//! lies in the application's buffer), what it protects and what not:
//! `PROTOCOL.md` §2 and §11.

use super::{Srd, Transmit};
use crate::wire::srd::{flags, Packet, PacketType, Repr, HEADER_LEN, TAG_LEN};

/// Context strings of BLAKE3's key-derivation mode: one per use, so no key
/// ever serves two purposes.
const CTX_JOB: &str = "spray 2026-05 srd v2 job key";
const CTX_HANDSHAKE: &str = "spray 2026-05 srd v2 handshake mac";
const CTX_SESSION: &str = "spray 2026-05 srd v2 session mac";

/// A 256-bit MAC key (what a tag is keyed with).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct MacKey([u8; 32]);

impl core::fmt::Debug for MacKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("MacKey(..)")
    }
}

/// A tag being computed: the header, then the payload in pieces, in order.
pub struct Sealer(blake3::Hasher);

impl Sealer {
    /// Feed the next bytes of the payload.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The tag.
    pub fn finish(&self) -> [u8; TAG_LEN] {
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(&self.0.finalize().as_bytes()[..TAG_LEN]);
        t
    }
}

impl MacKey {
    /// Start a tag over a packet's `HEADER_LEN` header bytes (flag MAC set).
    pub fn start(&self, header: &[u8]) -> Sealer {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(header);
        Sealer(h)
    }

    /// Write the tag of the packet in `packet` (header, tag room, payload:
    /// `Repr::buffer_len` bytes, flag MAC set) into its tag field.
    pub fn seal(&self, packet: &mut [u8]) {
        if packet.len() < HEADER_LEN + TAG_LEN {
            return;
        }
        let mut s = self.start(&packet[..HEADER_LEN]);
        s.update(&packet[HEADER_LEN + TAG_LEN..]);
        let t = s.finish();
        packet[HEADER_LEN..HEADER_LEN + TAG_LEN].copy_from_slice(&t);
    }

    /// Does `pkt` (checked, flag MAC) carry the tag of its header and payload?
    /// Compared in constant time.
    pub fn verify(&self, pkt: &Packet<&[u8]>) -> bool {
        let Some(tag) = pkt.tag() else {
            return false;
        };
        let mut s = self.start(pkt.header_bytes());
        s.update(pkt.payload_ref());
        let want = s.finish();
        let diff = want.iter().zip(tag).fold(0u8, |d, (a, b)| d | (a ^ b));
        core::hint::black_box(diff) == 0
    }
}

/// The job key of an endpoint and the keys derived from it.
#[derive(Clone, Debug)]
pub(crate) struct Auth {
    /// The 256-bit job key (the key material, hashed).
    job: MacKey,
    /// Key of HELLO, CHALLENGE and RESET tags.
    pub handshake: MacKey,
}

impl Auth {
    /// From the key material (any bytes, hashed into the job key); `None`
    /// for an empty one (no key).
    pub fn new(material: &[u8]) -> Option<Auth> {
        if material.is_empty() {
            return None;
        }
        let job = blake3::derive_key(CTX_JOB, material);
        Some(Auth {
            job: MacKey(job),
            handshake: MacKey(blake3::derive_key(CTX_HANDSHAKE, &job)),
        })
    }

    /// Key of the packets incarnation `src` sends to incarnation `dst` in
    /// their session: a packet of another session (other nonces) or of the
    /// other direction never verifies.
    pub fn session(&self, src: u64, dst: u64) -> MacKey {
        let mut m = [0u8; 48];
        m[..32].copy_from_slice(&self.job.0);
        m[32..40].copy_from_slice(&src.to_be_bytes());
        m[40..].copy_from_slice(&dst.to_be_bytes());
        MacKey(blake3::derive_key(CTX_SESSION, &m))
    }
}

/// The tag of a DATA / ACK / PROBE that incarnation `src` sends to
/// incarnation `dst` (nonces), with job key material `material`, over its
/// `HEADER_LEN` header bytes (flag MAC set) and its payload: the
/// construction of `PROTOCOL.md` §2, for test vectors and other
/// implementations. `None` for empty key material.
pub fn session_tag(
    material: &[u8],
    src: u64,
    dst: u64,
    header: &[u8],
    payload: &[u8],
) -> Option<[u8; TAG_LEN]> {
    let mut s = Auth::new(material)?.session(src, dst).start(header);
    s.update(payload);
    Some(s.finish())
}

/// The tag of a HELLO, CHALLENGE or RESET with job key material
/// `material` (see `session_tag`).
pub fn handshake_tag(material: &[u8], header: &[u8], payload: &[u8]) -> Option<[u8; TAG_LEN]> {
    let mut s = Auth::new(material)?.handshake.start(header);
    s.update(payload);
    Some(s.finish())
}

/// The two keys of one peer's session: ours to it, and its to us.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PeerKeys {
    /// Tags of the packets we send it.
    pub tx: MacKey,
    /// Tags of the packets it sends us.
    pub rx: MacKey,
}

impl Srd {
    /// Has this endpoint a job key (does every packet carry a MAC)?
    pub fn keyed(&self) -> bool {
        self.auth.is_some()
    }

    /// Tag the packet peer `i` just wrote into `buf` (`t`), with a job key:
    /// a HELLO with the handshake key, anything else with the session's.
    /// One with a deferred body waits for it (`seal_body`).
    pub(crate) fn seal(&mut self, i: usize, buf: &mut [u8], t: &Transmit) {
        let Some(a) = &self.auth else {
            return;
        };
        let key = if buf.get(1) == Some(&(PacketType::Hello as u8)) {
            a.handshake
        } else {
            match &self.peers[i].keys {
                Some(k) => k.tx,
                // Only HELLOs leave before a session (and its keys) is up.
                None => return debug_assert!(false, "session packet without keys"),
            }
        };
        if t.body.is_some() {
            self.unsealed = Some(key);
        } else if let Some(p) = buf.get_mut(..t.len) {
            key.seal(p);
        }
    }

    /// Finish the tag of the packet `poll_transmit` just returned with a
    /// deferred body (a no-op without a job key): `head` holds the bytes it
    /// wrote (header, tag room, payload head; or the whole datagram, body
    /// included, if the caller copied it there), and `body` feeds the rest
    /// of the payload to the `Sealer`, in order.
    pub fn seal_body(&mut self, head: &mut [u8], body: &mut dyn FnMut(&mut Sealer)) {
        let Some(key) = self.unsealed.take() else {
            return;
        };
        if head.len() < HEADER_LEN + TAG_LEN {
            return;
        }
        let mut s = key.start(&head[..HEADER_LEN]);
        s.update(&head[HEADER_LEN + TAG_LEN..]);
        body(&mut s);
        head[HEADER_LEN..HEADER_LEN + TAG_LEN].copy_from_slice(&s.finish());
    }

    /// Peer `i`'s session is up (or changed): its MAC keys, from the job key
    /// and both nonces (`rx`, if already derived to check the packet that
    /// opened it).
    pub(crate) fn set_keys(&mut self, i: usize, rx: Option<MacKey>) {
        let Some(a) = &self.auth else {
            return;
        };
        let (ours, theirs) = (self.p.nonce, self.peers[i].remote_nonce);
        // Boxed: most endpoints have no job key, and the 64 bytes inline
        // were a fifth of what a quiet peer costs.
        self.peers[i].keys = Some(Box::new(PeerKeys {
            tx: a.session(ours, theirs),
            rx: rx.unwrap_or_else(|| a.session(theirs, ours)),
        }));
    }

    /// Is the MAC flag of `h` what this endpoint expects (set with a job
    /// key, clear without)? If not, the packet is dropped and counted.
    pub(crate) fn mac_expected(&mut self, h: &Repr) -> bool {
        let tagged = h.flags & flags::MAC != 0;
        match (self.auth.is_some(), tagged) {
            (true, false) => self.stats.rx_mac_missing += 1,
            (false, true) => self.stats.rx_mac_unexpected += 1,
            _ => return true,
        }
        false
    }

    /// Without a job key: true. With one: does `pkt` carry a valid tag under
    /// `key` (`None`: no key to check with, a session without keys)? A
    /// failure is counted (`rx_bad_mac`).
    pub(crate) fn tag_ok(&mut self, key: Option<MacKey>, pkt: &Packet<&[u8]>) -> bool {
        if self.auth.is_none() {
            return true;
        }
        if key.is_some_and(|k| k.verify(pkt)) {
            return true;
        }
        self.stats.rx_bad_mac += 1;
        false
    }

    /// `tag_ok` with the handshake key (HELLO, CHALLENGE, RESET).
    pub(crate) fn handshake_tag_ok(&mut self, pkt: &Packet<&[u8]>) -> bool {
        let key = self.auth.as_ref().map(|a| a.handshake);
        self.tag_ok(key, pkt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::srd::{flags, PacketType, Repr};

    fn packet(key: &MacKey, payload: &[u8]) -> Vec<u8> {
        let r = Repr {
            ty: PacketType::Data,
            flags: flags::MAC,
            path: 1,
            src_port: 7,
            src_nonce: 9,
            dst_token: 11,
            psn: 3,
            psn_floor: 3,
            ack: None,
            payload_len: payload.len() as u16,
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b).unwrap();
        b[HEADER_LEN + TAG_LEN..].copy_from_slice(payload);
        key.seal(&mut b);
        b
    }

    /// A tag verifies under its own key only, and any bit flipped anywhere
    /// (header, tag, payload) makes it fail.
    #[test]
    fn tags_bind_key_direction_and_every_bit() {
        let a = Auth::new(b"job").unwrap();
        let k = a.session(1, 2);
        let b = packet(&k, b"hello world");
        let ok = |k: &MacKey, b: &[u8]| k.verify(&Packet::new_checked(b).unwrap());
        assert!(ok(&k, &b));
        assert!(!ok(&a.session(2, 1), &b), "other direction");
        assert!(!ok(&a.session(1, 3), &b), "other session");
        assert!(
            !ok(&Auth::new(b"other").unwrap().session(1, 2), &b),
            "other job"
        );
        assert!(!ok(&a.handshake, &b), "handshake key");
        for i in 0..b.len() * 8 {
            let mut x = b.clone();
            x[i / 8] ^= 1 << (i % 8);
            if let Ok(p) = Packet::new_checked(&x[..]) {
                assert!(!k.verify(&p), "bit {i} flipped still verifies");
            }
        }
        assert!(Auth::new(b"").is_none());
    }
}
