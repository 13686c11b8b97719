//! Sends to a dead peer fail, through the real libfabric core: with
//! `FI_SPRAY_UNREACHABLE_TIMEOUT_MS` set, every send, tagged send, inject,
//! send with CQ data and rendezvous-size send to a peer that never answers (a
//! silent socket, an endpoint that was closed after talking to us, a port
//! nobody listens on) completes with `FI_EHOSTUNREACH` within the timeout, the
//! send counter counts the errors, and the endpoint keeps working with live
//! peers. (Receives: a receive from any source waits, as with every
//! libfabric provider; one directed at a dead peer we had a session with
//! fails once its probes find it unreachable, `provider/tests/
//! engine_keepalive.rs`; see README.md.)

mod common;
use common::duo::*;
use common::fab::*;

use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

/// The unreachable timeout this test runs with, ms.
const TIMEOUT_MS: u64 = 400;
/// How much later than the timeout the errors may come (a loaded 2-core machine).
const SLACK: Duration = Duration::from_secs(4);
const ANY: u64 = u64::MAX;

/// Post one of each kind of send to `to`; returns the contexts that must come
/// back with an error (injects come back with a NULL context).
fn send_all(ep: *mut sys::fid_ep, to: u64, small: &[u8], big: &[u8]) -> Vec<usize> {
    unsafe {
        let msg = &*(*ep).msg;
        let tagged = &*(*ep).tagged;
        let p = small.as_ptr().cast();
        assert_eq!(msg.send.unwrap()(ep, p, 64, null_mut(), to, ctx(1)), 0);
        assert_eq!(
            tagged.send.unwrap()(ep, p, 64, null_mut(), to, 7, ctx(2)),
            0
        );
        assert_eq!(msg.inject.unwrap()(ep, p, 8, to), 0);
        assert_eq!(tagged.inject.unwrap()(ep, p, 8, to, 7), 0);
        let r = msg.senddata.unwrap()(ep, p, 64, null_mut(), 0xDA7A, to, ctx(3));
        assert_eq!(r, 0);
        let r = msg.send.unwrap()(ep, big.as_ptr().cast(), big.len(), null_mut(), to, ctx(4));
        assert_eq!(r, 0);
    }
    vec![0, 0, 1, 2, 3, 4]
}

/// Three enabled endpoints on `av`, each with its own tagged CQ; the first
/// also counts its sends on `cntr` when given.
fn trio(
    dom: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    av: *mut sys::fid_av,
    cntr: Option<*mut sys::fid_cntr>,
) -> ([*mut sys::fid_ep; 3], [*mut sys::fid_cq; 3]) {
    let eps = [0; 3].map(|_| open_ep(dom, info));
    let cqs = [0; 3].map(|_| open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED));
    for (&ep, &cq) in eps.iter().zip(&cqs) {
        assert_eq!(bind(ep, av, 0), 0);
        assert_eq!(bind(ep, cq, (sys::FI_TRANSMIT | sys::FI_RECV) as u64), 0);
    }
    if let Some(c) = cntr {
        assert_eq!(bind(eps[0], c, sys::FI_SEND as u64), 0);
    }
    for ep in eps {
        assert_eq!(control(ep, sys::FI_ENABLE, null_mut()), 0);
    }
    (eps, cqs)
}

/// Close `fids` in order (endpoints before what they are bound to).
fn close_all(fids: &[*mut sys::fid]) {
    for &f in fids {
        assert_eq!(close(f), 0);
    }
}

#[test]
fn sends_to_a_dead_peer_fail_within_the_timeout() {
    init();
    std::env::set_var("FI_SPRAY_UNREACHABLE_TIMEOUT_MS", TIMEOUT_MS.to_string());
    let info = info_with((sys::FI_MSG | sys::FI_TAGGED) as u64);
    let (fab, dom) = open_domain(info);
    let av = open_av(dom);
    let cntr = open_cntr(dom);
    // a sends, b is its live peer, gone dies.
    let ([a, b, gone], [cq_a, cq_b, cq_gone]) = trio(dom, info, av, Some(cntr));
    let to_b = av_insert(av, &getname(b));
    let small = vec![0x11u8; 64];
    // A rendezvous send (over the 256 KiB eager limit).
    let big = vec![0x22u8; 300_000];

    // Peer 1: an endpoint that talked to us, then went away (its port closed).
    let to_gone = av_insert(av, &getname(gone));
    let mut rx = [0u8; 64];
    unsafe {
        let r =
            (*(*gone).msg).recv.unwrap()(gone, rx.as_mut_ptr().cast(), 64, null_mut(), ANY, ctx(9));
        assert_eq!(r, 0);
        let r =
            (*(*a).msg).send.unwrap()(a, small.as_ptr().cast(), 64, null_mut(), to_gone, ctx(8));
        assert_eq!(r, 0);
    }
    wait_one(cq_gone, cq_a).expect("the soon-dead peer received");
    assert_eq!(
        wait_one(cq_a, cq_gone).expect("send").op_context as usize,
        8
    );
    assert_eq!(close(gone), 0);
    assert_eq!(close(cq_gone), 0);

    // Peer 2: a socket that receives everything and never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let silent_sa = sockaddr(silent.local_addr().expect("addr"));
    // Peer 3: a port nobody listens on.
    let closed_sa = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        sockaddr(s.local_addr().expect("addr"))
    };
    let peers = [
        ("closed endpoint", to_gone),
        ("silent socket", av_insert(av, &silent_sa)),
        ("unused port", av_insert(av, &closed_sa)),
    ];

    for (what, to) in peers {
        let start = Instant::now();
        let mut want = send_all(a, to, &small, &big);
        while !want.is_empty() {
            let e = match wait_one(cq_a, cq_b) {
                Ok(e) => panic!("{what}: a send to a dead peer succeeded: {e:?}"),
                Err(e) => e,
            };
            assert_eq!(e.err, sys::FI_EHOSTUNREACH as i32, "{what}: error code");
            let c = e.op_context as usize;
            let i = want.iter().position(|&w| w == c);
            assert!(
                i.is_some(),
                "{what}: unexpected context {c} (left {want:?})"
            );
            want.remove(i.unwrap_or(0));
            let t = start.elapsed();
            // A peer that is alive but silent for less than the timeout (a
            // descheduled process) must not be given up on early.
            assert!(
                what != "silent socket" || t >= Duration::from_millis(TIMEOUT_MS * 9 / 10),
                "{what}: error after {t:?}, before the {TIMEOUT_MS} ms timeout"
            );
            assert!(
                t < Duration::from_millis(TIMEOUT_MS) + SLACK,
                "{what}: error after {t:?}, timeout {TIMEOUT_MS} ms"
            );
        }
        println!("{what}: 6 sends failed after {:?}", start.elapsed());
    }
    let errs = unsafe { ((*(*cntr).ops).readerr.unwrap())(cntr) };
    assert_eq!(errs, 18, "send counter errors");

    // The endpoint still talks to a live peer.
    unsafe {
        let r = (*(*b).msg).recv.unwrap()(b, rx.as_mut_ptr().cast(), 64, null_mut(), ANY, ctx(20));
        assert_eq!(r, 0);
        let r = (*(*a).msg).send.unwrap()(a, small.as_ptr().cast(), 64, null_mut(), to_b, ctx(21));
        assert_eq!(r, 0);
    }
    assert_eq!(
        wait_one(cq_b, cq_a).expect("live receive").op_context as usize,
        20
    );
    assert_eq!(
        wait_one(cq_a, cq_b).expect("live send").op_context as usize,
        21
    );
    close_all(&[
        a.cast(),
        b.cast(),
        cq_a.cast(),
        cq_b.cast(),
        cntr.cast(),
        av.cast(),
        dom.cast(),
        fab.cast(),
    ]);
    unsafe { sys::fi_freeinfo(info) };
    drop(silent);
}

fn sockaddr(a: std::net::SocketAddr) -> libc::sockaddr_in {
    let std::net::SocketAddr::V4(v4) = a else {
        panic!("IPv4 expected")
    };
    // SAFETY (test): a plain C struct, all zero is valid.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = v4.port().to_be();
    sa.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
    sa
}

/// A receive directed at a peer (`FI_DIRECTED_RECV`, an `MPI_Recv` from a
/// rank) that died after talking to us fails with `FI_EHOSTUNREACH` within
/// the timeout (the peer is probed while the receive waits); a receive from
/// any source stays posted and still takes a live peer's message.
#[test]
fn a_receive_from_a_dead_peer_fails_within_the_timeout() {
    init();
    std::env::set_var("FI_SPRAY_UNREACHABLE_TIMEOUT_MS", TIMEOUT_MS.to_string());
    let info = info_with((sys::FI_MSG | sys::FI_TAGGED) as u64 | sys::FI_DIRECTED_RECV);
    let (fab, dom) = open_domain(info);
    let av = open_av(dom);
    let ([a, b, gone], [cq_a, cq_b, cq_gone]) = trio(dom, info, av, None);
    let to_a = av_insert(av, &getname(a));
    let to_gone = av_insert(av, &getname(gone));
    let small = [0x33u8; 64];
    let mut rx = [[0u8; 64]; 3];
    // The soon-dead peer talks to us first (a session), then goes away.
    unsafe {
        let tagged = &*(*a).tagged;
        let r = tagged.recv.unwrap()(
            a,
            rx[0].as_mut_ptr().cast(),
            64,
            null_mut(),
            to_gone,
            5,
            0,
            ctx(1),
        );
        assert_eq!(r, 0);
        let r = (*(*gone).tagged).send.unwrap()(
            gone,
            small.as_ptr().cast(),
            64,
            null_mut(),
            to_a,
            5,
            ctx(2),
        );
        assert_eq!(r, 0);
    }
    assert_eq!(
        wait_one(cq_a, cq_gone).expect("first message").op_context as usize,
        1
    );
    assert_eq!(
        wait_one(cq_gone, cq_a).expect("its send").op_context as usize,
        2
    );
    assert_eq!(close(gone), 0);
    assert_eq!(close(cq_gone), 0);
    let start = Instant::now();
    unsafe {
        let tagged = &*(*a).tagged;
        let r = tagged.recv.unwrap()(
            a,
            rx[1].as_mut_ptr().cast(),
            64,
            null_mut(),
            to_gone,
            6,
            0,
            ctx(3),
        );
        assert_eq!(r, 0);
        let r = tagged.recv.unwrap()(
            a,
            rx[2].as_mut_ptr().cast(),
            64,
            null_mut(),
            ANY,
            7,
            0,
            ctx(4),
        );
        assert_eq!(r, 0);
    }
    let e = match wait_one(cq_a, cq_b) {
        Ok(e) => panic!("a receive completed with no sender: {e:?}"),
        Err(e) => e,
    };
    let t = start.elapsed();
    assert_eq!(
        (e.op_context as usize, e.err),
        (3, sys::FI_EHOSTUNREACH as i32)
    );
    assert!(
        t < Duration::from_millis(TIMEOUT_MS) + SLACK,
        "the receive failed after {t:?}, timeout {TIMEOUT_MS} ms"
    );
    println!("directed receive failed {t:?} after its peer closed");
    // The receive from any source is still there for a live peer.
    unsafe {
        let r =
            (*(*b).tagged).send.unwrap()(b, small.as_ptr().cast(), 64, null_mut(), to_a, 7, ctx(5));
        assert_eq!(r, 0);
    }
    assert_eq!(
        wait_one(cq_a, cq_b).expect("live message").op_context as usize,
        4
    );
    assert_eq!(
        wait_one(cq_b, cq_a).expect("live send").op_context as usize,
        5
    );
    close_all(&[
        a.cast(),
        b.cast(),
        cq_a.cast(),
        cq_b.cast(),
        av.cast(),
        dom.cast(),
        fab.cast(),
    ]);
    unsafe { sys::fi_freeinfo(info) };
}
