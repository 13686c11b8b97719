//! A flood of small messages to a receiver that posts no receive, through
//! whole engines over the seeded simulator (loss, jitter, several paths):
//! the receiver never holds more unexpected messages than the sender's share
//! of `max_unexpected_msgs`, the sender's transmit queue fills and refuses
//! posts (`OpError::Again`), and once the receiver posts receives every
//! message arrives, once, intact, in send order. A failure names its seed.

use core::time::Duration;

use spray::msg::{CompKind, OpError, RecvFlags, RecvOp, SendOp, CREDIT_SHARES};
use spray::rng::Rng;
use spray::sim::{addr, LinkSpec, Sim};
use spray::time::Instant;
use spray::{Config, Engine, EpMode};

type Node = Engine<Vec<u8>>;

/// Messages a sender may have unmatched at the receiver.
const SHARE: usize = 32;
/// The sender's transmit queue, operations.
const TX: usize = 200;

fn engine(i: usize, seed: u64) -> Node {
    let mut c = Config::new(EpMode::Rdm, addr(i));
    c.paths = 4;
    c.nonce = 100 + i as u64;
    c.seed = seed ^ i as u64;
    c.max_unexpected_msgs = SHARE * CREDIT_SHARES;
    c.max_tx_ops = TX;
    Engine::new(c)
}

fn send(e: &mut Node, k: u64, delivery: bool) -> Result<(), OpError> {
    let peer = e.peer(addr(1));
    e.post_send(SendOp {
        peer,
        buf: k.to_le_bytes().to_vec(),
        tag: Some(5),
        data: None,
        context: k,
        report: true,
        delivery_complete: delivery,
        lazy: false,
    })
}

fn flood(seed: u64) {
    let mut r = Rng::new(seed);
    let spec = LinkSpec {
        delay: Duration::from_micros(5 + r.below(50)),
        jitter: Duration::from_micros(r.below(40)),
        bandwidth: 0,
        buffer: 0,
        loss: r.unit() * 0.05,
        dup: 0.0,
        corrupt: 0.0,
    };
    let mut sim = Sim::new(seed, vec![engine(0, seed), engine(1, seed)], vec![spec; 4]);
    let delivery = r.chance(0.5);
    let mut posted = 0u64;
    let mut refused = 0u64;
    let mut sends_done = 0u64;
    // 50 ms of flood at a receiver that posts nothing.
    let flood_end = Instant::from_nanos(50_000_000);
    let limit = Instant::from_nanos(60_000_000_000);
    while sim.now < flood_end {
        loop {
            match send(&mut sim.nodes[0], posted, delivery) {
                Ok(()) => posted += 1,
                Err(OpError::Again) => {
                    refused += 1;
                    break;
                }
                Err(e) => panic!("seed {seed}: post {e:?}"),
            }
        }
        while let Some(c) = sim.nodes[0].poll_completion() {
            assert!(c.error.is_none(), "seed {seed}: {c:?}");
            sends_done += 1;
        }
        let (held, _) = sim.nodes[1].unexpected();
        assert!(
            held <= SHARE,
            "seed {seed}: {held} unexpected messages held"
        );
        if !sim.step(limit) {
            break;
        }
    }
    assert_eq!(
        sim.nodes[1].unexpected().0,
        SHARE,
        "seed {seed}: the share should be used"
    );
    assert!(refused > 0, "seed {seed}: the transmit queue never filled");
    assert_eq!(sim.nodes[0].tx_room(), 0, "seed {seed}");
    // Accepted: the share at the receiver plus the full queue behind it
    // (sends complete as their messages are acked, unless they wait).
    assert!(
        posted as usize <= SHARE + TX,
        "seed {seed}: {posted} posts accepted"
    );
    // Now receive: `posted` messages, then the ones still to be posted.
    let total = posted + 300;
    let mut recvd = 0u64;
    let mut next_recv = 0u64;
    loop {
        while next_recv < total && next_recv < recvd + 64 {
            let op = RecvOp {
                src: None,
                buf: vec![0u8; 8],
                tag: Some((5, 0)),
                context: next_recv,
                flags: RecvFlags::default(),
                report: true,
            };
            sim.nodes[1].post_recv(op).expect("post recv");
            next_recv += 1;
        }
        while posted < total && send(&mut sim.nodes[0], posted, delivery).is_ok() {
            posted += 1;
        }
        while let Some(c) = sim.nodes[1].poll_completion() {
            assert_eq!(c.kind, CompKind::Recv, "seed {seed}");
            assert!(c.error.is_none(), "seed {seed}: {c:?}");
            // Receives posted in order take messages in send order.
            assert_eq!(
                c.buf.as_deref(),
                Some(&c.context.to_le_bytes()[..]),
                "seed {seed}: receive {} got another message",
                c.context
            );
            recvd += 1;
        }
        while let Some(c) = sim.nodes[0].poll_completion() {
            assert!(c.error.is_none(), "seed {seed}: {c:?}");
            sends_done += 1;
        }
        assert!(
            sim.nodes[1].unexpected().0 <= SHARE,
            "seed {seed}: over the bound while draining"
        );
        if recvd == total && sends_done == total {
            break;
        }
        assert!(
            sim.step(limit),
            "seed {seed}: stalled at {recvd}/{total} received, {sends_done} sends done"
        );
    }
    assert_eq!(sim.nodes[1].unexpected(), (0, 0), "seed {seed}");
    assert!(sim.nodes[0].msg_stats().credit_waits > 0, "seed {seed}");
}

#[test]
fn flood_of_small_messages_is_held_back_not_dropped() {
    for seed in 0..40 {
        flood(seed);
    }
}

/// The receiver dies while the sender's messages wait for its credit: the
/// engine probes it (keepalive) and, after the unreachable timeout, fails
/// every send instead of keeping them forever.
#[test]
fn sends_waiting_for_credit_fail_when_the_receiver_dies() {
    for seed in 0..6 {
        let mut nodes = vec![engine(0, seed), engine(1, seed)];
        let mut c = nodes[0].config().clone();
        c.unreachable_timeout = Duration::from_millis(200);
        nodes[0] = Engine::new(c);
        let spec = LinkSpec::ideal(Duration::from_micros(20));
        let mut sim = Sim::new(seed, nodes, vec![spec; 4]);
        let mut posted = 0u64;
        while send(&mut sim.nodes[0], posted, true).is_ok() {
            posted += 1;
        }
        let limit = Instant::from_nanos(30_000_000_000);
        let mut done = 0;
        let mut failed = 0;
        let mut down_at = None;
        while done < posted {
            while let Some(c) = sim.nodes[0].poll_completion() {
                done += 1;
                failed += u64::from(c.error.is_some());
            }
            if down_at.is_none() && done == SHARE as u64 {
                // The share delivered and acked: the receiver dies.
                down_at = Some(sim.now);
                sim.down[1] = true;
            }
            if done < posted {
                assert!(
                    sim.step(limit),
                    "seed {seed}: {done}/{posted} sends completed at {:?}",
                    sim.now
                );
            }
        }
        assert_eq!(failed, posted - SHARE as u64, "seed {seed}");
        let took = sim.now.saturating_since(down_at.expect("went down"));
        assert!(
            took < Duration::from_secs(2),
            "seed {seed}: failed only after {took:?}"
        );
    }
}
