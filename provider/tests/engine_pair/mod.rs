//! Helpers for two engines in the simulator exchanging tagged messages
//! (`engine_flowlet_floor.rs`, `engine_flowlet_tail.rs`,
//! `engine_timer_burst.rs`; each test uses some of them).
#![allow(dead_code)]

use core::time::Duration;

use spray::msg::{RecvFlags, RecvOp, SendOp};
use spray::sim::{addr, LinkSpec, Sim};
use spray::{Config, Engine, EpMode, PeerId};

pub type Node = Engine<Vec<u8>>;

/// Two nodes (8 paths each, 1472-byte datagrams) over 4 ideal links of 20 us;
/// `nonce` and `seed` tell one test's nodes and network from another's.
pub fn net(nonce: u64, seed: u64) -> Sim<Node> {
    let nodes = (0..2)
        .map(|i| {
            let mut c = Config::new(EpMode::Rdm, addr(i));
            c.paths = 8;
            c.nonce = nonce + i as u64;
            c.seed = seed ^ i as u64;
            c.max_datagram = 1472;
            Engine::new(c)
        })
        .collect();
    Sim::new(
        seed,
        nodes,
        vec![LinkSpec::ideal(Duration::from_micros(20)); 4],
    )
}

/// Node `1 - from` posts a receive of `len` bytes from `back`, then node
/// `from` sends `len` bytes to `to` (tag 9, context `r`).
pub fn post(sim: &mut Sim<Node>, from: usize, to: PeerId, back: PeerId, len: usize, r: u64) {
    let other = 1 - from;
    sim.nodes[other]
        .post_recv(RecvOp {
            src: Some(back),
            buf: vec![0; len],
            tag: Some((9, 0)),
            context: r,
            flags: RecvFlags::default(),
            report: true,
        })
        .unwrap();
    sim.nodes[from]
        .post_send(SendOp {
            peer: to,
            buf: vec![r as u8; len],
            tag: Some(9),
            data: None,
            context: r,
            report: true,
            delivery_complete: true,
            lazy: false,
        })
        .unwrap();
}

/// Step until node `i` has `n` more completions (all successful).
pub fn wait(sim: &mut Sim<Node>, i: usize, n: usize) {
    let limit = sim.now + Duration::from_secs(1);
    let mut got = 0;
    while got < n {
        while let Some(c) = sim.nodes[i].poll_completion() {
            assert!(c.error.is_none(), "{c:?}");
            got += 1;
        }
        if got < n {
            assert!(sim.step(limit), "node {i} stalled");
        }
    }
}

/// DATA packets node `i` has sent on each of its paths to its first peer.
pub fn sent_per_path(sim: &Sim<Node>, i: usize) -> Vec<u64> {
    let stats = sim.nodes[i].peer_stats();
    stats[0].paths.iter().map(|p| p.sent_packets).collect()
}
