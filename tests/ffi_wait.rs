//! Blocking waits through libfabric: fi_cq_sread and fi_cntr_wait that sleep
//! (measured by the reader's CPU time), time out, and progress the endpoint;
//! FI_WAIT_FD objects whose FI_GETWAIT fd, with fi_trywait, drives a
//! poll/epoll loop; and the cost of blocking against spinning (printed).

mod common;
use common::fab::*;
use common::wait::*;

use std::os::raw::c_int;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

const ANY: u64 = u64::MAX; // FI_ADDR_UNSPEC

/// Two endpoints of one domain, each with a CQ (and B with a receive counter)
/// of the given wait object.
struct Duo {
    info: *mut sys::fi_info,
    fab: *mut sys::fid_fabric,
    dom: *mut sys::fid_domain,
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

fn cq_with(dom: *mut sys::fid_domain, wait_obj: u32) -> Result<*mut sys::fid_cq, i32> {
    unsafe {
        let mut attr: sys::fi_cq_attr = std::mem::zeroed();
        attr.format = sys::fi_cq_format_FI_CQ_FORMAT_TAGGED;
        attr.size = 256;
        attr.wait_obj = wait_obj;
        let mut cq = null_mut();
        match ((*(*dom).ops).cq_open.unwrap())(dom, &mut attr, &mut cq, null_mut()) {
            0 => Ok(cq),
            rc => Err(rc),
        }
    }
}

fn cntr_with(dom: *mut sys::fid_domain, wait_obj: u32) -> Result<*mut sys::fid_cntr, i32> {
    unsafe {
        let mut attr: sys::fi_cntr_attr = std::mem::zeroed();
        attr.events = sys::fi_cntr_events_FI_CNTR_EVENTS_COMP;
        attr.wait_obj = wait_obj;
        let mut c = null_mut();
        match ((*(*dom).ops).cntr_open.unwrap())(dom, &mut attr, &mut c, null_mut()) {
            0 => Ok(c),
            rc => Err(rc),
        }
    }
}

impl Duo {
    fn new(wait_obj: u32) -> Duo {
        let info = getinfo(
            sys::fi_ep_type_FI_EP_RDM,
            (sys::FI_MSG | sys::FI_TAGGED) as u64,
        );
        let (fab, dom) = open_domain(info);
        let av = open_av(dom);
        let cntr = cntr_with(dom, wait_obj).expect("fi_cntr_open with this wait object");
        let mut ep = [null_mut(); 2];
        let mut cq = [null_mut(); 2];
        for i in 0..2 {
            ep[i] = open_ep(dom, info);
            cq[i] = cq_with(dom, wait_obj).expect("fi_cq_open with this wait object");
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

    fn sread(&self, i: usize, e: &mut sys::fi_cq_tagged_entry, timeout_ms: c_int) -> isize {
        unsafe {
            (*(*self.cq[i]).ops).sread.unwrap()(
                self.cq[i],
                (e as *mut sys::fi_cq_tagged_entry).cast(),
                1,
                std::ptr::null(),
                timeout_ms,
            )
        }
    }

    fn trywait<T>(&self, fid: *mut T) -> i32 {
        let mut f = fid as *mut sys::fid;
        unsafe { ((*(*self.fab).ops).trywait.unwrap())(self.fab, &mut f, 1) }
    }
}

#[test]
fn fd_wait_objects_are_accepted() {
    let d = Duo::new(sys::fi_wait_obj_FI_WAIT_FD);
    for fid in [d.cq[0] as *mut sys::fid, d.cntr as *mut sys::fid] {
        let (rc, fd) = getwait(fid);
        assert_eq!(rc, 0, "FI_GETWAIT");
        assert!(fd >= 0, "FI_GETWAIT gave fd {fd}");
        let mut obj: u32 = 0;
        let rc = control(fid, sys::FI_GETWAITOBJ, (&mut obj as *mut u32).cast());
        assert_eq!(rc, 0, "FI_GETWAITOBJ");
        assert_eq!(obj, sys::fi_wait_obj_FI_WAIT_FD);
    }
    d.close();
    // FI_WAIT_NONE objects have no fd; FI_WAIT_UNSPEC ones do.
    let (_, dom) = open_domain(getinfo(sys::fi_ep_type_FI_EP_RDM, sys::FI_MSG as u64));
    let none = cq_with(dom, sys::fi_wait_obj_FI_WAIT_NONE).unwrap();
    assert_eq!(getwait(none).0, -(sys::FI_ENODATA as i32));
    let unspec = cq_with(dom, sys::fi_wait_obj_FI_WAIT_UNSPEC).unwrap();
    assert_eq!(getwait(unspec).0, 0);
    assert_eq!(close(none), 0);
    assert_eq!(close(unspec), 0);
}

#[test]
fn sread_sleeps_until_a_peer_sends() {
    let d = Duo::new(sys::fi_wait_obj_FI_WAIT_FD);
    let mut rx = [0u8; 8];
    d.recv(1, &mut rx, 7);
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            d.inject(0, 0xfeed, 7);
            drive(d.cq[0], Duration::from_millis(300));
        });
        let cpu0 = thread_cpu_ns();
        let t0 = Instant::now();
        let mut e = sys::fi_cq_tagged_entry::default();
        let n = d.sread(1, &mut e, 5000);
        let waited = t0.elapsed();
        let cpu = thread_cpu_ns() - cpu0;
        assert_eq!(n, 1, "sread");
        assert_eq!(e.len, 8);
        // Written by the provider behind the compiler's back.
        let got = unsafe { std::ptr::read_volatile(&rx) };
        assert_eq!(u64::from_le_bytes(got), 0xfeed);
        assert!(waited >= Duration::from_millis(250), "early: {waited:?}");
        assert!(waited < Duration::from_millis(2000), "late: {waited:?}");
        // Spinning for 300 ms would cost ~300 ms of CPU.
        assert!(
            cpu < 30_000_000,
            "reader used {} ms of CPU while blocked {waited:?}",
            cpu / 1_000_000
        );
        eprintln!("sread blocked {waited:?} using {} us of CPU", cpu / 1000);
    });
    d.close();
}

#[test]
fn sread_times_out_with_eagain() {
    let d = Duo::new(sys::fi_wait_obj_FI_WAIT_FD);
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    let mut e = sys::fi_cq_tagged_entry::default();
    let n = d.sread(1, &mut e, 200);
    let waited = t0.elapsed();
    let cpu = thread_cpu_ns() - cpu0;
    assert_eq!(n, -(sys::FI_EAGAIN as isize));
    assert!(waited >= Duration::from_millis(195), "early: {waited:?}");
    assert!(waited < Duration::from_millis(1000), "late: {waited:?}");
    assert!(cpu < 30_000_000, "{} ms of CPU", cpu / 1_000_000);
    d.close();
}

#[test]
fn getwait_fd_with_poll_and_trywait_receives_everything() {
    const N: u64 = 20;
    let d = Duo::new(sys::fi_wait_obj_FI_WAIT_FD);
    let (rc, fd) = getwait(d.cq[1]);
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
            // The fi_trywait idiom: block only when trywait says so.
            match d.trywait(d.cq[1]) {
                0 => {
                    let mut p = libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    let r = unsafe { libc::poll(&mut p, 1, 2000) };
                    assert_eq!(r, 1, "poll timed out with {got} of {N} received");
                    sleeps += 1;
                }
                rc => assert_eq!(rc, -(sys::FI_EAGAIN as i32), "fi_trywait"),
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
        assert!(sleeps > 0, "never blocked on the fd");
    });
    let mut vals: Vec<u64> = bufs.iter().map(|b| u64::from_le_bytes(*b)).collect();
    vals.sort_unstable();
    assert_eq!(vals, (0..N).collect::<Vec<_>>());
    d.close();
}

#[test]
fn cntr_wait_and_epoll_on_its_fd() {
    const N: u64 = 6;
    let d = Duo::new(sys::fi_wait_obj_FI_WAIT_FD);
    let mut bufs = vec![[0u8; 8]; N as usize];
    for b in bufs.iter_mut() {
        d.recv(1, b, 4);
    }
    let (rc, fd) = getwait(d.cntr);
    assert_eq!(rc, 0);
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(ep >= 0);
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 1,
    };
    assert_eq!(
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) },
        0
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 0..N {
                std::thread::sleep(Duration::from_millis(30));
                d.inject(0, k, 4);
            }
            drive(d.cq[0], Duration::from_millis(300));
        });
        // fi_cntr_wait for the first one, sleeping.
        let cpu0 = thread_cpu_ns();
        let rc = unsafe { (*(*d.cntr).ops).wait.unwrap()(d.cntr, 1, 5000) };
        assert_eq!(rc, 0, "fi_cntr_wait");
        assert!(thread_cpu_ns() - cpu0 < 20_000_000, "cntr_wait spun");
        // Then the rest through epoll on the fd.
        let read = || unsafe { (*(*d.cntr).ops).read.unwrap()(d.cntr) };
        let t0 = Instant::now();
        while read() < N && t0.elapsed() < Duration::from_secs(10) {
            if d.trywait(d.cntr) == 0 && read() < N {
                let mut out = [libc::epoll_event { events: 0, u64: 0 }];
                let r = unsafe { libc::epoll_wait(ep, out.as_mut_ptr(), 1, 2000) };
                assert_eq!(r, 1, "epoll timed out at count {}", read());
            }
        }
        assert_eq!(read(), N);
    });
    unsafe { libc::close(ep) };
    d.close();
}

#[test]
fn cq_signal_wakes_a_sleeper() {
    let d = Duo::new(sys::fi_wait_obj_FI_WAIT_FD);
    let dr = &d;
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            unsafe { (*(*dr.cq[1]).ops).signal.unwrap()(dr.cq[1]) };
        });
        let t0 = Instant::now();
        let mut e = sys::fi_cq_tagged_entry::default();
        assert_eq!(d.sread(1, &mut e, 5000), -(sys::FI_EAGAIN as isize));
        assert!(t0.elapsed() < Duration::from_secs(2), "signal lost");
    });
    d.close();
}

#[test]
fn eq_fd_wakes_on_write() {
    let d = Duo::new(sys::fi_wait_obj_FI_WAIT_FD);
    let mut attr: sys::fi_eq_attr = unsafe { std::mem::zeroed() };
    attr.wait_obj = sys::fi_wait_obj_FI_WAIT_FD;
    let mut eq = null_mut();
    assert_eq!(
        unsafe { ((*(*d.fab).ops).eq_open.unwrap())(d.fab, &mut attr, &mut eq, null_mut()) },
        0
    );
    let (rc, fd) = getwait(eq);
    assert_eq!(rc, 0);
    assert_eq!(d.trywait(eq), 0, "empty EQ");
    let eqp = eq as usize;
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let eq = eqp as *mut sys::fid_eq;
            let v = 9u64;
            let n =
                unsafe { ((*(*eq).ops).write.unwrap())(eq, 1, (&v as *const u64).cast(), 8, 0) };
            assert_eq!(n, 8);
        });
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        assert_eq!(unsafe { libc::poll(&mut p, 1, 2000) }, 1, "EQ fd");
    });
    assert_eq!(d.trywait(eq), -(sys::FI_EAGAIN as i32), "EQ has an event");
    assert_eq!(close(eq), 0);
    d.close();
}

/// One ping-pong of `iters` 8-byte messages; `block` = both sides sread,
/// else both spin on fi_cq_read. Returns the mean round trip, µs.
fn pingpong(d: &Duo, iters: u64, block: bool) -> f64 {
    let side = |i: usize| {
        let mut rx = [0u8; 8];
        let mut e = sys::fi_cq_tagged_entry::default();
        let wait_rx = |e: &mut sys::fi_cq_tagged_entry| loop {
            let n = if block {
                d.sread(i, e, 5000)
            } else {
                cq_read(d.cq[i], std::slice::from_mut(e))
            };
            if n == 1 && e.flags & sys::FI_RECV as u64 != 0 {
                return;
            }
            assert!(n == 1 || n == -(sys::FI_EAGAIN as isize), "read {n}");
            assert!(!block || n == 1, "sread timed out");
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
fn cost_of_blocking() {
    const ITERS: u64 = 2000;
    let d = Duo::new(sys::fi_wait_obj_FI_WAIT_FD);
    let _ = pingpong(&d, 100, false);
    let spin = pingpong(&d, ITERS, false);
    let block = pingpong(&d, ITERS, true);
    // Idle: a reader blocked in sread for 1 s.
    let cpu0 = process_cpu_ns();
    let tcpu0 = thread_cpu_ns();
    let mut e = sys::fi_cq_tagged_entry::default();
    assert_eq!(d.sread(1, &mut e, 1000), -(sys::FI_EAGAIN as isize));
    let idle_cpu = (process_cpu_ns() - cpu0) as f64 / 1e6;
    let reader_cpu = (thread_cpu_ns() - tcpu0) as f64 / 1e6;
    eprintln!(
        "8-byte ping-pong round trip: spinning {spin:.1} us, sread {block:.1} us; \
         CPU while blocked 1 s in sread: reader {reader_cpu:.2} ms, process {idle_cpu:.2} ms"
    );
    assert!(idle_cpu < 100.0, "blocked reader burns {idle_cpu} ms/s");
    d.close();
}
