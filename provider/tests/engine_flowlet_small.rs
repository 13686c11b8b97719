//! Small messages queued together go on one path. A stream of 8-byte
//! messages has a low byte rate, below what earns a flowlet, and was
//! sprayed packet by packet: 32 messages a window posted at once (the
//! provider holds such a burst back for one flush, `ffi/ep/hold.rs`) went
//! out over every path, one send call per path, where one path takes them
//! as a single segmented send (the datagrams are the same size) and the
//! receiver gets them in one coalesced receive. IMB Uniband of 8 bytes
//! across 2 hosts: 0.24 M messages/s sprayed, 1.3 M on one path with the
//! hold. Only proven paths take such a flowlet (as `flowlet_floor`).

use core::time::Duration;

mod engine_pair;

use engine_pair::{net, post, wait, Node};
use spray::sim::{addr, Sim};
use spray::PeerId;

/// Windows of 8 small messages, each answered by one: every path proves
/// itself (RTT, no loss) and the flowlets' acks raise their cap.
fn warm(sim: &mut Sim<Node>, p01: PeerId, p10: PeerId) {
    for r in 0..40 {
        for k in 0..8 {
            post(sim, 0, p01, p10, 8, 8 * r + k);
        }
        wait(sim, 1, 8);
        post(sim, 1, p10, p01, 8, r);
        wait(sim, 0, 9);
        wait(sim, 1, 1);
    }
}

/// Two nodes whose paths have proved themselves (`warm`), then idle for
/// 200 us: the simulator and node 0's and node 1's peer ids of each other.
fn warmed(nonce: u64, seed: u64) -> (Sim<Node>, PeerId, PeerId) {
    let mut sim = net(nonce, seed);
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    warm(&mut sim, p01, p10);
    let pause = sim.now + Duration::from_micros(200);
    sim.run_until(pause, |_| false);
    (sim, p01, p10)
}

/// Node 0's packets at `now`, straight from the engine (they never reach
/// the network: recovered later as retransmissions): the paths of the DATA
/// packets among them, appended to `paths`.
fn data_paths(sim: &mut Sim<Node>, now: spray::Instant, buf: &mut [u8], paths: &mut Vec<u8>) {
    while let Some(t) = sim.nodes[0].poll_transmit(now, buf) {
        if t.len > 56 + 40 {
            paths.push(t.path);
        }
    }
}

#[test]
fn small_messages_queued_together_share_a_path() {
    let (mut sim, p01, p10) = warmed(1200, 0x71_ae);
    // A window of 32 messages of 8 bytes, posted at once; node 0's packets
    // straight from the engine.
    for r in 0..32 {
        post(&mut sim, 0, p01, p10, 8, 1000 + r);
    }
    let mut buf = vec![0u8; 2048];
    let mut paths = Vec::new();
    let now = sim.now;
    data_paths(&mut sim, now, &mut buf, &mut paths);
    let mut distinct = paths.clone();
    distinct.sort_unstable();
    distinct.dedup();
    println!("{} DATA packets on paths {paths:?}", paths.len());
    assert_eq!(paths.len(), 32, "{paths:?}");
    assert!(
        distinct.len() <= 2,
        "32 small messages over {} paths: {paths:?}",
        distinct.len()
    );
    // They all arrive (those taken here never reached the network: as
    // retransmissions).
    wait(&mut sim, 1, 32);
}

/// A small packet alone in the queue does not start a flowlet: sized by the
/// packet, it left 40 more behind it, and every later lone packet (a
/// receiver's CREDIT, an RTS or a CTS, seconds on) went to that path, dead or
/// not (`ffi_rails`: a NIC died and the flow stalled there, its sender
/// waiting for credit).
#[test]
fn lone_small_packets_keep_spraying() {
    let (mut sim, p01, p10) = warmed(1201, 0x71_af);
    // 24 messages of 8 bytes, each posted once the one before has left (all
    // in flight: the first, from idle, starts a flowlet of its own).
    let mut buf = vec![0u8; 2048];
    let mut paths = Vec::new();
    let now = sim.now;
    for r in 0..24 {
        post(&mut sim, 0, p01, p10, 8, 2000 + r);
        data_paths(&mut sim, now, &mut buf, &mut paths);
    }
    println!("{} DATA packets on paths {paths:?}", paths.len());
    assert_eq!(paths.len(), 24, "{paths:?}");
    // Past the idle burst's flowlet (16 KiB of packets at most), lone
    // packets are sprayed.
    let mut late = paths[12..].to_vec();
    late.sort_unstable();
    late.dedup();
    assert!(
        late.len() >= 3,
        "12 lone small packets over {} paths: {paths:?}",
        late.len()
    );
    wait(&mut sim, 1, 24);
}
