//! RMA writes, writedata and reads between two whole engines over the seeded,
//! lossy, duplicating, reordering simulator, verified byte for byte.

mod msg_rma_util;

use msg_rma_util::{content, drive, lock, net, secs, Regions, TBuf};
use spray::msg::{CompKind, RmaKind, RmaOp};
use spray::sim::addr;

const SIZES: &[usize] = &[
    0,
    1,
    8,
    1000,
    1375,
    1376,
    1377,
    4096,
    65537,
    300_000,
    1 << 20,
    3 << 20,
];

/// Room each op gets in the target region (ops never overlap), bytes.
fn slot_off(i: usize) -> usize {
    SIZES[..i].iter().map(|s| s + 64).sum()
}

/// Node 0 writes every size into node 1 (odd ones with remote CQ data) and reads every
/// size back out of a pre-filled region of node 1, all at once.
fn run(seed: u64, loss: f64) {
    let mut sim = net(seed, 2, loss);
    let regions = Regions::default();
    let span = slot_off(SIZES.len());
    let wmem = regions.add(7, span, None, false, true);
    let rmem = regions.add(9, span, Some(seed), true, false);
    sim.nodes[1].set_rma_target(Box::new(regions.clone()));
    let p1 = sim.nodes[0].peer(addr(1));
    let n = SIZES.len();
    for (i, &len) in SIZES.iter().enumerate() {
        let data = (i % 2 == 1).then_some(0xD000 + i as u64);
        let w = RmaOp {
            peer: p1,
            kind: RmaKind::Write { data },
            buf: TBuf::Own(content(i as u64, len)),
            key: 7,
            addr: slot_off(i) as u64,
            context: i as u64,
            report: true,
        };
        sim.nodes[0].post_rma(w).expect("post write");
        let r = RmaOp {
            peer: p1,
            kind: RmaKind::Read,
            buf: TBuf::Own(vec![0u8; len]),
            key: 9,
            addr: slot_off(i) as u64,
            context: 1000 + i as u64,
            report: true,
        };
        sim.nodes[0].post_rma(r).expect("post read");
    }
    let with_data = SIZES.iter().enumerate().filter(|(i, _)| i % 2 == 1).count();
    let mut done = vec![Vec::new(), Vec::new()];
    let ok = drive(&mut sim, &mut done, secs(60), |d| {
        d[0].len() >= 2 * n && d[1].len() >= with_data
    });
    assert!(
        ok,
        "seed {seed} loss {loss}: {} initiator and {} target completions by {:?}; rma {:?}/{:?}",
        done[0].len(),
        done[1].len(),
        sim.now,
        sim.nodes[0].rma_stats(),
        sim.nodes[1].rma_stats()
    );
    // Quiet for a while: no duplicate completions may follow.
    let quiet = sim.now + core::time::Duration::from_millis(50);
    drive(&mut sim, &mut done, quiet, |_| false);
    assert_eq!(
        done[0].len(),
        2 * n,
        "seed {seed}: extra initiator completions"
    );
    assert_eq!(
        done[1].len(),
        with_data,
        "seed {seed}: extra target completions"
    );
    let mut seen = vec![false; 2 * n];
    for c in &done[0] {
        assert!(c.error.is_none(), "seed {seed}: {c:?}");
        let (i, read) = match c.context {
            x if x >= 1000 => (x as usize - 1000, true),
            x => (x as usize, false),
        };
        assert!(!std::mem::replace(&mut seen[i + read as usize * n], true));
        let len = SIZES[i];
        assert_eq!(c.len, len);
        let off = slot_off(i);
        if read {
            assert_eq!(c.kind, CompKind::Read);
            let got = c.buf.as_ref().expect("buf back").bytes();
            assert!(
                got[..] == lock(&rmem)[off..off + len],
                "seed {seed}: read {i} ({len} B) differs"
            );
        } else {
            assert_eq!(c.kind, CompKind::Write);
            let m = lock(&wmem);
            assert!(
                m[off..off + len] == content(i as u64, len)[..],
                "seed {seed}: write {i} ({len} B) differs"
            );
            assert!(
                m[off + len..off + len + 64].iter().all(|&b| b == 0),
                "seed {seed}: write {i} spilled past its end"
            );
        }
    }
    let mut remote = vec![false; n];
    for c in &done[1] {
        assert_eq!(c.kind, CompKind::RemoteWrite, "seed {seed}: {c:?}");
        let i = (c.data.expect("cq data") - 0xD000) as usize;
        assert!(
            i % 2 == 1,
            "seed {seed}: remote completion for a plain write"
        );
        assert!(!std::mem::replace(&mut remote[i], true), "twice: {i}");
        assert_eq!(c.len, SIZES[i]);
        assert_eq!(c.src, Some(sim.nodes[1].peer(addr(0))));
        assert!(c.buf.is_none());
    }
    for node in &sim.nodes {
        let s = node.rma_stats();
        assert_eq!(
            (s.live_ops, s.live_writes, s.live_reads),
            (0, 0, 0),
            "{s:?}"
        );
    }
}

#[test]
fn write_read_all_sizes_lossless() {
    run(1, 0.0);
}

#[test]
fn write_read_all_sizes_lossy() {
    for (seed, loss) in [(2, 0.02), (3, 0.05), (4, 0.03)] {
        run(seed, loss);
    }
}

/// Tagged messages (every protocol size) and RMA ops share one peer pair at once:
/// the messages still match in send order (FI_ORDER_SAS) and the RMA data is right.
#[test]
fn rma_does_not_disturb_message_order() {
    use spray::msg::{RecvFlags, RecvOp, SendOp};
    let seed = 8;
    let mut sim = net(seed, 2, 0.03);
    let regions = Regions::default();
    let wmem = regions.add(7, 1 << 20, None, true, true);
    sim.nodes[1].set_rma_target(Box::new(regions));
    let p1 = sim.nodes[0].peer(addr(1));
    let sizes = [0usize, 10, 2000, 70_000, 5, 300_000, 1, 9000];
    for (i, &len) in sizes.iter().enumerate() {
        let recv = RecvOp {
            src: None,
            buf: TBuf::Own(vec![0; len]),
            tag: Some((3, 0)),
            context: i as u64,
            flags: RecvFlags::default(),
            report: true,
        };
        sim.nodes[1].post_recv(recv).expect("recv");
    }
    for (i, &len) in sizes.iter().enumerate() {
        // An RMA write and read between every two messages.
        let w = RmaOp {
            peer: p1,
            kind: RmaKind::Write { data: None },
            buf: TBuf::Own(content(100 + i as u64, 50_000)),
            key: 7,
            addr: (i * 60_000) as u64,
            context: 100 + i as u64,
            report: true,
        };
        sim.nodes[0].post_rma(w).expect("write");
        let send = SendOp {
            peer: p1,
            buf: TBuf::Own(content(i as u64, len)),
            tag: Some(3),
            data: None,
            context: i as u64,
            report: true,
            delivery_complete: false,
            lazy: false,
        };
        sim.nodes[0].post_send(send).expect("send");
        let r = RmaOp {
            peer: p1,
            kind: RmaKind::Read,
            buf: TBuf::Own(vec![0; 20_000]),
            key: 7,
            addr: 900_000,
            context: 200 + i as u64,
            report: true,
        };
        sim.nodes[0].post_rma(r).expect("read");
    }
    let n = sizes.len();
    let mut done = vec![Vec::new(), Vec::new()];
    assert!(
        drive(&mut sim, &mut done, secs(30), |d| d[0].len() >= 3 * n
            && d[1].len() >= n),
        "seed {seed}: {} / {}",
        done[0].len(),
        done[1].len()
    );
    for c in &done[1] {
        let i = c.context as usize;
        assert!(c.error.is_none(), "seed {seed}: {c:?}");
        assert_eq!(
            c.len, sizes[i],
            "seed {seed}: receive {i} got another message"
        );
        let got = c.buf.as_ref().expect("buf").bytes();
        assert!(
            got == content(i as u64, sizes[i]),
            "seed {seed}: message {i}"
        );
    }
    let m = lock(&wmem);
    for c in &done[0] {
        assert!(c.error.is_none(), "seed {seed}: {c:?}");
        if (100..200).contains(&c.context) {
            let i = (c.context - 100) as usize;
            assert!(m[i * 60_000..i * 60_000 + 50_000] == content(c.context, 50_000)[..]);
        } else if c.context >= 200 {
            let got = c.buf.as_ref().expect("buf").bytes();
            assert!(
                got[..] == m[900_000..920_000],
                "seed {seed}: read {}",
                c.context
            );
        }
    }
}
