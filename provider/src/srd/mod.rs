//! The SRD core: per-peer reliable, exactly-once, unordered datagrams sprayed
//! over many paths (UDP source ports), with selective acknowledgement, loss
//! recovery on another path, path health, BBR-like congestion control and
//! receiver credits. Sans-IO: `handle_*` in, `poll_*` out.

use core::net::SocketAddr;

use crate::config::Config;
use crate::dgram::{Datagrams, DgramEvent, PeerId, SendError};
use crate::time::Instant;

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
pub struct SrdStats {}

/// One endpoint's SRD state: all its peers.
pub struct Srd {}

impl Srd {
    /// A core for the endpoint described by `cfg`.
    pub fn new(cfg: &Config) -> Self {
        let _ = cfg;
        unimplemented!("srd worktree")
    }

    /// The peer at `addr` (its main IP and port), created if new.
    pub fn peer(&mut self, addr: SocketAddr) -> PeerId {
        let _ = addr;
        unimplemented!("srd worktree")
    }

    /// The main address of `peer`.
    pub fn peer_addr(&self, peer: PeerId) -> Option<SocketAddr> {
        let _ = peer;
        unimplemented!("srd worktree")
    }

    /// A UDP datagram arrived from `from` (source IP and port). Returns the
    /// payload to deliver, if this packet carries new data.
    pub fn handle_datagram<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a [u8],
    ) -> Option<(PeerId, &'a [u8])> {
        let _ = (now, from, data);
        unimplemented!("srd worktree")
    }

    /// Run the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
        unimplemented!("srd worktree")
    }

    /// The next packet to put on the wire, written into `buf`
    /// (`buf.len() >= cfg.max_datagram`), or `None` (nothing to send, or paced).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let _ = (now, buf);
        unimplemented!("srd worktree")
    }

    /// When `handle_timeout` must next be called (includes pacing release times).
    pub fn poll_timeout(&self) -> Option<Instant> {
        unimplemented!("srd worktree")
    }

    /// The next acknowledgement / failure / restart report.
    pub fn poll_event(&mut self) -> Option<DgramEvent> {
        unimplemented!("srd worktree")
    }

    /// Counters.
    pub fn stats(&self) -> &SrdStats {
        unimplemented!("srd worktree")
    }
}

impl Datagrams for Srd {
    fn max_payload(&self) -> usize {
        unimplemented!("srd worktree")
    }
    fn can_send(&self, peer: PeerId) -> bool {
        let _ = peer;
        unimplemented!("srd worktree")
    }
    fn send(
        &mut self,
        peer: PeerId,
        token: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), SendError> {
        let _ = (peer, token, len, fill);
        unimplemented!("srd worktree")
    }
}
