//! Sessions: the handshake (HELLO / CHALLENGE with a stateless cookie), the
//! token check every packet passes before it touches peer state, incarnation
//! changes (restarts) recognised by nonce, RESET hints, and the rate-limited
//! queue of stateless replies. Layout and reasons in `PROTOCOL.md` §1-§3.

use core::net::SocketAddr;
use core::time::Duration;
use std::collections::VecDeque;
use std::hash::Hasher;

use siphasher::sip::SipHasher24;

use super::peer::Peer;
use super::timer::Timer;
use super::{Srd, Transmit};
use crate::dgram::PeerId;
use crate::time::Instant;
use crate::wire::srd::{
    HandshakeRepr, Packet, PacketType, Repr, HANDSHAKE_LEN, HEADER_LEN, TAG_LEN,
};

/// Most stateless replies waiting for `poll_transmit`; more are dropped.
const STATELESS_QUEUE: usize = 1024;
/// Burst of stateless replies allowed at once (a job start where thousands
/// of peers say HELLO together), packets.
const STATELESS_BURST: u64 = 4096;
/// Previous nonces of a peer remembered, to drop a dead incarnation's late
/// packets (they may carry a cookie that was valid for it).
pub(crate) const RETIRED: usize = 4;
/// Tries of a verification handshake (a session exists; a RESET asked for
/// it) before giving up: the session goes on regardless.
const VERIFY_TRIES: u32 = 8;

/// A handshake this side started (it sent HELLO and waits for CHALLENGE).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Pending {
    /// The echo value the CHALLENGE must carry in `dst_token`.
    pub echo: u64,
    /// HELLOs sent so far.
    pub tries: u32,
}

/// Endpoint-wide session state: keys, our nonce, the stateless reply queue.
pub(crate) struct Sessions {
    /// Our incarnation nonce (never 0).
    pub nonce: u64,
    /// SipHash-2-4 key halves: the secret mixed with the nonce.
    k0: u64,
    k1: u64,
    /// Handshakes started (makes each echo value fresh).
    started: u64,
    /// Stateless replies waiting: destination, bytes (tag not yet written),
    /// length and the path they leave on (the one the packet they answer
    /// named).
    pub(crate) queue: VecDeque<(
        SocketAddr,
        [u8; HEADER_LEN + TAG_LEN + HANDSHAKE_LEN],
        usize,
        u8,
    )>,
    /// `flags::MAC` with a job key, else 0 (see `Params::mac_flag`).
    mac_flag: u8,
    /// Token bucket of stateless replies, in millionths of a reply.
    bucket: u64,
    /// When the bucket was last refilled.
    bucket_at: Instant,
    /// Refill rate, replies per second.
    per_sec: u64,
}

impl Sessions {
    /// Keys from `secret` and `nonce` (so an engine restarted with a new
    /// nonce issues new cookies even if it was wrongly given the old secret).
    pub fn new(nonce: u64, secret: [u8; 16], per_sec: u32, mac_flag: u8) -> Self {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&secret[..8]);
        b.copy_from_slice(&secret[8..]);
        let nonce = nonce.max(1);
        Sessions {
            nonce,
            k0: u64::from_le_bytes(a) ^ nonce,
            k1: u64::from_le_bytes(b) ^ nonce.rotate_left(32),
            started: 0,
            queue: VecDeque::new(),
            bucket: STATELESS_BURST * 1_000_000,
            bucket_at: Instant::ZERO,
            per_sec: u64::from(per_sec.max(1)),
            mac_flag,
        }
    }

    /// Keyed hash of a tag, an address and a 64-bit value; never 0.
    fn mac(&self, tag: u8, addr: SocketAddr, v: u64) -> u64 {
        let mut h = SipHasher24::new_with_keys(self.k0, self.k1);
        h.write_u8(tag);
        match addr.ip() {
            core::net::IpAddr::V4(ip) => h.write(&ip.octets()),
            core::net::IpAddr::V6(ip) => h.write(&ip.octets()),
        }
        h.write_u16(addr.port());
        h.write_u64(v);
        h.finish().max(1)
    }

    /// Our session token (cookie) for the incarnation `nonce` at `addr`:
    /// derived, not stored, so a HELLO costs us no state.
    pub fn cookie(&self, addr: SocketAddr, nonce: u64) -> u64 {
        self.mac(b'C', addr, nonce)
    }

    /// A fresh, unguessable echo value for a HELLO to `addr`.
    pub fn next_echo(&mut self, addr: SocketAddr) -> u64 {
        self.started += 1;
        self.mac(b'E', addr, self.started)
    }

    /// May one more stateless reply go at `now` (token bucket)?
    fn allow(&mut self, now: Instant) -> bool {
        let cap = STATELESS_BURST * 1_000_000;
        let dt = now.saturating_since(self.bucket_at).as_micros();
        let add = u64::try_from(dt.saturating_mul(u128::from(self.per_sec))).unwrap_or(cap);
        self.bucket = self.bucket.saturating_add(add).min(cap);
        self.bucket_at = now;
        if self.bucket < 1_000_000 || self.queue.len() >= STATELESS_QUEUE {
            return false;
        }
        self.bucket -= 1_000_000;
        true
    }

    /// Queue a stateless reply to `to`, if the rate allows; true if queued.
    fn reply(&mut self, now: Instant, to: SocketAddr, h: &Repr, hs: Option<HandshakeRepr>) -> bool {
        if !self.allow(now) {
            return false;
        }
        let mut h = *h;
        h.flags |= self.mac_flag;
        let mut b = [0u8; HEADER_LEN + TAG_LEN + HANDSHAKE_LEN];
        if h.emit(&mut b).is_err() {
            return false;
        }
        if let Some(hs) = hs {
            if hs.emit(&mut b[h.payload_offset()..]).is_err() {
                return false;
            }
        }
        self.queue.push_back((to, b, h.buffer_len(), h.path));
        true
    }
}

/// A header with no ack and no sequence numbers, from us.
pub(crate) fn bare(ty: PacketType, port: u16, nonce: u64, token: u64, payload_len: u16) -> Repr {
    Repr {
        ty,
        flags: 0,
        path: 0,
        src_port: port,
        src_nonce: nonce,
        dst_token: token,
        psn: 0,
        psn_floor: 0,
        ack: None,
        payload_len,
    }
}

impl Peer {
    /// The session with incarnation `nonce` is up: we send `token`, and
    /// accept it or `own` (our cookie for that incarnation).
    pub(crate) fn establish(&mut self, nonce: u64, token: u64, own: u64) {
        self.remote_nonce = nonce;
        self.token = token;
        self.own_cookie = own;
    }

    /// Has `nonce` been this peer's before (a dead incarnation)?
    pub(crate) fn retired(&self, nonce: u64) -> bool {
        self.retired_nonces.contains(&nonce)
    }

    /// Start a handshake (HELLO) unless one is under way.
    pub(crate) fn start_handshake(&mut self, echo: u64) {
        if self.hs.is_none() {
            self.hs = Some(Pending { echo, tries: 0 });
            self.hs_due = true;
        }
    }

    /// The handshake timer fired: send HELLO again, or give up.
    pub(crate) fn on_handshake_timer(&mut self) {
        let Some(hs) = self.hs else {
            return;
        };
        let wanted = if self.remote_nonce == 0 {
            // No session: worth it while data waits (the unreachable timer
            // bounds that).
            self.tx.busy()
        } else {
            hs.tries < VERIFY_TRIES
        };
        if wanted {
            self.hs_due = true;
        } else {
            self.hs = None;
        }
    }

    /// The HELLO to send now (its timer armed), if one is due.
    pub(crate) fn poll_hello(
        &mut self,
        p: &super::peer::Params,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        if !self.hs_due {
            return None;
        }
        self.hs_due = false;
        let hs = self.hs.as_mut()?;
        let wait = p
            .min_rto_ns
            .saturating_mul(1 << hs.tries.min(16))
            .min(p.max_rto_ns);
        // Each try on the next path (another source port, so another ECMP
        // hash both ways: the CHALLENGE answers on the path the HELLO
        // names). On one fixed path a dead link kept the session from ever
        // opening.
        // Rail 0's paths only: a HELLO from another NIC would open a second
        // session from that NIC's address.
        let n = self.paths.count().min(usize::from(p.paths)).max(1);
        let path = (hs.tries % n as u32) as u8;
        hs.tries += 1;
        let payload = HandshakeRepr {
            value: hs.echo,
            caps: super::rails::caps(p),
        };
        let mut h = bare(PacketType::Hello, p.port, p.nonce, 0, HANDSHAKE_LEN as u16);
        h.flags = p.mac_flag;
        h.path = path;
        h.emit(buf).ok()?;
        payload.emit(buf.get_mut(p.head..)?).ok()?;
        self.timers
            .set(Timer::Handshake, now + Duration::from_nanos(wait));
        Some(Transmit {
            dst: self.addr,
            path,
            len: h.buffer_len(),
            body: None,
        })
    }
}

impl Srd {
    /// The next stateless reply, written into `buf`.
    pub(crate) fn poll_stateless(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let (dst, b, len, path) = self.sess.queue.pop_front()?;
        let out = buf.get_mut(..len)?;
        out.copy_from_slice(&b[..len]);
        if let Some(a) = &self.auth {
            a.handshake.seal(out);
        }
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += len as u64;
        Some(Transmit {
            dst,
            path: self.stateless_path(path),
            len,
            body: None,
        })
    }

    /// Start a handshake with peer `i` (its first datagram was queued, or
    /// a RESET asked us to check the session).
    pub(crate) fn handshake(&mut self, i: usize) {
        let addr = self.peers[i].addr;
        if self.peers[i].hs.is_none() {
            let echo = self.sess.next_echo(addr);
            self.peers[i].start_handshake(echo);
            self.stats.tx_hellos += 1;
            self.activate(i);
        }
    }

    /// A HELLO from `addr`: answer with our cookie for its nonce, keeping
    /// nothing (the answer's size equals the HELLO's: no amplification).
    pub(crate) fn on_hello(&mut self, now: Instant, addr: SocketAddr, h: &Repr, payload: &[u8]) {
        let Ok(hs) = HandshakeRepr::parse(payload) else {
            self.stats.rx_malformed += 1;
            return;
        };
        let mut reply = bare(
            PacketType::Challenge,
            self.p.port,
            self.sess.nonce,
            hs.value,
            HANDSHAKE_LEN as u16,
        );
        // On the path the HELLO names: a retry on another path is answered
        // on another one too.
        reply.path = h.path;
        let cookie = HandshakeRepr {
            value: self.sess.cookie(addr, h.src_nonce),
            caps: super::rails::caps(&self.p),
        };
        if self.sess.reply(now, addr, &reply, Some(cookie)) {
            self.stats.tx_challenges += 1;
        } else {
            self.stats.stateless_dropped += 1;
        }
    }

    /// The peer at `addr`: its main address, else one of its rails'.
    fn peer_at(&self, addr: SocketAddr) -> Option<PeerId> {
        self.by_addr
            .get(&addr)
            .copied()
            .or_else(|| self.rail_lookup(addr).map(|x| x.0))
    }

    /// A CHALLENGE from `addr`: it completes our handshake if it echoes our
    /// pending HELLO (only a live peer at that address could have seen it).
    /// A nonce other than the session's means the peer restarted.
    pub(crate) fn on_challenge(&mut self, addr: SocketAddr, h: &Repr, payload: &[u8]) {
        let Ok(hs) = HandshakeRepr::parse(payload) else {
            self.stats.rx_malformed += 1;
            return;
        };
        // A peer's rail address: the CHALLENGE may answer a rail check.
        let Some(id) = self.peer_at(addr) else {
            self.stats.rx_bad_token += 1;
            return;
        };
        let i = id.0 as usize;
        let ours = self.peers[i].hs.is_some_and(|p| p.echo == h.dst_token);
        if !ours {
            if !self.rail_challenge(i, h) {
                self.stats.rx_bad_token += 1;
            }
            return;
        }
        let own = self.sess.cookie(addr, h.src_nonce);
        let (peer, mut ctx) = self.split(i);
        peer.hs = None;
        peer.hs_due = false;
        peer.timers.stop(Timer::Handshake);
        ctx.stats.handshakes += 1;
        let restarted = peer.remote_nonce != 0 && peer.remote_nonce != h.src_nonce;
        if restarted {
            peer.restart(&mut ctx, h.src_nonce);
        }
        peer.establish(h.src_nonce, hs.value, own);
        if restarted {
            self.rails_reset(i);
        }
        self.set_keys(i, None);
        self.rails_on_session(i, hs.caps);
        self.activate(i);
    }

    /// Answer `h` from `addr`, whose token we refuse, with a RESET echoing
    /// that token, at the stateless replies' bounded rate; nothing for a
    /// packet without a token.
    fn refuse_token(&mut self, now: Instant, addr: SocketAddr, h: &Repr) {
        if h.dst_token == 0 {
            return;
        }
        let mut r = bare(
            PacketType::Reset,
            self.p.port,
            self.sess.nonce,
            h.dst_token,
            0,
        );
        r.path = h.path;
        if self.sess.reply(now, addr, &r, None) {
            self.stats.tx_resets += 1;
        } else {
            self.stats.stateless_dropped += 1;
        }
    }

    /// A RESET from `addr`: if it echoes our token, the peer holds no
    /// session for it (it restarted, or lost us): check with a handshake.
    /// Never a teardown: a forged RESET costs one HELLO at most.
    pub(crate) fn on_reset(&mut self, now: Instant, addr: SocketAddr, h: &Repr) {
        let Some(id) = self.peer_at(addr) else {
            self.stats.rx_bad_token += 1;
            return;
        };
        let i = id.0 as usize;
        let peer = &mut self.peers[i];
        if peer.remote_nonce == 0 || (h.dst_token != peer.token && h.dst_token != peer.own_cookie) {
            self.stats.rx_bad_token += 1;
            return;
        }
        self.stats.rx_resets += 1;
        let quiet = peer
            .last_verify
            .is_none_or(|t| now.saturating_since(t).as_nanos() >= u128::from(self.p.min_rto_ns));
        if quiet && peer.hs.is_none() {
            peer.last_verify = Some(now);
            self.handshake(i);
        }
    }

    /// Admit a DATA / ACK / PROBE from `addr`: the peer it belongs to, with
    /// its session established or restarted, or `None` (dropped, counted).
    /// No peer state is created or changed unless the packet carries a
    /// token only a live holder of our CHALLENGE could know.
    ///
    /// One function on purpose (~115 lines): the admission rule is one
    /// decision table (known peer and token, restart, new session), read
    /// best in one place; every branch ends in admit or drop-and-count.
    pub(crate) fn admit_packet(
        &mut self,
        now: Instant,
        addr: SocketAddr,
        h: &Repr,
        pkt: &Packet<&[u8]>,
    ) -> Option<PeerId> {
        let known = self.by_addr.get(&addr).copied();
        if let Some(id) = known {
            let peer = &self.peers[id.0 as usize];
            if peer.remote_nonce != 0 && h.src_nonce == peer.remote_nonce {
                if h.dst_token == peer.token || h.dst_token == peer.own_cookie {
                    let key = peer.keys.as_ref().map(|k| k.rx);
                    let rails = peer.rails.is_some();
                    let ok = self.tag_ok(key, pkt);
                    if ok && rails {
                        self.rails_heard(id.0 as usize, 0, now);
                    }
                    return ok.then_some(id);
                }
                // The live session's nonce with another token: a forgery, or
                // a sender that took a token we never gave it for this nonce
                // (a CHALLENGE answering a copy of its HELLO with another
                // nonce, `sim::forge`'s mutations: it then sent nothing we
                // would take until its peer was declared unreachable). Tell
                // it, as step 2 does: its RESET check re-learns our cookie,
                // and a forger's claimed owner drops the RESET. ACKs too: a
                // peer that only acknowledges would starve our sends.
                self.stats.rx_bad_token += 1;
                if matches!(h.ty, PacketType::Data | PacketType::Probe | PacketType::Ack) {
                    self.refuse_token(now, addr, h);
                }
                return None;
            }
        }
        // A peer's rail address (`rails.rs`): the same check as its main
        // address's, the session's nonce and token; it never starts or
        // restarts a session. Without them, a packet from there is a
        // stranger's (the peer may have claimed an address that is not its
        // own: that address's owner can still open a session with us).
        let rail = if known.is_none() {
            self.rail_lookup(addr)
        } else {
            None
        };
        if let Some((id, r)) = rail {
            let peer = &self.peers[id.0 as usize];
            if peer.remote_nonce != 0
                && h.src_nonce == peer.remote_nonce
                && (h.dst_token == peer.token || h.dst_token == peer.own_cookie)
            {
                let key = peer.keys.as_ref().map(|k| k.rx);
                if !self.tag_ok(key, pkt) {
                    return None;
                }
                self.rails_heard(id.0 as usize, r, now);
                return Some(id);
            }
        }
        let cookie = self.sess.cookie(addr, h.src_nonce);
        if h.dst_token != cookie {
            if known.is_some() || rail.is_some() {
                self.stats.rx_bad_token += 1;
            } else {
                self.stats.rx_no_session += 1;
            }
            // A sender that believes in a session we do not hold (we
            // restarted, or it did): tell it, at a bounded rate. Never for
            // ACKs (nothing to repair).
            if matches!(h.ty, PacketType::Data | PacketType::Probe) {
                self.refuse_token(now, addr, h);
            }
            return None;
        }
        // A live holder of our CHALLENGE, or someone who saw it: only the
        // tag (with a job key) tells, before anything is created or changed.
        let key = self
            .auth
            .as_ref()
            .map(|a| a.session(h.src_nonce, self.sess.nonce));
        if !self.tag_ok(key, pkt) {
            return None;
        }
        let id = match known {
            Some(id) => id,
            None => {
                if self.peers.len() >= self.max_peers {
                    self.stats.rx_peer_limit += 1;
                    return None;
                }
                self.stats.sessions_accepted += 1;
                self.peer(addr)
            }
        };
        let i = id.0 as usize;
        let (peer, mut ctx) = self.split(i);
        if peer.retired(h.src_nonce) {
            ctx.stats.rx_stale_src += 1;
            return None;
        }
        let restarted = peer.remote_nonce != 0;
        if restarted {
            // A live new incarnation completed our handshake: a restart.
            peer.restart(&mut ctx, h.src_nonce);
        }
        peer.hs = None;
        peer.hs_due = false;
        peer.timers.stop(Timer::Handshake);
        peer.establish(h.src_nonce, cookie, cookie);
        if restarted {
            self.rails_reset(i);
        }
        self.set_keys(i, key);
        Some(id)
    }
}
