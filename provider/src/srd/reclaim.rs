//! Bounded peer memory: idle peers give their per-peer state back (the send
//! ring, path queues, congestion and RTT history) while keeping what the
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
            + self.tx.slots.capacity() * core::mem::size_of::<Slot>()
            + self.tx.retx.capacity() * 4
            + self.recovery.hedged.capacity() * 4
            + self.paths.paths.capacity() * core::mem::size_of::<super::path::Path>()
            + paths
            + self.rails_memory()
    }

    /// Could this peer give its state back at `now`: nothing queued, in
    /// flight, owed or armed, no handshake under way, no traffic for `idle`.
    fn reclaimable(&self, now: Instant, idle: Duration) -> bool {
        !self.reclaimed
            && self.hs.is_none()
            && self.quiescent()
            && now.saturating_since(self.last_active) >= idle
    }
}

impl Srd {
    /// Reclaim the idle peers (see `Config::peer_idle_timeout`); runs from
    /// `handle_timeout`, `handle_datagram` or `poll_transmit` once a quarter
    /// of the idle timeout has passed, while some peer holds state worth
    /// reclaiming (traffic with any other peer brings it round).
    pub(crate) fn sweep(&mut self, now: Instant) {
        let idle = Duration::from_nanos(self.idle_ns);
        let mut busy = false;
        for i in 0..self.peers.len() {
            if self.peers[i].reclaimable(now, idle) {
                let old = &self.peers[i];
                let mut fresh = Peer::new(old.id, old.addr, &self.p);
                fresh.establish(old.remote_nonce, old.token, old.own_cookie);
                fresh.retired_nonces = old.retired_nonces;
                fresh.keys = old.keys;
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
            busy |= !self.peers[i].reclaimed;
        }
        self.next_sweep = busy.then(|| now + idle / 4);
    }

    /// A peer was used since the last sweep: arm the sweep if it is not.
    pub(crate) fn arm_sweep(&mut self, now: Instant) {
        if self.sweep_wanted && self.next_sweep.is_none() {
            self.next_sweep = Some(now + Duration::from_nanos(self.idle_ns / 4));
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
