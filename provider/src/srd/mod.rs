//! The SRD core: per-peer reliable, exactly-once, unordered datagrams sprayed
//! over many paths (UDP source ports), with selective acknowledgement, loss
//! recovery on another path, path health, BBR-like congestion control and
//! receiver credits. Sans-IO: `handle_*` in, `poll_*` out. Where each
//! mechanism lives (`PROTOCOL.md` §1-§8 describe them):
//!
//! | file | what |
//! |------|------|
//! | `session.rs` | the handshake, the token check every packet passes, restarts |
//! | `recv.rs` | the receive path: parsing, admission, acks in, the window, credits |
//! | `rx.rs` | one peer's receive window and the ack state derived from it |
//! | `send.rs` | building packets: RESET, new data (window, credit, pacing), pure ACKs |
//! | `tx.rs` | one peer's ring of datagram slots by PSN and its retransmit queue |
//! | `ack.rs` | acknowledgements at the sender: acked PSNs, RTT and rate samples |
//! | `recovery.rs` | retransmission: loss detection, tail probe, RTO, hedging, resends |
//! | `path.rs` | per-path RTT and health, the path picker (spraying) |
//! | `cc/` | congestion control behind the `Controller` trait (`bbr.rs`) |
//! | `rails.rs` | several local NICs (rails) |
//! | `reclaim.rs` | bounded peer memory: idle peers give their state back |
//! | `place.rs` | direct placement: is this datagram new DATA, from its headers alone |
//! | `auth.rs` | per-packet authentication with a job key |
//! | `peer.rs`, `timer.rs`, `pool.rs`, `stats.rs` | the peer, its timers, buffer pool, counters |

mod ack;
mod auth;
pub mod cc;
mod path;
mod peer;
mod place;
mod pool;
mod rails;
mod reclaim;
mod recovery;
mod recv;
mod rx;
mod send;
mod session;
mod stats;
mod timer;
mod tx;

use core::net::SocketAddr;
use std::collections::VecDeque;

use crate::hash::FastMap;

use crate::config::Config;
use crate::dgram::{Datagrams, Deferred, DgramEvent, FailReason, PeerId, SendError};
use crate::time::Instant;
use crate::wire::srd::{flags, CREDIT_UNLIMITED, HEADER_LEN, TAG_LEN};

use peer::{Ctx, Params, Peer};
use timer::Timer;

pub use auth::{handshake_tag, session_tag, Sealer};
pub use path::Health;
pub use stats::{PathStats, PeerStats, SrdStats};

/// One UDP datagram to send: `len` bytes written at the start of the caller's buffer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination (the peer's main address).
    pub dst: SocketAddr,
    /// Path = entropy index (0..paths): each path leaves from a socket of
    /// its own. With rails (`Config::rails`), the socket: `r * paths + i` is
    /// entropy value `i` of rail `r` (bound to that rail's address).
    pub path: u8,
    /// Bytes written into the buffer (the whole datagram unless `body` is set).
    pub len: usize,
    /// The rest of the datagram, to append after those `len` bytes: only from
    /// `Srd::poll_transmit` for datagrams queued with `send_with_body`
    /// (`Engine::poll_transmit` always resolves it).
    pub body: Option<crate::dgram::Body>,
}

/// One endpoint's SRD state: all its peers.
pub struct Srd {
    p: Params,
    peers: Vec<Peer>,
    by_addr: FastMap<SocketAddr, PeerId>,
    events: VecDeque<DgramEvent>,
    pool: pool::Pool,
    stats: SrdStats,
    /// Peers that may have something to send or a timer armed, one bit per
    /// peer index: every peer whose bit is clear is `quiescent`.
    /// `poll_transmit`, `poll_timeout` and `handle_timeout` visit only
    /// these, in peer order as they visited every peer before (a quiescent
    /// peer's visit did nothing), so their cost follows the peers in use,
    /// not every peer ever met (an MPI rank knows all the others: scanning
    /// them all cost ~120 ns per idle peer per round trip, 35 us with 256
    /// idle peers). A peer joins when input from it arrives, a datagram is
    /// queued to it or a credit decision asks it for an ack, and leaves when
    /// `poll_transmit` finds it quiescent.
    active: Vec<u64>,
    /// Bit `w` set = word `w` of `active` is not zero: `next_active` skips
    /// 4096 idle peers per word read (with 16384 peers and one in use, a
    /// scan of `active` alone cost ~1.9 us per message, `engine_scale`).
    active_words: Vec<u64>,
    /// Peers (indices, ascending) that may be sending to us: every peer
    /// that is `rx_active`, `rx_wanting` or `rx_admitted` is here, so the
    /// credit decisions (`update_credit`, `admit`) visit these and not every
    /// peer ever met (a scan of 16384 idle peers every 50 us cost ~11 us per
    /// message, `engine_scale`). A peer joins with its DATA or PROBE and
    /// leaves when `update_credit` finds it none of the three.
    senders: Vec<u32>,
    /// Round-robin start (peer index) for `poll_transmit`.
    cursor: usize,
    /// Credit granted to each sender (see `update_credit`).
    credit: u16,
    /// When `credit` was last computed.
    credit_at: Option<Instant>,
    /// The set of active senders grew: recompute `credit` now.
    recount: bool,
    /// The receiver's effective credit budget (see `recv::Budget`).
    budget: recv::Budget,
    /// Whose turn it is to get the budget's remainder (one extra packet
    /// each), and since when (see `share_remainder`).
    extra_turn: (u32, Instant),
    /// Datagrams ever queued (see `queued_total`).
    queued_total: u64,
    /// The next send call's datagrams are lazy (`Datagrams::set_lazy`).
    lazy_next: bool,
    /// Keys, our nonce and the stateless replies (see `session.rs`).
    sess: session::Sessions,
    /// Most peers a remote handshake may add (`Config::max_peers`).
    max_peers: usize,
    /// A peer idle this long gives its state back (`Config::peer_idle_timeout`), ns.
    idle_ns: u64,
    /// A quiet peer trims its state after this long (`Config::peer_trim_after`), ns.
    trim_ns: u64,
    /// When idle peers are next looked for (`None`: no peer holds state).
    next_sweep: Option<Instant>,
    /// A peer was used since the sweep was last armed.
    sweep_wanted: bool,
    /// The latest DATA packet delivered, while the next may continue it
    /// (`recv.rs`: `continuation`); cleared by anything else.
    rx_last: Option<recv::RxLast>,
    /// `next_sweep` is at most a quarter of the trim time away.
    sweep_soon: bool,
    /// The job key and its derived keys (`Config::auth_key`), if any.
    auth: Option<auth::Auth>,
    /// The key of the packet `poll_transmit` last returned with a deferred
    /// body: its tag waits for the body (`seal_body`).
    unsealed: Option<auth::MacKey>,
    /// The peers' rail addresses (`rails.rs`; empty with one rail).
    rails: rails::Rails,
    /// The peer `poll_transmit` last took a packet from, and when: its next
    /// call at that instant with no input handled since goes to that peer's
    /// flowlet first (`Peer::poll_train`). Cleared by every input.
    train: Option<(usize, Instant)>,
}

impl Srd {
    /// A core for the endpoint described by `cfg`.
    pub fn new(cfg: &Config) -> Self {
        let auth = cfg.auth_key.as_ref().and_then(|k| auth::Auth::new(&k.0));
        let head = HEADER_LEN + if auth.is_some() { TAG_LEN } else { 0 };
        let max_payload = cfg
            .max_datagram
            .clamp(head + 1, head + usize::from(u16::MAX))
            - head;
        let rail_ips = rails::local_rails(cfg);
        let p = Params {
            nonce: cfg.nonce.max(1),
            port: cfg.local.port(),
            // At most 64 paths per peer, whatever the rails.
            paths: cfg.paths.clamp(1, (64 / rail_ips.len().max(1)) as u8),
            rail_ips,
            local_paths: cfg.local_paths.clamp(1, cfg.paths.clamp(1, 64)),
            local_ip: cfg.local.ip(),
            max_payload,
            ack_delay_ns: cfg.ack_delay.as_nanos() as u64,
            ack_soon_ns: cfg.ack_soon.min(cfg.ack_delay).as_nanos() as u64,
            ack_lazy_ns: (cfg.ack_lazy.as_nanos() as u64)
                .min(cfg.min_rto.as_nanos() as u64 / 2)
                .max(cfg.ack_delay.as_nanos() as u64),
            max_host_delay_ns: cfg.max_host_delay.as_nanos() as u64,
            ack_every: cfg.ack_every.max(1),
            min_rto_ns: (cfg.min_rto.as_nanos() as u64).max(1),
            // At most a sixteenth of the unreachable timeout: a peer is
            // then asked at least 16 times (stall probes, resends, HELLOs)
            // before it is declared unreachable. Backed off to 1 s, a
            // sender at 11.5-20 % loss a way had 4-5 tries left in the
            // timeout, each losing its round trip (probe or answer) about
            // 40 % of the time: a live peer was declared unreachable in 7
            // of `sim_property`'s seeds 0..400 000; in none at 312 ms.
            max_rto_ns: (cfg.max_rto.as_nanos() as u64)
                .min(cfg.unreachable_timeout.as_nanos() as u64 / 16)
                .max(cfg.min_rto.as_nanos() as u64)
                .max(1),
            unreachable_ns: cfg.unreachable_timeout.as_nanos() as u64,
            initial_window: cfg.initial_window.max(2),
            credit_budget: cfg.rx_credit_packets.max(2),
            credit_room: cfg.rx_credit_room.max(1),
            unscheduled: cfg.unscheduled_packets.max(1),
            seed: cfg.seed,
            rx_continuation: cfg.rx_continuation,
            flowlet: (cfg.flowlet_bytes / cfg.max_datagram.max(1)).clamp(1, 64) as u32,
            head,
            mac_flag: if auth.is_some() { flags::MAC } else { 0 },
        };
        let stats = SrdStats {
            path_sent: vec![0; usize::from(p.paths) * p.rail_ips.len().max(1)],
            path_lost: vec![0; usize::from(p.paths) * p.rail_ips.len().max(1)],
            ..SrdStats::default()
        };
        Srd {
            sess: session::Sessions::new(
                cfg.nonce,
                cfg.secret,
                cfg.stateless_per_sec,
                if auth.is_some() { flags::MAC } else { 0 },
            ),
            max_peers: cfg.max_peers.max(1) as usize,
            idle_ns: (cfg.peer_idle_timeout.as_nanos() as u64).max(1),
            trim_ns: (cfg.peer_trim_after.as_nanos() as u64).max(1),
            next_sweep: None,
            sweep_wanted: false,
            rx_last: None,
            sweep_soon: false,
            auth,
            unsealed: None,
            rails: rails::Rails::default(),
            train: None,
            pool: pool::Pool::new(max_payload),
            budget: recv::Budget::new(p.credit_budget),
            queued_total: 0,
            lazy_next: false,
            p,
            peers: Vec::new(),
            by_addr: FastMap::default(),
            events: VecDeque::new(),
            stats,
            active: Vec::new(),
            active_words: Vec::new(),
            senders: Vec::new(),
            cursor: 0,
            credit: CREDIT_UNLIMITED,
            credit_at: None,
            recount: false,
            extra_turn: (0, Instant::ZERO),
        }
    }

    /// The peer at `addr` (its main IP and port), created if new.
    pub fn peer(&mut self, addr: SocketAddr) -> PeerId {
        if let Some(&id) = self.by_addr.get(&addr) {
            return id;
        }
        let id = PeerId(self.peers.len() as u32);
        self.peers.push(Peer::new(id, addr, &self.p));
        self.by_addr.insert(addr, id);
        self.stats.peers = self.peers.len() as u64;
        self.activate(id.0 as usize);
        id
    }

    /// Put peer `i` on the `active` list (it is about to change).
    #[inline]
    pub(crate) fn activate(&mut self, i: usize) {
        let w = i / 64;
        if self.active.len() <= w {
            self.active.resize(w + 1, 0);
        }
        self.active[w] |= 1 << (i % 64);
        let s = w / 64;
        if self.active_words.len() <= s {
            self.active_words.resize(s + 1, 0);
        }
        self.active_words[s] |= 1 << (w % 64);
    }

    /// Take peer `i` off the `active` list (it is quiescent).
    fn deactivate(&mut self, i: usize) {
        let w = i / 64;
        self.active[w] &= !(1 << (i % 64));
        if self.active[w] == 0 {
            self.active_words[w / 64] &= !(1 << (w % 64));
        }
    }

    /// Is peer `i` on the `active` list?
    fn listed(&self, i: usize) -> bool {
        self.active
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The first peer on the `active` list at index `from` or after.
    fn next_active(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let bits = self.active.get(w)? & (u64::MAX << (from % 64));
        if bits != 0 {
            return Some(w * 64 + bits.trailing_zeros() as usize);
        }
        // The next non-zero word of `active`, through `active_words`.
        let from = w + 1;
        let mut s = from / 64;
        let mut words = self.active_words.get(s)? & (u64::MAX << (from % 64));
        loop {
            if words != 0 {
                let w = s * 64 + words.trailing_zeros() as usize;
                let bits = self.active.get(w)?;
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
            s += 1;
            words = *self.active_words.get(s)?;
        }
    }

    /// `activate` every sender a credit decision asked for an ack.
    pub(crate) fn activate_acking(&mut self) {
        for k in 0..self.senders.len() {
            let i = self.senders[k] as usize;
            if self.peers[i].rx.ack_now {
                self.activate(i);
            }
        }
    }

    /// Put peer `i` on `senders` (its DATA or PROBE arrived).
    #[inline]
    pub(crate) fn list_sender(&mut self, i: usize) {
        if self.peers[i].rx_listed {
            return;
        }
        self.peers[i].rx_listed = true;
        if let Err(at) = self.senders.binary_search(&(i as u32)) {
            self.senders.insert(at, i as u32);
        }
    }

    /// Debug builds: every peer off the `active` list is quiescent.
    fn check_active(&self) {
        debug_assert!(
            (0..self.peers.len()).all(|i| self.listed(i) || self.peers[i].quiescent()),
            "a peer off the active list has work"
        );
    }

    /// The id of the peer at `addr`, if known (never creates one).
    pub fn peer_addr_id(&self, addr: SocketAddr) -> Option<PeerId> {
        self.by_addr.get(&addr).copied()
    }

    /// The main address of `peer`.
    pub fn peer_addr(&self, peer: PeerId) -> Option<SocketAddr> {
        self.peers.get(peer.0 as usize).map(|p| p.addr)
    }

    pub(crate) fn split(&mut self, i: usize) -> (&mut Peer, Ctx<'_>) {
        let ctx = Ctx {
            p: &self.p,
            events: &mut self.events,
            pool: &mut self.pool,
            stats: &mut self.stats,
            credit: self.credit,
            recount: &mut self.recount,
        };
        (&mut self.peers[i], ctx)
    }

    /// Run the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.train = None;
        self.rx_last = None;
        if self.next_sweep.is_some_and(|t| t <= now) {
            self.sweep(now);
        }
        let mut at = 0;
        while let Some(i) = self.next_active(at) {
            at = i + 1;
            let (peer, mut ctx) = self.split(i);
            ctx.stats.peer_polls += 1;
            if peer.timers_stale {
                peer.update_timers(ctx.p);
            }
            if peer.timers.next().is_none_or(|t| t > now) {
                continue;
            }
            if peer.timers.due(Timer::Ack, now) {
                peer.timers.stop(Timer::Ack);
                peer.rx.ack_now = true;
            }
            if peer.timers.due(Timer::Pacing, now) {
                peer.timers.stop(Timer::Pacing);
            }
            if peer.timers.due(Timer::Unreachable, now) {
                peer.timers.stop(Timer::Unreachable);
                if peer.tx.busy() {
                    ctx.stats.unreachable += 1;
                    peer.fail_all(&mut ctx, FailReason::Unreachable);
                }
            }
            if peer.timers.due(Timer::Loss, now) {
                peer.timers.stop(Timer::Loss);
                peer.detect_losses(&mut ctx, now);
            }
            if peer.timers.due(Timer::Tlp, now) {
                peer.timers.stop(Timer::Tlp);
                peer.on_tlp(&mut ctx, now);
            }
            if peer.timers.due(Timer::Rto, now) {
                peer.on_rto_timer(&mut ctx, now);
            }
            if peer.timers.due(Timer::Handshake, now) {
                peer.timers.stop(Timer::Handshake);
                peer.on_handshake_timer();
            }
            if peer.timers.due(Timer::Rails, now) {
                peer.timers.stop(Timer::Rails);
                peer.on_rails_timer(now);
            }
            if peer.timers.due(Timer::Credit, now) {
                // Held at 0 credit too long: probe (poll_transmit re-arms).
                peer.timers.stop(Timer::Credit);
                peer.credit_probe_due = peer.tx.credit == Some(0) && peer.tx.busy();
            }
            peer.update_timers(ctx.p);
        }
        self.check_active();
    }

    /// The next packet to put on the wire, written into `buf`
    /// (`buf.len() >= cfg.max_datagram`), or `None` (nothing to send, or paced).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.rx_last = None;
        if buf.len() < self.p.head + self.p.max_payload {
            return None;
        }
        self.unsealed = None;
        if let Some(t) = self.poll_train(now, buf) {
            return Some(t);
        }
        if let Some(t) = self.poll_stateless(buf) {
            return Some(t);
        }
        if self.next_sweep.is_some_and(|t| t <= now) {
            self.sweep(now);
        }
        self.update_credit(now);
        // From the cursor to the last peer, then from the first to the cursor.
        let start = self.cursor.min(self.peers.len());
        let mut at = start;
        let mut wrapped = false;
        loop {
            let i = match self.next_active(at) {
                Some(i) if !wrapped || i < start => i,
                _ if !wrapped => {
                    wrapped = true;
                    at = 0;
                    continue;
                }
                _ => break,
            };
            at = i + 1;
            let n = self.peers.len();
            let (peer, mut ctx) = self.split(i);
            ctx.stats.peer_polls += 1;
            if peer.tx.idle_until_poll {
                peer.tx.idle_until_poll = false;
                peer.expire_credit(&ctx, now);
                peer.tx.last_progress = now;
                peer.update_timers(ctx.p);
            }
            if let Some(t) = peer.poll_transmit(&mut ctx, now, buf) {
                peer.last_active = now;
                // (Not `% n`: a division per packet.)
                self.cursor = if i + 1 < n { i + 1 } else { 0 };
                self.arm_sweep(now);
                self.seal(i, buf, &t);
                self.train = Some((i, now));
                return Some(t);
            }
            // The end of this peer's burst: the timers its packets left stale.
            if peer.timers_stale {
                peer.update_timers(ctx.p);
            }
            if peer.quiescent() {
                self.deactivate(i);
            }
        }
        self.check_active();
        None
    }

    /// The next packet of the flowlet of the peer that sent the last one
    /// (`train`), if that call was at `now` and nothing else may go first:
    /// no stateless reply queued, no sweep due. The peers' turns thus go
    /// flowlet by flowlet rather than packet by packet (the driver sends
    /// each peer's flowlet on a path as one segmented send either way).
    fn poll_train(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let (i, at) = self.train.take()?;
        if at != now
            || !self.sess.queue.is_empty()
            || self.next_sweep.is_some_and(|t| t <= now)
            || i >= self.peers.len()
        {
            return None;
        }
        let n = self.peers.len();
        let (peer, mut ctx) = self.split(i);
        ctx.stats.peer_polls += 1;
        let t = peer.poll_train(&mut ctx, now, buf)?;
        peer.last_active = now;
        self.cursor = if i + 1 < n { i + 1 } else { 0 };
        self.arm_sweep(now);
        self.seal(i, buf, &t);
        self.train = Some((i, now));
        Some(t)
    }

    /// When `handle_timeout` must next be called (includes pacing release
    /// times). The idle-peer sweep is not a deadline of its own: it runs
    /// from the next `handle_timeout` or `handle_datagram` after it is due,
    /// so an endpoint with nothing to do is never woken for it (its memory
    /// does not grow while it sleeps).
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Peers off the active list have no timer armed.
        let mut at = 0;
        let mut min: Option<Instant> = None;
        while let Some(i) = self.next_active(at) {
            at = i + 1;
            if let Some(t) = self.peers[i].next_deadline(&self.p) {
                min = Some(min.map_or(t, |m| m.min(t)));
            }
        }
        min
    }

    /// The next acknowledgement / failure / restart report.
    pub fn poll_event(&mut self) -> Option<DgramEvent> {
        self.events.pop_front()
    }

    /// Datagrams queued since creation: a driver compares two readings to
    /// learn whether a call gave the SRD anything to send.
    pub fn queued_total(&self) -> u64 {
        self.queued_total
    }

    /// Counters.
    pub fn stats(&self) -> &SrdStats {
        &self.stats
    }

    /// Has a session with `peer` been set up (we heard from it)?
    pub fn has_session(&self, peer: PeerId) -> bool {
        self.peers
            .get(peer.0 as usize)
            .is_some_and(|p| p.remote_nonce != 0)
    }

    /// Datagrams queued or unacknowledged towards `peer`.
    pub fn outstanding(&self, peer: PeerId) -> u32 {
        self.peers
            .get(peer.0 as usize)
            .map_or(0, |p| p.tx.outstanding())
    }

    /// Bytes in flight towards `peer` (sent, not acked, not declared lost).
    pub fn bytes_in_flight(&self, peer: PeerId) -> u64 {
        self.peers
            .get(peer.0 as usize)
            .map_or(0, |p| p.tx.bytes_in_flight)
    }

    /// Health of each path towards `peer`.
    pub fn path_health(&self, peer: PeerId) -> Vec<Health> {
        self.peers.get(peer.0 as usize).map_or(Vec::new(), |p| {
            p.paths.paths.iter().map(|x| x.health).collect()
        })
    }

    /// Smoothed RTT of each path towards `peer`, ns (0 = no sample).
    pub fn path_srtt(&self, peer: PeerId) -> Vec<u64> {
        self.peers.get(peer.0 as usize).map_or(Vec::new(), |p| {
            p.paths.paths.iter().map(|x| x.srtt_ns).collect()
        })
    }

    /// Congestion window towards `peer`, bytes.
    pub fn window(&self, peer: PeerId) -> u64 {
        use cc::Controller;
        self.peers.get(peer.0 as usize).map_or(0, |p| p.cc.window())
    }

    /// Payload buffers the pool ever allocated (flat in steady state).
    pub fn pool_allocated(&self) -> u64 {
        self.pool.allocated
    }

    /// A one-line dump of `peer`'s internal state, for debugging tests.
    pub fn debug_peer(&self, peer: PeerId) -> String {
        use cc::Controller;
        let Some(p) = self.peers.get(peer.0 as usize) else {
            return String::new();
        };
        format!(
            "credit {:?} una {} next_send {} next_psn {} inflight {}B/{}p retx {} win {} rate {:?} tokens {} timers {:?} srtt {} rto {}",
            p.tx.credit,
            p.tx.una,
            p.tx.next_send,
            p.tx.next_psn,
            p.tx.bytes_in_flight,
            p.tx.pkts_in_flight,
            p.tx.retx.len(),
            p.cc.window(),
            p.cc.pacing_rate(),
            p.pacing_tokens,
            p.timers,
            p.srtt_ns,
            p.rto_ns(&self.p)
        )
    }

    /// May peer `p` take one more datagram (queued + outstanding) before
    /// `send` blocks? Its limit is 4 windows of packets, within 64 and the
    /// ring (`queue_limit`).
    fn below_queue_limit(&self, p: &Peer) -> bool {
        use cc::Controller;
        below_queue_limit(p.tx.outstanding(), p.cc.window(), self.p.max_payload as u64)
    }
}

/// Most datagrams queued + outstanding per peer before `send` blocks, with
/// a congestion window of `window` bytes and packets of `max_payload`: 4
/// windows of packets, within 64 and the ring. (`below_queue_limit` is what
/// runs: this one is its specification.)
#[cfg(test)]
fn queue_limit(window: u64, max_payload: u64) -> u32 {
    let win_pkts = window / max_payload.max(1);
    (4 * win_pkts).clamp(64, u64::from(tx::WINDOW - 1)) as u32
}

/// `outstanding < queue_limit(window, max_payload)`, without its division
/// (two per packet queued, a tenth of the sender's time in `queue` and
/// `can_send`): o < 4 x floor(w / m) holds exactly when
/// ceil((o + 1) / 4) x m <= w.
fn below_queue_limit(outstanding: u32, window: u64, max_payload: u64) -> bool {
    let o = u64::from(outstanding);
    o < 64 || (o < u64::from(tx::WINDOW - 1) && (o + 4) / 4 * max_payload.max(1) <= window)
}

impl Datagrams for Srd {
    fn max_payload(&self) -> usize {
        self.p.max_payload
    }

    fn can_send(&self, peer: PeerId) -> bool {
        match self.peers.get(peer.0 as usize) {
            Some(p) => self.below_queue_limit(p),
            None => false,
        }
    }

    fn send(
        &mut self,
        peer: PeerId,
        token: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), SendError> {
        let lazy = core::mem::take(&mut self.lazy_next);
        self.queue(peer, token, len, fill, Deferred::default(), lazy)
    }

    fn supports_body(&self) -> bool {
        true
    }

    fn set_backlog(&mut self, peer: PeerId, more: bool) {
        if let Some(p) = self.peers.get_mut(peer.0 as usize) {
            p.backlog = more;
        }
    }

    fn set_lazy(&mut self) {
        self.lazy_next = true;
    }

    fn send_with_body(
        &mut self,
        peer: PeerId,
        token: u64,
        head_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
        body: Deferred,
    ) -> Result<(), SendError> {
        let lazy = core::mem::take(&mut self.lazy_next);
        self.queue(peer, token, head_len, fill, body, lazy)
    }

    fn send_run(
        &mut self,
        peer: PeerId,
        token: u64,
        head_len: usize,
        count: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]),
        body: &mut dyn FnMut(usize) -> Deferred,
    ) -> Result<usize, SendError> {
        self.queue_run(peer, token, head_len, count, fill, body)
    }
}

impl Srd {
    /// Queue a datagram: `head_len` bytes from `fill` now, `body` supplied at
    /// each transmission (see `Datagrams::send_with_body`); `lazy`: no
    /// completion waits on its ack (`Datagrams::set_lazy`).
    fn queue(
        &mut self,
        peer: PeerId,
        token: u64,
        head_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
        body: Deferred,
        lazy: bool,
    ) -> Result<(), SendError> {
        let len = head_len.saturating_add(body.len);
        let i = self.may_queue(peer, len)?;
        let buf = if head_len > tx::HEAD_INLINE {
            let mut b = self.pool.take();
            fill(&mut b[..head_len]);
            b
        } else {
            Vec::new()
        };
        self.wake_for_send(i);
        let inline = buf.is_empty();
        self.peers[i].note_queued();
        let slot = self.peers[i].tx.push_queued(token, len, body, buf, lazy);
        if inline {
            fill(&mut slot.head[..head_len]);
        }
        self.queued_total += 1;
        Ok(())
    }

    /// `Datagrams::send_run`: `queue` for up to `count` datagrams whose
    /// heads fit a slot inline, the peer's checks and activation done once.
    fn queue_run(
        &mut self,
        peer: PeerId,
        token: u64,
        head_len: usize,
        count: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]),
        body: &mut dyn FnMut(usize) -> Deferred,
    ) -> Result<usize, SendError> {
        let lazy = core::mem::take(&mut self.lazy_next);
        if count == 0 {
            return Ok(0);
        }
        if head_len > tx::HEAD_INLINE {
            // Heads in pool buffers: one at a time.
            return crate::dgram::send_each(count, |k| {
                self.queue(peer, token, head_len, &mut |b| fill(k, b), body(k), lazy)
            });
        }
        let mut next = body(0);
        let i = self.may_queue(peer, head_len.saturating_add(next.len))?;
        self.wake_for_send(i);
        let max_payload = self.p.max_payload;
        let peer = &mut self.peers[i];
        let window = {
            use cc::Controller;
            peer.cc.window()
        };
        peer.note_queued();
        let mut n = 0;
        loop {
            let slot = peer
                .tx
                .push_queued(token, head_len + next.len, next, Vec::new(), lazy);
            fill(n, &mut slot.head[..head_len]);
            n += 1;
            if n == count || !below_queue_limit(peer.tx.outstanding(), window, max_payload as u64) {
                break;
            }
            next = body(n);
            if head_len.saturating_add(next.len) > max_payload {
                break;
            }
        }
        self.queued_total += n as u64;
        Ok(n)
    }

    /// May a datagram of `len` payload bytes be queued for `peer` now? Its
    /// index if so.
    fn may_queue(&self, peer: PeerId, len: usize) -> Result<usize, SendError> {
        if len > self.p.max_payload {
            return Err(SendError::TooLarge);
        }
        let i = peer.0 as usize;
        let Some(p) = self.peers.get(i) else {
            return Err(SendError::BadPeer);
        };
        if !self.below_queue_limit(p) {
            return Err(SendError::WouldBlock);
        }
        Ok(i)
    }

    /// Peer `i` is about to have a datagram queued: make it active, start
    /// its handshake if it has no session, and keep its records.
    fn wake_for_send(&mut self, i: usize) {
        self.activate(i);
        if self.peers[i].remote_nonce == 0 {
            // No session yet: the datagram waits for the handshake (one
            // round trip), then leaves at once.
            self.handshake(i);
        }
        self.sweep_wanted = true;
        let peer = &mut self.peers[i];
        peer.reclaimed = false;
        peer.trimmed = false;
        peer.paths.ensure();
        if !peer.tx.busy() {
            // The unreachable clock starts when the peer goes from idle to
            // busy; `send` has no clock, so the next poll stamps it.
            peer.tx.idle_until_poll = true;
        }
    }
}

#[cfg(test)]
mod queue_limit_tests {
    use super::{below_queue_limit, queue_limit};

    #[test]
    fn the_limit_test_agrees_with_the_division() {
        for m in [1u64, 7, 1376, 1416, 8900, 65_000] {
            for w in (0..40u64)
                .map(|k| k * m / 3)
                .chain([u64::MAX / 8, 123_456_789])
            {
                for o in (0..200u32).chain(4000..4100) {
                    assert_eq!(
                        below_queue_limit(o, w, m),
                        o < queue_limit(w, m),
                        "outstanding {o}, window {w}, max payload {m}"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod queue_run_tests {
    use super::*;
    use crate::config::{Config, EpMode};

    fn srd() -> (Srd, PeerId) {
        let mut cfg = Config::new(EpMode::Rdm, "198.18.0.1:7000".parse().unwrap());
        cfg.max_datagram = 1472;
        let mut s = Srd::new(&cfg);
        let p = s.peer("198.18.0.2:7000".parse().unwrap());
        (s, p)
    }

    /// What a peer's queue holds: (token, head, len, body) per datagram.
    fn queued(s: &Srd, p: PeerId) -> Vec<(u64, Vec<u8>, usize, Deferred)> {
        let peer = &s.peers[p.0 as usize];
        let mut out = Vec::new();
        let mut psn = peer.tx.una;
        while psn != peer.tx.next_psn {
            let slot = peer.tx.slot(psn);
            out.push((slot.token, slot.head_bytes().to_vec(), slot.len, slot.body));
            psn = psn.wrapping_add(1);
        }
        out
    }

    fn body(k: usize) -> Deferred {
        Deferred {
            key: 1000 * k as u64,
            len: if k % 5 == 4 { 600 } else { 1300 },
            ack_at_once: k.is_multiple_of(3),
        }
    }

    /// A run queues exactly what as many `send_with_body` calls would (the
    /// heads, bodies, token and order), stops at the same place (the queue
    /// limit, or a datagram too large), and says how many it took.
    #[test]
    fn a_run_queues_what_single_sends_would() {
        let (mut one, p1) = srd();
        let (mut run, p2) = srd();
        let mut fill = |k: usize, b: &mut [u8]| {
            for (i, x) in b.iter_mut().enumerate() {
                *x = (k * 7 + i) as u8;
            }
        };
        // Far more than the queue limit (64 with the initial window).
        let want = 500;
        let mut singles = 0;
        for k in 0..want {
            let r = one.send_with_body(p1, 77, 40, &mut |b| fill(k, b), body(k));
            if r.is_err() {
                assert_eq!(r, Err(SendError::WouldBlock));
                break;
            }
            singles += 1;
        }
        let n = run.send_run(p2, 77, 40, want, &mut fill, &mut body);
        assert_eq!(n, Ok(singles), "a run stops at the queue limit");
        assert!(singles >= 64 && singles < want);
        assert_eq!(queued(&one, p1), queued(&run, p2));
        assert_eq!(run.queued_total, singles as u64);
        // Full: the next run takes none, as a single send would block.
        assert_eq!(
            run.send_run(p2, 77, 40, 1, &mut fill, &mut body),
            Err(SendError::WouldBlock)
        );
        // A body too large for a datagram ends a run before it.
        let (mut s, p) = srd();
        let mut big = |k: usize| Deferred {
            key: 0,
            len: if k == 3 { 1500 } else { 100 },
            ack_at_once: false,
        };
        assert_eq!(s.send_run(p, 1, 40, 10, &mut fill, &mut big), Ok(3));
        assert_eq!(
            s.send_run(p, 1, 40, 10, &mut fill, &mut |_| Deferred {
                key: 0,
                len: 1500,
                ack_at_once: false
            }),
            Err(SendError::TooLarge)
        );
        // An unknown peer.
        assert_eq!(
            s.send_run(PeerId(9), 1, 40, 2, &mut fill, &mut body),
            Err(SendError::BadPeer)
        );
        assert_eq!(s.send_run(p, 1, 40, 0, &mut fill, &mut body), Ok(0));
    }
}
