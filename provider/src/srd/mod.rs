//! The SRD core: per-peer reliable, exactly-once, unordered datagrams sprayed
//! over many paths (UDP source ports), with selective acknowledgement, loss
//! recovery on another path, path health, BBR-like congestion control and
//! receiver credits. Sans-IO: `handle_*` in, `poll_*` out.

mod ack;
pub mod cc;
mod path;
mod peer;
mod pool;
mod rx;
mod send;
mod timer;
mod tx;

use core::net::SocketAddr;
use std::collections::{HashMap, VecDeque};

use crate::config::Config;
use crate::dgram::{Datagrams, DgramEvent, FailReason, PeerId, SendError};
use crate::time::Instant;
use crate::wire::srd::{flags, Packet, PacketType, Repr, CREDIT_UNLIMITED, HEADER_LEN};

use peer::{Ctx, Params, Peer};
use rx::Arrival;
use timer::Timer;
use tx::SlotState;

pub use path::Health;

/// One UDP datagram to send: `len` bytes written at the start of the caller's buffer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination (the peer's main address).
    pub dst: SocketAddr,
    /// Path = entropy index = which of the endpoint's sockets sends it (0..paths).
    pub path: u8,
    /// Bytes written.
    pub len: usize,
}

/// Counters of everything the core did or dropped.
#[derive(Clone, Debug, Default)]
pub struct SrdStats {
    /// Packets handed out by `poll_transmit`.
    pub tx_packets: u64,
    /// Bytes handed out by `poll_transmit` (headers included).
    pub tx_bytes: u64,
    /// DATA packets sent (first transmissions and retransmissions).
    pub tx_data: u64,
    /// Pure ACK packets sent.
    pub tx_acks: u64,
    /// RESET packets sent.
    pub tx_resets: u64,
    /// DATA retransmissions.
    pub retransmits: u64,
    /// Packets declared lost (per-path ordering, overdue, or RTO).
    pub lost: u64,
    /// Packets declared lost by the retransmission timer (the last resort).
    pub rto_lost: u64,
    /// Tail-loss probes sent.
    pub tail_probes: u64,
    /// Retransmission-timer expiries.
    pub timeouts: u64,
    /// Lost-declared packets later acked (the loss was spurious).
    pub spurious_losses: u64,
    /// Retransmitted packets acked too soon for the resent copy.
    pub spurious_retransmits: u64,
    /// Times new data waited for the congestion window.
    pub window_limited: u64,
    /// Packets received (any type, parsed or not).
    pub rx_packets: u64,
    /// New datagrams delivered up.
    pub rx_delivered: u64,
    /// DATA packets already received (dropped, re-acked).
    pub rx_duplicates: u64,
    /// DATA packets outside the receive window (dropped).
    pub rx_out_of_window: u64,
    /// Packets that failed to parse.
    pub rx_malformed: u64,
    /// Packets from an older epoch of their sender (dropped).
    pub rx_stale_src: u64,
    /// Packets addressed to another epoch of ours (dropped, answered by RESET).
    pub rx_stale_dst: u64,
    /// Acks acknowledging PSNs never sent (ignored).
    pub rx_bad_ack: u64,
    /// Datagrams acknowledged.
    pub acked: u64,
    /// Datagrams failed back.
    pub failed: u64,
    /// Peer restarts seen.
    pub peer_restarts: u64,
    /// Peers declared unreachable.
    pub unreachable: u64,
    /// DATA packets sent per path index.
    pub path_sent: Vec<u64>,
    /// Packets declared lost per path index.
    pub path_lost: Vec<u64>,
}

/// One endpoint's SRD state: all its peers.
pub struct Srd {
    p: Params,
    peers: Vec<Peer>,
    by_addr: HashMap<SocketAddr, PeerId>,
    events: VecDeque<DgramEvent>,
    pool: pool::Pool,
    stats: SrdStats,
    /// Round-robin start for `poll_transmit` across peers.
    cursor: usize,
    /// Credit granted to each sender (see `update_credit`).
    credit: u16,
    /// When `credit` was last computed.
    credit_at: Option<Instant>,
}

impl Srd {
    /// A core for the endpoint described by `cfg`.
    pub fn new(cfg: &Config) -> Self {
        let max_payload = cfg
            .max_datagram
            .clamp(HEADER_LEN + 1, HEADER_LEN + usize::from(u16::MAX))
            - HEADER_LEN;
        let p = Params {
            epoch: cfg.epoch.max(1),
            port: cfg.local.port(),
            paths: cfg.paths.clamp(1, 64),
            max_payload,
            ack_delay_ns: cfg.ack_delay.as_nanos() as u64,
            ack_every: cfg.ack_every.max(1),
            min_rto_ns: (cfg.min_rto.as_nanos() as u64).max(1),
            max_rto_ns: (cfg.max_rto.as_nanos() as u64)
                .max(cfg.min_rto.as_nanos() as u64)
                .max(1),
            unreachable_ns: cfg.unreachable_timeout.as_nanos() as u64,
            initial_window: cfg.initial_window.max(2),
            seed: cfg.seed,
        };
        let stats = SrdStats {
            path_sent: vec![0; usize::from(p.paths)],
            path_lost: vec![0; usize::from(p.paths)],
            ..SrdStats::default()
        };
        Srd {
            pool: pool::Pool::new(max_payload),
            p,
            peers: Vec::new(),
            by_addr: HashMap::new(),
            events: VecDeque::new(),
            stats,
            cursor: 0,
            credit: CREDIT_UNLIMITED,
            credit_at: None,
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
        id
    }

    /// The id of the peer at `addr`, if known (never creates one).
    pub fn peer_addr_id(&self, addr: SocketAddr) -> Option<PeerId> {
        self.by_addr.get(&addr).copied()
    }

    /// The main address of `peer`.
    pub fn peer_addr(&self, peer: PeerId) -> Option<SocketAddr> {
        self.peers.get(peer.0 as usize).map(|p| p.addr)
    }

    /// Receiver credit per sender at `now` (incast defence): unlimited with
    /// one active sender; with several, `initial_window` packets beyond their
    /// cumulative acks shared among them (at least one each). A sender is
    /// active if it sent us new data in the last `ACTIVE_NS`.
    fn update_credit(&mut self, now: Instant) {
        const ACTIVE_NS: u64 = 1_000_000;
        const REFRESH_NS: u64 = 50_000;
        if self
            .credit_at
            .is_some_and(|t| now.saturating_since(t).as_nanos() < u128::from(REFRESH_NS))
        {
            return;
        }
        self.credit_at = Some(now);
        let active = self
            .peers
            .iter()
            .filter(|p| {
                p.rx_last_data
                    .is_some_and(|t| now.saturating_since(t).as_nanos() < u128::from(ACTIVE_NS))
            })
            .count() as u32;
        self.credit = if active <= 1 {
            CREDIT_UNLIMITED
        } else {
            (self.p.initial_window / active).clamp(1, u32::from(CREDIT_UNLIMITED) - 1) as u16
        };
    }

    fn split(&mut self, i: usize) -> (&mut Peer, Ctx<'_>) {
        let ctx = Ctx {
            p: &self.p,
            events: &mut self.events,
            pool: &mut self.pool,
            stats: &mut self.stats,
            credit: self.credit,
        };
        (&mut self.peers[i], ctx)
    }

    /// A UDP datagram arrived from `from` (source IP and port). Returns the
    /// payload to deliver, if this packet carries new data.
    pub fn handle_datagram<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a [u8],
    ) -> Option<(PeerId, &'a [u8])> {
        self.stats.rx_packets += 1;
        let parsed = Packet::new_checked(data).and_then(|p| Repr::parse(&p).map(|r| (p, r)));
        let Ok((pkt, h)) = parsed else {
            self.stats.rx_malformed += 1;
            return None;
        };
        if h.ty == PacketType::Data && usize::from(h.payload_len) > self.p.max_payload {
            self.stats.rx_malformed += 1;
            return None;
        }
        let addr = SocketAddr::new(from.ip(), h.src_port);
        let id = self.peer(addr);
        if h.ty == PacketType::Data {
            self.update_credit(now);
        }
        let my_epoch = self.p.epoch;
        let (peer, mut ctx) = self.split(id.0 as usize);
        if h.ty != PacketType::Reset && h.dst_epoch != 0 && h.dst_epoch != my_epoch {
            // Meant for another incarnation of us: tell the sender (rate-limited).
            ctx.stats.rx_stale_dst += 1;
            let quiet = peer
                .last_reset
                .is_none_or(|t| now.saturating_since(t).as_nanos() as u64 >= ctx.p.min_rto_ns);
            if h.dst_epoch < my_epoch && quiet {
                peer.reset_pending = true;
            }
            return None;
        }
        if peer.remote_epoch == 0 {
            peer.remote_epoch = h.src_epoch;
        } else if h.src_epoch < peer.remote_epoch {
            ctx.stats.rx_stale_src += 1;
            return None;
        } else if h.src_epoch > peer.remote_epoch {
            peer.restart(&mut ctx, h.src_epoch);
        }
        if let Some(ack) = &h.ack {
            if h.dst_epoch == my_epoch {
                let ext = if h.ty == PacketType::Ack {
                    pkt.payload_ref()
                } else {
                    &[]
                };
                peer.on_ack(&mut ctx, now, ack, ext);
            }
        }
        match h.ty {
            PacketType::Reset | PacketType::Ack => None,
            PacketType::Probe => {
                peer.rx.ack_now = true;
                None
            }
            PacketType::Data => {
                if (h.psn_floor.wrapping_sub(h.psn) as i32) > 0 {
                    ctx.stats.rx_malformed += 1;
                    return None;
                }
                peer.rx.advance_floor(h.psn_floor);
                match peer.rx.on_packet(h.psn, now) {
                    Arrival::New => {
                        peer.rx_last_data = Some(now);
                        peer.rx.unacked += 1;
                        if peer.rx.unacked >= ctx.p.ack_every || h.flags & flags::ACK_NOW != 0 {
                            peer.rx.ack_now = true;
                        }
                        if peer.timers.get(Timer::Ack).is_none() {
                            peer.timers.set(
                                Timer::Ack,
                                now + core::time::Duration::from_nanos(ctx.p.ack_delay_ns),
                            );
                        }
                        ctx.stats.rx_delivered += 1;
                        Some((id, pkt.payload_ref()))
                    }
                    Arrival::Duplicate => {
                        ctx.stats.rx_duplicates += 1;
                        peer.rx.ack_now = true;
                        None
                    }
                    Arrival::OutOfWindow => {
                        ctx.stats.rx_out_of_window += 1;
                        peer.rx.ack_now = true;
                        None
                    }
                }
            }
        }
    }

    /// Run the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.peers.len() {
            let (peer, mut ctx) = self.split(i);
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
                peer.on_rto(&mut ctx, now);
            }
            peer.update_timers(ctx.p);
        }
    }

    /// The next packet to put on the wire, written into `buf`
    /// (`buf.len() >= cfg.max_datagram`), or `None` (nothing to send, or paced).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if buf.len() < HEADER_LEN + self.p.max_payload {
            return None;
        }
        self.update_credit(now);
        let n = self.peers.len();
        for k in 0..n {
            let i = (self.cursor + k) % n;
            let (peer, mut ctx) = self.split(i);
            if peer.tx.idle_until_poll {
                peer.tx.idle_until_poll = false;
                peer.tx.last_progress = now;
                peer.update_timers(ctx.p);
            }
            let reset = peer.reset_pending;
            if let Some(t) = peer.poll_transmit(&mut ctx, now, buf) {
                if reset {
                    ctx.stats.tx_resets += 1;
                }
                self.cursor = (i + 1) % n;
                return Some(t);
            }
        }
        None
    }

    /// When `handle_timeout` must next be called (includes pacing release times).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.peers.iter().filter_map(|p| p.timers.next()).min()
    }

    /// The next acknowledgement / failure / restart report.
    pub fn poll_event(&mut self) -> Option<DgramEvent> {
        self.events.pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> &SrdStats {
        &self.stats
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

    /// Most datagrams queued + outstanding per peer before `send` blocks.
    fn queue_limit(&self, p: &Peer) -> u32 {
        use cc::Controller;
        let win_pkts = p.cc.window() / self.p.max_payload as u64;
        (4 * win_pkts).clamp(64, u64::from(tx::WINDOW - 1)) as u32
    }
}

impl Datagrams for Srd {
    fn max_payload(&self) -> usize {
        self.p.max_payload
    }

    fn can_send(&self, peer: PeerId) -> bool {
        match self.peers.get(peer.0 as usize) {
            Some(p) => p.tx.outstanding() < self.queue_limit(p),
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
        if len > self.p.max_payload {
            return Err(SendError::TooLarge);
        }
        let i = peer.0 as usize;
        let Some(p) = self.peers.get(i) else {
            return Err(SendError::BadPeer);
        };
        if p.tx.outstanding() >= self.queue_limit(p) {
            return Err(SendError::WouldBlock);
        }
        let mut buf = self.pool.take();
        fill(&mut buf[..len]);
        let peer = &mut self.peers[i];
        if !peer.tx.busy() {
            // The unreachable clock starts when the peer goes from idle to
            // busy; `send` has no clock, so the next poll stamps it.
            peer.tx.idle_until_poll = true;
        }
        let psn = peer.tx.next_psn;
        let slot = peer.tx.slot_mut(psn);
        debug_assert!(slot.state == SlotState::Free);
        slot.state = SlotState::Queued;
        slot.token = token;
        slot.buf = buf;
        slot.len = len;
        slot.sends = 0;
        peer.tx.next_psn = psn.wrapping_add(1);
        Ok(())
    }
}
