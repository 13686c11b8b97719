//! Wait sets and poll sets through libfabric: `fi_wait_open` with CQs,
//! counters and EQs opened `FI_WAIT_SET` on it, `fi_wait` that sleeps (by the
//! waiter's CPU time), times out, wakes on a completion, a counter change or
//! an EQ event and progresses the endpoints behind its members; the set's
//! `FI_GETWAIT` fd with `fi_trywait`; `fi_poll_open` / `fi_poll_add` /
//! `fi_poll_del` / `fi_poll` returning the contexts of objects with events;
//! and the cost of blocking on a wait set against spinning (printed).

mod common;
use common::fab::*;
use common::wait::*;

use std::os::raw::{c_int, c_void};
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

const ANY: u64 = u64::MAX; // FI_ADDR_UNSPEC
const ETIMEDOUT: i32 = -(sys::FI_ETIMEDOUT as i32);
const EAGAIN: i32 = -(sys::FI_EAGAIN as i32);

fn wait_open(fab: *mut sys::fid_fabric, wait_obj: u32) -> Result<*mut sys::fid_wait, i32> {
    unsafe {
        let mut attr: sys::fi_wait_attr = std::mem::zeroed();
        attr.wait_obj = wait_obj;
        let mut ws = null_mut();
        match ((*(*fab).ops).wait_open.unwrap())(fab, &mut attr, &mut ws) {
            0 => Ok(ws),
            rc => Err(rc),
        }
    }
}

fn fi_wait(ws: *mut sys::fid_wait, timeout_ms: c_int) -> i32 {
    unsafe { ((*(*ws).ops).wait.unwrap())(ws, timeout_ms) }
}

/// A tagged CQ signalling `ws` (FI_WAIT_SET), with `ctx` as its context.
fn cq_in(dom: *mut sys::fid_domain, ws: *mut sys::fid_wait, ctx: usize) -> *mut sys::fid_cq {
    unsafe {
        let mut attr: sys::fi_cq_attr = std::mem::zeroed();
        attr.format = sys::fi_cq_format_FI_CQ_FORMAT_TAGGED;
        attr.size = 256;
        attr.wait_obj = sys::fi_wait_obj_FI_WAIT_SET;
        attr.wait_set = ws;
        let mut cq = null_mut();
        let rc = ((*(*dom).ops).cq_open.unwrap())(dom, &mut attr, &mut cq, ctx as *mut c_void);
        assert_eq!(rc, 0, "fi_cq_open with FI_WAIT_SET");
        cq
    }
}

/// A counter signalling `ws` (FI_WAIT_SET), with `ctx` as its context.
fn cntr_in(dom: *mut sys::fid_domain, ws: *mut sys::fid_wait, ctx: usize) -> *mut sys::fid_cntr {
    unsafe {
        let mut attr: sys::fi_cntr_attr = std::mem::zeroed();
        attr.events = sys::fi_cntr_events_FI_CNTR_EVENTS_COMP;
        attr.wait_obj = sys::fi_wait_obj_FI_WAIT_SET;
        attr.wait_set = ws;
        let mut c = null_mut();
        let rc = ((*(*dom).ops).cntr_open.unwrap())(dom, &mut attr, &mut c, ctx as *mut c_void);
        assert_eq!(rc, 0, "fi_cntr_open with FI_WAIT_SET");
        c
    }
}

/// Contexts the objects are opened with (what fi_poll returns).
const CTX_CQ: [usize; 2] = [0x5100, 0x5101];
const CTX_CNTR: usize = 0x5200;

/// How the Duo's CQs and counter wait.
#[derive(Copy, Clone, PartialEq)]
enum Sets {
    /// Plain objects (FI_WAIT_UNSPEC), for poll sets.
    None,
    /// Both CQs and the counter signal one wait set.
    One,
    /// Each endpoint's CQ (and B's counter) signal a wait set of its own.
    PerEndpoint,
}

/// Two endpoints of one domain, each with a CQ, B with a receive counter.
struct Duo {
    info: *mut sys::fi_info,
    fab: *mut sys::fid_fabric,
    dom: *mut sys::fid_domain,
    /// The wait set of each side (the same one with `Sets::One`).
    ws: [*mut sys::fid_wait; 2],
    av: *mut sys::fid_av,
    ep: [*mut sys::fid_ep; 2],
    cq: [*mut sys::fid_cq; 2],
    cntr: *mut sys::fid_cntr,
    addr: [u64; 2],
}
// SAFETY (test): spray's objects are thread-safe (FI_THREAD_SAFE); the Duo
// outlives the threads that use it.
unsafe impl Send for Duo {}
unsafe impl Sync for Duo {}

impl Duo {
    fn new(sets: Sets) -> Duo {
        let info = getinfo(
            sys::fi_ep_type_FI_EP_RDM,
            (sys::FI_MSG | sys::FI_TAGGED) as u64,
        );
        let (fab, dom) = open_domain(info);
        let open_set =
            || wait_open(fab, sys::fi_wait_obj_FI_WAIT_FD).expect("fi_wait_open(FI_WAIT_FD)");
        let ws = match sets {
            Sets::None => [null_mut(); 2],
            Sets::One => {
                let w = open_set();
                [w, w]
            }
            Sets::PerEndpoint => [open_set(), open_set()],
        };
        let av = open_av(dom);
        let (cq0, cq1, cntr) = if sets != Sets::None {
            (
                cq_in(dom, ws[0], CTX_CQ[0]),
                cq_in(dom, ws[1], CTX_CQ[1]),
                cntr_in(dom, ws[1], CTX_CNTR),
            )
        } else {
            unsafe {
                let open_cq = |ctx: usize| {
                    let mut attr: sys::fi_cq_attr = std::mem::zeroed();
                    attr.format = sys::fi_cq_format_FI_CQ_FORMAT_TAGGED;
                    attr.size = 256;
                    let mut cq = null_mut();
                    let rc = ((*(*dom).ops).cq_open.unwrap())(
                        dom,
                        &mut attr,
                        &mut cq,
                        ctx as *mut c_void,
                    );
                    assert_eq!(rc, 0);
                    cq
                };
                let mut attr: sys::fi_cntr_attr = std::mem::zeroed();
                let mut c = null_mut();
                let rc = ((*(*dom).ops).cntr_open.unwrap())(
                    dom,
                    &mut attr,
                    &mut c,
                    CTX_CNTR as *mut c_void,
                );
                assert_eq!(rc, 0);
                (open_cq(CTX_CQ[0]), open_cq(CTX_CQ[1]), c)
            }
        };
        let cq = [cq0, cq1];
        let mut ep = [null_mut(); 2];
        for i in 0..2 {
            ep[i] = open_ep(dom, info);
            assert_eq!(bind(ep[i], av, 0), 0);
            assert_eq!(
                bind(ep[i], cq[i], (sys::FI_TRANSMIT | sys::FI_RECV) as u64),
                0
            );
            if i == 1 {
                assert_eq!(bind(ep[i], cntr, sys::FI_RECV as u64), 0);
            }
            assert_eq!(control(ep[i], sys::FI_ENABLE, null_mut()), 0);
        }
        let addr = [
            av_insert(av, &getname(ep[0])),
            av_insert(av, &getname(ep[1])),
        ];
        Duo {
            info,
            fab,
            dom,
            ws,
            av,
            ep,
            cq,
            cntr,
            addr,
        }
    }

    fn close(self) {
        for i in 0..2 {
            assert_eq!(close(self.ep[i]), 0);
            assert_eq!(close(self.cq[i]), 0);
        }
        assert_eq!(close(self.cntr), 0);
        assert_eq!(close(self.av), 0);
        if !self.ws[0].is_null() {
            assert_eq!(close(self.ws[0]), 0, "wait set close after its members");
        }
        if self.ws[1] != self.ws[0] {
            assert_eq!(close(self.ws[1]), 0, "wait set close after its members");
        }
        assert_eq!(close(self.dom), 0);
        assert_eq!(close(self.fab), 0);
        unsafe { sys::fi_freeinfo(self.info) };
    }

    /// Post a tagged receive of 8 bytes on endpoint `i` into `buf`.
    fn recv(&self, i: usize, buf: &mut [u8; 8], tag: u64) {
        let rc = unsafe {
            (*(*self.ep[i]).tagged).recv.unwrap()(
                self.ep[i],
                buf.as_mut_ptr().cast(),
                8,
                null_mut(),
                ANY,
                tag,
                0,
                null_mut(),
            )
        };
        assert_eq!(rc, 0, "fi_trecv");
    }

    /// Inject 8 bytes from endpoint `i` to the other one.
    fn inject(&self, i: usize, v: u64, tag: u64) {
        let tx = v.to_le_bytes();
        let rc = unsafe {
            (*(*self.ep[i]).tagged).inject.unwrap()(
                self.ep[i],
                tx.as_ptr().cast(),
                8,
                self.addr[1 - i],
                tag,
            )
        };
        assert_eq!(rc, 0, "fi_tinject");
    }

    fn trywait<T>(&self, fid: *mut T) -> i32 {
        let mut f = fid as *mut sys::fid;
        unsafe { ((*(*self.fab).ops).trywait.unwrap())(self.fab, &mut f, 1) }
    }

    fn cntr_read(&self) -> u64 {
        unsafe { (*(*self.cntr).ops).read.unwrap()(self.cntr) }
    }
}

#[test]
fn wait_set_opens_hands_out_its_fd_and_outlives_its_members() {
    let info = getinfo(sys::fi_ep_type_FI_EP_RDM, sys::FI_MSG as u64);
    let (fab, dom) = open_domain(info);
    for obj in [sys::fi_wait_obj_FI_WAIT_FD, sys::fi_wait_obj_FI_WAIT_UNSPEC] {
        let ws = wait_open(fab, obj).expect("fi_wait_open");
        let (rc, fd) = getwait(ws);
        assert_eq!(rc, 0, "FI_GETWAIT on the set");
        assert!(fd >= 0, "fd {fd}");
        let mut o: u32 = 0;
        assert_eq!(
            control(ws, sys::FI_GETWAITOBJ, (&mut o as *mut u32).cast()),
            0
        );
        assert_eq!(o, sys::fi_wait_obj_FI_WAIT_FD);
        // A member keeps the set open; the fabric cannot close under the set.
        let cq = cq_in(dom, ws, 1);
        assert_eq!(close(ws), -(sys::FI_EBUSY as i32), "set with a member");
        assert_eq!(close(cq), 0);
        assert_eq!(close(ws), 0);
    }
    // Wait objects a set cannot be made of.
    assert_eq!(
        wait_open(fab, sys::fi_wait_obj_FI_WAIT_MUTEX_COND).err(),
        Some(-(sys::FI_ENOSYS as i32))
    );
    assert_eq!(
        wait_open(fab, sys::fi_wait_obj_FI_WAIT_NONE).err(),
        Some(-(sys::FI_EINVAL as i32))
    );
    // FI_WAIT_SET without a set is refused.
    unsafe {
        let mut attr: sys::fi_cq_attr = std::mem::zeroed();
        attr.wait_obj = sys::fi_wait_obj_FI_WAIT_SET;
        let mut cq = null_mut();
        let rc = ((*(*dom).ops).cq_open.unwrap())(dom, &mut attr, &mut cq, null_mut());
        assert_eq!(rc, -(sys::FI_EINVAL as i32), "FI_WAIT_SET with no wait_set");
    }
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}

#[test]
fn fi_wait_sleeps_until_a_member_completes_and_progresses_the_endpoint() {
    let d = Duo::new(Sets::One);
    let mut rx = [0u8; 8];
    d.recv(1, &mut rx, 7);
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            d.inject(0, 0xbeef, 7);
            drive(d.cq[0], Duration::from_millis(300));
        });
        let cpu0 = thread_cpu_ns();
        let t0 = Instant::now();
        let rc = fi_wait(d.ws[0], 5000);
        let waited = t0.elapsed();
        let cpu = thread_cpu_ns() - cpu0;
        assert_eq!(rc, 0, "fi_wait");
        assert!(waited >= Duration::from_millis(250), "early: {waited:?}");
        assert!(waited < Duration::from_millis(2000), "late: {waited:?}");
        // Spinning for 300 ms would cost ~300 ms of CPU.
        assert!(
            cpu < 30_000_000,
            "waiter used {} ms of CPU while blocked {waited:?}",
            cpu / 1_000_000
        );
        // fi_wait itself received the message (nobody else progresses ep 1).
        // (The assist thread may be finishing the same progress call: allow it
        // a moment, never a send.)
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        let t1 = Instant::now();
        let mut n = cq_read(d.cq[1], &mut e);
        while n != 1 && t1.elapsed() < Duration::from_millis(100) {
            n = cq_read(d.cq[1], &mut e);
        }
        assert_eq!(n, 1, "the completion fi_wait saw");
        assert_eq!(e[0].len, 8);
        let got = unsafe { std::ptr::read_volatile(&rx) };
        assert_eq!(u64::from_le_bytes(got), 0xbeef);
        eprintln!("fi_wait blocked {waited:?} using {} us of CPU", cpu / 1000);
    });
    d.close();
}

#[test]
fn fi_wait_times_out() {
    let d = Duo::new(Sets::One);
    // The counter starts at 0 and nothing is queued: nothing to report.
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    let rc = fi_wait(d.ws[0], 200);
    let waited = t0.elapsed();
    let cpu = thread_cpu_ns() - cpu0;
    assert_eq!(rc, ETIMEDOUT, "fi_wait on an idle set");
    assert!(waited >= Duration::from_millis(195), "early: {waited:?}");
    assert!(waited < Duration::from_millis(1000), "late: {waited:?}");
    assert!(cpu < 30_000_000, "{} ms of CPU", cpu / 1_000_000);
    // Timeout 0 polls once.
    assert_eq!(fi_wait(d.ws[0], 0), ETIMEDOUT);
    d.close();
}

#[test]
fn fi_wait_wakes_on_counter_changes_and_eq_events() {
    let d = Duo::new(Sets::One);
    // fi_cntr_add from another thread wakes the waiter, once per change.
    std::thread::scope(|s| {
        let cntr = d.cntr as usize;
        let adder = s.spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let c = cntr as *mut sys::fid_cntr;
            let at = Instant::now();
            assert_eq!(unsafe { (*(*c).ops).add.unwrap()(c, 3) }, 0);
            at
        });
        assert_eq!(fi_wait(d.ws[0], 10_000), 0, "fi_wait on a counter change");
        let woke = Instant::now();
        let added = adder.join().unwrap();
        assert!(woke >= added, "woke before the change");
        // Well within the 10 s timeout (a lost signal would still be seen
        // by the 100 ms bounded sleep; the margin is for a loaded machine).
        assert!(
            woke - added < Duration::from_secs(2),
            "counter change seen late"
        );
    });
    assert_eq!(d.cntr_read(), 3);
    assert_eq!(fi_wait(d.ws[0], 50), ETIMEDOUT, "a change is reported once");
    // An EQ on the same set: an event wakes the waiter and stays reported
    // until it is read.
    let mut attr: sys::fi_eq_attr = unsafe { std::mem::zeroed() };
    attr.wait_obj = sys::fi_wait_obj_FI_WAIT_SET;
    attr.wait_set = d.ws[0];
    let mut eq = null_mut();
    assert_eq!(
        unsafe { ((*(*d.fab).ops).eq_open.unwrap())(d.fab, &mut attr, &mut eq, null_mut()) },
        0,
        "fi_eq_open with FI_WAIT_SET"
    );
    let eqp = eq as usize;
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let eq = eqp as *mut sys::fid_eq;
            let v = 5u64;
            let n =
                unsafe { ((*(*eq).ops).write.unwrap())(eq, 1, (&v as *const u64).cast(), 8, 0) };
            assert_eq!(n, 8);
        });
        assert_eq!(fi_wait(d.ws[0], 5000), 0, "fi_wait on an EQ event");
    });
    assert_eq!(fi_wait(d.ws[0], 0), 0, "unread EQ event still reported");
    let mut ev = 0u32;
    let mut buf = [0u8; 8];
    let n = unsafe { ((*(*eq).ops).read.unwrap())(eq, &mut ev, buf.as_mut_ptr().cast(), 8, 0) };
    assert_eq!(n, 8);
    assert_eq!(fi_wait(d.ws[0], 0), ETIMEDOUT, "EQ read, set idle");
    assert_eq!(close(eq), 0);
    d.close();
}

#[test]
fn wait_set_fd_with_trywait_receives_everything() {
    const N: u64 = 20;
    let d = Duo::new(Sets::One);
    let (rc, fd) = getwait(d.ws[0]);
    assert_eq!(rc, 0);
    let mut bufs = vec![[0u8; 8]; N as usize];
    for b in bufs.iter_mut() {
        d.recv(1, b, 3);
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 0..N {
                std::thread::sleep(Duration::from_millis(5));
                d.inject(0, k, 3);
            }
            drive(d.cq[0], Duration::from_millis(300));
        });
        let mut got = 0;
        let mut sleeps = 0;
        let t0 = Instant::now();
        let mut e = [sys::fi_cq_tagged_entry::default(); 8];
        while got < N && t0.elapsed() < Duration::from_secs(10) {
            match d.trywait(d.ws[0]) {
                0 => {
                    let mut p = libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    let r = unsafe { libc::poll(&mut p, 1, 2000) };
                    assert_eq!(r, 1, "poll on the set's fd timed out at {got} of {N}");
                    sleeps += 1;
                }
                rc => assert_eq!(rc, EAGAIN, "fi_trywait on the set"),
            }
            loop {
                let n = cq_read(d.cq[1], &mut e);
                if n <= 0 {
                    assert_eq!(n, -(sys::FI_EAGAIN as isize));
                    break;
                }
                got += n as u64;
            }
        }
        assert_eq!(got, N, "received");
        assert!(sleeps > 0, "never blocked on the set's fd");
    });
    let mut vals: Vec<u64> = bufs.iter().map(|b| u64::from_le_bytes(*b)).collect();
    vals.sort_unstable();
    assert_eq!(vals, (0..N).collect::<Vec<_>>());
    d.close();
}

fn poll_open(dom: *mut sys::fid_domain) -> Result<*mut sys::fid_poll, i32> {
    unsafe {
        let mut attr: sys::fi_poll_attr = std::mem::zeroed();
        let mut ps = null_mut();
        match ((*(*dom).ops).poll_open.unwrap())(dom, &mut attr, &mut ps) {
            0 => Ok(ps),
            rc => Err(rc),
        }
    }
}

fn poll_add<T>(ps: *mut sys::fid_poll, fid: *mut T) -> i32 {
    unsafe { ((*(*ps).ops).poll_add.unwrap())(ps, fid as *mut sys::fid, 0) }
}

fn poll_del<T>(ps: *mut sys::fid_poll, fid: *mut T) -> i32 {
    unsafe { ((*(*ps).ops).poll_del.unwrap())(ps, fid as *mut sys::fid, 0) }
}

/// `fi_poll` until it reports something (bounded), sorted contexts.
fn poll_some(ps: *mut sys::fid_poll, limit: Duration) -> Vec<usize> {
    let t0 = Instant::now();
    let mut ctx = [null_mut::<c_void>(); 8];
    loop {
        let n = unsafe { ((*(*ps).ops).poll.unwrap())(ps, ctx.as_mut_ptr(), 8) };
        assert!(n >= 0, "fi_poll {n}");
        if n > 0 || t0.elapsed() > limit {
            let mut v: Vec<usize> = ctx[..n as usize].iter().map(|c| *c as usize).collect();
            v.sort_unstable();
            return v;
        }
        std::thread::yield_now();
    }
}

#[test]
fn poll_set_returns_the_contexts_of_objects_with_events() {
    let d = Duo::new(Sets::None);
    let ps = poll_open(d.dom).expect("fi_poll_open");
    for f in [d.cq[0] as *mut sys::fid, d.cq[1].cast(), d.cntr.cast()] {
        assert_eq!(poll_add(ps, f), 0, "fi_poll_add");
    }
    // Only CQs, counters and EQs can be polled.
    assert_eq!(poll_add(ps, d.av), -(sys::FI_EINVAL as i32));
    // Nothing happened yet.
    assert_eq!(poll_some(ps, Duration::ZERO), Vec::<usize>::new());
    // A send with a completion: fi_poll alone moves it (it progresses the
    // endpoints) and names the receive CQ, the counter and the send CQ.
    let mut rx = [0u8; 8];
    d.recv(1, &mut rx, 9);
    let tx = 0x77u64.to_le_bytes();
    let rc = unsafe {
        (*(*d.ep[0]).tagged).send.unwrap()(
            d.ep[0],
            tx.as_ptr().cast(),
            8,
            null_mut(),
            d.addr[1],
            9,
            null_mut(),
        )
    };
    assert_eq!(rc, 0, "fi_tsend");
    let mut seen = Vec::new();
    let t0 = Instant::now();
    while seen.len() < 3 && t0.elapsed() < Duration::from_secs(5) {
        for c in poll_some(ps, Duration::from_secs(1)) {
            if !seen.contains(&c) {
                seen.push(c);
            }
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, vec![CTX_CQ[0], CTX_CQ[1], CTX_CNTR], "contexts");
    // The counter is reported once per change, the CQs until they are read.
    let again = poll_some(ps, Duration::ZERO);
    assert_eq!(again, vec![CTX_CQ[0], CTX_CQ[1]], "second fi_poll");
    let mut e = [sys::fi_cq_tagged_entry::default(); 4];
    assert_eq!(cq_read(d.cq[0], &mut e), 1);
    assert_eq!(cq_read(d.cq[1], &mut e), 1);
    assert_eq!(poll_some(ps, Duration::ZERO), Vec::<usize>::new());
    // Removed objects are not reported; removing one twice is an error.
    assert_eq!(poll_del(ps, d.cntr), 0);
    assert_eq!(poll_del(ps, d.cntr), -(sys::FI_EINVAL as i32));
    unsafe { (*(*d.cntr).ops).add.unwrap()(d.cntr, 1) };
    assert_eq!(poll_some(ps, Duration::ZERO), Vec::<usize>::new());
    // The domain cannot close under the poll set.
    assert_eq!(close(d.dom), -(sys::FI_EBUSY as i32));
    assert_eq!(close(ps), 0);
    d.close();
}

/// One ping-pong of `iters` 8-byte messages; `block` = each side waits in
/// fi_wait on its wait set before reading its CQ, else both spin on fi_cq_read.
/// Returns the mean round trip, µs.
fn pingpong(d: &Duo, iters: u64, block: bool) -> f64 {
    let side = |i: usize| {
        let mut rx = [0u8; 8];
        let mut e = sys::fi_cq_tagged_entry::default();
        let wait_rx = |e: &mut sys::fi_cq_tagged_entry| {
            let t0 = Instant::now();
            loop {
                let n = cq_read(d.cq[i], std::slice::from_mut(e));
                if n == 1 && e.flags & sys::FI_RECV as u64 != 0 {
                    return;
                }
                assert!(n == 1 || n == -(sys::FI_EAGAIN as isize), "read {n}");
                assert!(t0.elapsed() < Duration::from_secs(10), "ping-pong stalled");
                if block && n != 1 {
                    let rc = fi_wait(d.ws[i], 5000);
                    assert!(rc == 0 || rc == ETIMEDOUT, "fi_wait {rc}");
                }
            }
        };
        for k in 0..iters {
            d.recv(i, &mut rx, 1);
            if i == 0 {
                d.inject(0, k, 1);
                wait_rx(&mut e);
            } else {
                wait_rx(&mut e);
                d.inject(1, k, 1);
            }
        }
    };
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| side(1));
        side(0);
    });
    t0.elapsed().as_secs_f64() * 1e6 / iters as f64
}

#[test]
fn cost_of_waiting_on_a_set() {
    const ITERS: u64 = 2000;
    // One wait set per side, as one set per waiting thread (two threads
    // waiting on one set progress each other's endpoint and take each
    // other's wake-ups).
    let d = Duo::new(Sets::PerEndpoint);
    let _ = pingpong(&d, 100, false);
    let spin = pingpong(&d, ITERS, false);
    let block = pingpong(&d, ITERS, true);
    // Drain what the ping-pong left for the counter, then idle 1 s in fi_wait.
    let _ = fi_wait(d.ws[1], 0);
    let cpu0 = process_cpu_ns();
    let tcpu0 = thread_cpu_ns();
    assert_eq!(fi_wait(d.ws[1], 1000), ETIMEDOUT);
    let idle_cpu = (process_cpu_ns() - cpu0) as f64 / 1e6;
    let waiter_cpu = (thread_cpu_ns() - tcpu0) as f64 / 1e6;
    eprintln!(
        "8-byte ping-pong round trip: spinning {spin:.1} us, fi_wait on a wait set {block:.1} us; \
         CPU while blocked 1 s in fi_wait: waiter {waiter_cpu:.2} ms, process {idle_cpu:.2} ms"
    );
    assert!(idle_cpu < 100.0, "blocked waiter burns {idle_cpu} ms/s");
    d.close();
}
