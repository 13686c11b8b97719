//! Connected sending sockets (`ffi/io/driver.rs`, `tx_conn`): an endpoint's
//! sending sockets other than socket 0 are `connect`ed to the first peer
//! they send to, and its packets to that peer leave without an address.
//! Checked over loopback with three endpoints A, B, C in one process:
//! - after A and B exchange messages, a socket of A is connected to B and
//!   one of B to A, and neither main (receiving) socket is connected;
//! - A still reaches C through its socket connected to B (an explicit
//!   address on a connected socket);
//! - once B is closed, A's packets to B draw ICMP port-unreachable errors,
//!   which a connected socket reports on its next send; A's messages to C
//!   from that socket must still go out at once (the send is retried), not
//!   be dropped as refused (`tx_errors` in the `FI_SPRAY_STATS` counters).
//!
//! One test per process: `FI_SPRAY_STATS` is process-wide.

mod common;
use common::fab::*;
use common::{stat_sum, udp_sockets};

use std::os::raw::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);

struct Node {
    ep: *mut sys::fid_ep,
    cq: *mut sys::fid_cq,
}

/// Read one completion from `cq` within 5 s (panics otherwise).
fn wait_one(cq: *mut sys::fid_cq, what: &str) -> sys::fi_cq_tagged_entry {
    let mut e = [sys::fi_cq_tagged_entry::default(); 1];
    let t = Instant::now();
    loop {
        match cq_read(cq, &mut e) {
            1 => return e[0],
            EAGAIN => {}
            rc => panic!("{what}: fi_cq_read returned {rc}"),
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{what}: no completion in 5 s"
        );
    }
}

fn tsend(n: &Node, buf: &[u8], dest: u64, tag: u64) {
    // SAFETY (test): buf outlives the send (its completion is waited for).
    let rc = unsafe {
        (*(*n.ep).tagged).send.unwrap()(
            n.ep,
            buf.as_ptr().cast(),
            buf.len(),
            null_mut(),
            dest,
            tag,
            null_mut(),
        )
    };
    assert_eq!(rc, 0, "fi_tsend");
}

fn trecv(n: &Node, buf: &mut [u8], tag: u64) {
    // SAFETY (test): buf outlives the receive (its completion is waited for).
    let rc = unsafe {
        (*(*n.ep).tagged).recv.unwrap()(
            n.ep,
            buf.as_mut_ptr().cast(),
            buf.len(),
            null_mut(),
            u64::MAX, // FI_ADDR_UNSPEC
            tag,
            0,
            null_mut::<c_void>(),
        )
    };
    assert_eq!(rc, 0, "fi_trecv");
}

/// One 8-byte message `from` → `to` (at fi_addr `dest`), checked.
fn one_message(from: &Node, to: &Node, dest: u64, k: u64) {
    let mut rx = [0u8; 8];
    trecv(to, &mut rx, k);
    let tx = k.to_le_bytes();
    tsend(from, &tx, dest, k);
    let e = wait_one(to.cq, "receive");
    assert_eq!(e.tag, k);
    assert_eq!(rx, tx, "message {k}: received bytes differ");
    wait_one(from.cq, "send");
}

fn same(a: &libc::sockaddr_in, b: &libc::sockaddr_in) -> bool {
    a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port
}

#[test]
fn sending_sockets_connect_to_their_first_peer_and_survive_its_departure() {
    let stats = std::env::temp_dir().join(format!("spray-conn-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&stats);
    std::env::set_var("FI_SPRAY_STATS", &stats);
    // Several sockets per endpoint (the default), whatever the environment says.
    std::env::set_var("FI_SPRAY_PATHS", "4");
    // A's messages to the closed B must stay outstanding, not fail early.
    std::env::set_var("FI_SPRAY_UNREACHABLE_TIMEOUT_MS", "60000");
    let info = getinfo(
        sys::fi_ep_type_FI_EP_RDM,
        (sys::FI_MSG | sys::FI_TAGGED) as u64,
    );
    let (fab, dom) = open_domain(info);
    let av = open_av(dom);
    let nodes: Vec<Node> = (0..3)
        .map(|_| {
            let ep = open_ep(dom, info);
            let cq = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
            assert_eq!(bind(ep, av, 0), 0);
            assert_eq!(bind(ep, cq, (sys::FI_TRANSMIT | sys::FI_RECV) as u64), 0);
            assert_eq!(control(ep, sys::FI_ENABLE, null_mut()), 0);
            Node { ep, cq }
        })
        .collect();
    let names: Vec<libc::sockaddr_in> = nodes.iter().map(|n| getname(n.ep)).collect();
    let addr: Vec<u64> = names.iter().map(|sa| av_insert(av, sa)).collect();
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);

    // A <-> B ping-pong.
    for k in 0..50 {
        one_message(a, b, addr[1], 2 * k);
        one_message(b, a, addr[0], 2 * k + 1);
    }
    let socks = udp_sockets();
    let conn_to = |to: &libc::sockaddr_in| {
        socks
            .iter()
            .filter(|(_, _, p)| p.as_ref().is_some_and(|p| same(p, to)))
            .count()
    };
    assert!(conn_to(&names[1]) >= 1, "no socket of A is connected to B");
    assert!(conn_to(&names[0]) >= 1, "no socket of B is connected to A");
    for (i, name) in names.iter().enumerate() {
        let main = socks.iter().find(|(_, me, _)| same(me, name));
        let (_, _, peer) = main.unwrap_or_else(|| panic!("endpoint {i}'s main socket not found"));
        assert!(
            peer.is_none(),
            "endpoint {i}'s receiving socket is connected"
        );
    }

    // A -> C through A's socket connected to B.
    for k in 100..120 {
        one_message(a, c, addr[2], k);
    }

    // B goes away; A keeps sending to it (retransmissions draw ICMP errors on
    // A's socket connected to B), and meanwhile talks to C from that socket.
    assert_eq!(close(b.ep), 0);
    assert_eq!(close(b.cq), 0);
    let orphan = 7u64.to_le_bytes();
    tsend(a, &orphan, addr[1], 999);
    let t = Instant::now();
    let mut k = 200;
    while t.elapsed() < Duration::from_millis(300) {
        one_message(a, c, addr[2], k);
        k += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    for n in [a, c] {
        assert_eq!(close(n.ep), 0);
        assert_eq!(close(n.cq), 0);
    }
    assert_eq!(close(av), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    // SAFETY (test): info came from fi_getinfo.
    unsafe { sys::fi_freeinfo(info) };

    let text = std::fs::read_to_string(&stats).expect("FI_SPRAY_STATS file written at close");
    let _ = std::fs::remove_file(&stats);
    let errors = stat_sum(&text, "tx_errors");
    println!(
        "{} messages A -> C after B closed; tx_errors {errors}",
        k - 200
    );
    assert_eq!(
        errors, 0,
        "packets were dropped as refused by the kernel (a connected socket's ICMP report)"
    );
}
