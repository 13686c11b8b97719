//! A sender's loss timers while a burst is only partly handed out: `send_data`
//! leaves the RTO and tail-probe timers to the end of the peer's burst
//! (`Peer::timers_stale`), so a driver that stops polling after some packets
//! (its batch full, the socket blocked) must still be told when to come back,
//! and the lost packets must still be resent.

mod engine_pair;

use core::time::Duration;

use engine_pair::{net, post, wait};
use spray::sim::addr;

const MSG: usize = 64 * 1024;

#[test]
fn a_partly_polled_burst_arms_the_loss_timers() {
    for seed in 1..=4u64 {
        let mut sim = net(0x7100 + 16 * seed, seed);
        let (to_b, to_a) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
        // A session and RTT samples first: one message each way.
        post(&mut sim, 0, to_b, to_a, MSG, 1);
        wait(&mut sim, 1, 1);
        post(&mut sim, 1, to_a, to_b, MSG, 2);
        wait(&mut sim, 0, 2);
        wait(&mut sim, 1, 1);
        // Let every ack settle.
        let settle = sim.now + Duration::from_millis(5);
        while sim.step(settle) {}

        // Node 0 sends 64 KiB; its driver takes 3 packets (they are lost:
        // never delivered) and stops before the burst ends.
        post(&mut sim, 0, to_b, to_a, MSG, 3);
        let now = sim.now;
        let mut buf = vec![0u8; 2048];
        let before = sim.nodes[0].srd_stats().tx_data;
        for _ in 0..3 {
            assert!(
                sim.nodes[0].poll_transmit(now, &mut buf).is_some(),
                "seed {seed}: node 0 had DATA to send"
            );
        }
        assert_eq!(sim.nodes[0].srd_stats().tx_data, before + 3, "seed {seed}");

        // It must be told when to come back, and by then resend: follow its
        // deadlines (dropping whatever it sends) until a DATA packet is resent.
        let mut t = now;
        let mut resent = false;
        for _ in 0..64 {
            let Some(at) = sim.nodes[0].poll_timeout() else {
                panic!("seed {seed}: DATA in flight but no deadline");
            };
            assert!(
                at <= t + Duration::from_secs(1),
                "seed {seed}: the next deadline is {:?} away",
                at.saturating_since(t)
            );
            t = t.max(at);
            sim.nodes[0].handle_timeout(t);
            while sim.nodes[0].poll_transmit(t, &mut buf).is_some() {}
            let s = sim.nodes[0].srd_stats();
            if s.retransmits + s.tail_probes > 0 {
                resent = true;
                break;
            }
        }
        assert!(resent, "seed {seed}: the lost packets were never resent");
    }
}
