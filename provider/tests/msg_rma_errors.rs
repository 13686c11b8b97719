//! RMA errors over the simulator: refused keys, ranges and accesses complete
//! `RemoteAccess` exactly once; a vanished or restarted peer fails pending ops
//! with `PeerUnreachable`; a target drops the state of a peer that failed.

mod msg_rma_util;

use core::time::Duration;

use msg_rma_util::{content, drive, engine, lock, net, run_for, secs, Comp, Regions, TBuf};
use spray::msg::{AtomicOp, AtomicType, CompError, CompKind, RmaKind, RmaOp};
use spray::sim::addr;
use spray::PeerId;

fn write(
    peer: PeerId,
    key: u64,
    addr: u64,
    len: usize,
    data: Option<u64>,
    ctx: u64,
) -> RmaOp<TBuf> {
    RmaOp {
        peer,
        kind: RmaKind::Write { data },
        buf: TBuf::Own(content(ctx, len)),
        key,
        addr,
        context: ctx,
        report: true,
    }
}

fn read(peer: PeerId, key: u64, addr: u64, len: usize, ctx: u64) -> RmaOp<TBuf> {
    RmaOp {
        peer,
        kind: RmaKind::Read,
        buf: TBuf::Own(vec![0; len]),
        key,
        addr,
        context: ctx,
        report: true,
    }
}

fn fetch_add(peer: PeerId, key: u64, addr: u64, ctx: u64) -> RmaOp<TBuf> {
    RmaOp {
        peer,
        kind: RmaKind::FetchAtomic {
            op: AtomicOp::Sum,
            dt: AtomicType::U64,
            result: TBuf::Own(vec![0; 8]),
        },
        buf: TBuf::Own(1u64.to_le_bytes().to_vec()),
        key,
        addr,
        context: ctx,
        report: true,
    }
}

/// Every context in `want` completed exactly once with `error`; nothing else completed.
fn check_once(seed: u64, comps: &[Comp], want: &[(u64, Option<CompError>)]) {
    for &(ctx, err) in want {
        let n: Vec<_> = comps.iter().filter(|c| c.context == ctx).collect();
        assert_eq!(
            n.len(),
            1,
            "seed {seed}: op {ctx} completed {} times",
            n.len()
        );
        assert_eq!(n[0].error, err, "seed {seed}: op {ctx}: {:?}", n[0]);
    }
    assert_eq!(comps.len(), want.len(), "seed {seed}: {comps:?}");
}

#[test]
fn refused_ops_complete_remote_access_exactly_once() {
    for (seed, loss) in [(31u64, 0.0), (32, 0.03), (33, 0.05)] {
        let mut sim = net(seed, 2, loss);
        let regions = Regions::default();
        let wmem = regions.add(7, 100_000, None, false, true);
        regions.add(9, 100_000, Some(1), true, false);
        sim.nodes[1].set_rma_target(Box::new(regions));
        let p1 = sim.nodes[0].peer(addr(1));
        let p0 = sim.nodes[1].peer(addr(0));
        let acc = Some(CompError::RemoteAccess);
        let ops = vec![
            (write(p1, 99, 0, 200_000, Some(1), 1), acc), // unknown key, many segments
            (write(p1, 7, 50_000, 60_000, Some(2), 2), acc), // runs past the region
            (write(p1, 9, 0, 5_000, None, 3), acc),       // read-only region
            (read(p1, 7, 0, 5_000, 4), acc),              // write-only region
            (read(p1, 9, 95_000, 10_000, 5), acc),        // runs past the region
            (read(p1, 98, 0, 10, 6), acc),                // unknown key
            (fetch_add(p1, 9, 0, 7), acc),                // atomics need read + write
            (fetch_add(p1, 7, 99_996, 8), acc),           // 8 bytes at 99 996: past the end
            (write(p1, 99, 0, 0, Some(3), 9), acc),       // 0 bytes, unknown key
            (write(p1, 7, 1000, 20_000, Some(4), 10), None), // a good one among them
            (read(p1, 9, 0, 0, 11), None),                // 0-byte read of a good key
        ];
        let want: Vec<_> = ops.iter().map(|(o, e)| (o.context, *e)).collect();
        for (op, _) in ops {
            sim.nodes[0].post_rma(op).expect("post");
        }
        // Node 0 has no RMA target installed: everything aimed at it is refused.
        sim.nodes[1]
            .post_rma(write(p0, 7, 0, 3000, Some(5), 21))
            .expect("post");
        sim.nodes[1]
            .post_rma(read(p0, 7, 0, 3000, 22))
            .expect("post");
        sim.nodes[1]
            .post_rma(fetch_add(p0, 7, 0, 23))
            .expect("post");
        let mut done = vec![Vec::new(), Vec::new()];
        let n0 = want.len();
        assert!(
            drive(&mut sim, &mut done, secs(20), |d| d[0].len() >= n0
                && d[1].len() >= 4),
            "seed {seed}: {} / {} completions",
            done[0].len(),
            done[1].len()
        );
        let quiet = sim.now + Duration::from_millis(50);
        drive(&mut sim, &mut done, quiet, |_| false);
        check_once(seed, &done[0], &want);
        // Node 1: its three refused ops, and one RemoteWrite for the good writedata only.
        let (remote, own): (Vec<Comp>, Vec<Comp>) = done[1]
            .drain(..)
            .partition(|c| c.kind == CompKind::RemoteWrite);
        check_once(seed, &own, &[(21, acc), (22, acc), (23, acc)]);
        assert_eq!(remote.len(), 1, "seed {seed}: {remote:?}");
        assert_eq!((remote[0].data, remote[0].len), (Some(4), 20_000));
        assert!(lock(&wmem)[1000..21_000] == content(10, 20_000)[..]);
        assert!(lock(&wmem)[..1000].iter().all(|&b| b == 0));
        assert!(sim.nodes[1].rma_stats().refused >= 9);
        for node in &sim.nodes {
            let s = node.rma_stats();
            assert_eq!(
                (s.live_ops, s.live_writes, s.live_reads),
                (0, 0, 0),
                "{s:?}"
            );
        }
    }
}

/// Node 0 runs a big write, a big read and an atomic against node 1, which
/// vanishes mid-transfer: every op completes `PeerUnreachable` exactly once.
#[test]
fn vanished_target_fails_pending_ops() {
    for seed in [41u64, 42] {
        let mut sim = net(seed, 2, 0.02);
        let regions = Regions::default();
        regions.add(1, 4 << 20, Some(2), true, true);
        sim.nodes[1].set_rma_target(Box::new(regions));
        let p1 = sim.nodes[0].peer(addr(1));
        sim.nodes[0]
            .post_rma(write(p1, 1, 0, 3 << 20, Some(1), 1))
            .expect("post");
        sim.nodes[0]
            .post_rma(read(p1, 1, 0, 3 << 20, 2))
            .expect("post");
        sim.nodes[0].post_rma(fetch_add(p1, 1, 0, 3)).expect("post");
        let mut done = vec![Vec::new(), Vec::new()];
        run_for(&mut sim, &mut done, Duration::from_micros(150));
        assert!(
            done[0].len() < 3,
            "seed {seed}: finished before the failure"
        );
        sim.down[1] = true;
        // Posted after the peer vanished: fails too.
        sim.nodes[0].post_rma(read(p1, 1, 0, 100, 4)).expect("post");
        let unreach = Some(CompError::PeerUnreachable);
        let ok = drive(&mut sim, &mut done, secs(5), |d| d[0].len() >= 4);
        assert!(ok, "seed {seed}: {:?} by {:?}", done[0], sim.now);
        let quiet = sim.now + Duration::from_millis(50);
        drive(&mut sim, &mut done, quiet, |_| false);
        // The atomic may have made it before the cut; the large ops cannot have.
        let atomic_err = done[0]
            .iter()
            .find(|c| c.context == 3)
            .and_then(|c| c.error);
        let want = [(1, unreach), (2, unreach), (3, atomic_err), (4, unreach)];
        check_once(seed, &done[0], &want);
        assert_eq!(sim.nodes[0].rma_stats().live_ops, 0);
    }
}

/// Node 0 reads 3 MiB from node 1 and writes 3 MiB with CQ data to it, then
/// vanishes: node 1's read responses fail back and it drops everything it held
/// for node 0 (read stream, write byte counter); no RemoteWrite appears.
#[test]
fn target_drops_state_of_a_failed_initiator() {
    let seed = 51;
    let mut sim = net(seed, 2, 0.01);
    let regions = Regions::default();
    regions.add(1, 4 << 20, Some(3), true, true);
    sim.nodes[1].set_rma_target(Box::new(regions));
    let p1 = sim.nodes[0].peer(addr(1));
    sim.nodes[0]
        .post_rma(read(p1, 1, 0, 3 << 20, 1))
        .expect("post");
    sim.nodes[0]
        .post_rma(write(p1, 1, 0, 3 << 20, Some(9), 2))
        .expect("post");
    let mut done = vec![Vec::new(), Vec::new()];
    run_for(&mut sim, &mut done, Duration::from_micros(300));
    let s = sim.nodes[1].rma_stats().clone();
    assert!(
        s.live_reads == 1 && s.live_writes == 1,
        "seed {seed}: not mid-transfer: {s:?}"
    );
    sim.down[0] = true;
    let cleared = |s: &spray::sim::Sim<msg_rma_util::Node>| {
        let st = s.nodes[1].rma_stats();
        st.live_reads == 0 && st.live_writes == 0
    };
    assert!(
        sim.run_until(secs(5), cleared),
        "seed {seed}: node 1 still holds {:?}",
        sim.nodes[1].rma_stats()
    );
    if let Some(c) = sim.nodes[1].poll_completion() {
        panic!("seed {seed}: target completion for a dead initiator: {c:?}");
    }
}

/// Node 1 restarts (new nonce, same address) while node 0's ops are in flight:
/// node 0 fails them `PeerUnreachable`, and new traffic between them works.
#[test]
fn restarted_target_fails_pending_ops_then_works_again() {
    let seed = 61;
    let mut sim = net(seed, 2, 0.02);
    let regions = Regions::default();
    regions.add(1, 4 << 20, Some(4), true, true);
    sim.nodes[1].set_rma_target(Box::new(regions.clone()));
    let back = Regions::default();
    let bmem = back.add(5, 10_000, None, true, true);
    sim.nodes[0].set_rma_target(Box::new(back));
    let p1 = sim.nodes[0].peer(addr(1));
    sim.nodes[0]
        .post_rma(read(p1, 1, 0, 3 << 20, 1))
        .expect("post");
    let mut done = vec![Vec::new(), Vec::new()];
    // Long enough for the read request to be acknowledged: then node 0 has nothing
    // outstanding, and only the restart report can fail the read.
    run_for(&mut sim, &mut done, Duration::from_micros(300));
    assert!(done[0].is_empty(), "finished before the restart");
    sim.nodes[1] = engine(1, 500);
    sim.nodes[1].set_rma_target(Box::new(regions));
    // The new incarnation writes to node 0: that reveals the restart.
    let p0 = sim.nodes[1].peer(addr(0));
    sim.nodes[1]
        .post_rma(write(p0, 5, 0, 10_000, None, 7))
        .expect("post");
    let ok = drive(&mut sim, &mut done, secs(5), |d| {
        !d[0].is_empty() && !d[1].is_empty()
    });
    assert!(ok, "seed {seed}: {:?} / {:?}", done[0], done[1]);
    let unreach = Some(CompError::PeerUnreachable);
    check_once(seed, &done[0], &[(1, unreach)]);
    check_once(seed, &done[1], &[(7, None)]);
    assert!(lock(&bmem)[..] == content(7, 10_000)[..]);
    // And node 0 can use the new incarnation.
    sim.nodes[0]
        .post_rma(read(p1, 1, (3 << 20) + 4096, 5000, 3))
        .expect("post");
    let ok = drive(&mut sim, &mut done, secs(10), |d| d[0].len() >= 2);
    assert!(ok, "seed {seed}: read after restart never completed");
    let c = &done[0][1];
    assert!(c.error.is_none(), "{c:?}");
    assert!(
        c.buf.as_ref().expect("buf").bytes()[..]
            == content(4, 4 << 20)[(3 << 20) + 4096..(3 << 20) + 9096]
    );
}

/// The path 0 → 1 goes black mid-write for longer than the unreachable timeout,
/// then heals: node 0's write fails `PeerUnreachable`, its RMA_ABORT (retried until
/// the path is back) frees node 1's byte counter, and later RMA works again.
#[test]
fn failed_write_is_aborted_at_the_living_target() {
    use spray::sim::{Event, EventKind};
    let seed = 71;
    let mut sim = net(seed, 2, 0.01);
    let regions = Regions::default();
    regions.add(1, 4 << 20, None, true, true);
    sim.nodes[1].set_rma_target(Box::new(regions));
    let p1 = sim.nodes[0].peer(addr(1));
    sim.nodes[0]
        .post_rma(write(p1, 1, 0, 3 << 20, Some(3), 1))
        .expect("post");
    let mut done = vec![Vec::new(), Vec::new()];
    run_for(&mut sim, &mut done, Duration::from_micros(150));
    let from = sim.now;
    let until = from + Duration::from_millis(250);
    for link in sim.paths_mut(0, 1).iter_mut() {
        link.schedule.push(Event {
            from,
            until,
            kind: EventKind::Blackhole,
        });
    }
    assert_eq!(sim.nodes[1].rma_stats().live_writes, 1, "not mid-write");
    let ok = drive(&mut sim, &mut done, secs(3), |d| !d[0].is_empty());
    assert!(ok, "seed {seed}: the write never failed");
    check_once(seed, &done[0], &[(1, Some(CompError::PeerUnreachable))]);
    let freed = |s: &spray::sim::Sim<msg_rma_util::Node>| s.nodes[1].rma_stats().live_writes == 0;
    assert!(
        sim.run_until(secs(5), freed),
        "seed {seed}: node 1 kept the counter: {:?}",
        sim.nodes[1].rma_stats()
    );
    assert!(
        sim.nodes[1].poll_completion().is_none(),
        "no RemoteWrite for it"
    );
    sim.nodes[0]
        .post_rma(write(p1, 1, 0, 100_000, Some(4), 2))
        .expect("post");
    let ok = drive(&mut sim, &mut done, secs(10), |d| {
        d[0].len() >= 2 && !d[1].is_empty()
    });
    assert!(ok, "seed {seed}: no RMA after the heal: {:?}", done);
    assert!(done[0][1].error.is_none() && done[1][0].data == Some(4));
}
