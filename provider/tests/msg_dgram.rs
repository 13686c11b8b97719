//! Message layer in DGRAM mode: one datagram per message, arrival order, no SAS hold-back.

mod msg_fake;

use msg_fake::{cfg, pattern, rop, sop, Cluster};
use spray::config::EpMode;
use spray::dgram::PeerId;
use spray::msg::{CompError, CompKind, OpError};

fn cluster(n: usize, seed: u64) -> Cluster {
    let mut c = Cluster::new(n, cfg(EpMode::Dgram), seed);
    for node in c.nodes.iter_mut() {
        node.set_max_payload(1400);
    }
    c
}

#[test]
fn size_limit_is_one_datagram() {
    let mut c = cluster(2, 1);
    let max = c.nodes[0].max_msg_size();
    assert_eq!(max, 1400 - spray::wire::msg::HEADER_LEN);
    assert_eq!(
        c.nodes[0].post_send(sop(1, vec![0; max + 1], None, 1)),
        Err(OpError::TooLarge)
    );
    c.recv(1, rop(max, None, None, 2));
    c.send(0, 1, sop(1, pattern(3, max), None, 3));
    assert!(c.run(100_000));
    assert_eq!(c.net.delivered, 1);
    let r = c.take(1, CompKind::Recv).pop().unwrap();
    assert_eq!((r.len, r.error, r.src), (max, None, Some(PeerId(0))));
    assert_eq!(r.buf.unwrap(), pattern(3, max));
}

#[test]
fn arrival_order_not_send_order() {
    let mut c = cluster(2, 2);
    c.net.cap = 64;
    let n = 500u64;
    for i in 0..n {
        c.recv(1, rop(1000, None, None, i));
    }
    for i in 0..n {
        let mut s = sop(1, pattern(i, (i % 900) as usize), None, i);
        s.data = Some(i);
        c.send(0, 1, s);
    }
    assert!(c.run(1_000_000));
    let mut rs = c.take(1, CompKind::Recv);
    assert_eq!(rs.len(), n as usize);
    rs.sort_by_key(|r| r.context);
    let mut seen = vec![false; n as usize];
    let mut out_of_order = 0;
    for (k, r) in rs.iter().enumerate() {
        let i = r.data.unwrap();
        assert!(!seen[i as usize]);
        seen[i as usize] = true;
        assert_eq!(
            r.buf.as_ref().unwrap()[..r.len],
            pattern(i, (i % 900) as usize)[..]
        );
        out_of_order += usize::from(i != k as u64);
    }
    assert!(out_of_order > 0, "random delivery order never showed");
    assert_eq!(c.nodes[1].stats().held, 0);
    assert_eq!(c.take(0, CompKind::Send).len(), n as usize);
}

#[test]
fn unexpected_datagrams_and_truncation() {
    let mut c = cluster(3, 3);
    c.send(0, 1, sop(1, pattern(1, 800), None, 1));
    c.send(2, 1, sop(1, pattern(2, 300), Some(9), 2));
    assert!(c.run(100_000));
    c.recv(1, rop(100, None, None, 10));
    c.recv(1, rop(300, Some((9, 0)), Some(2), 11));
    let mut rs = c.take(1, CompKind::Recv);
    rs.sort_by_key(|r| r.context);
    assert_eq!(
        (rs[0].error, rs[0].len, rs[0].olen),
        (Some(CompError::Truncated), 100, 700)
    );
    assert_eq!(rs[0].buf.as_ref().unwrap()[..], pattern(1, 800)[..100]);
    assert_eq!((rs[1].error, rs[1].tag), (None, 9));
    assert_eq!(c.nodes[1].unexpected_bytes(), 0);
}

#[test]
fn unexpected_overflow_drops_datagrams_not_memory() {
    let mut cf = cfg(EpMode::Dgram);
    cf.max_unexpected_bytes = 10_000;
    let mut c = Cluster::new(2, cf, 4);
    for i in 0..50 {
        c.send(0, 1, sop(1, vec![1; 1000], None, i));
    }
    assert!(c.run(100_000));
    assert!(c.nodes[1].peak_unexpected_bytes() <= 10_000);
    assert_eq!(c.nodes[1].stats().dropped, 40);
}
