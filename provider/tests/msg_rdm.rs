//! Message-layer scenarios in RDM mode over the fake random-order datagram service.

mod msg_fake;

use msg_fake::{cfg, pattern, rop, sop, Cluster, Comp};
use spray::config::EpMode;
use spray::dgram::PeerId;
use spray::msg::{CompError, CompKind, OpError, RecvFlags};

const SEG: usize = 1400 - spray::wire::msg::HEADER_LEN;
const EAGER: usize = 16 << 10;

fn cluster(n: usize, seed: u64) -> Cluster {
    Cluster::new(n, cfg(EpMode::Rdm), seed)
}

fn run(c: &mut Cluster) {
    assert!(c.run(5_000_000), "did not go quiet");
}

fn one(c: &mut Cluster, i: usize, kind: CompKind) -> Comp {
    let mut v = c.take(i, kind);
    assert_eq!(
        v.len(),
        1,
        "expected one {kind:?} completion at node {i}: {v:?}"
    );
    v.pop().unwrap()
}

#[test]
fn sizes_across_protocol_boundaries() {
    let sizes = [
        0,
        1,
        SEG - 1,
        SEG,
        SEG + 1,
        2 * SEG,
        EAGER - 1,
        EAGER,
        EAGER + 1,
        100_000,
        (8 << 20) + 3,
    ];
    for (k, &len) in sizes.iter().enumerate() {
        for expected in [true, false] {
            let seed = k as u64 * 2 + expected as u64;
            let mut c = cluster(2, seed);
            let data = pattern(seed, len);
            if expected {
                c.recv(1, rop(len, Some((7, 0)), None, 100));
            }
            let mut s = sop(1, data.clone(), Some(7), 5);
            s.data = Some(0xDA7A);
            c.send(0, 1, s);
            run(&mut c);
            if !expected {
                c.recv(1, rop(len, Some((7, 0)), None, 100));
                run(&mut c);
            }
            let r = one(&mut c, 1, CompKind::Recv);
            assert_eq!(r.error, None, "len {len} seed {seed}");
            assert_eq!((r.len, r.olen, r.tag, r.context), (len, 0, 7, 100));
            assert_eq!(r.src, Some(PeerId(0)));
            assert_eq!(r.data, Some(0xDA7A));
            assert!(
                r.buf.as_ref().unwrap() == &data,
                "bytes differ, len {len} seed {seed}"
            );
            let s = one(&mut c, 0, CompKind::Send);
            assert_eq!((s.error, s.len, s.context), (None, len, 5));
            assert_eq!(s.buf.unwrap(), data);
            assert_eq!(c.nodes[1].live_counts(), (0, 0, 0));
            assert_eq!(c.nodes[0].live_counts(), (0, 0, 0));
            // Counted unexpected only when it came before its receive; its bytes
            // only when they were held (eager/medium: the rendezvous data waits).
            let st = c.nodes[1].stats();
            let held = if !expected && len <= EAGER { len } else { 0 };
            assert_eq!(
                (st.unexpected, st.unexpected_bytes),
                (u64::from(!expected), held as u64),
                "len {len} seed {seed}"
            );
        }
    }
}

#[test]
fn send_order_matching_under_reordering() {
    for seed in 0..3u64 {
        let mut c = cluster(2, 1000 + seed);
        c.net.cap = 64;
        let n = 2000u64;
        let mut rng = spray::rng::Rng::new(seed);
        let lens: Vec<usize> = (0..n)
            .map(|_| match rng.below(10) {
                0 => 0,
                1..=6 => rng.below(SEG as u64 * 2) as usize,
                7 | 8 => rng.below(EAGER as u64) as usize,
                _ => EAGER + rng.below(20_000) as usize,
            })
            .collect();
        // Half the receives before the traffic, half after.
        for i in 0..n / 2 {
            c.recv(1, rop(40_000, Some((3, 0)), None, i));
        }
        for i in 0..n {
            c.send(0, 1, sop(1, pattern(i, lens[i as usize]), Some(3), i));
            if i % 64 == 0 {
                for _ in 0..50 {
                    c.step();
                }
            }
        }
        run(&mut c);
        for i in n / 2..n {
            c.recv(1, rop(40_000, Some((3, 0)), None, i));
        }
        run(&mut c);
        let rs = c.take(1, CompKind::Recv);
        assert_eq!(rs.len(), n as usize, "seed {seed}");
        for r in rs {
            let i = r.context;
            let want = pattern(i, lens[i as usize]);
            assert_eq!(
                r.len,
                want.len(),
                "seed {seed}: receive {i} took the wrong message"
            );
            assert!(
                r.buf.unwrap()[..r.len] == want[..],
                "seed {seed}: receive {i} bytes"
            );
        }
        assert_eq!(c.take(0, CompKind::Send).len(), n as usize);
        assert!(
            c.nodes[1].stats().held > 0,
            "seed {seed}: reordering never exercised SAS"
        );
    }
}

#[test]
fn tag_ignore_bits_and_untagged_apart() {
    let mut c = cluster(2, 9);
    c.recv(1, rop(8, Some((0xAB00, 0x00FF)), None, 1));
    c.recv(1, rop(8, None, None, 2));
    c.send(0, 1, sop(1, vec![1; 8], Some(0xAC00), 10)); // no match for ctx 1
    c.send(0, 1, sop(1, vec![2; 8], Some(0xAB42), 11)); // matches ctx 1 via ignore bits
    c.send(0, 1, sop(1, vec![3; 8], None, 12)); // untagged: ctx 2
    run(&mut c);
    let mut rs = c.take(1, CompKind::Recv);
    rs.sort_by_key(|r| r.context);
    assert_eq!(rs.len(), 2);
    assert_eq!(
        (rs[0].context, rs[0].tag, rs[0].buf.as_ref().unwrap()[0]),
        (1, 0xAB42, 2)
    );
    assert_eq!(
        (rs[1].context, rs[1].buf.as_ref().unwrap()[0], rs[1].tagged),
        (2, 3, false)
    );
    c.recv(1, rop(8, Some((0, u64::MAX)), None, 3));
    run(&mut c);
    let r = one(&mut c, 1, CompKind::Recv);
    assert_eq!((r.context, r.tag), (3, 0xAC00));
}

#[test]
fn any_source_and_directed() {
    let mut c = cluster(3, 4);
    c.send(1, 0, sop(0, vec![1; 100], Some(5), 1));
    run(&mut c);
    c.send(2, 0, sop(0, vec![2; 100], Some(5), 2));
    run(&mut c);
    // Directed to node 2 skips node 1's earlier message.
    c.recv(0, rop(100, Some((5, 0)), Some(2), 20));
    c.recv(0, rop(100, Some((5, 0)), None, 21));
    run(&mut c);
    let mut rs = c.take(0, CompKind::Recv);
    rs.sort_by_key(|r| r.context);
    assert_eq!(
        (rs[0].src, rs[0].buf.as_ref().unwrap()[0]),
        (Some(PeerId(2)), 2)
    );
    assert_eq!(
        (rs[1].src, rs[1].buf.as_ref().unwrap()[0]),
        (Some(PeerId(1)), 1)
    );
    // Posted first: a directed receive lets another peer's message pass to the any-source one.
    c.recv(0, rop(100, Some((5, 0)), Some(1), 30));
    c.recv(0, rop(100, Some((5, 0)), None, 31));
    c.send(2, 0, sop(0, vec![2; 100], Some(5), 3));
    run(&mut c);
    let r = one(&mut c, 0, CompKind::Recv);
    assert_eq!((r.context, r.src), (31, Some(PeerId(2))));
}

#[test]
fn truncation_in_every_protocol() {
    for (k, &len) in [SEG / 2, 5 * SEG, EAGER * 3].iter().enumerate() {
        for expected in [true, false] {
            let mut c = cluster(2, 50 + k as u64);
            let room = len / 3;
            let data = pattern(k as u64, len);
            if expected {
                c.recv(1, rop(room, None, None, 1));
            }
            c.send(0, 1, sop(1, data.clone(), None, 2));
            run(&mut c);
            if !expected {
                c.recv(1, rop(room, None, None, 1));
                run(&mut c);
            }
            let r = one(&mut c, 1, CompKind::Recv);
            assert_eq!(r.error, Some(CompError::Truncated));
            assert_eq!((r.len, r.olen), (room, len - room));
            assert_eq!(r.buf.unwrap(), data[..room]);
            assert_eq!(one(&mut c, 0, CompKind::Send).error, None);
            // Later traffic is unaffected: every segment of the truncated message was consumed.
            c.recv(1, rop(10, None, None, 3));
            c.send(0, 1, sop(1, vec![9; 10], None, 4));
            run(&mut c);
            assert_eq!(one(&mut c, 1, CompKind::Recv).buf.unwrap(), vec![9; 10]);
            assert_eq!(c.nodes[1].live_counts(), (0, 0, 0));
        }
    }
    // A rendezvous receiver only asks for what fits.
    let mut c = cluster(2, 77);
    c.recv(1, rop(SEG, None, None, 1));
    c.send(0, 1, sop(1, vec![1; EAGER * 10], None, 2));
    run(&mut c);
    assert!(
        c.nodes[0].stats().datagrams_sent <= 3,
        "{:?}",
        c.nodes[0].stats()
    );
}

#[test]
fn cancel_posted_receive() {
    let mut c = cluster(2, 3);
    c.recv(1, rop(10, Some((1, 0)), None, 1));
    c.recv(1, rop(10, Some((1, 0)), None, 2));
    assert!(c.nodes[1].cancel(1));
    assert!(!c.nodes[1].cancel(1));
    assert!(!c.nodes[1].cancel(99));
    c.pump(1);
    let r = one(&mut c, 1, CompKind::Recv);
    assert_eq!(
        (r.context, r.error, r.buf.map(|b| b.len())),
        (1, Some(CompError::Canceled), Some(10))
    );
    c.send(0, 1, sop(1, vec![4; 10], Some(1), 5));
    run(&mut c);
    assert_eq!(one(&mut c, 1, CompKind::Recv).context, 2);
    assert_eq!(one(&mut c, 0, CompKind::Send).context, 5);
    // A send not yet started can be cancelled too.
    c.net.cap = 0;
    c.send(0, 1, sop(1, vec![4; 10], Some(1), 6));
    c.send(0, 1, sop(1, vec![4; 10], Some(1), 7));
    assert!(c.nodes[0].cancel(7));
    c.pump(0);
    let s = one(&mut c, 0, CompKind::Send);
    assert_eq!((s.context, s.error), (7, Some(CompError::Canceled)));
}

#[test]
fn peek_claim_discard() {
    let mut c = cluster(2, 5);
    let peek = |ctx, claim, discard| {
        let mut r = rop(0, Some((8, 0)), None, ctx);
        r.flags = RecvFlags {
            peek: true,
            claim,
            discard,
            multi_recv: false,
        };
        r
    };
    c.recv(1, peek(1, false, false));
    let r = one(&mut c, 1, CompKind::Recv);
    assert_eq!((r.context, r.error), (1, Some(CompError::NoMessage)));
    let mut s = sop(1, pattern(1, 3000), Some(8), 10);
    s.data = Some(77);
    c.send(0, 1, s);
    c.send(0, 1, sop(1, pattern(2, EAGER * 2), Some(8), 11));
    c.send(0, 1, sop(1, pattern(3, 500), Some(8), 12));
    run(&mut c);
    c.recv(1, peek(2, false, false));
    let r = one(&mut c, 1, CompKind::Recv);
    assert_eq!(
        (r.error, r.len, r.data, r.src, r.tag),
        (None, 3000, Some(77), Some(PeerId(0)), 8)
    );
    // Claim it; a plain receive then sees the next message, not the claimed one.
    c.recv(1, peek(3, true, false));
    assert_eq!(one(&mut c, 1, CompKind::Recv).len, 3000);
    c.recv(1, peek(4, true, false));
    assert_eq!(one(&mut c, 1, CompKind::Recv).len, EAGER * 2);
    let mut take = rop(3000, Some((8, 0)), None, 3);
    take.flags.claim = true;
    c.recv(1, take);
    run(&mut c);
    let r = one(&mut c, 1, CompKind::Recv);
    assert_eq!((r.context, r.error, r.data), (3, None, Some(77)));
    assert_eq!(r.buf.unwrap(), pattern(1, 3000));
    // Discard the claimed rendezvous message: the sender completes, nothing is transferred.
    let mut d = rop(0, Some((8, 0)), None, 4);
    d.flags = RecvFlags {
        peek: false,
        claim: true,
        discard: true,
        multi_recv: false,
    };
    c.recv(1, d);
    run(&mut c);
    let r = one(&mut c, 1, CompKind::Recv);
    assert_eq!((r.context, r.error, r.len), (4, None, 0));
    // Peek + discard drops the last one.
    c.recv(1, peek(5, false, true));
    assert_eq!(one(&mut c, 1, CompKind::Recv).len, 500);
    c.recv(1, peek(6, false, false));
    assert_eq!(
        one(&mut c, 1, CompKind::Recv).error,
        Some(CompError::NoMessage)
    );
    run(&mut c);
    assert_eq!(c.take(0, CompKind::Send).len(), 3);
    assert_eq!(c.nodes[1].live_counts(), (0, 0, 0));
    assert_eq!(c.nodes[1].unexpected_bytes(), 0);
}

#[test]
fn multi_recv_buffer() {
    let mut c = cluster(2, 6);
    c.nodes[1].set_min_multi_recv(1000);
    let mut m = rop(10_000, None, None, 42);
    m.flags.multi_recv = true;
    // Two messages arrive before the buffer is posted, the rest after.
    c.send(0, 1, sop(1, pattern(0, 3000), None, 0));
    c.send(0, 1, sop(1, pattern(1, 2500), None, 1));
    run(&mut c);
    c.recv(1, m);
    for i in 2..5 {
        c.send(0, 1, sop(1, pattern(i, 2000), None, i));
    }
    run(&mut c);
    let rs = c.take(1, CompKind::Recv);
    // 3000 + 2500 + 2000 = 7500 leaves 2500 ≥ 1000; + 2000 = 9500 leaves 500 < 1000: released.
    assert_eq!(rs.len(), 4, "{rs:?}");
    let last = rs.iter().find(|r| r.multi_recv_done).expect("release");
    assert_eq!(rs.iter().filter(|r| r.multi_recv_done).count(), 1);
    let buf = last.buf.as_ref().unwrap();
    for r in &rs {
        assert_eq!(r.context, 42);
        assert_eq!(r.error, None);
        let i = [3000, 2500, 2000].iter().position(|&l| l == r.len).unwrap() as u64;
        let i = if r.offset >= 7500 { 3 } else { i };
        assert_eq!(
            &buf[r.offset..r.offset + r.len],
            &pattern(i, r.len)[..],
            "msg at {}",
            r.offset
        );
    }
    let mut offs: Vec<_> = rs.iter().map(|r| r.offset).collect();
    offs.sort();
    assert_eq!(offs, vec![0, 3000, 5500, 7500]);
    // The fifth waits for the next buffer.
    let r = rop(5000, None, None, 43);
    c.recv(1, r);
    run(&mut c);
    assert_eq!(
        one(&mut c, 1, CompKind::Recv).buf.unwrap()[..2000],
        pattern(4, 2000)[..]
    );
}

#[test]
fn delivery_complete_waits_for_acks() {
    for dc in [false, true] {
        let mut c = cluster(2, 8);
        c.net.cap = 1000;
        let mut s = sop(1, pattern(0, 10 * SEG), None, 1);
        s.delivery_complete = dc;
        c.recv(1, rop(10 * SEG, None, None, 2));
        c.send(0, 1, s);
        assert_eq!(c.net.inflight.len(), 10);
        assert_eq!(c.take(0, CompKind::Send).len(), usize::from(!dc));
        // With delivery-complete, the send completes exactly when its last ack arrives.
        let mut done = !dc;
        while c.step() {
            let unacked = c.net.inflight.iter().filter(|p| p.from == 0).count()
                + c.net.events.iter().filter(|(n, _)| *n == 0).count();
            if !done {
                done = !c.take(0, CompKind::Send).is_empty();
                assert_eq!(
                    done,
                    unacked == 0,
                    "completion vs. {unacked} unacked datagrams"
                );
            }
        }
        assert!(done);
        run(&mut c);
        assert_eq!(one(&mut c, 1, CompKind::Recv).error, None);
    }
}

#[test]
fn failed_datagrams_fail_the_send_once() {
    for len in [100, 5 * SEG, EAGER * 4] {
        let mut c = cluster(2, 11);
        c.kill_link(0, 1);
        let mut s = sop(1, vec![1; len], None, 1);
        s.delivery_complete = true;
        c.send(0, 1, s);
        c.send(0, 1, sop(1, vec![1; len], None, 2));
        run(&mut c);
        let mut ss = c.take(0, CompKind::Send);
        ss.sort_by_key(|s| s.context);
        let ctxs: Vec<_> = ss.iter().map(|s| s.context).collect();
        assert_eq!(ctxs, vec![1, 2]);
        assert_eq!(ss[0].error, Some(CompError::PeerUnreachable));
        assert!(ss[0].buf.is_some());
        if len > EAGER {
            // A rendezvous send without delivery-complete still needs its CTS.
            assert_eq!(ss[1].error, Some(CompError::PeerUnreachable));
        }
        assert_eq!(c.nodes[0].live_counts().0, 0);
    }
}

#[test]
fn peer_restart_resets_sequences() {
    let mut c = cluster(2, 12);
    // Partial traffic in flight when node 1 restarts.
    c.recv(1, rop(EAGER * 3, None, None, 1));
    c.send(0, 1, sop(1, vec![1; EAGER * 3], None, 1));
    c.send(0, 1, sop(1, vec![1; 3 * SEG], None, 2));
    for _ in 0..5 {
        c.step();
    }
    c.restart(1);
    run(&mut c);
    let ss = c.take(0, CompKind::Send);
    assert!(ss
        .iter()
        .all(|s| s.context != 1 || s.error == Some(CompError::PeerUnreachable)));
    // The new incarnation starts at sequence 0 in both directions.
    for i in 0..20u64 {
        c.recv(1, rop(5000, None, Some(0), 100 + i));
        c.send(
            0,
            1,
            sop(1, pattern(i, (i as usize * 997) % 5000), None, 10 + i),
        );
        c.send(1, 0, sop(0, pattern(i, 10), None, 10 + i));
        c.recv(0, rop(10, None, None, 200 + i));
    }
    run(&mut c);
    let rs = c.take(1, CompKind::Recv);
    assert_eq!(rs.len(), 20);
    for r in rs {
        let i = r.context - 100;
        assert_eq!(
            r.buf.unwrap()[..r.len],
            pattern(i, (i as usize * 997) % 5000)[..]
        );
    }
    assert_eq!(c.take(0, CompKind::Recv).len(), 20);
}

#[test]
fn restart_drops_partial_and_fails_matched_receive() {
    let mut c = cluster(2, 13);
    c.recv(1, rop(5 * SEG, None, None, 1));
    c.send(0, 1, sop(1, vec![1; 5 * SEG], None, 1));
    // Deliver some but not all segments of the medium message to node 1.
    while c.nodes[1].live_counts().2 == 0 {
        c.step();
    }
    c.nodes[1].handle_event(spray::dgram::DgramEvent::PeerRestarted { peer: PeerId(0) });
    c.pump(1);
    let r = one(&mut c, 1, CompKind::Recv);
    assert_eq!(r.error, Some(CompError::PeerUnreachable));
    assert!(r.buf.is_some());
    assert_eq!(c.nodes[1].live_counts(), (0, 0, 0));
}

#[test]
fn many_peers_all_to_all() {
    let n = 8;
    let mut c = cluster(n, 14);
    c.net.cap = 4;
    for to in 0..n {
        for from in 0..n {
            if from != to {
                for k in 0..4 {
                    let ctx = (from * 100 + k) as u64;
                    c.recv(to, rop(EAGER * 2, Some((from as u64, 0)), Some(from), ctx));
                }
            }
        }
    }
    for from in 0..n {
        for to in 0..n {
            if from != to {
                for k in 0..4 {
                    let len = [10, 3 * SEG, EAGER + 5, 2 * EAGER][k];
                    let id = (from * 100 + to * 10 + k) as u64;
                    c.send(from, to, sop(to, pattern(id, len), Some(from as u64), id));
                }
            }
        }
    }
    run(&mut c);
    for to in 0..n {
        let rs = c.take(to, CompKind::Recv);
        assert_eq!(rs.len(), 4 * (n - 1));
        for r in rs {
            let from = r.context / 100;
            let k = (r.context % 100) as usize;
            let id = from * 100 + to as u64 * 10 + k as u64;
            let len = [10, 3 * SEG, EAGER + 5, 2 * EAGER][k];
            assert_eq!(r.buf.unwrap()[..r.len], pattern(id, len)[..]);
        }
    }
}

#[test]
fn unexpected_memory_stays_bounded() {
    let mut cf = cfg(EpMode::Rdm);
    cf.max_unexpected_bytes = 256 << 10;
    let mut c = Cluster::new(3, cf.clone(), 15);
    let n = 300u64;
    for i in 0..n {
        for from in [0, 2] {
            let len = [EAGER, 7000, 100, 0][(i % 4) as usize];
            c.send(
                from,
                1,
                sop(1, pattern(i + 1000 * from as u64, len), Some(i), i),
            );
        }
    }
    run(&mut c);
    let peak = c.nodes[1].peak_unexpected_bytes();
    // Each sender holds at most max/CREDIT_SHARES of eager credit towards us.
    let bound = 2 * cf.max_unexpected_bytes / spray::msg::CREDIT_SHARES;
    assert!(peak <= bound, "peak {peak} > {bound}");
    assert!(peak > 0);
    for i in 0..n {
        for from in [0usize, 2] {
            c.recv(
                1,
                rop(EAGER, Some((i, 0)), Some(from), i + 1000 * from as u64),
            );
        }
    }
    run(&mut c);
    let rs = c.take(1, CompKind::Recv);
    assert_eq!(rs.len(), 2 * n as usize);
    for r in rs {
        let len = [EAGER, 7000, 100, 0][(r.tag % 4) as usize];
        assert_eq!(r.buf.unwrap()[..r.len], pattern(r.context, len)[..]);
    }
    assert_eq!(c.nodes[1].unexpected_bytes(), 0);
    // Credit came back: later small messages go eagerly again.
    let before = c.nodes[0].stats().datagrams_sent;
    c.recv(1, rop(10, None, None, 1));
    c.send(0, 1, sop(1, vec![1; 10], None, 1));
    run(&mut c);
    assert_eq!(c.nodes[0].stats().datagrams_sent - before, 1);
}

#[test]
fn too_large_and_invalid_posts() {
    let mut c = cluster(2, 16);
    let max = c.nodes[0].max_msg_size();
    assert!(max >= 1 << 40);
    let mut r = rop(10, Some((1, 0)), None, 1);
    r.flags.multi_recv = true;
    assert_eq!(c.nodes[1].post_recv(r), Err(OpError::Invalid));
}

#[test]
fn blocked_peer_does_not_block_others() {
    let mut c = cluster(3, 17);
    c.net.link_cap.insert((0, 1), 0);
    c.send(0, 1, sop(1, vec![1; 5 * SEG], None, 1));
    c.send(0, 2, sop(2, vec![2; 5 * SEG], None, 2));
    c.recv(2, rop(5 * SEG, None, None, 3));
    for _ in 0..1000 {
        c.step();
    }
    assert_eq!(
        one(&mut c, 2, CompKind::Recv).buf.unwrap(),
        vec![2; 5 * SEG]
    );
    assert!(c.nodes[0].has_pending_sends());
    // Unblock: the held-back peer drains too.
    c.net.link_cap.clear();
    c.recv(1, rop(5 * SEG, None, None, 4));
    run(&mut c);
    assert_eq!(
        one(&mut c, 1, CompKind::Recv).buf.unwrap(),
        vec![1; 5 * SEG]
    );
    assert!(!c.nodes[0].has_pending_sends());
}

#[test]
fn multi_recv_with_zero_minimum_releases_when_full() {
    let mut c = cluster(2, 18);
    let mut m = rop(3000, None, None, 9);
    m.flags.multi_recv = true;
    c.recv(1, m);
    c.send(0, 1, sop(1, vec![1; 1000], None, 1));
    c.send(0, 1, sop(1, vec![2; 2000], None, 2));
    run(&mut c);
    let rs = c.take(1, CompKind::Recv);
    assert_eq!(rs.len(), 2);
    assert_eq!(
        rs.iter()
            .filter(|r| r.multi_recv_done && r.buf.is_some())
            .count(),
        1
    );
}

#[test]
fn failed_cts_fails_the_matched_receive() {
    let mut c = cluster(2, 19);
    c.recv(1, rop(EAGER * 4, None, None, 1));
    c.send(0, 1, sop(1, vec![1; EAGER * 4], None, 2));
    // Deliver the RTS; node 1 answers with a CTS at once.
    while c.net.inflight.iter().all(|p| p.from != 1) {
        assert!(c.step());
    }
    c.kill_link(0, 1);
    run(&mut c);
    let r = one(&mut c, 1, CompKind::Recv);
    assert_eq!((r.context, r.error), (1, Some(CompError::PeerUnreachable)));
    assert_eq!(c.nodes[1].live_counts(), (0, 0, 0));
}

#[test]
fn restart_keeps_whole_unexpected_messages() {
    let mut c = cluster(2, 20);
    c.send(0, 1, sop(1, pattern(1, 3 * SEG), None, 1));
    run(&mut c);
    c.restart(0);
    c.send(0, 1, sop(1, pattern(2, 100), None, 2));
    run(&mut c);
    c.recv(1, rop(3 * SEG, None, None, 10));
    c.recv(1, rop(3 * SEG, None, None, 11));
    run(&mut c);
    let mut rs = c.take(1, CompKind::Recv);
    rs.sort_by_key(|r| r.context);
    assert_eq!(rs.len(), 2);
    assert_eq!(
        rs[0].buf.as_ref().unwrap()[..rs[0].len],
        pattern(1, 3 * SEG)[..]
    );
    assert_eq!(
        rs[1].buf.as_ref().unwrap()[..rs[1].len],
        pattern(2, 100)[..]
    );
}

#[test]
fn report_flag_is_copied_and_errors_always_report() {
    let mut c = cluster(2, 21);
    let mut s = sop(1, vec![1; 10], None, 1);
    s.report = false;
    let mut r = rop(10, None, None, 2);
    r.report = false;
    c.recv(1, r);
    c.send(0, 1, s);
    let mut r = rop(5, None, None, 3);
    r.report = false;
    c.recv(1, r);
    let mut s = sop(1, vec![2; 10], None, 4);
    s.report = false;
    c.send(0, 1, s);
    run(&mut c);
    let mut rs = c.take(1, CompKind::Recv);
    rs.sort_by_key(|r| r.context);
    assert_eq!((rs[0].report, rs[0].error), (false, None));
    assert_eq!(
        (rs[1].report, rs[1].error),
        (true, Some(CompError::Truncated))
    );
    assert!(c.take(0, CompKind::Send).iter().all(|s| !s.report));
}

/// The message sequence number in a message-layer datagram.
fn seq_of(p: &msg_fake::Pkt) -> u32 {
    u32::from_be_bytes([p.data[4], p.data[5], p.data[6], p.data[7]])
}

#[test]
fn failed_message_is_aborted_and_later_ones_flow() {
    // deliver_first: how many of the failed message's datagrams get through first.
    for (k, deliver_first) in [0usize, 2].into_iter().enumerate() {
        for len in [5 * SEG, EAGER * 3] {
            let mut c = cluster(2, 30 + k as u64);
            c.net.cap = 64;
            c.recv(1, rop(len, None, None, 1));
            c.recv(1, rop(100, None, None, 2));
            c.send(0, 1, sop(1, vec![1; len], None, 1));
            c.send(0, 1, sop(1, vec![2; 100], None, 2));
            // Deliver a few of message 0's datagrams (answering its RTS), then fail the rest.
            let mut delivered = 0;
            for _ in 0..100 {
                if delivered >= deliver_first {
                    break;
                }
                let i = c
                    .net
                    .inflight
                    .iter()
                    .position(|p| p.from == 0 && seq_of(p) == 0);
                let i = i.or_else(|| c.net.inflight.iter().position(|p| p.from == 1));
                let Some(i) = i else {
                    break;
                };
                let p = c.net.inflight.swap_remove(i);
                *c.net.counts.get_mut(&(p.from, p.to)).unwrap() -= 1;
                c.nodes[p.to as usize].handle_payload(PeerId(p.from), &p.data);
                c.pump(p.to as usize);
                c.pump(p.from as usize);
                delivered += usize::from(p.from == 0);
            }
            let n = c.fail_where(|p| p.from == 0 && seq_of(p) == 0);
            assert!(n > 0);
            run(&mut c);
            let s = c.take(0, CompKind::Send);
            let s0 = s.iter().find(|s| s.context == 1).unwrap();
            // Sends complete when handed down; only a rendezvous send whose RTS failed
            // was still going.
            let want = (len > EAGER && delivered == 0).then_some(CompError::PeerUnreachable);
            assert_eq!(s0.error, want, "len {len} k {k}");
            assert_eq!(s.iter().find(|s| s.context == 2).unwrap().error, None);
            let rs = c.take(1, CompKind::Recv);
            let r1 = rs
                .iter()
                .find(|r| r.context == 1)
                .expect("receive 1 completes");
            if delivered == 0 {
                // Nothing of message 0 arrived: to the receiver it never existed, and
                // message 1 takes the first receive instead of waiting forever.
                assert_eq!((r1.error, r1.len), (None, 100), "len {len} k {k}");
                assert_eq!(r1.buf.as_ref().unwrap()[..100], vec![2; 100][..]);
                assert!(c.nodes[1].cancel(2));
            } else {
                let r2 = rs
                    .iter()
                    .find(|r| r.context == 2)
                    .expect("message 1 held back");
                assert_eq!(r2.buf.as_ref().unwrap()[..r2.len], vec![2; 100][..]);
                assert_eq!(
                    r1.error,
                    Some(CompError::PeerUnreachable),
                    "len {len} k {k}"
                );
            }
            assert_eq!(c.nodes[1].live_counts(), (0, 0, 0));
        }
    }
}

#[test]
fn failed_cts_is_retried_while_the_peer_lives() {
    let mut c = cluster(2, 22);
    let data = pattern(5, EAGER * 4);
    c.recv(1, rop(EAGER * 4, None, None, 1));
    c.send(0, 1, sop(1, data.clone(), None, 2));
    // Fail the first CTS (type byte 3) once; the link stays up.
    let mut failed = 0;
    for _ in 0..1000 {
        failed += c.fail_where(|p| p.from == 1 && p.data[1] == 3);
        if failed > 0 || !c.step() {
            break;
        }
    }
    assert_eq!(failed, 1);
    run(&mut c);
    let r = one(&mut c, 1, CompKind::Recv);
    assert_eq!(r.error, None);
    assert!(r.buf.unwrap() == data);
    assert_eq!(one(&mut c, 0, CompKind::Send).error, None);
}
