//! Rails (several NICs): an endpoint with two or more local addresses sprays
//! a peer that has rails too over (rail, entropy value) paths. Rails are
//! paired by index (our rail r with the peer's rail r); rail 0 is the main
//! address. The peer's rail addresses come in a RAILS packet inside the
//! session (token, and with a job key the session MAC, checked first), and
//! a rail is sent to only once a HELLO from our rail r to the peer's rail r
//! came back as a CHALLENGE carrying the session's nonce: the address is the
//! peer's, not a third party's. Packets from a peer's rail address pass the
//! session check like those from its main address (token and nonce), never
//! by address alone. Layout and reasons: `PROTOCOL.md` §5.1. With one rail
//! none of this runs: a peer's `rails` stays `None`.

use core::net::{IpAddr, SocketAddr};
use core::time::Duration;

use super::path::Health;
use super::peer::{Ctx, Params, Peer};
use super::session::bare;
use super::timer::{Timer, TimerTable};
use super::{Srd, Transmit};
use crate::config::Config;
use crate::dgram::PeerId;
use crate::hash::FastMap;
use crate::time::Instant;
use crate::wire::rails::{RailsRepr, MAX_RAILS};
use crate::wire::srd::{flags, HandshakeRepr, PacketType, Repr, CAP_MAC, CAP_RAILS, HANDSHAKE_LEN};

/// RAILS asking for an answer (ACK_NOW) sent before giving up.
const MAX_ASKS: u32 = 8;

/// A rail not yet checked is checked (its HELLO resent) only while the peer
/// is in use: data went to it, or came from it within this long, ns.
const IN_USE_NS: u128 = 1_000_000_000;

/// Rail health (`Peer::rail_health`) is looked at most this often, ns.
const HEALTH_EVERY_NS: u128 = 1_000_000;

/// A dead rail (every path bad) is probed at least every 16 RTTs, within
/// these bounds, ns: each path backs off on its own to 256 RTTs, and a rail
/// that came back should not wait for that.
const DEAD_PROBE_MIN_NS: u64 = 20_000_000;
const DEAD_PROBE_MAX_NS: u64 = 250_000_000;

/// The local rails of the endpoint `cfg` describes: rail 0 is `cfg.local`'s
/// IP, then `cfg.rails[1..]` of the same family (no repeats), at most
/// `MAX_RAILS`. Empty when fewer than two are left: one rail.
pub(crate) fn local_rails(cfg: &Config) -> Vec<IpAddr> {
    if cfg.rails.len() < 2 {
        return Vec::new();
    }
    let main = cfg.local.ip();
    let mut v = vec![main];
    for &ip in cfg.rails.iter().skip(1) {
        if v.len() < MAX_RAILS && ip.is_ipv4() == main.is_ipv4() && !v.contains(&ip) {
            v.push(ip);
        }
    }
    if v.len() < 2 {
        v.clear();
    }
    v
}

/// Endpoint-wide rail state.
#[derive(Default)]
pub(crate) struct Rails {
    /// The peers' rail addresses (other than their main ones), learned from
    /// their RAILS: where a packet from such an address is looked up. Only
    /// the session token and nonce make it that peer's.
    pub by_rail: FastMap<SocketAddr, (PeerId, u8)>,
}

/// Where a peer's rail stands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Check {
    /// A HELLO from our rail to it must come back as a CHALLENGE echoing
    /// `echo` with the session's nonce before anything else goes there.
    Pending {
        /// The echo value of its HELLOs.
        echo: u64,
        /// HELLOs sent.
        tries: u32,
        /// A HELLO must go out.
        due: bool,
        /// When the next one may go.
        at: Instant,
    },
    /// Checked: its paths are in use.
    Valid,
    /// Not used in this session: answered by another incarnation, or an
    /// address this endpoint cannot or must not use.
    Refused,
}

/// One rail of a peer.
#[derive(Clone, Debug)]
struct Remote {
    /// Its address: the rail's IP and the peer's main port.
    addr: SocketAddr,
    check: Check,
}

/// A peer's rails (only for a peer with which rails are exchanged).
#[derive(Clone, Debug)]
pub(crate) struct PeerRails {
    /// Our RAILS asking for the peer's (ACK_NOW) must go out.
    ask_due: bool,
    /// RAILS asking for an answer sent so far.
    asks: u32,
    /// When the next ask may go.
    ask_at: Instant,
    /// The peer answered an ask: it has our rails.
    answered: bool,
    /// The peer asked: our RAILS (no ACK_NOW) must go out.
    answer_due: bool,
    /// The peer's rails by index (0: its main address); empty until its
    /// RAILS arrives. Learned once per session.
    remote: Vec<Remote>,
    /// The rail of each block of `Params::paths` paths after the first
    /// (block 0 is rail 0), in the order the rails were checked.
    blocks: Vec<u8>,
    /// When a packet last came from each of the peer's rails.
    heard: [Instant; MAX_RAILS],
    /// Bit `b`: every path of block `b` was bad at the last health look.
    dead: u8,
    /// When rail health was last looked at.
    health_at: Instant,
}

impl PeerRails {
    fn new() -> Self {
        PeerRails {
            ask_due: false,
            asks: 0,
            ask_at: Instant::ZERO,
            answered: false,
            answer_due: false,
            remote: Vec::new(),
            blocks: Vec::new(),
            heard: [Instant::ZERO; MAX_RAILS],
            dead: 0,
            health_at: Instant::ZERO,
        }
    }

    /// Arm (or stop) the rails timer for the earliest future deadline.
    fn arm(&self, timers: &mut TimerTable, now: Instant) {
        let mut next: Option<Instant> = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        if !self.answered && (1..MAX_ASKS).contains(&self.asks) && self.ask_at > now {
            at(self.ask_at);
        }
        for r in &self.remote {
            if let Check::Pending {
                due: false, at: t, ..
            } = r.check
            {
                if t > now {
                    at(t);
                }
            }
        }
        match next {
            Some(t) => timers.set(Timer::Rails, t),
            None => timers.stop(Timer::Rails),
        }
    }

    /// The rail of path block `b`.
    fn rail_of_block(&self, b: usize) -> usize {
        if b == 0 {
            0
        } else {
            self.blocks.get(b - 1).map_or(0, |&r| usize::from(r))
        }
    }
}

/// The caps bits of our HELLOs and CHALLENGEs.
pub(crate) fn caps(p: &Params) -> u64 {
    (if p.mac_flag != 0 { CAP_MAC } else { 0 })
        | (if p.rail_ips.len() >= 2 { CAP_RAILS } else { 0 })
}

/// What `poll_rails` sends.
enum Out {
    /// The check HELLO of the peer's rail `rail`.
    Check {
        rail: usize,
        dst: SocketAddr,
        echo: u64,
    },
    /// Our RAILS, asking for the peer's (`ask`) or answering its ask.
    Rails { ask: bool },
}

impl Peer {
    /// Is this peer on this host (no fabric between us, one path)?
    fn on_this_host(&self, p: &Params) -> bool {
        let ip = self.addr.ip();
        ip.is_loopback() || ip == p.local_ip || p.rail_ips.contains(&ip)
    }

    /// Destination and socket path (what `Transmit` carries and the
    /// header's `path` says) of path index `j`: rail 0's paths go to the
    /// main address from sockets `j`; block `b` of `Params::paths` paths
    /// after it to the peer's rail `r` from sockets `r * paths + j % paths`.
    pub(crate) fn route(&self, p: &Params, j: u8) -> (SocketAddr, u8) {
        let Some(r) = self.rails.as_deref() else {
            return (self.addr, j);
        };
        let k = usize::from(p.paths).max(1);
        let b = usize::from(j) / k;
        if b == 0 {
            return (self.addr, j);
        }
        let rail = r.rail_of_block(b);
        match r.remote.get(rail) {
            Some(x) => (x.addr, (rail * k + usize::from(j) % k) as u8),
            None => (self.addr, (usize::from(j) % k) as u8),
        }
    }

    /// The rail of path index `j` (0 without rails).
    pub(crate) fn rail_of_path(&self, p: &Params, j: usize) -> u8 {
        self.rails.as_deref().map_or(0, |r| {
            r.rail_of_block(j / usize::from(p.paths).max(1)) as u8
        })
    }

    /// The path of a pure ACK: the picker's, but on a rail the peer was
    /// heard from lately when the picker's was not (a receiver sends DATA
    /// rarely, so its own loss detection would never find a dead rail, and
    /// half its acks would vanish into it). Measured (`PROTOCOL.md` §5.1):
    /// without it a flow through TBF-limited veth NICs fell from 45 to
    /// 0.6-5 MB/s after one NIC went down (its pacing overshot).
    pub(crate) fn ack_path(&mut self, p: &Params, now: Instant) -> u8 {
        let j = self.paths.pick_control(None);
        let rtt = self.rtt_ns();
        let Some(r) = self.rails.as_deref() else {
            return j;
        };
        if r.blocks.is_empty() {
            return j;
        }
        let k = usize::from(p.paths).max(1);
        let fresh = (4 * rtt).max(1_000_000);
        let age = |b: usize| now.saturating_since(r.heard[r.rail_of_block(b)]).as_nanos();
        let b = usize::from(j) / k;
        if age(b) <= u128::from(fresh) {
            return j;
        }
        let Some(best) = (0..=r.blocks.len()).min_by_key(|&b| age(b)) else {
            return j;
        };
        if age(best) <= u128::from(fresh) {
            (best * k + usize::from(j) % k) as u8
        } else {
            j
        }
    }

    /// Nothing of the rails to send now (see `Peer::quiescent`).
    pub(crate) fn rails_quiet(&self) -> bool {
        self.rails.as_deref().is_none_or(|r| {
            !r.ask_due
                && !r.answer_due
                && !r
                    .remote
                    .iter()
                    .any(|x| matches!(x.check, Check::Pending { due: true, .. }))
        })
    }

    /// The rails timer fired: ask again if our RAILS went unanswered. A
    /// rail's check HELLO goes again from `poll_rails`, if the peer is in use.
    pub(crate) fn on_rails_timer(&mut self, now: Instant) {
        let Some(r) = self.rails.as_deref_mut() else {
            return;
        };
        if !r.answered && (1..MAX_ASKS).contains(&r.asks) && r.ask_at <= now {
            r.ask_due = true;
        }
        r.arm(&mut self.timers, now);
    }

    /// After a reclaim (a fresh peer in its place): take `old` rails over,
    /// with fresh paths for every rail in use.
    pub(crate) fn adopt_rails(&mut self, p: &Params, old: Option<Box<PeerRails>>) {
        if let Some(r) = old {
            self.paths.add_paths(usize::from(p.paths) * r.blocks.len());
            self.rails = Some(r);
        }
    }

    /// Bytes the rails of this peer hold.
    pub(crate) fn rails_memory(&self) -> usize {
        self.rails.as_deref().map_or(0, |r| {
            core::mem::size_of::<PeerRails>()
                + r.remote.capacity() * core::mem::size_of::<Remote>()
                + r.blocks.capacity()
        })
    }

    /// Rails as wholes (at most every `HEALTH_EVERY_NS`): the paths of a rail
    /// share its NIC, so when every one of them is bad the rail is down, and
    /// when one of them carries again it is back. A dead rail gets a probe
    /// at least every 16 RTTs (each path alone backs off to 256); a rail
    /// back has all its bad paths probed at once.
    fn rail_health(&mut self, p: &Params, now: Instant) {
        let rtt = self.rtt_ns();
        let Some(r) = self.rails.as_deref_mut() else {
            return;
        };
        if now.saturating_since(r.health_at).as_nanos() < HEALTH_EVERY_NS {
            return;
        }
        r.health_at = now;
        let k = usize::from(p.paths).max(1);
        let every = Duration::from_nanos((16 * rtt).clamp(DEAD_PROBE_MIN_NS, DEAD_PROBE_MAX_NS));
        for b in 0..=r.blocks.len().min(7) {
            let n = self.paths.paths.len();
            let Some(paths) = self
                .paths
                .paths
                .get_mut((b * k).min(n)..((b + 1) * k).min(n))
            else {
                continue;
            };
            if paths.is_empty() {
                continue;
            }
            let bit = 1u8 << b;
            if paths.iter().all(|x| x.health == Health::Bad) {
                r.dead |= bit;
                let next = paths
                    .iter_mut()
                    .filter(|x| !x.probing)
                    .min_by_key(|x| x.probe_at);
                if let Some(x) = next {
                    if x.probe_at > now + every {
                        x.probe_at = now + every;
                    }
                }
            } else if r.dead & bit != 0 {
                r.dead &= !bit;
                for x in paths.iter_mut().filter(|x| x.health == Health::Bad) {
                    x.probing = false;
                    x.probe_backoff = 0;
                    x.probe_at = now;
                }
            }
        }
    }

    /// A rails packet to send now, written into `buf` (the session is up).
    ///
    /// One function on purpose (~110 lines): the RAILS exchange's send side
    /// in protocol order (offer, checks of learned addresses, answers), each
    /// step writing the same packet buffer and returning.
    pub(crate) fn poll_rails(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let p = ctx.p;
        self.rail_health(p, now);
        let in_use = self.tx.busy()
            || self
                .rx_last_data
                .is_some_and(|t| now.saturating_since(t).as_nanos() < IN_USE_NS);
        let r = self.rails.as_deref_mut()?;
        let mut out = None;
        for (rail, x) in r.remote.iter_mut().enumerate() {
            if let Check::Pending {
                echo,
                tries,
                due,
                at,
            } = &mut x.check
            {
                if !*due && *at <= now && in_use {
                    *due = true;
                }
                if *due {
                    *due = false;
                    let wait = p
                        .min_rto_ns
                        .saturating_mul(1 << (*tries).min(16))
                        .min(p.max_rto_ns);
                    *tries += 1;
                    *at = now + Duration::from_nanos(wait);
                    out = Some(Out::Check {
                        rail,
                        dst: x.addr,
                        echo: *echo,
                    });
                    break;
                }
            }
        }
        if out.is_none() && r.answer_due {
            r.answer_due = false;
            out = Some(Out::Rails { ask: false });
        }
        if out.is_none() && r.ask_due {
            r.ask_due = false;
            if !r.answered {
                let wait = p
                    .min_rto_ns
                    .saturating_mul(1 << r.asks.min(16))
                    .min(p.max_rto_ns);
                r.asks += 1;
                r.ask_at = now + Duration::from_nanos(wait);
                out = Some(Out::Rails { ask: true });
            }
        }
        r.arm(&mut self.timers, now);
        match out? {
            Out::Check { rail, dst, echo } => {
                let mut h = bare(PacketType::Hello, p.port, p.nonce, 0, HANDSHAKE_LEN as u16);
                h.flags = p.mac_flag;
                h.path = (rail * usize::from(p.paths)) as u8;
                h.emit(buf).ok()?;
                let hs = HandshakeRepr {
                    value: echo,
                    caps: caps(p),
                };
                hs.emit(buf.get_mut(p.head..)?).ok()?;
                ctx.stats.tx_packets += 1;
                ctx.stats.tx_bytes += h.buffer_len() as u64;
                ctx.stats.tx_rail_checks += 1;
                Some(Transmit {
                    dst,
                    path: h.path,
                    len: h.buffer_len(),
                    body: None,
                })
            }
            Out::Rails { ask } => {
                let list = RailsRepr {
                    rails: p.rail_ips.clone(),
                };
                let j = self.ack_path(p, now);
                let (dst, path) = self.route(p, j);
                let h = Repr {
                    ty: PacketType::Rails,
                    flags: p.mac_flag | if ask { flags::ACK_NOW } else { 0 },
                    path,
                    src_port: p.port,
                    src_nonce: p.nonce,
                    dst_token: self.token,
                    psn: 0,
                    psn_floor: 0,
                    ack: None,
                    payload_len: list.buffer_len() as u16,
                };
                h.emit(buf).ok()?;
                list.emit(buf.get_mut(p.head..)?).ok()?;
                ctx.stats.tx_packets += 1;
                ctx.stats.tx_bytes += h.buffer_len() as u64;
                ctx.stats.tx_rails += 1;
                Some(Transmit {
                    dst,
                    path,
                    len: h.buffer_len(),
                    body: None,
                })
            }
        }
    }
}

impl Srd {
    /// The socket path of a stateless reply (CHALLENGE, RESET) to a packet
    /// that named path `named`: that path (mod the paths per rail), so a
    /// HELLO retried on another path is answered on another one too
    /// (`PROTOCOL.md` §5). With rails, a packet naming a path past rail 0's
    /// block came to one of our rail addresses (a rail check, or a peer's
    /// packet from its rail): the reply leaves from the last path of rail
    /// 0, which the driver sends from its receiving socket, bound to the
    /// wildcard address, so the kernel gives it the source address of the
    /// rail it leaves by (the one the peer sent to, rails pairing by
    /// index); from a socket bound to rail 0's address it would come back
    /// from the wrong address and not be taken for that rail's.
    pub(crate) fn stateless_path(&self, named: u8) -> u8 {
        let k = self.p.paths.max(1);
        if self.p.rail_ips.len() >= 2 && named >= k {
            k - 1
        } else {
            named % k
        }
    }

    /// The peer and rail of a peer's rail address (not a main one).
    pub(crate) fn rail_lookup(&self, addr: SocketAddr) -> Option<(PeerId, u8)> {
        if self.rails.by_rail.is_empty() {
            return None;
        }
        self.rails.by_rail.get(&addr).copied()
    }

    /// A packet of peer `i`'s session came from its rail `rail` at `now`.
    pub(crate) fn rails_heard(&mut self, i: usize, rail: u8, now: Instant) {
        if let Some(r) = self.peers[i].rails.as_deref_mut() {
            if let Some(h) = r.heard.get_mut(usize::from(rail)) {
                *h = now;
            }
        }
    }

    /// Peer `i`'s session is up, its CHALLENGE offering `caps`: with rails
    /// on both sides, send it ours (asking for its own).
    pub(crate) fn rails_on_session(&mut self, i: usize, caps: u64) {
        if self.p.rail_ips.len() < 2 || caps & CAP_RAILS == 0 {
            return;
        }
        let peer = &mut self.peers[i];
        if peer.on_this_host(&self.p) {
            return;
        }
        let r = peer.rails.get_or_insert_with(|| Box::new(PeerRails::new()));
        if !r.answered && r.asks == 0 {
            r.ask_due = true;
        }
        self.activate(i);
    }

    /// Peer `i` restarted: its rails were those of the old incarnation.
    pub(crate) fn rails_reset(&mut self, i: usize) {
        let Some(r) = self.peers[i].rails.take() else {
            return;
        };
        let id = self.peers[i].id;
        for x in &r.remote {
            if self.rails.by_rail.get(&x.addr).is_some_and(|e| e.0 == id) {
                self.rails.by_rail.remove(&x.addr);
            }
        }
        let k = usize::from(self.p.paths);
        self.peers[i].paths.truncate(k);
        self.peers[i].timers.stop(Timer::Rails);
    }

    /// A RAILS from peer `id` (its session check passed): learn its rails
    /// (once per session) and start checking those we pair with; answer an
    /// ask, or take an answer as one.
    pub(crate) fn on_rails(&mut self, now: Instant, id: PeerId, h: &Repr, payload: &[u8]) {
        let i = id.0 as usize;
        self.stats.rx_rails += 1;
        if self.p.rail_ips.len() < 2 || self.peers[i].on_this_host(&self.p) {
            // One rail here (the sender should not have sent it), or a peer
            // on this host: nothing to spray over.
            self.stats.rx_rails_ignored += 1;
            return;
        }
        let Ok(list) = RailsRepr::parse(payload) else {
            self.stats.rx_malformed += 1;
            return;
        };
        let learn = self.peers[i]
            .rails
            .as_deref()
            .is_none_or(|r| r.remote.is_empty());
        let mut remote = Vec::new();
        if learn {
            let main = self.peers[i].addr;
            let n = self.p.rail_ips.len().min(list.rails.len());
            remote.push(Remote {
                addr: main,
                check: Check::Valid,
            });
            for rail in 1..n {
                let ip = list.rails[rail];
                let addr = SocketAddr::new(ip, main.port());
                let usable = ip.is_ipv4() == self.p.local_ip.is_ipv4()
                    && !ip.is_unspecified()
                    && !ip.is_loopback()
                    && !ip.is_multicast()
                    && !self.p.rail_ips.contains(&ip)
                    && !remote.iter().any(|x| x.addr.ip() == ip)
                    && !self.by_addr.contains_key(&addr)
                    && self.rails.by_rail.get(&addr).is_none_or(|e| e.0 == id);
                let check = if usable {
                    self.rails.by_rail.insert(addr, (id, rail as u8));
                    Check::Pending {
                        echo: self.sess.next_echo(addr),
                        tries: 0,
                        due: true,
                        at: now,
                    }
                } else {
                    self.stats.rails_refused += 1;
                    Check::Refused
                };
                remote.push(Remote { addr, check });
            }
        }
        let peer = &mut self.peers[i];
        let r = peer.rails.get_or_insert_with(|| Box::new(PeerRails::new()));
        if learn {
            r.remote = remote;
        }
        if h.flags & flags::ACK_NOW != 0 {
            r.answer_due = true;
        } else {
            r.answered = true;
            r.ask_due = false;
        }
        r.arm(&mut peer.timers, now);
        self.activate(i);
    }

    /// A CHALLENGE from peer `i` that answers none of its handshakes: does
    /// it answer the check HELLO of one of its rails? With the session's
    /// nonce the rail is the peer's: its paths join the others. With
    /// another nonce someone else answers there: the rail is not used.
    /// True if it answered a check.
    pub(crate) fn rail_challenge(&mut self, i: usize, h: &Repr) -> bool {
        let k = usize::from(self.p.paths);
        let peer = &mut self.peers[i];
        let nonce = peer.remote_nonce;
        let Some(r) = peer.rails.as_deref_mut() else {
            return false;
        };
        let Some(rail) = r
            .remote
            .iter()
            .position(|x| matches!(x.check, Check::Pending { echo, .. } if echo == h.dst_token))
        else {
            return false;
        };
        if nonce != 0 && h.src_nonce == nonce {
            r.remote[rail].check = Check::Valid;
            r.blocks.push(rail as u8);
            peer.paths.add_paths(k);
            self.stats.rails_valid += 1;
        } else {
            r.remote[rail].check = Check::Refused;
            let addr = r.remote[rail].addr;
            self.rails.by_rail.remove(&addr);
            self.stats.rails_refused += 1;
        }
        true
    }
}
