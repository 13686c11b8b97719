//! A message's last few packets ride with its body on the body's path
//! instead of a flowlet of their own: a 64 KiB message at a 1472-byte
//! datagram is a flowlet of 44 packets and 4 more, which cost the sender a
//! send call and the receiver a receive of their own, and arrived apart
//! from the body (across two hosts at MTU 1500 the receiver had returned to
//! the application by then and took them a poll or two later). So does a
//! tail of one packet: at MTU 9000 a 64 KiB message is a flowlet of 7 and 1
//! more, and the lone last packet cost a send call of its own (2.7 us) and
//! reached the receiver 4.5 us after the body.

mod engine_pair;

use engine_pair::{net, post, sent_per_path, wait};
use spray::sim::addr;

/// 48 packets at a 1472-byte datagram: a flowlet of 44 (64 KiB of
/// datagrams) and 4 more.
const LEN: usize = 64 << 10;

/// 47 packets: the same flowlet and 3 more (1376 payload bytes a packet);
/// with the flowlet of 46 payload-counted packets it had, 1 more.
const LEN_ONE_MORE: usize = 46 * 1376 + 100;

/// A ping-pong of `LEN`-byte messages; per round after the first `warm`, the
/// fewest packets a path carried of node 0's message (on the paths that
/// carried any).
fn ping_pong(len: usize, rounds: u64, warm: u64) -> Vec<u64> {
    let mut sim = net(900, 0x71_1e);
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    let mut least = Vec::new();
    for r in 0..rounds {
        let before = sent_per_path(&sim, 0);
        post(&mut sim, 0, p01, p10, len, r);
        wait(&mut sim, 1, 1);
        let after = sent_per_path(&sim, 0);
        post(&mut sim, 1, p10, p01, len, r);
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

/// Messages of `len` bytes, ping-ponged: in at most a tenth of them did a
/// path carry 4 packets or fewer of one message (its tail on a path of its own).
fn tail_rides_with_body(len: usize) {
    let least = ping_pong(len, 60, 20);
    println!("fewest packets on one path per {len}-byte message: {least:?}");
    let split = least.iter().filter(|&&n| n <= 4).count();
    assert!(split * 10 <= least.len(), "{least:?}");
}

#[test]
fn a_message_tail_rides_with_its_body() {
    // Before: the flowlet on one path and its tail on another.
    tail_rides_with_body(LEN);
}

#[test]
fn a_one_packet_tail_rides_with_its_body() {
    // Before: 46 packets on one path and the last one on another (when
    // the flowlet was 46).
    tail_rides_with_body(LEN_ONE_MORE);
}
