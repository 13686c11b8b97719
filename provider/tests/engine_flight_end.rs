//! A message longer than `ack_every` packets, seen whole by its receiver (a
//! drained socket, as the provider receives a burst's tail before it
//! transmits): its end is a flight end like a short message's. The receiver
//! holds the ack for a prompt reply instead of sending a pure ACK because 16
//! packets or more arrived (across two hosts at MTU 1500, that ACK was a
//! 3.6 us send call between the receive and its completion in every 64 KiB
//! ping-pong). And its last few packets ride with the body on the body's
//! path instead of a flowlet of their own (a send call on the sender and a
//! receive on the receiver for 2-4 packets, arriving apart from the body).

use core::time::Duration;

use spray::msg::{RecvFlags, RecvOp, SendOp};
use spray::sim::{addr, LinkSpec, Sim};
use spray::{Config, Engine, EpMode, PeerId};

type Node = Engine<Vec<u8>>;

/// 48 packets at a 1472-byte datagram: a flowlet of 46 (64 KiB) and 2 more.
const LEN: usize = 64 << 10;

fn net(ack_soon: Duration) -> Sim<Node> {
    let nodes = (0..2)
        .map(|i| {
            let mut c = Config::new(EpMode::Rdm, addr(i));
            c.paths = 8;
            c.nonce = 900 + i as u64;
            c.seed = 0x71_1e ^ i as u64;
            c.max_datagram = 1472;
            c.ack_delay = Duration::from_micros(400);
            c.ack_soon = ack_soon;
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

/// A ping-pong of `LEN`-byte messages, each answered at once; per round
/// after the first `warm`: node 1's pure ACKs, and the fewest packets a path
/// carried of node 0's message (on the paths that carried any).
fn ping_pong(rounds: u64, warm: u64) -> (Vec<u64>, Vec<u64>) {
    let mut sim = net(Duration::from_micros(5));
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    let (mut acks, mut least) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let acks_before = sim.nodes[1].srd_stats().tx_acks;
        let before = sent_per_path(&sim, 0);
        post(&mut sim, 0, p01, p10, r);
        wait(&mut sim, 1, 1);
        let after = sent_per_path(&sim, 0);
        // The answer goes 1 us after the message is in (a prompt reply);
        // meanwhile node 1 sends whatever is due, as the provider's progress
        // does after a receive batch, before the application sees it.
        let limit = sim.now + Duration::from_micros(1);
        while sim.step(limit) {}
        post(&mut sim, 1, p10, p01, r);
        wait(&mut sim, 0, 2);
        wait(&mut sim, 1, 1);
        if r >= warm {
            acks.push(sim.nodes[1].srd_stats().tx_acks - acks_before);
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
    (acks, least)
}

#[test]
fn a_long_message_answered_at_once_needs_no_pure_ack() {
    let (acks, _) = ping_pong(60, 20);
    println!("pure ACKs of node 1 per 64 KiB round: {acks:?}");
    // Before: every message ended with 16 or more packets unacknowledged,
    // and the receiver acknowledged it at once, before its answer (one pure
    // ACK a round). What remains is the ack of node 0's CREDIT returning
    // eager credit every 4 messages (256 KiB), a flight of its own.
    let total: u64 = acks.iter().sum();
    assert!(
        total * 3 <= acks.len() as u64,
        "{total} pure ACKs in {} rounds: {acks:?}",
        acks.len()
    );
}

#[test]
fn a_message_tail_rides_with_its_body() {
    let (_, least) = ping_pong(60, 20);
    println!("fewest packets on one path per 64 KiB message: {least:?}");
    // Before: 46 packets on one path and the last 2 on another.
    let split = least.iter().filter(|&&n| n <= 4).count();
    assert!(split * 10 <= least.len(), "{least:?}");
}

/// Both nodes send `LEN` bytes to each other at once and wait for their send
/// and receive (no answer carries the acks): the median round.
fn exchange(ack_soon: Duration, rounds: u64) -> Duration {
    let mut sim = net(ack_soon);
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    let mut times = Vec::new();
    for r in 0..rounds {
        let start = sim.now;
        post(&mut sim, 0, p01, p10, 2 * r);
        post(&mut sim, 1, p10, p01, 2 * r + 1);
        wait(&mut sim, 0, 2);
        wait(&mut sim, 1, 2);
        times.push(sim.now - start);
    }
    times.sort();
    times[times.len() / 2]
}

#[test]
fn a_long_exchange_still_completes_without_the_ack_delay() {
    // The flight end's hold is `ack_soon` while the receiver has its own data
    // in flight: the sends complete about a round trip after the data.
    let soon = exchange(Duration::from_micros(5), 20);
    let held = exchange(Duration::from_micros(400), 20);
    println!("exchange of 64 KiB: {soon:?} a round (ack soon 5 us), {held:?} (held 400 us)");
    assert!(soon < Duration::from_micros(150), "{soon:?} a round");
    // The hold is what ends the round (the test can fail).
    assert!(held >= Duration::from_micros(400), "{held:?} a round");
}
