//! A deterministic discrete-event network simulator (seeded) that runs real
//! engines over paths with delay, jitter, bandwidth, buffers, loss,
//! duplication and corruption.
//!
//! Hosts are `Node`s at addresses `10.0.0.i:5000`. Between each ordered pair
//! of hosts there are K path links (a `Transmit.path` maps to link
//! `path % K`, or as `Sim::path_links` says); a host may also have a shared bottleneck link in front of it
//! (incast). Everything random comes from one `Rng` seeded by the test, so a
//! failing run is replayed from its seed.
//!
//! A host may have rails (`Sim::set_rails`: NICs, each with its own address
//! `rail_addr(i, r)`): a packet leaves from the address of the rail its
//! `Transmit.path` names and crosses the link of the rail its destination
//! address belongs to (each rail its own network, as two NICs on two
//! subnets).

pub mod check;
pub mod forge;
pub mod gro;
mod link;
mod node;

pub use link::{Event, EventKind, Link, LinkSpec, LinkStats};
pub use node::{Arrived, Node, SrdNode};

use core::cmp::Ordering;
use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::collections::{BinaryHeap, HashMap};

use crate::rng::Rng;
use crate::time::Instant;

/// Main UDP port of every simulated host (path `i` sends from `PORT + i`).
pub const PORT: u16 = 5000;

/// Address of host `i`.
pub fn addr(i: usize) -> SocketAddr {
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(10, 0, (i >> 8) as u8, i as u8)),
        PORT,
    )
}

/// Address of rail `r` of host `i` (rail 0 is `addr(i)`).
pub fn rail_addr(i: usize, r: usize) -> SocketAddr {
    if r == 0 {
        return addr(i);
    }
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(10, 100 + r as u8, (i >> 8) as u8, i as u8)),
        PORT,
    )
}

#[derive(Debug)]
struct Pending {
    at: Instant,
    seq: u64,
    to: usize,
    from: SocketAddr,
    /// Still has to cross the destination's bottleneck.
    via_bottleneck: bool,
    data: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    // Min-heap on (time, seq).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// The simulated network and its hosts.
pub struct Sim<N: Node> {
    /// Current time.
    pub now: Instant,
    /// Randomness for every link.
    pub rng: Rng,
    /// The hosts.
    pub nodes: Vec<N>,
    /// Hosts that are down (receive nothing, send nothing, run no timers).
    pub down: Vec<bool>,
    /// Path links per (from, to) host pair.
    pub links: HashMap<(usize, usize), Vec<Link>>,
    /// Path specs used for pairs not set explicitly.
    pub default_paths: Vec<LinkSpec>,
    /// Which link each path (entropy value) hashes onto, like an ECMP
    /// switch's hash of the source port: path `p` takes link
    /// `path_links[p % len] % K`. Empty (the default): link `p % K`.
    pub path_links: Vec<usize>,
    /// Optional shared bottleneck in front of each host.
    pub bottleneck: Vec<Option<Link>>,
    /// Packets sent to an address no host has.
    pub unroutable: u64,
    /// Datagrams delivered to hosts, total.
    pub delivered: u64,
    /// Rails per host (`set_rails`; 0 or 1 = one address).
    pub rails: Vec<usize>,
    /// Paths per rail of the hosts with rails (their `Config::paths`).
    pub rail_paths: u8,
    queue: BinaryHeap<Pending>,
    seq: u64,
    by_addr: HashMap<SocketAddr, usize>,
    buf: Vec<u8>,
}

impl<N: Node> Sim<N> {
    /// A network of `nodes` (host i at `addr(i)`), paths `default_paths`
    /// between every pair, randomness from `seed`.
    pub fn new(seed: u64, nodes: Vec<N>, default_paths: Vec<LinkSpec>) -> Self {
        let n = nodes.len();
        Sim {
            now: Instant::ZERO,
            rng: Rng::new(seed),
            down: vec![false; n],
            bottleneck: (0..n).map(|_| None).collect(),
            by_addr: (0..n).map(|i| (addr(i), i)).collect(),
            nodes,
            links: HashMap::new(),
            default_paths,
            path_links: Vec::new(),
            unroutable: 0,
            delivered: 0,
            rails: vec![0; n],
            rail_paths: 1,
            queue: BinaryHeap::new(),
            seq: 0,
            buf: vec![0u8; 1 << 16],
        }
    }

    /// The path links from host `a` to host `b` (created from the defaults).
    pub fn paths_mut(&mut self, a: usize, b: usize) -> &mut Vec<Link> {
        let d = &self.default_paths;
        self.links
            .entry((a, b))
            .or_insert_with(|| d.iter().cloned().map(Link::new).collect())
    }

    /// Give host `i` `rails` rails (`rail_addr(i, r)`), each sending
    /// `paths_per_rail` paths (the host's `Config::paths`). Between two hosts
    /// with rails, set one link per rail (or a multiple: `E` links per rail,
    /// rail `r`'s being `r * E..`) with `paths_mut`.
    pub fn set_rails(&mut self, i: usize, rails: usize, paths_per_rail: u8) {
        self.rails[i] = rails;
        self.rail_paths = paths_per_rail.max(1);
        for r in 1..rails {
            self.by_addr.insert(rail_addr(i, r), i);
        }
    }

    /// Arrival time of the next packet in the network.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.queue.peek().map(|p| p.at)
    }

    /// Packets in the network.
    pub fn in_network(&self) -> usize {
        self.queue.len()
    }

    fn route(&mut self, src: usize, t: crate::srd::Transmit) {
        let Some(&dst) = self.by_addr.get(&t.dst) else {
            self.unroutable += 1;
            return;
        };
        let k = usize::from(self.rail_paths.max(1));
        let src_rail = if self.rails[src] > 1 {
            (usize::from(t.path) / k).min(self.rails[src] - 1)
        } else {
            0
        };
        let from = SocketAddr::new(
            rail_addr(src, src_rail).ip(),
            PORT.wrapping_add(u16::from(t.path)),
        );
        let dst_rails = self.rails[dst];
        let dst_rail = (1..dst_rails)
            .find(|&r| rail_addr(dst, r) == t.dst)
            .unwrap_or(0);
        let now = self.now;
        let len = t.len;
        let data = self.buf[..len].to_vec();
        let d = &self.default_paths;
        let links = self
            .links
            .entry((src, dst))
            .or_insert_with(|| d.iter().cloned().map(Link::new).collect());
        if links.is_empty() {
            self.unroutable += 1;
            return;
        }
        let p = usize::from(t.path);
        let k = if dst_rails > 1 {
            // The destination rail's network; within it, by entropy value.
            let per = (links.len() / dst_rails).max(1);
            (dst_rail * per + (p % k) % per) % links.len()
        } else {
            (match self.path_links.len() {
                0 => p,
                n => self.path_links[p % n],
            }) % links.len()
        };
        let arrivals = links[k].offer(&mut self.rng, now, len);
        let via = self.bottleneck[dst].is_some();
        for at in arrivals.into_iter().flatten() {
            self.seq += 1;
            self.queue.push(Pending {
                at,
                seq: self.seq,
                to: dst,
                from,
                via_bottleneck: via,
                data: data.clone(),
            });
        }
    }

    /// Drain every host's transmissions at the current time.
    fn flush(&mut self) {
        for i in 0..self.nodes.len() {
            if self.down[i] {
                continue;
            }
            // Bounded so a runaway sender cannot hang the test.
            for _ in 0..100_000 {
                let mut buf = core::mem::take(&mut self.buf);
                let t = self.nodes[i].poll_transmit(self.now, &mut buf);
                self.buf = buf;
                match t {
                    Some(t) => self.route(i, t),
                    None => break,
                }
            }
        }
    }

    /// One step: send what is ready, advance to the next event (not past
    /// `limit`) and process it. Returns false when nothing is left to do
    /// before `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        self.flush();
        let mut next = self.queue.peek().map(|p| p.at);
        for (i, n) in self.nodes.iter().enumerate() {
            if self.down[i] {
                continue;
            }
            if let Some(t) = n.poll_timeout() {
                next = Some(next.map_or(t, |x: Instant| x.min(t)));
            }
        }
        let Some(next) = next else { return false };
        if next > limit {
            self.now = limit;
            return false;
        }
        self.now = self.now.max(next);
        while self.queue.peek().is_some_and(|p| p.at <= self.now) {
            let Some(p) = self.queue.pop() else { break };
            if p.via_bottleneck {
                let now = self.now;
                if let Some(b) = self.bottleneck[p.to].as_mut() {
                    for at in b
                        .offer(&mut self.rng, now, p.data.len())
                        .into_iter()
                        .flatten()
                    {
                        self.seq += 1;
                        let seq = self.seq;
                        self.queue.push(Pending {
                            at,
                            seq,
                            via_bottleneck: false,
                            data: p.data.clone(),
                            ..p
                        });
                    }
                }
                continue;
            }
            if self.down[p.to] {
                continue;
            }
            self.delivered += 1;
            self.nodes[p.to].handle_datagram(self.now, p.from, &p.data);
        }
        for i in 0..self.nodes.len() {
            if !self.down[i] && self.nodes[i].poll_timeout().is_some_and(|t| t <= self.now) {
                self.nodes[i].handle_timeout(self.now);
            }
        }
        true
    }

    /// Run until `done` holds (checked after each step) or `limit`; true if `done`.
    /// Panics after an absurd number of steps at one instant (a livelock).
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&Self) -> bool) -> bool {
        let mut same = 0u32;
        let mut last = self.now;
        loop {
            if done(self) {
                return true;
            }
            if !self.step(limit) {
                return done(self);
            }
            if self.now == last {
                same += 1;
                assert!(same < 1_000_000, "simulation livelock at {:?}", self.now);
            } else {
                same = 0;
                last = self.now;
            }
        }
    }
}
