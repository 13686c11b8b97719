//! Atomics over the lossy simulator: every op × datatype × call kind checked
//! against an independent reference (wide-integer / f64 arithmetic), fetch and
//! compare results included; concurrent atomics from two initiators; post checks.

mod msg_rma_util;

use msg_rma_util::{drive, lock, net, secs, Regions, TBuf};
use spray::msg::atomic::{ATOMIC_OPS, ATOMIC_TYPES};
use spray::msg::{
    atomic_valid, AtomicCall, AtomicOp, AtomicType, CompKind, OpError, RmaKind, RmaOp,
};
use spray::rng::Rng;
use spray::sim::addr;

/// An element value: integers widened (sign or zero extended), floats as f64.
#[derive(Copy, Clone, Debug)]
enum V {
    I(i128),
    F(f64),
}

fn is_float(dt: AtomicType) -> bool {
    matches!(dt, AtomicType::F32 | AtomicType::F64)
}

fn signed(dt: AtomicType) -> bool {
    matches!(
        dt,
        AtomicType::I8 | AtomicType::I16 | AtomicType::I32 | AtomicType::I64
    )
}

fn decode(dt: AtomicType, b: &[u8]) -> V {
    let n = dt.size();
    match dt {
        AtomicType::F32 => V::F(f32::from_le_bytes(b[..4].try_into().unwrap()) as f64),
        AtomicType::F64 => V::F(f64::from_le_bytes(b[..8].try_into().unwrap())),
        _ => {
            let mut raw = 0u128;
            for (i, &x) in b[..n].iter().enumerate() {
                raw |= (x as u128) << (8 * i);
            }
            let bits = 8 * n as u32;
            let v = if signed(dt) && raw >> (bits - 1) & 1 == 1 {
                raw as i128 - (1i128 << bits)
            } else {
                raw as i128
            };
            V::I(v)
        }
    }
}

fn encode(dt: AtomicType, v: V) -> Vec<u8> {
    match (dt, v) {
        (AtomicType::F32, V::F(f)) => (f as f32).to_le_bytes().to_vec(),
        (AtomicType::F64, V::F(f)) => f.to_le_bytes().to_vec(),
        (_, V::I(i)) => (0..dt.size()).map(|k| (i >> (8 * k)) as u8).collect(),
        _ => unreachable!("type mismatch"),
    }
}

/// libfabric's definition of each op, written from the man page (fi_atomic(3)).
fn reference(op: AtomicOp, t: V, o: V, c: V) -> V {
    use AtomicOp::*;
    match (t, o, c) {
        (V::I(t), V::I(o), V::I(c)) => V::I(match op {
            Min => t.min(o),
            Max => t.max(o),
            Sum => t + o,
            Prod => t.wrapping_mul(o),
            Lor => (t != 0 || o != 0) as i128,
            Land => (t != 0 && o != 0) as i128,
            Bor => t | o,
            Band => t & o,
            Lxor => ((t != 0) != (o != 0)) as i128,
            Bxor => t ^ o,
            Read => t,
            Write => o,
            Cswap => [t, o][(c == t) as usize],
            CswapNe => [t, o][(c != t) as usize],
            CswapLe => [t, o][(c <= t) as usize],
            CswapLt => [t, o][(c < t) as usize],
            CswapGe => [t, o][(c >= t) as usize],
            CswapGt => [t, o][(c > t) as usize],
            Mswap => (o & c) | (t & !c),
        }),
        (V::F(t), V::F(o), V::F(c)) => V::F(match op {
            Min => t.min(o),
            Max => t.max(o),
            Sum => t + o,
            Prod => t * o,
            Read => t,
            Write => o,
            Cswap => [t, o][(c == t) as usize],
            CswapNe => [t, o][(c != t) as usize],
            CswapLe => [t, o][(c <= t) as usize],
            CswapLt => [t, o][(c < t) as usize],
            CswapGe => [t, o][(c >= t) as usize],
            CswapGt => [t, o][(c > t) as usize],
            _ => unreachable!("not valid on floats"),
        }),
        _ => unreachable!(),
    }
}

fn random_elem(rng: &mut Rng, dt: AtomicType) -> Vec<u8> {
    if is_float(dt) {
        // Small halves and quarters: exact in f32, no NaN, some equal values.
        let f = (rng.below(64) as f64 - 32.0) / 4.0;
        encode(dt, V::F(f))
    } else {
        let v = match rng.below(4) {
            0 => rng.below(3) as i128,
            1 => -(rng.below(3) as i128),
            _ => rng.next_u64() as i128,
        };
        encode(dt, V::I(v))
    }
}

struct Case {
    op: AtomicOp,
    dt: AtomicType,
    call: AtomicCall,
    count: usize,
    old: Vec<u8>,
    operand: Vec<u8>,
    compare: Vec<u8>,
}

/// Slot of case `i` in the target and result regions, bytes.
const SLOT: usize = 64;

#[test]
fn every_op_and_type_matches_the_reference() {
    let seed = 21;
    let mut rng = Rng::new(seed);
    let mut cases = Vec::new();
    for call in [AtomicCall::Plain, AtomicCall::Fetch, AtomicCall::Compare] {
        for &op in &ATOMIC_OPS {
            for &dt in &ATOMIC_TYPES {
                if !atomic_valid(op, dt, call) {
                    continue;
                }
                let count = 1 + cases.len() % (SLOT / dt.size()).min(5);
                let mut c = Case {
                    op,
                    dt,
                    call,
                    count,
                    old: Vec::new(),
                    operand: Vec::new(),
                    compare: Vec::new(),
                };
                for e in 0..count {
                    let t = random_elem(&mut rng, dt);
                    c.operand.extend(random_elem(&mut rng, dt));
                    // Half the comparands equal the target, so every compare op both swaps and not.
                    let cmp = if e % 2 == 0 {
                        t.clone()
                    } else {
                        random_elem(&mut rng, dt)
                    };
                    c.compare.extend(cmp);
                    c.old.extend(t);
                }
                cases.push(c);
            }
        }
    }
    assert!(cases.len() > 150, "only {} valid combinations", cases.len());
    let mut sim = net(seed, 2, 0.03);
    let regions = Regions::default();
    let tmem = regions.add(3, cases.len() * SLOT, None, true, true);
    let results = Regions::default().add(0, cases.len() * SLOT, None, true, true);
    for (i, c) in cases.iter().enumerate() {
        lock(&tmem)[i * SLOT..i * SLOT + c.old.len()].copy_from_slice(&c.old);
    }
    sim.nodes[1].set_rma_target(Box::new(regions));
    let p1 = sim.nodes[0].peer(addr(1));
    for (i, c) in cases.iter().enumerate() {
        let n = c.old.len();
        let result = TBuf::view(&results, i * SLOT, n);
        let (op, dt) = (c.op, c.dt);
        let kind = match c.call {
            AtomicCall::Plain => RmaKind::Atomic { op, dt },
            AtomicCall::Fetch => RmaKind::FetchAtomic { op, dt, result },
            AtomicCall::Compare => RmaKind::CompareAtomic {
                op,
                dt,
                compare: TBuf::Own(c.compare.clone()),
                result,
            },
        };
        let rop = RmaOp {
            peer: p1,
            kind,
            buf: TBuf::Own(c.operand.clone()),
            key: 3,
            addr: (i * SLOT) as u64,
            context: i as u64,
            report: true,
        };
        sim.nodes[0].post_rma(rop).expect("post atomic");
    }
    let mut done = vec![Vec::new(), Vec::new()];
    let want = cases.len();
    assert!(
        drive(&mut sim, &mut done, secs(30), |d| d[0].len() >= want),
        "seed {seed}: {}/{want} atomics done",
        done[0].len()
    );
    assert!(done[1].is_empty(), "atomics make no target completions");
    let mut seen = vec![false; want];
    for comp in &done[0] {
        let i = comp.context as usize;
        let c = &cases[i];
        assert!(!std::mem::replace(&mut seen[i], true));
        assert_eq!(comp.kind, CompKind::Atomic);
        assert!(comp.error.is_none(), "seed {seed}: {comp:?}");
        let sz = c.dt.size();
        let mut expect = Vec::new();
        for e in 0..c.count {
            let at = e * sz..(e + 1) * sz;
            let v = reference(
                c.op,
                decode(c.dt, &c.old[at.clone()]),
                decode(c.dt, &c.operand[at.clone()]),
                decode(c.dt, &c.compare[at]),
            );
            expect.extend(encode(c.dt, v));
        }
        let got = lock(&tmem)[i * SLOT..i * SLOT + expect.len()].to_vec();
        assert_eq!(
            got, expect,
            "seed {seed}: {:?} {:?} {:?} x{}: old {:?} operand {:?} compare {:?}",
            c.call, c.op, c.dt, c.count, c.old, c.operand, c.compare
        );
        let fetched = lock(&results)[i * SLOT..i * SLOT + c.old.len()].to_vec();
        if c.call == AtomicCall::Plain {
            assert!(
                fetched.iter().all(|&b| b == 0),
                "plain atomic wrote a result"
            );
        } else {
            assert_eq!(
                fetched, c.old,
                "seed {seed}: fetched old values of {:?} {:?}",
                c.op, c.dt
            );
        }
    }
}

#[test]
fn two_initiators_sum_one_counter_exactly() {
    for seed in [5u64, 6] {
        let mut sim = net(seed, 3, 0.04);
        let regions = Regions::default();
        let start = 1u64 << 40;
        let ctr = regions.add(1, 16, None, true, true);
        lock(&ctr)[..8].copy_from_slice(&start.to_le_bytes());
        sim.nodes[1].set_rma_target(Box::new(regions));
        let fetched = Regions::default().add(0, 2 * 300 * 8, None, true, true);
        let per = 300usize;
        let mut total = 0u64;
        for (k, node) in [0usize, 2].into_iter().enumerate() {
            let p1 = sim.nodes[node].peer(addr(1));
            for i in 0..per {
                let inc = 1 + (k * per + i) as u64;
                total += inc;
                let slot = (k * per + i) * 8;
                let kind = if i % 3 == 0 {
                    RmaKind::Atomic {
                        op: AtomicOp::Sum,
                        dt: AtomicType::U64,
                    }
                } else {
                    RmaKind::FetchAtomic {
                        op: AtomicOp::Sum,
                        dt: AtomicType::U64,
                        result: TBuf::view(&fetched, slot, 8),
                    }
                };
                let op = RmaOp {
                    peer: p1,
                    kind,
                    buf: TBuf::Own(inc.to_le_bytes().to_vec()),
                    key: 1,
                    addr: 0,
                    context: slot as u64,
                    report: true,
                };
                sim.nodes[node].post_rma(op).expect("post");
            }
        }
        let mut done = vec![Vec::new(), Vec::new(), Vec::new()];
        assert!(
            drive(&mut sim, &mut done, secs(30), |d| d[0].len() >= per
                && d[2].len() >= per),
            "seed {seed}: {} + {} of {per} each",
            done[0].len(),
            done[2].len()
        );
        for c in done[0].iter().chain(&done[2]) {
            assert!(c.error.is_none(), "seed {seed}: {c:?}");
        }
        let end = u64::from_le_bytes(lock(&ctr)[..8].try_into().unwrap());
        assert_eq!(end, start + total, "seed {seed}: counter lost updates");
        // Fetched old values are distinct (each saw a different sum) and in range.
        let f = lock(&fetched).clone();
        let mut olds: Vec<u64> = (0..2 * per)
            .filter(|s| !(s % per).is_multiple_of(3))
            .map(|s| u64::from_le_bytes(f[s * 8..s * 8 + 8].try_into().unwrap()))
            .collect();
        assert!(olds.iter().all(|&o| o >= start && o < start + total));
        olds.sort_unstable();
        olds.dedup();
        assert_eq!(
            olds.len(),
            2 * (per - per.div_ceil(3)),
            "seed {seed}: duplicate fetches"
        );
    }
}

#[test]
fn post_time_checks() {
    let mut sim = net(1, 2, 0.0);
    let p1 = sim.nodes[0].peer(addr(1));
    let max = sim.nodes[0].max_atomic_count(AtomicType::U64, false);
    let maxc = sim.nodes[0].max_atomic_count(AtomicType::U64, true);
    assert!(
        max > 100 && maxc >= max / 2 - 1 && maxc <= max / 2,
        "{max} {maxc}"
    );
    let max8 = sim.nodes[0].max_atomic_count(AtomicType::U8, false);
    assert!(max8 >= max * 8 && max8 < max * 8 + 8, "{max8} vs {max}");
    let mk = |kind, len: usize| RmaOp {
        peer: p1,
        kind,
        buf: TBuf::Own(vec![1u8; len]),
        key: 1,
        addr: 0,
        context: 0,
        report: true,
    };
    let u64sum = || RmaKind::Atomic {
        op: AtomicOp::Sum,
        dt: AtomicType::U64,
    };
    let e = &mut sim.nodes[0];
    assert_eq!(
        e.post_rma(mk(u64sum(), max * 8 + 8)).err(),
        Some(OpError::TooLarge)
    );
    assert_eq!(e.post_rma(mk(u64sum(), 12)).err(), Some(OpError::Invalid));
    assert_eq!(e.post_rma(mk(u64sum(), 0)).err(), Some(OpError::Invalid));
    let bad = RmaKind::Atomic {
        op: AtomicOp::Bor,
        dt: AtomicType::F64,
    };
    assert_eq!(e.post_rma(mk(bad, 8)).err(), Some(OpError::Invalid));
    let cswap_plain = RmaKind::Atomic {
        op: AtomicOp::Cswap,
        dt: AtomicType::U32,
    };
    assert_eq!(e.post_rma(mk(cswap_plain, 8)).err(), Some(OpError::Invalid));
    let short = RmaKind::FetchAtomic {
        op: AtomicOp::Sum,
        dt: AtomicType::U32,
        result: TBuf::Own(vec![0; 4]),
    };
    assert_eq!(e.post_rma(mk(short, 8)).err(), Some(OpError::Invalid));
    let big_cmp = RmaKind::CompareAtomic {
        op: AtomicOp::Cswap,
        dt: AtomicType::U64,
        compare: TBuf::Own(vec![0; 8 * (maxc + 1)]),
        result: TBuf::Own(vec![0; 8 * (maxc + 1)]),
    };
    assert_eq!(
        e.post_rma(mk(big_cmp, 8 * (maxc + 1))).err(),
        Some(OpError::TooLarge)
    );
    // The largest ones go through and apply.
    let regions = Regions::default();
    let mem = regions.add(1, 8 * max, None, true, true);
    sim.nodes[1].set_rma_target(Box::new(regions));
    let res = Regions::default().add(0, 8 * maxc, None, true, true);
    sim.nodes[0]
        .post_rma(mk(u64sum(), 8 * max))
        .expect("max count");
    let full_cmp = RmaKind::CompareAtomic {
        op: AtomicOp::Cswap,
        dt: AtomicType::U64,
        compare: TBuf::Own(vec![0; 8 * maxc]),
        result: TBuf::view(&res, 0, 8 * maxc),
    };
    sim.nodes[0]
        .post_rma(mk(full_cmp, 8 * maxc))
        .expect("max compare count");
    let mut done = vec![Vec::new(), Vec::new()];
    assert!(drive(&mut sim, &mut done, secs(5), |d| d[0].len() >= 2));
    assert!(done[0].iter().all(|c| c.error.is_none()), "{:?}", done[0]);
    let one = u64::from_le_bytes([1; 8]);
    let m = lock(&mem);
    for e in 0..max {
        let v = u64::from_le_bytes(m[e * 8..e * 8 + 8].try_into().unwrap());
        // Sum of 0 + one, then (if it ran second) the compare saw one != 0: unchanged;
        // (if it ran first) 0 == 0 swapped in one, then the sum made 2 * one.
        assert!(
            v == one || (e < maxc && v == one.wrapping_mul(2)),
            "elem {e}: {v:#x}"
        );
    }
}
