//! A small message after a pause leaves as one flowlet: its application
//! hands it over at once, but its rate is the ping-pong's (a few KiB per
//! round trip), below what earns a flowlet, and it was sprayed packet by
//! packet: one send call on the sender and one receive call on the receiver
//! per packet instead of one of each (Intel MPI's PingPong of 16 KiB across
//! 2 hosts: 137 us sprayed over 12 paths, 56 us as one flowlet). On a path
//! that has not proven itself it still goes packet by packet
//! (`sim_dead_link`: a whole message lost on a dead link cost a timeout).

use core::time::Duration;

use spray::msg::{RecvFlags, RecvOp, SendOp};
use spray::sim::{addr, LinkSpec, Sim};
use spray::{Config, Engine, EpMode, PeerId};

type Node = Engine<Vec<u8>>;

fn net() -> Sim<Node> {
    let nodes = (0..2)
        .map(|i| {
            let mut c = Config::new(EpMode::Rdm, addr(i));
            c.paths = 8;
            c.nonce = 700 + i as u64;
            c.seed = 0x71_0e ^ i as u64;
            c.max_datagram = 1472;
            Engine::new(c)
        })
        .collect();
    Sim::new(
        3,
        nodes,
        vec![LinkSpec::ideal(Duration::from_micros(20)); 4],
    )
}

fn post(sim: &mut Sim<Node>, from: usize, to: PeerId, back: PeerId, len: usize, r: u64) {
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

/// DATA packets node 0 has sent on each of its paths to node 1.
fn sent_per_path(sim: &Sim<Node>) -> Vec<u64> {
    let stats = sim.nodes[0].peer_stats();
    stats[0].paths.iter().map(|p| p.sent_packets).collect()
}

#[test]
fn a_small_message_after_a_pause_is_one_flowlet() {
    let mut sim = net();
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    let len = 4096; // 3 packets
    let rounds = 60;
    let mut spread = Vec::new();
    for r in 0..rounds {
        let before = sent_per_path(&sim);
        post(&mut sim, 0, p01, p10, len, r);
        wait(&mut sim, 1, 1);
        post(&mut sim, 1, p10, p01, len, r);
        wait(&mut sim, 0, 2);
        wait(&mut sim, 1, 1);
        let after = sent_per_path(&sim);
        let paths = after
            .iter()
            .zip(before.iter().chain(std::iter::repeat(&0)))
            .filter(|(a, b)| a > b)
            .count();
        spread.push(paths);
        // A pause: the next message starts with nothing in flight.
        let pause = sim.now + Duration::from_micros(300);
        sim.run_until(pause, |_| false);
    }
    println!("paths per 4 KiB message, round by round: {spread:?}");
    // The first rounds prove the paths one packet at a time; after that a
    // message goes on one path (the sender's three packets in one send).
    let late = &spread[20..];
    let one = late.iter().filter(|&&n| n == 1).count();
    assert!(one * 10 >= late.len() * 9, "{spread:?}");
}
