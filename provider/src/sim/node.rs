//! The sans-IO endpoint interface the simulator drives, and an `Srd`-backed
//! node with a tiny application (an outbox of datagrams, a record of what
//! arrived and of every ack / failure).

use core::net::SocketAddr;
use std::collections::VecDeque;

use crate::config::Config;
use crate::dgram::{Datagrams, DgramEvent, PeerId};
use crate::srd::{Srd, Transmit};
use crate::time::Instant;

/// What the simulator needs from an endpoint (the `Srd` core today, the full
/// `Engine` later): quinn-style `handle_*` / `poll_*`.
pub trait Node {
    /// A datagram arrived from `from` (source IP and UDP source port).
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]);
    /// Timers due at `now`.
    fn handle_timeout(&mut self, now: Instant);
    /// Next datagram to send, written into `buf`.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit>;
    /// Next timer deadline.
    fn poll_timeout(&self) -> Option<Instant>;
}

/// A datagram that arrived at an `SrdNode`.
#[derive(Clone, Debug)]
pub struct Arrived {
    /// From which peer.
    pub peer: PeerId,
    /// When.
    pub at: Instant,
    /// Payload.
    pub data: Vec<u8>,
}

/// An `Srd` plus a minimal application around it.
pub struct SrdNode {
    /// The core.
    pub srd: Srd,
    /// Datagrams waiting for `can_send`: (peer address, token, payload).
    pub outbox: VecDeque<(SocketAddr, u64, Vec<u8>)>,
    /// Everything delivered up.
    pub arrived: Vec<Arrived>,
    /// Every event, with its time.
    pub events: Vec<(Instant, DgramEvent)>,
    /// Datagrams handed to `send`.
    pub sent: u64,
}

impl SrdNode {
    /// A node running `Srd::new(cfg)`.
    pub fn new(cfg: &Config) -> Self {
        SrdNode {
            srd: Srd::new(cfg),
            outbox: VecDeque::new(),
            arrived: Vec::new(),
            events: Vec::new(),
            sent: 0,
        }
    }

    /// Queue a datagram for `to` (sent as the window allows).
    pub fn push(&mut self, to: SocketAddr, token: u64, data: Vec<u8>) {
        self.outbox.push_back((to, token, data));
    }

    /// Hand queued datagrams to the core as its queue allows (each step
    /// does; a test may too, to look at the core before anything is sent).
    pub fn pump(&mut self, now: Instant) {
        while let Some((to, token, data)) = self.outbox.front() {
            let peer = self.srd.peer(*to);
            if !self.srd.can_send(peer) {
                self.srd.set_backlog(peer, true);
                break;
            }
            let token = *token;
            let r = self
                .srd
                .send(peer, token, data.len(), &mut |b| b.copy_from_slice(data));
            if r.is_err() {
                break;
            }
            self.sent += 1;
            self.outbox.pop_front();
            if self
                .outbox
                .front()
                .is_none_or(|(a, _, _)| self.srd.peer(*a) != peer)
            {
                self.srd.set_backlog(peer, false);
            }
        }
        while let Some(ev) = self.srd.poll_event() {
            self.events.push((now, ev));
        }
    }

    /// Acked tokens so far (a token as many times as datagrams with it).
    pub fn acked(&self) -> impl Iterator<Item = u64> + '_ {
        self.events.iter().flat_map(|(_, e)| {
            let (token, count) = match *e {
                DgramEvent::Acked { token, count, .. } => (token, count as usize),
                _ => (0, 0),
            };
            core::iter::repeat_n(token, count)
        })
    }

    /// Failed tokens so far.
    pub fn failed(&self) -> impl Iterator<Item = u64> + '_ {
        self.events.iter().filter_map(|(_, e)| match e {
            DgramEvent::Failed { token, .. } => Some(*token),
            _ => None,
        })
    }
}

impl Node for SrdNode {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        if let Some((peer, payload)) = self.srd.handle_datagram(now, from, data) {
            self.arrived.push(Arrived {
                peer,
                at: now,
                data: payload.to_vec(),
            });
        }
        self.pump(now);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.srd.handle_timeout(now);
        self.pump(now);
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.pump(now);
        let t = self.srd.poll_transmit(now, buf);
        self.pump(now);
        t
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.srd.poll_timeout()
    }
}
