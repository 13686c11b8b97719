//! A message's last few packets ride with its body on the body's path
//! instead of a flowlet of their own: a 64 KiB message at a 1472-byte
//! datagram is a flowlet of 46 packets and 2 more, which cost the sender a
//! send call and the receiver a receive of their own, and arrived apart
//! from the body (across two hosts at MTU 1500 the receiver had returned to
//! the application by then and took them a poll or two later).

use core::time::Duration;

use spray::msg::{RecvFlags, RecvOp, SendOp};
use spray::sim::{addr, LinkSpec, Sim};
use spray::{Config, Engine, EpMode, PeerId};

type Node = Engine<Vec<u8>>;

/// 48 packets at a 1472-byte datagram: a flowlet of 46 (64 KiB) and 2 more.
const LEN: usize = 64 << 10;

fn net() -> Sim<Node> {
    let nodes = (0..2)
        .map(|i| {
            let mut c = Config::new(EpMode::Rdm, addr(i));
            c.paths = 8;
            c.nonce = 900 + i as u64;
            c.seed = 0x71_1e ^ i as u64;
            c.max_datagram = 1472;
            Engine::new(c)
        })
        .collect();
    Sim::new(
        5,
        nodes,
        vec![LinkSpec::ideal(Duration::from_micros(20)); 4],
    )
}

fn post(sim: &mut Sim<Node>, from: usize, to: PeerId, back: PeerId, r: u64) {
    let other = 1 - from;
    sim.nodes[other]
        .post_recv(RecvOp {
            src: Some(back),
            buf: vec![0; LEN],
            tag: Some((9, 0)),
            context: r,
            flags: RecvFlags::default(),
            report: true,
        })
        .unwrap();
    sim.nodes[from]
        .post_send(SendOp {
            peer: to,
            buf: vec![r as u8; LEN],
            tag: Some(9),
            data: None,
            context: r,
            report: true,
            delivery_complete: true,
        })
        .unwrap();
}

/// Step until node `i` has `n` more completions (all successful).
fn wait(sim: &mut Sim<Node>, i: usize, n: usize) {
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

/// DATA packets node `i` has sent on each of its paths to the other node.
fn sent_per_path(sim: &Sim<Node>, i: usize) -> Vec<u64> {
    let stats = sim.nodes[i].peer_stats();
    stats[0].paths.iter().map(|p| p.sent_packets).collect()
}

/// A ping-pong of `LEN`-byte messages; per round after the first `warm`, the
/// fewest packets a path carried of node 0's message (on the paths that
/// carried any).
fn ping_pong(rounds: u64, warm: u64) -> Vec<u64> {
    let mut sim = net();
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    let mut least = Vec::new();
    for r in 0..rounds {
        let before = sent_per_path(&sim, 0);
        post(&mut sim, 0, p01, p10, r);
        wait(&mut sim, 1, 1);
        let after = sent_per_path(&sim, 0);
        post(&mut sim, 1, p10, p01, r);
        wait(&mut sim, 0, 2);
        wait(&mut sim, 1, 1);
        if r >= warm {
            let fewest = after
                .iter()
                .zip(before.iter().chain(std::iter::repeat(&0)))
                .map(|(a, b)| a - b)
                .filter(|&n| n > 0)
                .min()
                .unwrap_or(0);
            least.push(fewest);
        }
    }
    least
}

#[test]
fn a_message_tail_rides_with_its_body() {
    let least = ping_pong(60, 20);
    println!("fewest packets on one path per 64 KiB message: {least:?}");
    // Before: 46 packets on one path and the last 2 on another.
    let split = least.iter().filter(|&&n| n <= 4).count();
    assert!(split * 10 <= least.len(), "{least:?}");
}
