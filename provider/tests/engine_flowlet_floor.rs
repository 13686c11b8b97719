//! A small message after a pause leaves as one flowlet: its application
//! hands it over at once, but its rate is the ping-pong's (a few KiB per
//! round trip), below what earns a flowlet, and it was sprayed packet by
//! packet: one send call on the sender and one receive call on the receiver
//! per packet instead of one of each (Intel MPI's PingPong of 16 KiB across
//! 2 hosts: 137 us sprayed over 12 paths, 56 us as one flowlet). On a path
//! that has not proven itself it still goes packet by packet
//! (`sim_dead_link`: a whole message lost on a dead link cost a timeout).

use core::time::Duration;

mod engine_pair;

use engine_pair::{net, post, sent_per_path, wait};
use spray::sim::addr;

#[test]
fn a_small_message_after_a_pause_is_one_flowlet() {
    let mut sim = net(700, 0x71_0e);
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    let len = 4096; // 3 packets
    let rounds = 60;
    let mut spread = Vec::new();
    for r in 0..rounds {
        let before = sent_per_path(&sim, 0);
        post(&mut sim, 0, p01, p10, len, r);
        wait(&mut sim, 1, 1);
        post(&mut sim, 1, p10, p01, len, r);
        wait(&mut sim, 0, 2);
        wait(&mut sim, 1, 1);
        let after = sent_per_path(&sim, 0);
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
