//! A flowlet fits one segmented send. The FFI sends a flowlet as one
//! `UDP_SEGMENT` entry, and the kernel takes at most one IP datagram's
//! worth (64 KiB) of segments per entry. Counted in payload bytes
//! (`flowlet_bytes` / max payload), a 64 KiB flowlet at a 1472-byte
//! datagram was 46 packets: 67 712 bytes of datagrams, so every flowlet left
//! as an entry of 44 and one of 2, a second pass through the kernel's stack
//! on the sender (a send call of its own when the 2 were alone on their
//! socket) and a second datagram for the receiver's GRO. A 1 MiB stream
//! between 2 hosts at MTU 1500 averaged 23 packets per segmented send.
//! Counted in datagram bytes, the flowlet is 44 packets: one entry.

use core::time::Duration;

mod engine_pair;

use engine_pair::{net, post, wait};
use spray::sim::addr;

/// The datagram size of `engine_pair::net`'s nodes.
const DATAGRAM: usize = 1472;

/// `Config::flowlet_bytes`' default: one segmented send.
const FLOWLET_BYTES: usize = 64 << 10;

#[test]
fn a_flowlet_fits_one_segmented_send() {
    let mut sim = net(1100, 0x71_9e);
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    // Ping-pongs of 64 KiB: the paths prove themselves and the rate
    // estimate grows past what earns whole flowlets.
    for r in 0..20 {
        post(&mut sim, 0, p01, p10, 64 << 10, r);
        wait(&mut sim, 1, 1);
        post(&mut sim, 1, p10, p01, 64 << 10, r);
        wait(&mut sim, 0, 2);
        wait(&mut sim, 1, 1);
    }
    // A pause (the last acks arrive, pacing tokens refill), then a 256 KiB
    // message (eager, 191 packets): take node 0's first burst straight from the engine and note
    // the path of each DATA packet.
    let pause = sim.now + Duration::from_micros(200);
    sim.run_until(pause, |_| false);
    post(&mut sim, 0, p01, p10, 256 << 10, 99);
    let mut buf = vec![0u8; 2048];
    let mut paths = Vec::new();
    let now = sim.now;
    while let Some(t) = sim.nodes[0].poll_transmit(now, &mut buf) {
        if t.len > 1000 {
            paths.push(t.path);
        }
    }
    // Runs of consecutive packets on one path; the last may be cut short
    // by the window, or run on with the message's tail.
    let mut runs = Vec::new();
    let mut run = 0usize;
    for (i, p) in paths.iter().enumerate() {
        run += 1;
        if paths.get(i + 1) != Some(p) {
            runs.push(run);
            run = 0;
        }
    }
    runs.pop();
    println!(
        "{} DATA packets in the first burst; flowlets: {runs:?}",
        paths.len()
    );
    let most = FLOWLET_BYTES / DATAGRAM;
    assert!(runs.len() >= 2, "too few flowlets to judge: {runs:?}");
    assert!(
        runs.iter().all(|&n| n * DATAGRAM <= FLOWLET_BYTES),
        "a flowlet of more than {most} datagrams of {DATAGRAM} bytes: {runs:?}"
    );
    assert!(
        runs.contains(&most),
        "no flowlet of {most} datagrams: {runs:?}"
    );
}
