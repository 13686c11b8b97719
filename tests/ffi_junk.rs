//! Junk datagrams from a stranger (oversized, empty, random bytes) reaching a
//! spray endpoint while the application polls it (the single-`recvfrom` probe
//! path) and while nobody polls (the batched `recvmmsg` path): each is dropped
//! and counted, and tagged messages both ways still arrive intact.

mod common;
use common::fab::*;
use common::stat_sum;

use std::net::UdpSocket;
use std::os::raw::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
/// Payload size of every spray datagram in this test (FI_SPRAY_MTU), bytes.
const MTU: usize = 1400;

struct Pair {
    info: *mut sys::fi_info,
    fab: *mut sys::fid_fabric,
    dom: *mut sys::fid_domain,
    av: *mut sys::fid_av,
    ep: [*mut sys::fid_ep; 2],
    cq: [*mut sys::fid_cq; 2],
    addr: [u64; 2],
    name: [libc::sockaddr_in; 2],
}

impl Pair {
    fn new() -> Pair {
        let info = getinfo(
            sys::fi_ep_type_FI_EP_RDM,
            (sys::FI_MSG | sys::FI_TAGGED) as u64,
        );
        let (fab, dom) = open_domain(info);
        let av = open_av(dom);
        let mut ep = [null_mut(); 2];
        let mut cq = [null_mut(); 2];
        for i in 0..2 {
            ep[i] = open_ep(dom, info);
            cq[i] = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
            assert_eq!(bind(ep[i], av, 0), 0);
            assert_eq!(
                bind(ep[i], cq[i], (sys::FI_TRANSMIT | sys::FI_RECV) as u64),
                0
            );
            assert_eq!(control(ep[i], sys::FI_ENABLE, null_mut()), 0, "fi_enable");
        }
        let name = [getname(ep[0]), getname(ep[1])];
        let addr = [av_insert(av, &name[0]), av_insert(av, &name[1])];
        Pair {
            info,
            fab,
            dom,
            av,
            ep,
            cq,
            addr,
            name,
        }
    }

    fn close(self) {
        for i in 0..2 {
            assert_eq!(close(self.ep[i]), 0);
            assert_eq!(close(self.cq[i]), 0);
        }
        assert_eq!(close(self.av), 0);
        assert_eq!(close(self.dom), 0);
        assert_eq!(close(self.fab), 0);
        unsafe { sys::fi_freeinfo(self.info) };
    }
}

/// Poll `cq` (and progress `other`) until one completion; panics on an error
/// completion or after 10 s.
fn wait_one(cq: *mut sys::fid_cq, other: *mut sys::fid_cq) -> sys::fi_cq_tagged_entry {
    let t = Instant::now();
    loop {
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        let n = cq_read(cq, &mut e);
        if n == 1 {
            return e[0];
        }
        assert_eq!(n, EAGAIN, "fi_cq_read failed (error completion?)");
        let _ = cq_read(other, &mut []);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no completion within 10 s"
        );
    }
}

fn ctx(x: &mut u64) -> *mut c_void {
    (x as *mut u64).cast()
}

/// One tagged message `from` -> `to` of `size` bytes; checks its contents.
fn exchange(p: &Pair, from: usize, to: usize, size: usize, seed: u8) {
    let tx: Vec<u8> = (0..size)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    let mut rx = vec![0u8; size];
    let (mut sctx, mut rctx) = (1u64, 2u64);
    unsafe {
        let r = (*(*p.ep[to]).tagged).recv.unwrap()(
            p.ep[to],
            rx.as_mut_ptr().cast(),
            size,
            null_mut(),
            p.addr[from],
            u64::from(seed),
            0,
            ctx(&mut rctx),
        );
        assert_eq!(r, 0, "fi_trecv");
        let s = (*(*p.ep[from]).tagged).send.unwrap()(
            p.ep[from],
            tx.as_ptr().cast(),
            size,
            null_mut(),
            p.addr[to],
            u64::from(seed),
            ctx(&mut sctx),
        );
        assert_eq!(s, 0, "fi_tsend");
    }
    let e = wait_one(p.cq[to], p.cq[from]);
    assert_eq!(e.op_context, ctx(&mut rctx));
    assert_eq!(e.len, size);
    assert!(rx == tx, "{size}-byte message {from}->{to} corrupted");
    let e = wait_one(p.cq[from], p.cq[to]);
    assert_eq!(e.op_context, ctx(&mut sctx));
}

/// Send every kind of junk to `dst`: too long for a receive slot, empty, one
/// byte, random bytes the size of a header, random bytes of a full datagram.
fn junk(sock: &UdpSocket, dst: &libc::sockaddr_in, round: u32, gap: Duration) -> usize {
    let to = std::net::SocketAddrV4::new(
        u32::from_be(dst.sin_addr.s_addr).into(),
        u16::from_be(dst.sin_port),
    );
    let mut x = 0x9e37_79b9u32 ^ round;
    let mut rnd = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    };
    let sizes = [4 * MTU, 0, 1, 40, MTU];
    for n in sizes {
        sock.send_to(&rnd(n), to).expect("send junk");
        std::thread::sleep(gap);
    }
    sizes.len()
}

/// One test per process: the stats file and MTU knobs are process-wide.
#[test]
fn junk_is_dropped_and_counted_on_both_receive_paths() {
    let path = std::env::temp_dir().join(format!("spray-junk-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    std::env::set_var("FI_SPRAY_STATS", &path);
    std::env::set_var("FI_SPRAY_MTU", MTU.to_string());
    let p = Pair::new();
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind stranger");
    exchange(&p, 0, 1, 8, 1);
    let rounds = 4;
    for round in 0..rounds {
        // While B is being polled (by this thread, without pause): junk from
        // another thread arrives between polls, so B's next receive is the
        // single-datagram probe.
        let t = Instant::now();
        let (s2, to) = (sock.try_clone().expect("clone socket"), p.name[1]);
        let stranger = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1));
            junk(&s2, &to, round, Duration::from_micros(300));
        });
        while t.elapsed() < Duration::from_millis(5) {
            let _ = cq_read(p.cq[1], &mut []);
        }
        // (The stranger needs about 2.5 ms: all its junk is in by now.)
        stranger.join().expect("junk thread");
        exchange(&p, 0, 1, 100, 2);
        exchange(&p, 1, 0, 3000, 3);
        // Nobody polls: the junk waits in the socket with the next message,
        // and B's first receive after the pause is a batch.
        junk(&sock, &p.name[1], round + 100, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        exchange(&p, 0, 1, 5000, 4);
        exchange(&p, 1, 0, 8, 5);
    }
    p.close();
    let text = std::fs::read_to_string(&path).expect("FI_SPRAY_STATS file written at close");
    let _ = std::fs::remove_file(&path);
    let truncated = stat_sum(&text, "rx_truncated");
    println!("rx_truncated {truncated}");
    // One oversized datagram per junk burst, two bursts per round.
    assert_eq!(
        truncated,
        2 * rounds as u64,
        "oversized datagrams not all counted"
    );
}
