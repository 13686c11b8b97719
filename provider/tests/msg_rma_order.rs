//! One-sided ordering (`RmaOrder`: `FI_ORDER_RAW` / `WAR` / `WAW`, plain, `RMA_`
//! and `ATOMIC_` forms alike) over the seeded simulator, whose 8 paths with
//! jitter and loss reorder datagrams: pairs of ops posted back to back on the
//! same target bytes must take effect in post order when the order is asked.
//! Without it the same runs show the reorderings (so the checks can fail).

mod msg_rma_util;

use msg_rma_util::{content, drive, lock, net, secs, Comp, Mem, Regions, TBuf};
use spray::msg::{AtomicOp, AtomicType, OrderScope, RmaKind, RmaOp, RmaOrder};
use spray::sim::addr;

/// Op pairs per pattern.
const PAIRS: usize = 48;
/// Slot stride in each region, bytes: room for the multi-datagram ops.
const STRIDE: usize = 4096;

/// Every fourth pair moves 3000 bytes (three datagrams at the simulator's
/// MTU), the rest 8.
fn len_of(k: usize) -> usize {
    if k.is_multiple_of(4) {
        3000
    } else {
        8
    }
}

/// Ops whose effect came out of post order, per pattern.
#[derive(Debug, Default, PartialEq, Eq)]
struct Wrong {
    /// Write, write: the target slot holds the first write's bytes.
    waw: usize,
    /// Write, read: the read missed the write.
    raw: usize,
    /// Read, write: the read saw the later write.
    war: usize,
    /// Atomic write, fetching atomic read: the fetch missed the write.
    atomic_raw: usize,
}

fn op(
    peer: spray::PeerId,
    kind: RmaKind<TBuf>,
    buf: TBuf,
    key: u64,
    k: usize,
    ctx: u64,
) -> RmaOp<TBuf> {
    RmaOp {
        peer,
        kind,
        buf,
        key,
        addr: (k * STRIDE) as u64,
        context: ctx,
        report: true,
    }
}

fn run(seed: u64, order: RmaOrder) -> Wrong {
    let mut sim = net(seed, 2, 0.01);
    let regions = Regions::default();
    let span = PAIRS * STRIDE;
    let waw = regions.add(1, span, None, true, true);
    let _raw = regions.add(2, span, None, true, true);
    let war = regions.add(3, span, Some(seed), true, true);
    let war_before = lock(&war).clone();
    let _atomic = regions.add(4, span, None, true, true);
    sim.nodes[1].set_rma_target(Box::new(regions.clone()));
    sim.nodes[0].set_rma_order(order);
    let results: Mem = std::sync::Arc::new(std::sync::Mutex::new(vec![0u8; PAIRS * 8]));
    let p1 = sim.nodes[0].peer(addr(1));
    let post = |sim: &mut spray::sim::Sim<msg_rma_util::Node>, o| {
        sim.nodes[0].post_rma(o).expect("post");
    };
    for k in 0..PAIRS {
        let len = len_of(k);
        let first = TBuf::Own(content(1000 + k as u64, len));
        let second = TBuf::Own(content(2000 + k as u64, len));
        let w = |data| RmaKind::Write { data };
        post(&mut sim, op(p1, w(None), first, 1, k, 0));
        post(&mut sim, op(p1, w(None), second, 1, k, 1));
        let value = TBuf::Own(content(3000 + k as u64, len));
        post(&mut sim, op(p1, w(None), value, 2, k, 2));
        let back = TBuf::Own(vec![0u8; len]);
        post(
            &mut sim,
            op(p1, RmaKind::Read, back, 2, k, (k * 10 + 3) as u64),
        );
        let back = TBuf::Own(vec![0u8; len]);
        post(
            &mut sim,
            op(p1, RmaKind::Read, back, 3, k, (k * 10 + 4) as u64),
        );
        let value = TBuf::Own(content(4000 + k as u64, len));
        post(&mut sim, op(p1, w(None), value, 3, k, 5));
        let aw = RmaKind::Atomic {
            op: AtomicOp::Write,
            dt: AtomicType::U64,
        };
        let operand = TBuf::Own((k as u64 + 1).to_le_bytes().to_vec());
        post(&mut sim, op(p1, aw, operand, 4, k, 6));
        let ar = RmaKind::FetchAtomic {
            op: AtomicOp::Read,
            dt: AtomicType::U64,
            result: TBuf::view(&results, k * 8, 8),
        };
        post(&mut sim, op(p1, ar, TBuf::Own(vec![0u8; 8]), 4, k, 7));
    }
    let total = PAIRS * 8;
    let mut done: Vec<Vec<Comp>> = vec![Vec::new(), Vec::new()];
    let ok = drive(&mut sim, &mut done, secs(60), |d| d[0].len() >= total);
    assert!(
        ok,
        "seed {seed} {order:?}: {} of {total} completions by {:?}",
        done[0].len(),
        sim.now
    );
    println!(
        "seed {seed} {order:?}: {total} ops done at {:?} (simulated)",
        sim.now
    );
    let mut wrong = Wrong::default();
    for c in &done[0] {
        assert!(c.error.is_none(), "seed {seed} {order:?}: {c:?}");
        let (k, which) = ((c.context / 10) as usize, c.context % 10);
        let got = c.buf.as_ref().map(TBuf::bytes).unwrap_or_default();
        let len = len_of(k);
        match which {
            3 if got != content(3000 + k as u64, len) => wrong.raw += 1,
            4 if got != war_before[k * STRIDE..k * STRIDE + len] => wrong.war += 1,
            _ => {}
        }
    }
    let waw_mem = lock(&waw);
    let res = lock(&results);
    for k in 0..PAIRS {
        let len = len_of(k);
        if waw_mem[k * STRIDE..k * STRIDE + len] != content(2000 + k as u64, len)[..] {
            wrong.waw += 1;
        }
        if res[k * 8..k * 8 + 8] != (k as u64 + 1).to_le_bytes() {
            wrong.atomic_raw += 1;
        }
    }
    wrong
}

const ALL: RmaOrder = RmaOrder::ALL;

#[test]
fn asked_orders_hold_over_reordering_paths() {
    for seed in 1..=4 {
        let w = run(seed, ALL);
        assert_eq!(w, Wrong::default(), "seed {seed}: ops out of post order");
    }
}

/// Each order alone keeps its own pattern (the others may go either way).
#[test]
fn each_order_alone_keeps_its_pattern() {
    for seed in 5..=7 {
        let (all, none) = (OrderScope::ALL, OrderScope::default());
        let only = |raw, war, waw| RmaOrder { raw, war, waw };
        let w = run(seed, only(all, none, none));
        assert_eq!((w.raw, w.atomic_raw), (0, 0), "seed {seed} RAW: {w:?}");
        let w = run(seed, only(none, all, none));
        assert_eq!(w.war, 0, "seed {seed} WAR: {w:?}");
        let w = run(seed, only(none, none, all));
        assert_eq!(w.waw, 0, "seed {seed} WAW: {w:?}");
    }
}

/// The `ATOMIC_` forms alone (what Intel MPI and MPICH ask) order atomics
/// among themselves and hold no RMA read or write back: those still come out
/// of post order (summed over seeds), and the run takes the unordered time
/// rather than a round trip per write.
#[test]
fn atomic_forms_order_atomics_only() {
    let atomic_only = OrderScope {
        atomic: true,
        ..OrderScope::default()
    };
    let order = RmaOrder {
        raw: atomic_only,
        war: atomic_only,
        waw: atomic_only,
    };
    let mut rma_wrong = 0;
    for seed in 1..=4 {
        let w = run(seed, order);
        assert_eq!(w.atomic_raw, 0, "seed {seed}: atomics out of order: {w:?}");
        rma_wrong += w.waw + w.raw + w.war;
    }
    assert!(rma_wrong > 0, "RMA ops were ordered too (held back)");
}

/// The network of these tests does reorder: without the orders, every
/// pattern comes out of post order somewhere (what the tests above would
/// catch if the ordering broke).
#[test]
fn without_the_orders_the_network_reorders() {
    let mut sum = Wrong::default();
    for seed in 1..=4 {
        let w = run(seed, RmaOrder::default());
        println!("seed {seed}: unordered {w:?}");
        sum.waw += w.waw;
        sum.raw += w.raw;
        sum.war += w.war;
        sum.atomic_raw += w.atomic_raw;
    }
    assert!(
        sum.waw > 0 && sum.raw > 0 && sum.war > 0 && sum.atomic_raw > 0,
        "no reordering seen: {sum:?}"
    );
}
