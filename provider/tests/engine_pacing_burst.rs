//! A message of the first flight's size leaves at once after a pause, where
//! the pacing rate sends it within 200 us and nothing was lost lately. The
//! window lets such a message (64 KiB at MTU 1500) go without an ack; the
//! pacing bucket held only 16 packets or 100 us at the pacing rate, so at a
//! rate an application-limited exchange keeps low, the rest of the message
//! left one packet at a time as tokens came in: a send call (and on the
//! receiving host a receive) per packet, where the driver hands a whole
//! flowlet to the kernel in one. Intel MPI's Alltoall of 64 KiB among 4 hosts
//! on 2 CPUs made three quarters of its send calls for single DATA packets.
//!
//! Two engines over 4 links of 100 MB/s each: after a few 64 KiB exchanges the
//! sender's pacing rate sends 48 packets in more than 100 us (but less than
//! the 200 us a burst from idle may take at once). After a pause (tokens
//! refill), a 64 KiB message must leave whole at the instant it is posted;
//! over links that drop packets, right after losses, it must not. Where the
//! window would let a larger message go whole (long round trips), pacing must
//! still bound its first burst to the bucket: the floor sizes a burst, it does
//! not turn pacing off.

use core::time::Duration;

mod engine_pair;

use engine_pair::{post, wait, Node};
use spray::sim::{addr, LinkSpec, Sim};
use spray::{Config, Engine, EpMode, PeerId};

/// Link rate, bytes/s (800 Mbit/s).
const LINK_BYTES_PER_SEC: u64 = 100_000_000;
const MSG: usize = 64 << 10;

fn net(seed: u64, delay: Duration) -> Sim<Node> {
    net_lossy(seed, delay, 0.0)
}

fn net_lossy(seed: u64, delay: Duration, loss: f64) -> Sim<Node> {
    let nodes = (0..2)
        .map(|i| {
            let mut c = Config::new(EpMode::Rdm, addr(i));
            c.paths = 8;
            c.nonce = 0x7ace + i as u64;
            c.seed = seed ^ i as u64;
            c.max_datagram = 1472;
            Engine::new(c)
        })
        .collect();
    let mut link = LinkSpec::ideal(delay);
    link.bandwidth = LINK_BYTES_PER_SEC;
    link.loss = loss;
    Sim::new(seed, nodes, vec![link; 4])
}

/// Ping-pongs of 64 KiB: the rate estimate of an application-limited exchange.
fn exchange(sim: &mut Sim<Node>, p01: PeerId, p10: PeerId, rounds: u64) {
    for r in 0..rounds {
        post(sim, 0, p01, p10, MSG, r);
        wait(sim, 1, 1);
        post(sim, 1, p10, p01, MSG, r);
        wait(sim, 0, 2);
        wait(sim, 1, 1);
    }
}

/// `n` transfers of 1 MiB from node 0, one after the other: each fills the
/// window (not application-limited) and measures the links' rate.
fn transfers(sim: &mut Sim<Node>, p01: PeerId, p10: PeerId, n: u64) {
    for r in 0..n {
        post(sim, 0, p01, p10, 1 << 20, r);
        wait(sim, 1, 1);
        wait(sim, 0, 1);
    }
}

/// DATA packets node 0 sends at this instant, straight from the engine
/// (byte 1 of the SRD header: its type, 1 = DATA).
fn burst_now(sim: &mut Sim<Node>) -> usize {
    let mut buf = vec![0u8; 2048];
    let now = sim.now;
    let mut n = 0;
    while sim.nodes[0].poll_transmit(now, &mut buf).is_some() {
        if buf[1] == 1 {
            n += 1;
        }
    }
    n
}

#[test]
fn a_first_flight_message_is_not_paced_packet_by_packet() {
    let mut sim = net(0x9aceb0, Duration::from_micros(20));
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    exchange(&mut sim, p01, p10, 30);
    let rate = sim.nodes[0].peer_stats()[0].pacing_rate_bps;
    let packets = MSG.div_ceil(1472 - 96);
    // The test means something only where the bucket a busy flow gets (16
    // packets or 100 us at the pacing rate) is short of the message.
    let message_bytes = packets as u64 * (1472 - 96);
    assert!(
        rate > 0 && rate / 10_000 < message_bytes && 16 * (1472 - 96) < message_bytes,
        "pacing rate {rate} B/s: 100 us of it holds the whole message"
    );
    let pause = sim.now + Duration::from_millis(5);
    sim.run_until(pause, |_| false);
    post(&mut sim, 0, p01, p10, MSG, 99);
    let n = burst_now(&mut sim);
    println!("pacing rate {rate} B/s; {n} of the message's {packets} packets left at once");
    assert!(
        n >= packets,
        "only {n} of {packets} packets of a 64 KiB message left at once (pacing rate {rate} B/s)"
    );
    wait(&mut sim, 1, 1);
    wait(&mut sim, 0, 1);
}

#[test]
fn a_burst_beyond_the_bucket_is_still_paced() {
    // Round trips of 2 ms: the window (twice the bandwidth-delay product)
    // lets a 256 KiB message (eager, 191 packets) go whole; pacing must not.
    let mut sim = net(0xb01c, Duration::from_millis(1));
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    // Transfers long enough to measure the links' rate.
    transfers(&mut sim, p01, p10, 6);
    let pause = sim.now + Duration::from_millis(5);
    sim.run_until(pause, |_| false);
    let window = sim.nodes[0].peer_stats()[0].cwnd_bytes;
    post(&mut sim, 0, p01, p10, 256 << 10, 50);
    let n = burst_now(&mut sim);
    let rate = sim.nodes[0].peer_stats()[0].pacing_rate_bps;
    println!(
        "window {window} B, pacing rate {rate} B/s; {n} packets of a 256 KiB message left at once"
    );
    assert!(
        window > 128 << 10,
        "window {window} B: too small for the test to tell pacing from the window"
    );
    // The bucket: the first flight (64 packets of 1376 bytes here: 88 KiB)
    // or 100 us at the rate, whichever is more.
    let bucket = (64 * 1376u64).max(rate / 10_000);
    assert!(
        (n as u64) * 1376 <= bucket + 1376,
        "{n} packets left at once: more than the pacing bucket of {bucket} B"
    );
    wait(&mut sim, 1, 1);
    wait(&mut sim, 0, 1);
}

#[test]
fn no_whole_flight_from_idle_right_after_a_loss() {
    // The first test's exchanges, over links that drop 3 % of packets: the
    // pause after them is shorter than the quiet time a loss must be behind
    // us, so the bucket stays at 16 packets or 100 us at the rate.
    let mut sim = net_lossy(0x1055, Duration::from_micros(20), 0.03);
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    exchange(&mut sim, p01, p10, 30);
    let stats = &sim.nodes[0].peer_stats()[0];
    let (rate, lost) = (stats.pacing_rate_bps, stats.lost);
    assert!(lost > 0, "no loss: the test shows nothing");
    let pause = sim.now + Duration::from_millis(2);
    sim.run_until(pause, |_| false);
    post(&mut sim, 0, p01, p10, MSG, 99);
    let n = burst_now(&mut sim);
    let bucket = (16 * 1376u64).max(rate / 10_000);
    println!("pacing rate {rate} B/s, {lost} lost; {n} packets left at once (bucket {bucket} B)");
    assert!(
        (n as u64) * 1376 <= bucket + 1376,
        "{n} packets left at once right after losses: more than the busy bucket of {bucket} B"
    );
    wait(&mut sim, 1, 1);
    wait(&mut sim, 0, 1);
}

/// Paths of the DATA packets node 0 sends at this instant, in order.
fn burst_paths(sim: &mut Sim<Node>) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let now = sim.now;
    let mut paths = Vec::new();
    while let Some(t) = sim.nodes[0].poll_transmit(now, &mut buf) {
        if buf[1] == 1 {
            paths.push(t.path);
        }
    }
    paths
}

#[test]
fn small_exchanges_keep_the_rate_a_transfer_measured() {
    // Transfers measure the links (1 MiB each, the window full: not
    // application-limited); then 8-byte ping-pongs for 50 ms, far longer
    // than a rate peak lives (10 RTTs, at least 1 ms). Their rate samples
    // say how fast the application sends, not what the links carry. Aged
    // to their pace (2.3 MB/s here), the estimate made the next 64 KiB
    // message leave paced and sprayed packet by packet (45 packets at once
    // over 34 runs of one path, each a send call on a host) where it
    // leaves whole on one path, one segmented send.
    let mut sim = net(0xa1b2, Duration::from_micros(20));
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    transfers(&mut sim, p01, p10, 4);
    let measured = sim.nodes[0].peer_stats()[0].pacing_rate_bps;
    let end = sim.now + Duration::from_millis(50);
    let mut r = 10;
    while sim.now < end {
        post(&mut sim, 0, p01, p10, 8, r);
        wait(&mut sim, 1, 1);
        post(&mut sim, 1, p10, p01, 8, r);
        wait(&mut sim, 0, 2);
        wait(&mut sim, 1, 1);
        r += 1;
    }
    let after = sim.nodes[0].peer_stats()[0].pacing_rate_bps;
    post(&mut sim, 0, p01, p10, MSG, r);
    let paths = burst_paths(&mut sim);
    let runs = paths.windows(2).filter(|w| w[0] != w[1]).count() + 1;
    println!(
        "pacing rate {measured} B/s after the transfers, {after} B/s after {r} small \
         exchanges; then {} packets of 64 KiB left at once over {runs} path runs",
        paths.len()
    );
    assert!(
        measured > 2 * LINK_BYTES_PER_SEC,
        "the transfers measured {measured} B/s over 4 links of {LINK_BYTES_PER_SEC}"
    );
    assert!(
        after >= measured / 2,
        "small exchanges aged the pacing rate out: {measured} -> {after} B/s"
    );
    let packets = MSG.div_ceil(1472 - 96);
    assert!(
        paths.len() >= packets && runs <= 2,
        "after small exchanges a 64 KiB message left {} of {packets} packets at once over \
         {runs} path runs",
        paths.len()
    );
    wait(&mut sim, 1, 1);
    wait(&mut sim, 0, 1);
}
