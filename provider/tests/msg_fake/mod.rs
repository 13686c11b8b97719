//! An in-memory fake of the SRD datagram service for message-layer tests: reliable,
//! exactly-once, delivered in a seeded random order, bounded in flight per link, with
//! acks, failures and peer restarts on demand.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};

use spray::config::{Config, EpMode};
use spray::dgram::{Datagrams, DgramEvent, FailReason, PeerId, SendError};
use spray::msg::{CompKind, Completion, MsgLayer, RecvFlags, RecvOp, SendOp};
use spray::rng::Rng;

/// One datagram in flight.
pub struct Pkt {
    pub from: u32,
    pub to: u32,
    pub token: u64,
    pub data: Vec<u8>,
}

/// The network shared by all nodes.
pub struct Net {
    pub rng: Rng,
    pub inflight: Vec<Pkt>,
    /// Most datagrams in flight per (from, to) link.
    pub cap: usize,
    pub counts: HashMap<(u32, u32), usize>,
    /// Per-link overrides of `cap`.
    pub link_cap: HashMap<(u32, u32), usize>,
    pub max_payload: usize,
    /// Reports not yet delivered: (node, event).
    pub events: Vec<(u32, DgramEvent)>,
    /// Links whose datagrams fail back instead of arriving.
    pub dead: HashSet<(u32, u32)>,
    pub delivered: u64,
    pub would_block: u64,
}

/// The `Datagrams` view of one node.
pub struct Port<'a> {
    pub net: &'a mut Net,
    pub me: u32,
}

impl Datagrams for Port<'_> {
    fn max_payload(&self) -> usize {
        self.net.max_payload
    }
    fn can_send(&self, peer: PeerId) -> bool {
        let link = (self.me, peer.0);
        let cap = self
            .net
            .link_cap
            .get(&link)
            .copied()
            .unwrap_or(self.net.cap);
        self.net.counts.get(&link).copied().unwrap_or(0) < cap
    }
    fn send(
        &mut self,
        peer: PeerId,
        token: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), SendError> {
        if len > self.net.max_payload {
            return Err(SendError::TooLarge);
        }
        if !self.can_send(peer) {
            self.net.would_block += 1;
            return Err(SendError::WouldBlock);
        }
        let mut data = vec![0u8; len];
        fill(&mut data);
        if self.net.dead.contains(&(self.me, peer.0)) {
            let ev = DgramEvent::Failed {
                peer,
                token,
                reason: FailReason::Unreachable,
            };
            self.net.events.push((self.me, ev));
            return Ok(());
        }
        *self.net.counts.entry((self.me, peer.0)).or_insert(0) += 1;
        self.net.inflight.push(Pkt {
            from: self.me,
            to: peer.0,
            token,
            data,
        });
        Ok(())
    }
}

pub type Comp = Completion<Vec<u8>>;

/// Several message layers joined by the fake network; node `i` is `PeerId(i)` to the others.
pub struct Cluster {
    pub net: Net,
    pub cfg: Config,
    pub nodes: Vec<MsgLayer<Vec<u8>>>,
    pub comps: Vec<Vec<Comp>>,
}

pub fn cfg(mode: EpMode) -> Config {
    let mut c = Config::new(mode, "127.0.0.1:1".parse().unwrap());
    c.eager_limit = 16 << 10;
    c.max_unexpected_bytes = 4 << 20;
    c
}

impl Cluster {
    pub fn new(n: usize, cfg: Config, seed: u64) -> Self {
        Cluster {
            net: Net {
                rng: Rng::new(seed),
                inflight: Vec::new(),
                cap: 16,
                counts: HashMap::new(),
                link_cap: HashMap::new(),
                max_payload: 1400,
                events: Vec::new(),
                dead: HashSet::new(),
                delivered: 0,
                would_block: 0,
            },
            nodes: (0..n).map(|_| MsgLayer::new(&cfg)).collect(),
            comps: (0..n).map(|_| Vec::new()).collect(),
            cfg,
        }
    }

    pub fn pump(&mut self, i: usize) {
        let mut port = Port {
            net: &mut self.net,
            me: i as u32,
        };
        self.nodes[i].pump(&mut port);
        while let Some(c) = self.nodes[i].poll_completion() {
            self.comps[i].push(c);
        }
    }

    pub fn pump_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.pump(i);
        }
    }

    /// Deliver one random datagram or report. False when nothing is in flight.
    pub fn step(&mut self) -> bool {
        let (np, ne) = (self.net.inflight.len(), self.net.events.len());
        if np + ne == 0 {
            return false;
        }
        let pick = self.net.rng.below((np + ne) as u64) as usize;
        if pick < np {
            let p = self.net.inflight.swap_remove(pick);
            if let Some(c) = self.net.counts.get_mut(&(p.from, p.to)) {
                *c -= 1;
            }
            self.net.delivered += 1;
            self.nodes[p.to as usize].handle_payload(PeerId(p.from), &p.data);
            let ev = DgramEvent::Acked {
                peer: PeerId(p.to),
                token: p.token,
                count: 1,
            };
            self.net.events.push((p.from, ev));
            self.pump(p.to as usize);
            self.pump(p.from as usize);
        } else {
            let (node, ev) = self.net.events.swap_remove(pick - np);
            self.nodes[node as usize].handle_event(ev);
            self.pump(node as usize);
        }
        true
    }

    /// Run until quiet (nothing in flight, nothing queued); false if `max_steps` ran out.
    pub fn run(&mut self, max_steps: usize) -> bool {
        self.pump_all();
        for _ in 0..max_steps {
            if !self.step() {
                self.pump_all();
                if self.net.inflight.is_empty()
                    && self.net.events.is_empty()
                    && self.nodes.iter().all(|n| !n.has_pending_sends())
                {
                    return true;
                }
            }
        }
        false
    }

    /// Node `j` restarts: a fresh layer, its in-flight traffic gone, the others told.
    pub fn restart(&mut self, j: usize) {
        self.nodes[j] = MsgLayer::new(&self.cfg);
        self.comps[j].clear();
        let jj = j as u32;
        let mut kept = Vec::new();
        for p in self.net.inflight.drain(..) {
            if p.to == jj {
                let ev = DgramEvent::Failed {
                    peer: PeerId(jj),
                    token: p.token,
                    reason: FailReason::PeerRestarted,
                };
                self.net.events.push((p.from, ev));
            } else if p.from != jj {
                kept.push(p);
            }
        }
        self.net.inflight = kept;
        self.net.counts.retain(|&(f, t), _| f != jj && t != jj);
        self.net.events.retain(|&(n, _)| n != jj);
        for i in 0..self.nodes.len() {
            if i != j {
                self.nodes[i].handle_event(DgramEvent::PeerRestarted { peer: PeerId(jj) });
                self.pump(i);
            }
        }
    }

    /// Make the link between `a` and `b` fail every datagram (both directions).
    pub fn kill_link(&mut self, a: u32, b: u32) {
        self.net.dead.insert((a, b));
        self.net.dead.insert((b, a));
        let mut kept = Vec::new();
        for p in self.net.inflight.drain(..) {
            if (p.from, p.to) == (a, b) || (p.from, p.to) == (b, a) {
                let ev = DgramEvent::Failed {
                    peer: PeerId(p.to),
                    token: p.token,
                    reason: FailReason::Unreachable,
                };
                self.net.events.push((p.from, ev));
            } else {
                kept.push(p);
            }
        }
        self.net.inflight = kept;
        self.net
            .counts
            .retain(|&(f, t), _| !((f, t) == (a, b) || (f, t) == (b, a)));
    }

    /// Fail back (as unreachable) every in-flight datagram for which `pred` holds;
    /// the link itself stays up.
    pub fn fail_where(&mut self, mut pred: impl FnMut(&Pkt) -> bool) -> usize {
        let mut kept = Vec::new();
        let mut failed = 0;
        for p in self.net.inflight.drain(..) {
            if pred(&p) {
                failed += 1;
                if let Some(c) = self.net.counts.get_mut(&(p.from, p.to)) {
                    *c -= 1;
                }
                let ev = DgramEvent::Failed {
                    peer: PeerId(p.to),
                    token: p.token,
                    reason: FailReason::Unreachable,
                };
                self.net.events.push((p.from, ev));
            } else {
                kept.push(p);
            }
        }
        self.net.inflight = kept;
        failed
    }

    pub fn send(&mut self, from: usize, to: usize, op: SendOp<Vec<u8>>) {
        assert_eq!(op.peer, PeerId(to as u32));
        self.nodes[from].post_send(op).expect("post_send");
        self.pump(from);
    }

    pub fn recv(&mut self, at: usize, op: RecvOp<Vec<u8>>) {
        self.nodes[at].post_recv(op).expect("post_recv");
        self.pump(at);
    }

    /// Take node `i`'s completions of `kind`.
    pub fn take(&mut self, i: usize, kind: CompKind) -> Vec<Comp> {
        let (want, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.comps[i])
            .into_iter()
            .partition(|c| c.kind == kind);
        self.comps[i] = rest;
        want
    }
}

/// Deterministic test bytes of message `id`.
pub fn pattern(id: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (id.wrapping_mul(131) as usize + i * 7 + (i >> 9)) as u8)
        .collect()
}

pub fn sop(to: usize, buf: Vec<u8>, tag: Option<u64>, context: u64) -> SendOp<Vec<u8>> {
    SendOp {
        peer: PeerId(to as u32),
        buf,
        tag,
        data: None,
        context,
        report: true,
        delivery_complete: false,
        lazy: false,
    }
}

pub fn rop(
    len: usize,
    tag: Option<(u64, u64)>,
    src: Option<usize>,
    context: u64,
) -> RecvOp<Vec<u8>> {
    RecvOp {
        src: src.map(|s| PeerId(s as u32)),
        buf: vec![0xEE; len],
        tag,
        context,
        flags: RecvFlags::default(),
        report: true,
    }
}
