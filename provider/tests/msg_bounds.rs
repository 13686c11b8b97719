//! Bounded memory in the message layer (issue 17): unexpected messages are
//! bounded in count whatever their size (rendezvous requests included), a
//! sender past its message credit waits rather than anything being dropped,
//! and the transmit and receive queues refuse posts past their size. Over the
//! fake random-order datagram service, many seeds; a failure names its seed.

mod msg_fake;

use std::collections::HashMap;

use msg_fake::{cfg, pattern, rop, sop, Cluster};
use spray::config::{Config, EpMode};
use spray::dgram::PeerId;
use spray::msg::{CompError, CompKind, OpError, CREDIT_SHARES};
use spray::rng::Rng;

const EAGER: usize = 16 << 10;

/// A config whose senders may each have `share` messages unmatched at a peer.
fn bounded(share: usize) -> Config {
    let mut c = cfg(EpMode::Rdm);
    c.max_unexpected_msgs = share * CREDIT_SHARES;
    c
}

/// Sizes of every protocol: empty, one segment, medium, rendezvous.
fn random_len(rng: &mut Rng) -> usize {
    match rng.below(6) {
        0 => 0,
        1..=2 => 1 + rng.below(64) as usize,
        3 => rng.below(3 * 1360) as usize,
        4 => rng.below(EAGER as u64) as usize,
        _ => EAGER + 1 + rng.below(40_000) as usize,
    }
}

/// `senders` nodes flood node 0, which posts no receive for a while: it never
/// holds more than the senders' shares of messages (nothing is dropped: the
/// rest wait at their senders). Then it receives everything, in send order,
/// intact. Returns how often a sender waited for credit.
fn flood_then_drain(seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let senders = 1 + rng.below(4) as usize;
    let share = 2 + rng.below(20) as usize;
    let mut c = Cluster::new(senders + 1, bounded(share), seed ^ 0x5EED);
    c.net.cap = 1 + rng.below(24) as usize;
    let per = 3 * share + rng.below(60) as usize;
    // (sender, k) -> (len, tag)
    let mut msgs = HashMap::new();
    for k in 0..per {
        for s in 1..=senders {
            let len = random_len(&mut rng);
            let tag = rng.below(3);
            msgs.insert((s, k), (len, tag));
            let id = (s * 100_000 + k) as u64;
            let mut op = sop(0, pattern(id, len), Some(tag), id);
            op.data = Some(id);
            op.delivery_complete = rng.chance(0.3);
            c.send(s, 0, op);
        }
    }
    assert!(c.run(5_000_000), "seed {seed}: did not go quiet");
    let bound = senders * share;
    let held = c.nodes[0].unexpected_msgs();
    assert!(
        c.nodes[0].peak_unexpected_msgs() <= bound,
        "seed {seed}: {} unexpected messages held, bound {bound}",
        c.nodes[0].peak_unexpected_msgs()
    );
    assert_eq!(
        held, bound,
        "seed {seed}: every sender should use its share"
    );
    let waits: u64 = (1..=senders).map(|s| c.nodes[s].stats().credit_waits).sum();
    assert!(waits > 0, "seed {seed}: no sender waited");
    // Now receive everything, in random chunks: senders resume as credit returns.
    let mut order: Vec<(usize, usize)> = (0..per)
        .flat_map(|k| (1..=senders).map(move |s| (s, k)))
        .collect();
    // Any order across senders; per sender and tag the receives come in send
    // order, which a directed receive of that tag takes in send order (SAS).
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let mut next: HashMap<(usize, u64), Vec<usize>> = HashMap::new();
    for k in (0..per).rev() {
        for s in 1..=senders {
            next.entry((s, msgs[&(s, k)].1)).or_default().push(k);
        }
    }
    for (n, &(s, k)) in order.iter().enumerate() {
        let tag = msgs[&(s, k)].1;
        let k_in_order = next
            .get_mut(&(s, tag))
            .and_then(|v| v.pop())
            .expect("a message left");
        let len = msgs[&(s, k_in_order)].0;
        c.recv(0, rop(len, Some((tag, 0)), Some(s), n as u64));
        for _ in 0..rng.below(40) {
            c.step();
        }
        assert!(
            c.nodes[0].unexpected_msgs() <= bound,
            "seed {seed}: {} held after {n} receives",
            c.nodes[0].unexpected_msgs()
        );
    }
    assert!(c.run(5_000_000), "seed {seed}: did not drain");
    let mut rs = c.take(0, CompKind::Recv);
    assert_eq!(rs.len(), senders * per, "seed {seed}: messages missing");
    // In the order the receives were posted.
    rs.sort_by_key(|r| r.context);
    let mut got: HashMap<(usize, u64), Vec<usize>> = HashMap::new();
    for r in &rs {
        assert!(r.error.is_none(), "seed {seed}: {r:?}");
        let id = r.data.expect("cq data") as usize;
        let (s, k) = (id / 100_000, id % 100_000);
        let (len, tag) = msgs[&(s, k)];
        assert_eq!(r.tag, tag, "seed {seed} msg {id}");
        assert_eq!(r.len, len, "seed {seed} msg {id}");
        assert!(
            r.buf.as_ref().unwrap()[..len] == pattern(id as u64, len)[..],
            "seed {seed} msg {id}: bytes"
        );
        got.entry((s, tag)).or_default().push(k);
    }
    for (key, ks) in got {
        assert!(
            ks.windows(2).all(|w| w[0] < w[1]),
            "seed {seed}: {key:?} out of send order: {ks:?}"
        );
    }
    let sent: usize = (1..=senders).map(|s| c.take(s, CompKind::Send).len()).sum();
    assert_eq!(sent, senders * per, "seed {seed}: send completions");
    for (i, node) in c.nodes.iter().enumerate() {
        assert_eq!(
            node.live_counts(),
            (0, 0, 0),
            "seed {seed}: node {i} leaked"
        );
        assert_eq!(node.unexpected_msgs(), 0, "seed {seed}");
    }
    waits
}

#[test]
fn unexpected_messages_bounded_in_count_nothing_lost() {
    let waits: u64 = (0..120).map(flood_then_drain).sum();
    assert!(waits > 0);
}

/// More senders than `CREDIT_SHARES`: their first shares together exceed the
/// bound; past it the receiver returns no credit until the application has
/// taken messages, and every message still arrives.
#[test]
fn credit_withheld_past_the_bound_with_many_senders() {
    for seed in 0..6u64 {
        let senders = CREDIT_SHARES + 16;
        let share = 2;
        let max = share * CREDIT_SHARES;
        let mut c = Cluster::new(senders + 1, bounded(share), seed);
        c.net.cap = 4;
        let per = 4;
        for k in 0..per {
            for s in 1..=senders {
                let id = (s * 100 + k) as u64;
                c.send(s, 0, sop(0, pattern(id, 8), Some(s as u64), id));
            }
        }
        assert!(c.run(5_000_000), "seed {seed}: did not go quiet");
        // Each sender's first share landed (all of them: nothing can stop a
        // first share), and no more.
        assert_eq!(c.nodes[0].unexpected_msgs(), senders * share, "seed {seed}");
        // Take one message of each of the first 8 senders: still over the
        // bound, so none of them gets its credit back.
        for s in 1..=8 {
            c.recv(0, rop(8, Some((s as u64, 0)), Some(s), 0));
        }
        assert!(c.run(5_000_000), "seed {seed}");
        assert!(c.nodes[0].unexpected_msgs() >= max, "seed {seed}");
        assert!(c.nodes[0].stats().credit_withheld > 0, "seed {seed}");
        assert_eq!(
            c.nodes[0].peak_unexpected_msgs(),
            senders * share,
            "seed {seed}: a sender got credit while the receiver was over its bound"
        );
        // Take the rest: everything arrives.
        for s in 1..=senders {
            for k in 0..per - usize::from(s <= 8) {
                c.recv(0, rop(8, Some((s as u64, 0)), Some(s), k as u64));
            }
        }
        assert!(c.run(5_000_000), "seed {seed}: did not drain");
        let rs = c.take(0, CompKind::Recv);
        assert_eq!(rs.len(), senders * per, "seed {seed}");
        for r in rs {
            let s = r.src.expect("source").0 as usize;
            assert_eq!(r.tag, s as u64, "seed {seed}");
        }
        assert_eq!(c.nodes[0].unexpected_msgs(), 0, "seed {seed}");
    }
}

/// CREDIT datagrams that fail (the peer unreachable for a while) are sent
/// again, so a sender waiting for message credit is not stranded.
#[test]
fn lost_credit_is_sent_again() {
    for seed in 0..20u64 {
        let share = 4;
        let mut c = Cluster::new(2, bounded(share), seed);
        let per = 6 * share;
        for k in 0..per {
            c.send(1, 0, sop(0, pattern(k as u64, 8), Some(1), k as u64));
        }
        assert!(c.run(1_000_000), "seed {seed}");
        assert_eq!(c.nodes[0].unexpected_msgs(), share, "seed {seed}");
        let mut failed = 0;
        for k in 0..per {
            c.recv(0, rop(8, Some((1, 0)), None, k as u64));
            // Every CREDIT's first send fails back as unreachable (type
            // byte 5; try count in token bits 32..40).
            for _ in 0..20 {
                failed += c.fail_where(|p| {
                    p.from == 0 && p.data.get(1) == Some(&5) && (p.token >> 32) & 0xFF == 0
                });
                c.step();
            }
        }
        // Let the last retries through.
        assert!(c.run(1_000_000), "seed {seed}: did not drain");
        assert!(failed > 0, "seed {seed}: no CREDIT failed");
        let rs = c.take(0, CompKind::Recv);
        assert_eq!(rs.len(), per, "seed {seed}: {failed} credits failed");
        for r in rs {
            assert_eq!(
                r.buf.unwrap(),
                pattern(r.context, 8),
                "seed {seed}: message {} in the wrong receive",
                r.context
            );
        }
    }
}

/// The transmit queue holds `max_tx_ops` operations not completed (sends
/// waiting for credit or acks included); the receive queue `max_rx_ops`
/// posted receives. Past them: `Again`, and room again once some complete.
#[test]
fn queues_refuse_past_their_size() {
    let mut cf = bounded(4);
    cf.max_tx_ops = 10;
    cf.max_rx_ops = 7;
    let mut c = Cluster::new(2, cf, 3);
    for k in 0..10 {
        let mut op = sop(1, pattern(k, 100), Some(1), k);
        op.delivery_complete = true;
        c.nodes[0].post_send(op).expect("room");
    }
    let mut op = sop(1, vec![0; 100], Some(1), 99);
    op.delivery_complete = true;
    assert_eq!(c.nodes[0].post_send(op), Err(OpError::Again));
    assert_eq!(c.nodes[0].tx_room(), 0);
    // Four arrive (the peer's share) and complete on their acks; six wait for
    // credit, still in the queue.
    assert!(c.run(100_000));
    assert_eq!(c.take(0, CompKind::Send).len(), 4);
    assert_eq!(c.nodes[0].tx_room(), 4);
    // Receives nothing matches fill the receive queue.
    for k in 0..7 {
        c.nodes[1]
            .post_recv(rop(100, Some((9, 0)), None, 100 + k))
            .expect("room");
    }
    assert_eq!(
        c.nodes[1].post_recv(rop(100, Some((1, 0)), None, 0)),
        Err(OpError::Again)
    );
    assert_eq!(c.nodes[1].rx_room(), 0);
    let mut peek = rop(0, Some((1, 0)), None, 8);
    peek.flags.peek = true;
    assert_eq!(c.nodes[1].post_recv(peek), Ok(()), "a peek is always taken");
    for k in 0..7 {
        assert!(c.nodes[1].cancel(100 + k));
    }
    assert_eq!(c.nodes[1].rx_room(), 7);
    c.pump(1);
    assert_eq!(
        c.take(1, CompKind::Recv).len(),
        7 + 1,
        "cancels and the peek"
    );
    // Now take the ten messages, one receive at a time: the waiting sends go
    // out as credit comes back, and the transmit queue empties.
    for k in 0..10 {
        c.recv(1, rop(100, Some((1, 0)), None, k));
        assert!(c.run(100_000));
    }
    let rs = c.take(1, CompKind::Recv);
    assert_eq!(rs.len(), 10);
    for r in rs {
        assert_eq!(r.buf.unwrap(), pattern(r.context, 100));
    }
    assert_eq!(c.take(0, CompKind::Send).len(), 6);
    assert_eq!(c.nodes[0].tx_room(), 10);
    assert_eq!(c.nodes[1].rx_room(), 7);
    assert_eq!(c.nodes[1].live_counts(), (0, 0, 0));
}

/// Sends waiting for the message credit of a peer that died do not wait
/// forever: the peer is among those probed (`waiting_peers`), and when the
/// probe fails they complete with `PeerUnreachable`.
#[test]
fn sends_waiting_for_credit_fail_when_the_peer_dies() {
    for seed in 0..10u64 {
        let share = 2;
        let mut c = Cluster::new(2, bounded(share), seed);
        for k in 0..5 {
            let mut op = sop(1, pattern(k, 8), Some(1), k);
            op.delivery_complete = true;
            c.send(0, 1, op);
        }
        assert!(c.run(100_000), "seed {seed}");
        assert_eq!(c.take(0, CompKind::Send).len(), share, "seed {seed}");
        assert_eq!(c.nodes[0].waiting_peers(), vec![PeerId(1)], "seed {seed}");
        c.kill_link(0, 1);
        c.nodes[0].push_keepalive(PeerId(1));
        c.pump(0);
        assert!(c.run(100_000), "seed {seed}");
        let sends = c.take(0, CompKind::Send);
        assert_eq!(sends.len(), 5 - share, "seed {seed}");
        for s in sends {
            assert_eq!(s.error, Some(CompError::PeerUnreachable), "seed {seed}");
        }
        assert_eq!(c.nodes[0].live_counts(), (0, 0, 0), "seed {seed}");
        assert!(c.nodes[0].waiting_peers().is_empty(), "seed {seed}");
    }
}

/// Credit owed below a batch is not stranded: a sender out of message credit
/// whose receiver has taken fewer than a batch (half a share) of its messages
/// and then waits for a later one (another tag) still gets it, since only
/// `share - taken` earlier messages are unreceived, fewer than the share.
/// (Batched credit alone would leave both waiting for ever.)
#[test]
fn credit_below_a_batch_reaches_a_sender_that_waits() {
    for seed in 0..20u64 {
        let mut rng = Rng::new(seed);
        let share = 4 + rng.below(30) as usize;
        let mut c = Cluster::new(2, bounded(share), seed);
        c.net.cap = 1 + rng.below(16) as usize;
        // A full share of tag 1, then one message of tag 2.
        for k in 0..share {
            c.send(1, 0, sop(0, pattern(k as u64, 8), Some(1), k as u64));
        }
        c.send(1, 0, sop(0, pattern(999, 8), Some(2), 999));
        assert!(c.run(1_000_000), "seed {seed}");
        assert_eq!(c.nodes[0].unexpected_msgs(), share, "seed {seed}");
        // Take fewer than a batch of tag 1 (at least one), then wait for tag 2.
        let batch = (share / 2).max(1);
        let taken = 1 + rng.below(batch as u64 - 1) as usize;
        for k in 0..taken {
            c.recv(0, rop(8, Some((1, 0)), None, k as u64));
        }
        c.recv(0, rop(8, Some((2, 0)), None, 999));
        assert!(c.run(1_000_000), "seed {seed}");
        let rs = c.take(0, CompKind::Recv);
        assert_eq!(
            rs.len(),
            taken + 1,
            "seed {seed}: share {share}, {taken} taken: the tag-2 message never came"
        );
        for r in rs {
            assert_eq!(r.buf.unwrap(), pattern(r.context, 8), "seed {seed}");
        }
        assert_eq!(c.take(1, CompKind::Send).len(), share + 1, "seed {seed}");
    }
}
