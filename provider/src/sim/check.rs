//! Helpers for tests over `SrdNode`s: configs, self-checking payloads, and
//! the exactly-once invariant check.

use core::net::SocketAddr;
use core::time::Duration;
use std::collections::HashMap;

use super::node::SrdNode;
use super::{addr, LinkSpec, Sim};
use crate::config::{Config, EpMode};
use crate::dgram::DgramEvent;

/// The config of simulated host `i` with `paths` paths and incarnation
/// nonce `nonce` (a restarted host needs another one).
pub fn config(i: usize, paths: u8, nonce: u64) -> Config {
    let mut c = Config::new(EpMode::Dgram, addr(i));
    c.paths = paths;
    c.nonce = nonce;
    c.seed = 0x5eed ^ i as u64;
    c
}

/// Hosts 0 and 1 (`paths` paths each) over `links` links of `bandwidth`
/// bytes/s with `buffer` bytes of queue, `delay` one way (5 us of jitter),
/// link 0 10x slower if `slow` (an ECMP fabric with one bad link, path `p`
/// on link `p % links`); and the other links' bandwidth in all, bytes/s
/// (the ideal's).
pub fn slow_link_pair(
    seed: u64,
    paths: u8,
    links: usize,
    (delay, bandwidth, buffer): (Duration, u64, u64),
    slow: bool,
) -> (Sim<SrdNode>, u64) {
    let (c0, c1) = (config(0, paths, 10), config(1, paths, 20));
    let mut spec = LinkSpec::ideal(delay);
    spec.bandwidth = bandwidth;
    spec.buffer = buffer;
    spec.jitter = Duration::from_micros(5);
    let mut specs = vec![spec; links];
    if slow {
        specs[0].bandwidth /= 10;
    }
    let good = specs
        .iter()
        .skip(usize::from(slow))
        .map(|s| s.bandwidth)
        .sum();
    let nodes = vec![SrdNode::new(&c0), SrdNode::new(&c1)];
    (Sim::new(seed, nodes, specs), good)
}

/// A payload of `len` bytes (at least 8) that encodes `token`, so the
/// receiver can check both identity and content.
pub fn payload(token: u64, len: usize) -> Vec<u8> {
    let len = len.max(8);
    // A token-dependent fill plus the token at both ends: cheap to build and
    // compare (memset / memcmp), and a payload of one token is never
    // mistaken for another's.
    let mut v = vec![(token as u8).wrapping_mul(31).wrapping_add(len as u8); len];
    v[..8].copy_from_slice(&token.to_le_bytes());
    if len >= 16 {
        v[len - 8..].copy_from_slice(&token.to_le_bytes());
    }
    v
}

/// The token a payload made by `payload` encodes, if its content is intact.
pub fn token_of(data: &[u8]) -> Option<u64> {
    let t = u64::from_le_bytes(data.get(..8)?.try_into().ok()?);
    (payload(t, data.len()) == data).then_some(t)
}

/// What happened to the datagrams `from` sent to `to`.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Tokens pushed.
    pub pushed: u64,
    /// Delivered (distinct tokens).
    pub delivered: u64,
    /// Acked at the sender.
    pub acked: u64,
    /// Failed at the sender.
    pub failed: u64,
    /// Neither acked nor failed yet.
    pub pending: u64,
}

/// Check exactly-once between sender host `from` and receiver host `to` for
/// tokens `0..n`: no duplicate or corrupt delivery, every acked token
/// delivered, each token acked or failed at most once. `Err` describes the
/// first violation.
pub fn check_pair(sim: &Sim<SrdNode>, from: usize, to: usize, n: u64) -> Result<Outcome, String> {
    let src: SocketAddr = addr(from);
    let rx = &sim.nodes[to];
    let tx = &sim.nodes[from];
    let Some(rx_peer) = rx.srd.peer_addr_id(src) else {
        return Ok(Outcome {
            pushed: n,
            pending: n,
            ..Outcome::default()
        });
    };
    let mut seen: HashMap<u64, u32> = HashMap::new();
    for a in rx.arrived.iter().filter(|a| a.peer == rx_peer) {
        let t = token_of(&a.data)
            .ok_or_else(|| format!("corrupt payload of {} bytes", a.data.len()))?;
        let c = seen.entry(t).or_insert(0);
        *c += 1;
        if *c > 1 {
            return Err(format!("token {t} delivered twice"));
        }
        if t >= n {
            return Err(format!("unknown token {t}"));
        }
    }
    let mut fate: HashMap<u64, u8> = HashMap::new();
    for (_, e) in &tx.events {
        let (t, k) = match *e {
            DgramEvent::Acked {
                token, count: 1, ..
            } => (token, 1),
            DgramEvent::Acked { token, count, .. } => {
                return Err(format!("token {token} acked {count} times"))
            }
            DgramEvent::Failed { token, .. } => (token, 2),
            DgramEvent::PeerRestarted { .. } => continue,
        };
        if fate.insert(t, k).is_some() {
            return Err(format!("token {t} reported twice"));
        }
        if k == 1 && !seen.contains_key(&t) {
            return Err(format!("token {t} acked but never delivered"));
        }
    }
    let acked = fate.values().filter(|&&k| k == 1).count() as u64;
    let failed = fate.values().filter(|&&k| k == 2).count() as u64;
    Ok(Outcome {
        pushed: n,
        delivered: seen.len() as u64,
        acked,
        failed,
        pending: n - acked - failed,
    })
}

/// Print one row of the scenario table (`scripts/sim-scenarios.sh` collects
/// every `SCENARIO|` line from the tests into a markdown table).
pub fn row(scenario: &str, measured: &str, bar: &str, ok: bool) {
    println!(
        "SCENARIO|{scenario}|{measured}|{bar}|{}",
        if ok { "pass" } else { "FAIL" }
    );
}
