//! Property test: random mixes of sizes, tags, directed / any-source receives posted
//! before or after arrival, truncation and delivery-complete, over many seeds. Every
//! message must be received exactly once, with the right bytes, in per-peer send order.

mod msg_fake;

use std::collections::{HashMap, HashSet};

use msg_fake::{cfg, pattern, rop, sop, Cluster};
use spray::config::EpMode;
use spray::msg::{CompError, CompKind};
use spray::rng::Rng;

const SEG: usize = 1400 - spray::wire::msg::HEADER_LEN;

struct Msg {
    from: usize,
    to: usize,
    len: usize,
    class: Option<u64>,
}

fn random_len(rng: &mut Rng) -> usize {
    match rng.below(12) {
        0 => 0,
        1 => 1 + rng.below(8) as usize,
        2..=4 => rng.below(SEG as u64 + 2) as usize,
        5 => SEG - 1 + rng.below(3) as usize,
        6..=8 => rng.below(16 << 10) as usize,
        9 => (16 << 10) - 1 + rng.below(3) as usize,
        _ => (16 << 10) + rng.below(60_000) as usize,
    }
}

fn one_seed(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let n = 2 + rng.below(3) as usize;
    let mut c = Cluster::new(n, cfg(EpMode::Rdm), seed ^ 0xABCD);
    c.net.cap = 1 + rng.below(32) as usize;
    let classes: [Option<u64>; 3] = [None, Some(1), Some(2)];
    // Per (receiver, class): directed receives or any-source ones (mixing could strand one).
    let mut directed = HashMap::new();
    for to in 0..n {
        for cl in classes {
            directed.insert((to, cl), rng.chance(0.5));
        }
    }
    let count = 10 + rng.below(40) as usize;
    let mut msgs = Vec::new();
    for _ in 0..count {
        let from = rng.below(n as u64) as usize;
        let to = (from + 1 + rng.below(n as u64 - 1) as usize) % n;
        let class = classes[rng.below(3) as usize];
        msgs.push(Msg {
            from,
            to,
            len: random_len(&mut rng),
            class,
        });
    }
    // A receive for every message, in an order consistent per (receiver, class, source).
    let mut sends: Vec<usize> = (0..count).collect();
    let mut recvs: Vec<usize> = (0..count).collect();
    for v in [&mut sends, &mut recvs] {
        for i in (1..v.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
    let (mut si, mut ri) = (0, 0);
    let (mut peeks, mut cancels, mut claims) = (0, 0, 0);
    let mut posted: Vec<(usize, u64)> = Vec::new(); // (template message, context)
    let mut max_len: HashMap<(usize, Option<u64>), usize> = HashMap::new();
    for m in &msgs {
        let e = max_len.entry((m.to, m.class)).or_insert(0);
        *e = (*e).max(m.len);
    }
    while si < count || ri < count {
        if si < count && (ri == count || rng.chance(0.5)) {
            let id = sends[si];
            si += 1;
            let m = &msgs[id];
            let tag = m.class.map(|cl| cl | (rng.next_u64() << 8));
            let mut op = sop(m.to, pattern(id as u64, m.len), tag, id as u64);
            op.data = Some(id as u64);
            op.delivery_complete = rng.chance(0.3);
            c.send(m.from, m.to, op);
        } else {
            let tmpl = recvs[ri];
            let ctx = (1 << 32) | ri as u64;
            ri += 1;
            let m = &msgs[tmpl];
            let dir = directed[&(m.to, m.class)];
            let full = max_len[&(m.to, m.class)];
            let room = if rng.chance(0.15) {
                rng.below(full as u64 + 1) as usize
            } else {
                full
            };
            let tag = m.class.map(|cl| (cl, !0xFF));
            let src = dir.then_some(m.from);
            let mut op = rop(room, tag, src, ctx);
            if rng.chance(0.2) {
                // Peek + claim first: it must reserve exactly what a receive would take.
                let mut p = rop(0, tag, src, ctx);
                p.flags.peek = true;
                p.flags.claim = true;
                c.recv(m.to, p);
                let found = c.comps[m.to]
                    .last()
                    .is_some_and(|r| r.context == ctx && r.error.is_none());
                op.flags.claim = found;
                claims += usize::from(found);
                peeks += 1;
            }
            c.recv(m.to, op);
            if rng.chance(0.1) {
                // A receive nobody sends to, cancelled.
                c.recv(m.to, rop(10, Some((0x77, 0)), None, 7 << 40));
                assert!(c.nodes[m.to].cancel(7 << 40), "seed {seed}");
                cancels += 1;
            }
            posted.push((tmpl, ctx));
        }
        for _ in 0..rng.below(30) {
            c.step();
        }
    }
    // Directed receives were made per template message's source; the counts per
    // (receiver, class, source) match by construction, so everything must complete.
    assert!(c.run(2_000_000), "seed {seed}: did not go quiet");
    let mut seen = HashSet::new();
    for to in 0..n {
        let mut rs = c.take(to, CompKind::Recv);
        // Peek reports (no buffer) and cancelled receives are checked, then set aside.
        let canceled = rs
            .iter()
            .filter(|r| r.error == Some(CompError::Canceled))
            .count();
        let peeked = rs
            .iter()
            .filter(|r| r.buf.is_none() || r.error == Some(CompError::NoMessage))
            .count();
        assert!(rs
            .iter()
            .all(|r| r.error != Some(CompError::Canceled) || r.context == 7 << 40));
        rs.retain(|r| {
            r.buf.is_some() && !matches!(r.error, Some(CompError::Canceled | CompError::NoMessage))
        });
        peeks -= peeked;
        cancels -= canceled;
        rs.sort_by_key(|r| r.context);
        let mut last: HashMap<(usize, Option<u64>), usize> = HashMap::new();
        let mut send_pos = vec![0; count];
        for (p, &id) in sends.iter().enumerate() {
            send_pos[id] = p;
        }
        for r in rs {
            let id = r.data.expect("cq data") as usize;
            assert!(seen.insert(id), "seed {seed}: message {id} received twice");
            let m = &msgs[id];
            assert_eq!(
                (m.to, r.src.map(|p| p.0 as usize)),
                (to, Some(m.from)),
                "seed {seed}"
            );
            let room = r.buf.as_ref().unwrap().len();
            let placed = m.len.min(room);
            assert_eq!(
                (r.len, r.olen),
                (placed, m.len - placed),
                "seed {seed} msg {id}"
            );
            let want_err = (m.len > room).then_some(CompError::Truncated);
            assert_eq!(r.error, want_err, "seed {seed} msg {id}");
            assert!(
                r.buf.as_ref().unwrap()[..placed] == pattern(id as u64, m.len)[..placed],
                "seed {seed} msg {id}: bytes"
            );
            assert_eq!(r.tag & 0xFF, m.class.unwrap_or(0), "seed {seed}");
            // Per-peer send order within a class: later receives get later messages.
            let key = (m.from, m.class);
            if let Some(&prev) = last.get(&key) {
                assert!(
                    send_pos[id] > prev,
                    "seed {seed}: SAS order broken at msg {id}"
                );
            }
            last.insert(key, send_pos[id]);
        }
    }
    assert_eq!(seen.len(), count, "seed {seed}: messages missing");
    assert_eq!(
        (peeks, cancels),
        (0, 0),
        "seed {seed}: peek / cancel completions missing"
    );
    for (i, node) in c.nodes.iter().enumerate() {
        assert_eq!(
            node.live_counts(),
            (0, 0, 0),
            "seed {seed}: node {i} leaked state"
        );
        assert_eq!(node.unexpected_bytes(), 0, "seed {seed}");
    }
    let sent: usize = (0..n).map(|i| c.take(i, CompKind::Send).len()).sum();
    assert_eq!(sent, count, "seed {seed}: send completions");
    claims
}

#[test]
fn random_mixes_over_many_seeds() {
    let claims: usize = (0..320).map(one_seed).sum();
    assert!(
        claims > 50,
        "peek + claim found a message only {claims} times"
    );
}
