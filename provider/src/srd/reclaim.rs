//! Bounded peer memory, in two steps. A peer quiet for a moment
//! (`Config::peer_trim_after`, 1 s) trims: it gives back its send ring and
//! path records and keeps each path's RTT and health in 4 bytes. A peer idle
//! for long (`Config::peer_idle_timeout`) gives back the rest of its
//! per-peer state (congestion and RTT history) while keeping what the
//! session needs to go on unnoticed by the other side: its nonce and tokens,
//! the packet numbers in both directions and the receive window. The peer's
//! id and address stay, so nothing above (the message layer's per-peer
//! state, the FFI's address cache) ever sees an id change meaning.

use core::time::Duration;

use super::peer::Peer;
use super::tx::Slot;
use super::Srd;
use crate::time::Instant;

impl Peer {
    /// Bytes this peer holds now (the struct and what it allocated).
    pub(crate) fn memory(&self) -> usize {
        let paths: usize = self
            .paths
            .paths
            .iter()
            .map(|p| p.outstanding.capacity() * core::mem::size_of::<(u32, u64)>())
            .sum();
        core::mem::size_of::<Peer>()
            + self.tx.ring_capacity() * core::mem::size_of::<Slot>()
            + self.tx.retx.capacity() * 4
            + self.recovery.hedged.capacity() * 4
            + self.paths.paths.capacity() * core::mem::size_of::<super::path::Path>()
            + paths
            + self.paths.summary_memory()
            + self.rails_memory()
    }

    /// Does this peer hold state it could give back at `now`: nothing
    /// queued, in flight, owed or armed, no handshake under way, no traffic
    /// for `quiet`?
    fn idle_for(&self, now: Instant, quiet: Duration) -> bool {
        !self.reclaimed
            && self.hs.is_none()
            && self.quiescent()
            && now.saturating_since(self.last_active) >= quiet
    }

    /// Give back the send ring, the retransmission queues and the path
    /// records (each path's RTT and health stay, see `PathSet::compact`).
    /// Nothing is queued or in flight, so no slot or path record is in use.
    fn trim(&mut self) {
        self.tx.shrink();
        self.recovery.hedged = Vec::new();
        self.paths.compact();
        self.trimmed = true;
    }
}

impl Srd {
    /// Reclaim the idle peers (see `Config::peer_idle_timeout`) and trim the
    /// quiet ones (`Config::peer_trim_after`); runs from `handle_timeout`,
    /// `handle_datagram` or `poll_transmit` once a quarter of the trim time
    /// (of the idle timeout once every peer is trimmed) has passed, while
    /// some peer holds state worth giving back (traffic with any other peer
    /// brings it round).
    pub(crate) fn sweep(&mut self, now: Instant) {
        let idle = Duration::from_nanos(self.idle_ns);
        let quiet = Duration::from_nanos(self.trim_ns);
        let (mut busy, mut untrimmed) = (false, false);
        for i in 0..self.peers.len() {
            let reclaim = self.peers[i].idle_for(now, idle);
            if !reclaim && !self.peers[i].trimmed && self.peers[i].idle_for(now, quiet) {
                self.peers[i].trim();
                self.stats.peers_trimmed += 1;
            }
            if reclaim {
                let old = &self.peers[i];
                let mut fresh = Peer::new(old.id, old.addr, &self.p);
                fresh.establish(old.remote_nonce, old.token, old.own_cookie);
                fresh.retired_nonces = old.retired_nonces;
                fresh.last_verify = old.last_verify;
                fresh.probe_no = old.probe_no;
                // Packet numbers go on: everything below was acked or failed,
                // and the peer's receive window expects what follows.
                let next = old.tx.next_psn;
                fresh.tx.una = next;
                fresh.tx.next_send = next;
                fresh.tx.next_psn = next;
                fresh.last_active = old.last_active;
                // Still on `senders` until `update_credit` takes it off.
                fresh.rx_listed = old.rx_listed;
                let mut old = core::mem::replace(&mut self.peers[i], fresh);
                self.peers[i].keys = old.keys.take();
                self.peers[i].adopt_rails(&self.p, old.rails.take());
                // The receive window (no heap) keeps its place, so a late
                // duplicate is still recognised.
                self.peers[i].rx = old.rx;
                self.peers[i].rx.unacked = 0;
                self.peers[i].rx.ack_now = false;
                // No path records until it is used again (`PathSet::ensure`).
                self.peers[i].paths.release();
                self.stats.peers_reclaimed += 1;
            }
            let p = &self.peers[i];
            busy |= !p.reclaimed;
            untrimmed |= !p.reclaimed && !p.trimmed;
        }
        // Every quarter of the trim time while a peer may still trim, else
        // of the idle timeout (a sweep walks every peer).
        self.next_sweep = if untrimmed {
            Some(now + quiet / 4)
        } else {
            busy.then(|| now + idle / 4)
        };
        self.sweep_soon = untrimmed;
    }

    /// A peer was used since the last sweep: arm the sweep at the trim pace
    /// unless it is (once per change of pace, not per packet).
    pub(crate) fn arm_sweep(&mut self, now: Instant) {
        if self.sweep_wanted && !self.sweep_soon {
            let at = now + Duration::from_nanos(self.trim_ns.min(self.idle_ns) / 4);
            if self.next_sweep.is_none_or(|t| t > at) {
                self.next_sweep = Some(at);
            }
            self.sweep_soon = true;
        }
        self.sweep_wanted = false;
    }

    /// Bytes the peer table holds now (peers and what they allocated), for
    /// tests and statistics.
    pub fn peer_memory(&self) -> usize {
        self.peers.capacity() * core::mem::size_of::<Peer>()
            - self.peers.len() * core::mem::size_of::<Peer>()
            + self.peers.iter().map(Peer::memory).sum::<usize>()
            + self.by_addr.capacity()
                * (core::mem::size_of::<core::net::SocketAddr>()
                    + core::mem::size_of::<crate::dgram::PeerId>())
            + (self.active.capacity() + self.active_words.capacity()) * 8
    }
}
