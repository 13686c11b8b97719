//! One-sided operations between two spray endpoints (each in its own domain)
//! over loopback UDP through the real libfabric core: RMA write / read /
//! writedata / inject at several sizes with verified contents, atomics with
//! fetched and compared results, counters, remote-access errors, bad arguments,
//! the `*valid` queries, both memory-registration modes, and the RAW / WAR /
//! WAW orderings an endpoint keeps when asked.

mod common;
use common::fab::*;

use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};

use spray_fi::sys;

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
const EAVAIL: isize = -(sys::FI_EAVAIL as isize);
const EINVAL: isize = -(sys::FI_EINVAL as isize);
const EOPNOTSUPP: i32 = -(sys::FI_EOPNOTSUPP as i32);
const ENOKEY: i32 = -(sys::FI_ENOKEY as i32);
const RMA: u64 = sys::FI_RMA as u64;
const ATOMIC: u64 = sys::FI_ATOMIC as u64;
const READ: u64 = sys::FI_READ as u64;
const WRITE: u64 = sys::FI_WRITE as u64;
const REMOTE_RW: u64 = (sys::FI_REMOTE_READ | sys::FI_REMOTE_WRITE) as u64;

/// No progress assist in this process (10 s): a side the test does not call
/// does not move, which `fence_orders_read_after_write` and
/// `asked_orders_hold_through_the_provider` rely on.
fn setup() {
    std::env::set_var("FI_SPRAY_ASSIST_US", "10000000");
    init();
}

/// What one completion said.
#[derive(Debug)]
enum Got {
    Ok(sys::fi_cq_tagged_entry, u64),
    Err(sys::fi_cq_err_entry),
}

/// Poll `cq` (progressing the peer through `other`) until one entry.
fn wait_one(cq: *mut sys::fid_cq, other: *mut sys::fid_cq) -> Got {
    let t = Instant::now();
    loop {
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        let mut src = [0u64; 1];
        let n = cq_readfrom(cq, &mut e, &mut src);
        if n == 1 {
            return Got::Ok(e[0], src[0]);
        }
        if n == EAVAIL {
            let (r, err) = cq_readerr(cq);
            assert_eq!(r, 1);
            return Got::Err(err);
        }
        assert_eq!(n, EAGAIN, "fi_cq_readfrom");
        let _ = cq_read(other, &mut []);
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no completion within 20 s"
        );
    }
}

fn ok(g: Got) -> sys::fi_cq_tagged_entry {
    match g {
        Got::Ok(e, _) => e,
        Got::Err(e) => panic!("error completion: err {} flags {:#x}", e.err, e.flags),
    }
}

/// Nothing arrives on `cq` for a little while.
fn quiet(cq: *mut sys::fid_cq, other: *mut sys::fid_cq) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(50) {
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        assert_eq!(
            cq_read(cq, &mut e),
            EAGAIN,
            "unexpected completion {:?}",
            e[0]
        );
        let _ = cq_read(other, &mut []);
    }
}

/// `fi_getinfo` for an RDM endpoint with RMA and atomics, offering `mr_mode`.
fn rma_info(mr_mode: i32) -> *mut sys::fi_info {
    setup();
    unsafe {
        let hints = sys::fi_dupinfo(null());
        (*(*hints).ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
        (*hints).caps = (sys::FI_MSG | sys::FI_TAGGED) as u64 | RMA | ATOMIC;
        (*(*hints).domain_attr).mr_mode = mr_mode;
        let name = CString::new("spray").unwrap();
        (*(*hints).fabric_attr).prov_name = libc::strdup(name.as_ptr());
        let mut info = null_mut();
        let rc = sys::fi_getinfo(sys::fi_version(), null(), null(), 0, hints, &mut info);
        sys::fi_freeinfo(hints);
        assert_eq!(rc, 0, "fi_getinfo");
        info
    }
}

/// One side: its own fabric, domain, AV, CQ and endpoint.
struct Side {
    fab: *mut sys::fid_fabric,
    dom: *mut sys::fid_domain,
    av: *mut sys::fid_av,
    cq: *mut sys::fid_cq,
    ep: *mut sys::fid_ep,
    cntrs: Vec<*mut sys::fid_cntr>,
}

struct Pair {
    info: *mut sys::fi_info,
    s: [Side; 2],
    /// fi_addr of the other side in each side's AV.
    peer: [u64; 2],
}

impl Pair {
    fn new(mr_mode: i32) -> Pair {
        Pair::ordered(mr_mode, 0)
    }

    /// As `new`, the endpoints opened with `order` added to the info's
    /// transmit `msg_order` (as an application whose hints asked it).
    fn ordered(mr_mode: i32, order: u64) -> Pair {
        let info = rma_info(mr_mode);
        unsafe { (*(*info).tx_attr).msg_order |= order };
        let mk = || {
            let (fab, dom) = open_domain(info);
            let av = open_av(dom);
            let ep = open_ep(dom, info);
            let cq = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
            assert_eq!(bind(ep, av, 0), 0);
            assert_eq!(bind(ep, cq, (sys::FI_TRANSMIT | sys::FI_RECV) as u64), 0);
            Side {
                fab,
                dom,
                av,
                cq,
                ep,
                cntrs: Vec::new(),
            }
        };
        let s = [mk(), mk()];
        for x in &s {
            assert_eq!(control(x.ep, sys::FI_ENABLE, null_mut()), 0);
        }
        let peer = [
            av_insert(s[0].av, &getname(s[1].ep)),
            av_insert(s[1].av, &getname(s[0].ep)),
        ];
        Pair { info, s, peer }
    }

    /// A counter bound to side `i` with `flags`.
    fn cntr(&mut self, i: usize, flags: u64) -> *mut sys::fid_cntr {
        let c = open_cntr(self.s[i].dom);
        assert_eq!(bind(self.s[i].ep, c, flags), 0);
        self.s[i].cntrs.push(c);
        c
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for x in &self.s {
            assert_eq!(close(x.ep), 0);
            assert_eq!(close(x.cq), 0);
            for c in &x.cntrs {
                assert_eq!(close(*c), 0);
            }
            assert_eq!(close(x.av), 0);
            assert_eq!(close(x.dom), 0, "an MR left open");
            assert_eq!(close(x.fab), 0);
        }
        unsafe { sys::fi_freeinfo(self.info) };
    }
}

/// A registered region (closed on drop).
struct Mr(*mut sys::fid_mr);

impl Mr {
    fn key(&self) -> u64 {
        unsafe { (*self.0).key }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        assert_eq!(close(self.0), 0);
    }
}

/// `fi_mr_reg` of `buf` with `access` and `key`; the return code on failure.
fn mr_reg(dom: *mut sys::fid_domain, buf: &mut [u8], access: u64, key: u64) -> Result<Mr, i32> {
    let mut mr = null_mut();
    let rc = unsafe {
        (*(*dom).mr).reg.unwrap()(
            dom as *mut sys::fid,
            buf.as_mut_ptr() as *const c_void,
            buf.len(),
            access,
            0,
            key,
            0,
            &mut mr,
            null_mut(),
        )
    };
    if rc == 0 {
        Ok(Mr(mr))
    } else {
        Err(rc)
    }
}

fn ctx(x: &mut u64) -> *mut c_void {
    (x as *mut u64).cast()
}

/// A patterned buffer of `n` bytes (`seed` varies it).
fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n)
        .map(|i| ((i * 131 + seed * 7) ^ (i >> 9)) as u8)
        .collect()
}

#[test]
fn write_read_writedata_at_sizes() {
    let p = Pair::new(0);
    let (a, b) = (&p.s[0], &p.s[1]);
    const OFF: usize = 64;
    let max = 3 << 20;
    let mut region = vec![0u8; max + 2 * OFF];
    let mr = mr_reg(b.dom, &mut region, REMOTE_RW, 7).unwrap();
    assert_eq!(mr.key(), 7, "mode 0: the requested key");
    let mut c = 0u64;
    unsafe {
        let rma = &*(*a.ep).rma;
        for (n, size) in [1usize, 100, 4000, 70_000, 1 << 20, max]
            .into_iter()
            .enumerate()
        {
            let tx = pattern(size, n);
            // fi_write at offset OFF (mode 0: offsets into the region).
            let rc = rma.write.unwrap()(
                a.ep,
                tx.as_ptr().cast(),
                size,
                null_mut(),
                p.peer[0],
                OFF as u64,
                mr.key(),
                ctx(&mut c),
            );
            assert_eq!(rc, 0, "fi_write {size}");
            let e = ok(wait_one(a.cq, b.cq));
            assert_eq!(e.op_context, ctx(&mut c));
            assert_eq!(e.flags & (RMA | WRITE | READ), RMA | WRITE);
            assert_eq!(
                &region[OFF..OFF + size],
                &tx[..],
                "target after write of {size}"
            );
            assert!(
                region[..OFF].iter().all(|&x| x == 0),
                "wrote before the range"
            );
            assert!(
                region[OFF + size..].iter().all(|&x| x == 0),
                "wrote past the range"
            );
            // fi_read back into a fresh buffer.
            // A guard zone after the `size` bytes asked for must stay untouched.
            let mut rx = vec![0xa5u8; size + 64];
            let rc = rma.read.unwrap()(
                a.ep,
                rx.as_mut_ptr().cast(),
                size,
                null_mut(),
                p.peer[0],
                OFF as u64,
                mr.key(),
                ctx(&mut c),
            );
            assert_eq!(rc, 0, "fi_read {size}");
            let e = ok(wait_one(a.cq, b.cq));
            assert_eq!(e.flags & (RMA | WRITE | READ), RMA | READ);
            assert_eq!(&rx[..size], &tx[..], "read back {size}");
            assert!(
                rx[size..].iter().all(|&x| x == 0xa5),
                "read wrote past {size} bytes"
            );
            region[OFF..OFF + size].fill(0);
        }
        // fi_writedata: the target's CQ reports the data and the source.
        let tx = pattern(5000, 9);
        let rc = rma.writedata.unwrap()(
            a.ep,
            tx.as_ptr().cast(),
            tx.len(),
            null_mut(),
            0xfeed_beef,
            p.peer[0],
            0,
            mr.key(),
            ctx(&mut c),
        );
        assert_eq!(rc, 0);
        let (e, src) = match wait_one(b.cq, a.cq) {
            Got::Ok(e, s) => (e, s),
            Got::Err(e) => panic!("target error {}", e.err),
        };
        let want = RMA | (sys::FI_REMOTE_WRITE | sys::FI_REMOTE_CQ_DATA) as u64;
        assert_eq!(e.flags & want, want, "flags {:#x}", e.flags);
        assert_eq!(e.data, 0xfeed_beef);
        assert_eq!(src, p.peer[1], "source of the write");
        assert_eq!(&region[..5000], &tx[..]);
        ok(wait_one(a.cq, b.cq));
        // fi_writev over two pieces and fi_readv into two pieces.
        let (x, y) = (pattern(3000, 1), pattern(700, 2));
        let iov = [
            libc::iovec {
                iov_base: x.as_ptr() as *mut c_void,
                iov_len: x.len(),
            },
            libc::iovec {
                iov_base: y.as_ptr() as *mut c_void,
                iov_len: y.len(),
            },
        ];
        let rc = rma.writev.unwrap()(
            a.ep,
            iov.as_ptr().cast(),
            null_mut(),
            2,
            p.peer[0],
            10,
            mr.key(),
            null_mut(),
        );
        assert_eq!(rc, 0);
        ok(wait_one(a.cq, b.cq));
        assert_eq!(&region[10..3010], &x[..]);
        assert_eq!(&region[3010..3710], &y[..]);
        let (mut u, mut v) = (vec![0u8; 1000], vec![0u8; 2700]);
        let iov = [
            libc::iovec {
                iov_base: u.as_mut_ptr().cast(),
                iov_len: u.len(),
            },
            libc::iovec {
                iov_base: v.as_mut_ptr().cast(),
                iov_len: v.len(),
            },
        ];
        let rc = rma.readv.unwrap()(
            a.ep,
            iov.as_ptr().cast(),
            null_mut(),
            2,
            p.peer[0],
            10,
            mr.key(),
            null_mut(),
        );
        assert_eq!(rc, 0);
        ok(wait_one(a.cq, b.cq));
        assert_eq!(&u[..], &region[10..1010]);
        assert_eq!(&v[..], &region[1010..3710]);
    }
}

#[test]
fn inject_counters_and_msg_forms() {
    let mut p = Pair::new(0);
    let wc = p.cntr(0, WRITE);
    let rc_ = p.cntr(0, READ);
    let (a, b) = (&p.s[0], &p.s[1]);
    let mut region = vec![0u8; 4096];
    let mr = mr_reg(b.dom, &mut region, REMOTE_RW, 99).unwrap();
    // Spin on a counter while progressing the target too.
    let wait_cntr = |c: *mut sys::fid_cntr, n: u64| {
        let t = Instant::now();
        unsafe {
            while (*(*c).ops).read.unwrap()(c) < n {
                let _ = cq_read(b.cq, &mut []);
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "counter stuck below {n}"
                );
            }
            assert_eq!((*(*c).ops).readerr.unwrap()(c), 0);
        }
    };
    unsafe {
        let rma = &*(*a.ep).rma;
        // fi_inject_write: the source may change at once; no CQ entry, counted.
        let mut src = pattern(200, 3);
        let want = src.clone();
        assert_eq!(
            rma.inject.unwrap()(a.ep, src.as_ptr().cast(), 200, p.peer[0], 100, mr.key()),
            0
        );
        src.fill(0xee);
        wait_cntr(wc, 1);
        assert_eq!(&region[100..300], &want[..]);
        quiet(a.cq, b.cq);
        // fi_inject_writedata: the target still gets its CQ data.
        assert_eq!(
            rma.injectdata.unwrap()(a.ep, src.as_ptr().cast(), 8, 0x55, p.peer[0], 0, mr.key()),
            0
        );
        let e = ok(wait_one(b.cq, a.cq));
        assert_eq!(e.data, 0x55);
        wait_cntr(wc, 2);
        // fi_readmsg with FI_COMPLETION counts on the read counter.
        let mut rx = vec![0u8; 200];
        let iov = libc::iovec {
            iov_base: rx.as_mut_ptr().cast(),
            iov_len: 200,
        };
        let rio = sys::fi_rma_iov {
            addr: 100,
            len: 200,
            key: mr.key(),
        };
        let mut c = 5u64;
        let msg = sys::fi_msg_rma {
            msg_iov: (&iov as *const libc::iovec).cast(),
            desc: null_mut(),
            iov_count: 1,
            addr: p.peer[0],
            rma_iov: &rio,
            rma_iov_count: 1,
            context: ctx(&mut c),
            data: 0,
        };
        assert_eq!(
            rma.readmsg.unwrap()(a.ep, &msg, sys::FI_COMPLETION as u64),
            0
        );
        let e = ok(wait_one(a.cq, b.cq));
        assert_eq!(e.op_context, ctx(&mut c));
        wait_cntr(rc_, 1);
        assert_eq!(rx, want);
        // FI_INJECT on a read is refused; two remote ranges are refused.
        assert_eq!(
            rma.readmsg.unwrap()(a.ep, &msg, sys::FI_INJECT as u64),
            EINVAL
        );
        let two = [rio, rio];
        let bad = sys::fi_msg_rma {
            rma_iov: two.as_ptr(),
            rma_iov_count: 2,
            ..msg
        };
        assert_eq!(rma.writemsg.unwrap()(a.ep, &bad, 0), EINVAL);
        let short = sys::fi_rma_iov { len: 10, ..rio };
        let bad = sys::fi_msg_rma {
            rma_iov: &short,
            ..msg
        };
        assert_eq!(
            rma.writemsg.unwrap()(a.ep, &bad, 0),
            EINVAL,
            "remote range too short"
        );
        assert_eq!(rma.writemsg.unwrap()(a.ep, null(), 0), EINVAL);
        // fi_writemsg with FI_INJECT | FI_REMOTE_CQ_DATA.
        let tx = pattern(64, 8);
        let iov = libc::iovec {
            iov_base: tx.as_ptr() as *mut c_void,
            iov_len: 64,
        };
        let wmsg = sys::fi_msg_rma {
            msg_iov: (&iov as *const libc::iovec).cast(),
            data: 0x77,
            ..msg
        };
        let f = (sys::FI_INJECT | sys::FI_REMOTE_CQ_DATA) as u64;
        assert_eq!(rma.writemsg.unwrap()(a.ep, &wmsg, f), 0);
        let e = ok(wait_one(b.cq, a.cq));
        assert_eq!(e.data, 0x77);
        wait_cntr(wc, 3);
        assert_eq!(&region[100..164], &tx[..]);
        // Without FI_COMPLETION (and no selective completion) it is still reported.
        quiet(b.cq, a.cq);
        let e = ok(wait_one(a.cq, b.cq));
        assert_eq!(e.flags & (RMA | WRITE), RMA | WRITE);
    }
}

#[test]
fn remote_access_errors() {
    let mut p = Pair::new(0);
    let wc = p.cntr(0, READ | WRITE);
    let (a, b) = (&p.s[0], &p.s[1]);
    let mut region = vec![1u8; 1000];
    let mut ro = vec![2u8; 100];
    let mr = mr_reg(b.dom, &mut region, REMOTE_RW, 1).unwrap();
    let mr_ro = mr_reg(b.dom, &mut ro, sys::FI_REMOTE_READ as u64, 2).unwrap();
    // A duplicate requested key is refused.
    let mut other = vec![0u8; 10];
    assert_eq!(mr_reg(b.dom, &mut other, REMOTE_RW, 1).err(), Some(ENOKEY));
    let buf = [9u8; 200];
    let mut c = 0u64;
    let eacces = sys::FI_EACCES as i32;
    unsafe {
        let rma = &*(*a.ep).rma;
        let cases: [(u64, u64, usize, &str); 4] = [
            (12345, 0, 10, "unknown key"),
            (mr.key(), 900, 200, "past the end of the region"),
            (mr.key(), u64::MAX - 5, 10, "address overflow"),
            (mr_ro.key(), 0, 10, "region not writable"),
        ];
        for (key, addr, len, what) in cases {
            let rc = rma.write.unwrap()(
                a.ep,
                buf.as_ptr().cast(),
                len,
                null_mut(),
                p.peer[0],
                addr,
                key,
                ctx(&mut c),
            );
            assert_eq!(rc, 0, "{what}");
            match wait_one(a.cq, b.cq) {
                Got::Err(e) => {
                    assert_eq!(e.err, eacces, "{what}");
                    assert_eq!(e.op_context, ctx(&mut c));
                }
                Got::Ok(e, _) => panic!("{what}: completed {:?}", e),
            }
        }
        assert!(
            region.iter().all(|&x| x == 1),
            "a refused write changed memory"
        );
        assert!(ro.iter().all(|&x| x == 2));
        // Reading the read-only region works.
        let mut rx = vec![0u8; 100];
        assert_eq!(
            rma.read.unwrap()(
                a.ep,
                rx.as_mut_ptr().cast(),
                100,
                null_mut(),
                p.peer[0],
                0,
                mr_ro.key(),
                null_mut()
            ),
            0
        );
        ok(wait_one(a.cq, b.cq));
        assert_eq!(rx, ro);
        assert_eq!((*(*wc).ops).readerr.unwrap()(wc), 4, "errors counted");
        // A closed region is gone.
        let key = mr.key();
        drop(mr);
        assert_eq!(
            rma.write.unwrap()(
                a.ep,
                buf.as_ptr().cast(),
                10,
                null_mut(),
                p.peer[0],
                0,
                key,
                null_mut()
            ),
            0
        );
        assert!(matches!(wait_one(a.cq, b.cq), Got::Err(e) if e.err == eacces));
        // Bad arguments never crash.
        assert_eq!(
            rma.write.unwrap()(a.ep, null(), 10, null_mut(), p.peer[0], 0, key, null_mut()),
            EINVAL
        );
        assert_eq!(
            rma.write.unwrap()(
                a.ep,
                buf.as_ptr().cast(),
                10,
                null_mut(),
                77,
                0,
                key,
                null_mut()
            ),
            EINVAL,
            "unknown peer"
        );
        assert_eq!(
            rma.write.unwrap()(
                null_mut(),
                buf.as_ptr().cast(),
                10,
                null_mut(),
                p.peer[0],
                0,
                key,
                null_mut()
            ),
            EINVAL
        );
        let big = vec![0u8; 1 << 16];
        assert_eq!(
            rma.inject.unwrap()(a.ep, big.as_ptr().cast(), big.len(), p.peer[0], 0, key),
            -(sys::FI_EMSGSIZE as isize),
            "inject larger than inject_size"
        );
    }
}

/// Issue one atomic through `f`, wait for its completion, return its flags.
fn atomic_done(p: &Pair, rc: isize) -> u64 {
    assert_eq!(rc, 0, "atomic post");
    ok(wait_one(p.s[0].cq, p.s[1].cq)).flags
}

#[test]
fn atomics_fetch_compare_and_valid() {
    let p = Pair::new(0);
    let (a, b) = (&p.s[0], &p.s[1]);
    let mut region = vec![0u8; 256];
    let mr = mr_reg(b.dom, &mut region, REMOTE_RW, 3).unwrap();
    let u64_at = |r: &[u8], off: usize| u64::from_ne_bytes(r[off..off + 8].try_into().unwrap());
    let (u64t, i32t, f64t) = (
        sys::fi_datatype_FI_UINT64,
        sys::fi_datatype_FI_INT32,
        sys::fi_datatype_FI_DOUBLE,
    );
    unsafe {
        let at = &*(*a.ep).atomic;
        // Plain SUM on 4 u64s at offset 0.
        let ops = [1u64, 2, 3, 1 << 40];
        region[..32].copy_from_slice(&[10u64, 20, 30, 40].map(u64::to_ne_bytes).concat());
        let f = atomic_done(
            &p,
            at.write.unwrap()(
                a.ep,
                ops.as_ptr().cast(),
                4,
                null_mut(),
                p.peer[0],
                0,
                mr.key(),
                u64t,
                sys::fi_op_FI_SUM,
                null_mut(),
            ),
        );
        assert_eq!(f & (ATOMIC | WRITE | READ), ATOMIC | WRITE);
        assert_eq!(
            [0, 8, 16, 24].map(|o| u64_at(&region, o)),
            [11, 22, 33, 40 + (1 << 40)]
        );
        // Fetch-and-add returns the old values.
        let mut old = [0u64; 2];
        let f = atomic_done(
            &p,
            at.readwrite.unwrap()(
                a.ep,
                ops.as_ptr().cast(),
                2,
                null_mut(),
                old.as_mut_ptr().cast(),
                null_mut(),
                p.peer[0],
                8,
                mr.key(),
                u64t,
                sys::fi_op_FI_SUM,
                null_mut(),
            ),
        );
        assert_eq!(f & (ATOMIC | WRITE | READ), ATOMIC | READ);
        assert_eq!(old, [22, 33]);
        assert_eq!([8, 16].map(|o| u64_at(&region, o)), [23, 35]);
        // FI_ATOMIC_READ with no operand buffer.
        let mut got = [0u64; 1];
        atomic_done(
            &p,
            at.readwrite.unwrap()(
                a.ep,
                null(),
                1,
                null_mut(),
                got.as_mut_ptr().cast(),
                null_mut(),
                p.peer[0],
                0,
                mr.key(),
                u64t,
                sys::fi_op_FI_ATOMIC_READ,
                null_mut(),
            ),
        );
        assert_eq!(got, [11]);
        // Compare-and-swap: equal swaps, unequal does not; both return the old value.
        let (cmp, new) = ([11u64], [500u64]);
        let mut res = [0u64];
        atomic_done(
            &p,
            at.compwrite.unwrap()(
                a.ep,
                new.as_ptr().cast(),
                1,
                null_mut(),
                cmp.as_ptr().cast(),
                null_mut(),
                res.as_mut_ptr().cast(),
                null_mut(),
                p.peer[0],
                0,
                mr.key(),
                u64t,
                sys::fi_op_FI_CSWAP,
                null_mut(),
            ),
        );
        assert_eq!((res[0], u64_at(&region, 0)), (11, 500));
        atomic_done(
            &p,
            at.compwrite.unwrap()(
                a.ep,
                [7u64].as_ptr().cast(),
                1,
                null_mut(),
                cmp.as_ptr().cast(),
                null_mut(),
                res.as_mut_ptr().cast(),
                null_mut(),
                p.peer[0],
                0,
                mr.key(),
                u64t,
                sys::fi_op_FI_CSWAP,
                null_mut(),
            ),
        );
        assert_eq!((res[0], u64_at(&region, 0)), (500, 500));
        // MIN on i32 (signed) and SUM on f64 through the vector and msg forms.
        region[64..72].copy_from_slice(&[5i32, -5].map(i32::to_ne_bytes).concat());
        let ops32 = [-7i32, 3];
        let ioc = sys::fi_ioc {
            addr: ops32.as_ptr() as *mut c_void,
            count: 2,
        };
        atomic_done(
            &p,
            at.writev.unwrap()(
                a.ep,
                &ioc,
                null_mut(),
                1,
                p.peer[0],
                64,
                mr.key(),
                i32t,
                sys::fi_op_FI_MIN,
                null_mut(),
            ),
        );
        let mins: Vec<i32> = region[64..72]
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(mins, [-7, -5]);
        region[128..136].copy_from_slice(&1.5f64.to_ne_bytes());
        let d = [2.25f64];
        let ioc = sys::fi_ioc {
            addr: d.as_ptr() as *mut c_void,
            count: 1,
        };
        let rioc = sys::fi_rma_ioc {
            addr: 128,
            count: 1,
            key: mr.key(),
        };
        let mut fres = [0f64];
        let resv = sys::fi_ioc {
            addr: fres.as_mut_ptr().cast(),
            count: 1,
        };
        let msg = sys::fi_msg_atomic {
            msg_iov: &ioc,
            desc: null_mut(),
            iov_count: 1,
            addr: p.peer[0],
            rma_iov: &rioc,
            rma_iov_count: 1,
            datatype: f64t,
            op: sys::fi_op_FI_SUM,
            context: null_mut(),
            data: 0,
        };
        let mut resv2 = resv;
        atomic_done(
            &p,
            at.readwritemsg.unwrap()(a.ep, &msg, &mut resv2, null_mut(), 1, 0),
        );
        assert_eq!(fres[0], 1.5);
        assert_eq!(
            f64::from_ne_bytes(region[128..136].try_into().unwrap()),
            3.75
        );
        // The vector forms of fetch and compare: fetch-add 10 to u64 at 160, then
        // swap it for 99 where it equals 30 (it does: 20 + 10).
        region[160..168].copy_from_slice(&20u64.to_ne_bytes());
        let (add, mut old) = ([10u64], [0u64]);
        let ioc = sys::fi_ioc {
            addr: add.as_ptr() as *mut c_void,
            count: 1,
        };
        let mut resv = sys::fi_ioc {
            addr: old.as_mut_ptr().cast(),
            count: 1,
        };
        atomic_done(
            &p,
            at.readwritev.unwrap()(
                a.ep,
                &ioc,
                null_mut(),
                1,
                &mut resv,
                null_mut(),
                1,
                p.peer[0],
                160,
                mr.key(),
                u64t,
                sys::fi_op_FI_SUM,
                null_mut(),
            ),
        );
        assert_eq!((old[0], u64_at(&region, 160)), (20, 30));
        let (swap, cmp30) = ([99u64], [30u64]);
        let ioc = sys::fi_ioc {
            addr: swap.as_ptr() as *mut c_void,
            count: 1,
        };
        let cioc = sys::fi_ioc {
            addr: cmp30.as_ptr() as *mut c_void,
            count: 1,
        };
        atomic_done(
            &p,
            at.compwritev.unwrap()(
                a.ep,
                &ioc,
                null_mut(),
                1,
                &cioc,
                null_mut(),
                1,
                &mut resv,
                null_mut(),
                1,
                p.peer[0],
                160,
                mr.key(),
                u64t,
                sys::fi_op_FI_CSWAP,
                null_mut(),
            ),
        );
        assert_eq!((old[0], u64_at(&region, 160)), (30, 99));
        // Bad key on an atomic: an error completion, memory untouched.
        let before = region.clone();
        let rc = at.write.unwrap()(
            a.ep,
            ops.as_ptr().cast(),
            1,
            null_mut(),
            p.peer[0],
            0,
            4242,
            u64t,
            sys::fi_op_FI_SUM,
            null_mut(),
        );
        assert_eq!(rc, 0);
        assert!(matches!(wait_one(a.cq, b.cq), Got::Err(e) if e.err == sys::FI_EACCES as i32));
        assert_eq!(region, before);

        // Bad arguments.
        let post = |dt, op, n| {
            at.write.unwrap()(
                a.ep,
                ops.as_ptr().cast(),
                n,
                null_mut(),
                p.peer[0],
                0,
                mr.key(),
                dt,
                op,
                null_mut(),
            )
        };
        assert_eq!(post(u64t, sys::fi_op_FI_SUM, 0), EINVAL, "count 0");
        assert_eq!(post(999, sys::fi_op_FI_SUM, 1), EINVAL, "no such datatype");
        assert_eq!(post(u64t, 999, 1), EINVAL, "no such op");
        assert_eq!(
            post(sys::fi_datatype_FI_LONG_DOUBLE, sys::fi_op_FI_SUM, 1) as i32,
            EOPNOTSUPP
        );
        assert_eq!(
            post(u64t, sys::fi_op_FI_CSWAP, 1) as i32,
            EOPNOTSUPP,
            "compare op in a plain call"
        );
        assert_eq!(
            at.compwrite.unwrap()(
                a.ep,
                new.as_ptr().cast(),
                1,
                null_mut(),
                null(),
                null_mut(),
                res.as_mut_ptr().cast(),
                null_mut(),
                p.peer[0],
                0,
                mr.key(),
                u64t,
                sys::fi_op_FI_CSWAP,
                null_mut()
            ),
            EINVAL,
            "no comparands"
        );
        assert_eq!(at.writemsg.unwrap()(a.ep, null(), 0), EINVAL);
        quiet(a.cq, b.cq);

        // Valid queries.
        let mut n = 0usize;
        assert_eq!(
            at.writevalid.unwrap()(a.ep, u64t, sys::fi_op_FI_SUM, &mut n),
            0
        );
        assert!(n >= 1, "count {n}");
        let max = n;
        assert_eq!(
            post(u64t, sys::fi_op_FI_SUM, max + 1),
            EINVAL,
            "count above the valid maximum"
        );
        assert_eq!(
            at.readwritevalid.unwrap()(a.ep, u64t, sys::fi_op_FI_ATOMIC_READ, &mut n),
            0
        );
        assert_eq!(
            at.compwritevalid.unwrap()(a.ep, u64t, sys::fi_op_FI_CSWAP, &mut n),
            0
        );
        assert!(n >= 1);
        assert_eq!(
            at.writevalid.unwrap()(a.ep, u64t, sys::fi_op_FI_ATOMIC_READ, &mut n),
            EOPNOTSUPP
        );
        assert_eq!(
            at.writevalid.unwrap()(a.ep, f64t, sys::fi_op_FI_BOR, &mut n),
            EOPNOTSUPP
        );
        assert_eq!(
            at.writevalid.unwrap()(
                a.ep,
                sys::fi_datatype_FI_FLOAT_COMPLEX,
                sys::fi_op_FI_SUM,
                &mut n
            ),
            EOPNOTSUPP
        );
        assert_eq!(
            at.compwritevalid.unwrap()(a.ep, u64t, sys::fi_op_FI_SUM, &mut n),
            EOPNOTSUPP
        );
        assert_eq!(
            at.writevalid.unwrap()(a.ep, u64t, sys::fi_op_FI_SUM, null_mut()),
            EINVAL as i32
        );
        // fi_query_atomic on the domain agrees.
        let q = (*(*a.dom).ops).query_atomic.unwrap();
        let mut attr = sys::fi_atomic_attr { count: 0, size: 0 };
        assert_eq!(q(a.dom, u64t, sys::fi_op_FI_SUM, &mut attr, 0), 0);
        assert_eq!((attr.size, attr.count), (8, max));
        assert_eq!(
            q(
                a.dom,
                u64t,
                sys::fi_op_FI_CSWAP,
                &mut attr,
                sys::FI_COMPARE_ATOMIC
            ),
            0
        );
        assert_eq!(
            q(a.dom, u64t, sys::fi_op_FI_CSWAP, &mut attr, 0),
            EOPNOTSUPP
        );
        assert_eq!(
            q(
                a.dom,
                sys::fi_datatype_FI_LONG_DOUBLE_COMPLEX,
                sys::fi_op_FI_SUM,
                &mut attr,
                0
            ),
            EOPNOTSUPP
        );
        assert_eq!(
            q(a.dom, u64t, sys::fi_op_FI_SUM, null_mut(), 0),
            EINVAL as i32
        );
    }
}

#[test]
fn provider_keys_and_virtual_addresses() {
    let mode = (sys::FI_MR_VIRT_ADDR | sys::FI_MR_PROV_KEY | sys::FI_MR_ALLOCATED) as i32;
    let p = Pair::new(mode);
    unsafe {
        let granted = (*(*p.info).domain_attr).mr_mode;
        assert_eq!(
            granted,
            (sys::FI_MR_VIRT_ADDR | sys::FI_MR_PROV_KEY) as i32,
            "granted mr_mode"
        );
        assert_eq!((*(*p.info).tx_attr).rma_iov_limit, 1);
    }
    let (a, b) = (&p.s[0], &p.s[1]);
    let mut r1 = vec![0u8; 5000];
    let mut r2 = vec![0u8; 5000];
    // The same requested key twice: the provider picks distinct keys.
    let m1 = mr_reg(b.dom, &mut r1, REMOTE_RW, 0).unwrap();
    let m2 = mr_reg(b.dom, &mut r2, REMOTE_RW, 0).unwrap();
    assert_ne!(m1.key(), m2.key());
    let tx = pattern(3000, 4);
    unsafe {
        let rma = &*(*a.ep).rma;
        let addr = r2.as_ptr() as u64 + 1000;
        assert_eq!(
            rma.write.unwrap()(
                a.ep,
                tx.as_ptr().cast(),
                3000,
                null_mut(),
                p.peer[0],
                addr,
                m2.key(),
                null_mut()
            ),
            0
        );
        ok(wait_one(a.cq, b.cq));
        assert_eq!(&r2[1000..4000], &tx[..]);
        assert!(r1.iter().all(|&x| x == 0));
        // An offset is not an address in this mode.
        assert_eq!(
            rma.write.unwrap()(
                a.ep,
                tx.as_ptr().cast(),
                10,
                null_mut(),
                p.peer[0],
                0,
                m2.key(),
                null_mut()
            ),
            0
        );
        assert!(matches!(wait_one(a.cq, b.cq), Got::Err(_)));
    }
}

#[test]
fn dgram_endpoints_have_no_rma() {
    let info = getinfo(sys::fi_ep_type_FI_EP_DGRAM, sys::FI_MSG as u64);
    unsafe {
        assert_eq!((*info).caps & (RMA | ATOMIC), 0, "DGRAM caps");
        assert_eq!((*(*info).tx_attr).rma_iov_limit, 0);
    }
    let (fab, dom) = open_domain(info);
    let ep = open_ep(dom, info);
    let buf = [0u8; 8];
    let enosys = -(sys::FI_ENOSYS as isize);
    unsafe {
        let w = (*(*ep).rma).write.unwrap();
        assert_eq!(
            w(ep, buf.as_ptr().cast(), 8, null_mut(), 0, 0, 0, null_mut()),
            enosys
        );
        let mut n = 0usize;
        let v = (*(*ep).atomic).writevalid.unwrap();
        assert_eq!(
            v(ep, sys::fi_datatype_FI_UINT64, sys::fi_op_FI_SUM, &mut n),
            enosys as i32
        );
    }
    assert_eq!(close(ep), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}

/// `FI_FENCE`: a fenced read is held back (`-FI_EAGAIN`) while an earlier write of
/// the same endpoint is unfinished, and once posted it sees all the written bytes.
#[test]
fn fence_orders_read_after_write() {
    let p = Pair::new(0);
    let (a, b) = (&p.s[0], &p.s[1]);
    let size = 2 << 20;
    let mut region = vec![0u8; size];
    let mr = mr_reg(b.dom, &mut region, REMOTE_RW, 31).unwrap();
    let tx = pattern(size, 9);
    let mut rx = vec![0u8; size];
    let (mut cw, mut cr) = (1u64, 2u64);
    unsafe {
        let rma = &*(*a.ep).rma;
        let rc = rma.write.unwrap()(
            a.ep,
            tx.as_ptr().cast(),
            size,
            null_mut(),
            p.peer[0],
            0,
            mr.key(),
            ctx(&mut cw),
        );
        assert_eq!(rc, 0, "fi_write");
        let iov = libc::iovec {
            iov_base: rx.as_mut_ptr().cast(),
            iov_len: size,
        };
        let rio = sys::fi_rma_iov {
            addr: 0,
            len: size,
            key: mr.key(),
        };
        let msg = sys::fi_msg_rma {
            msg_iov: (&iov as *const libc::iovec).cast(),
            desc: null_mut(),
            iov_count: 1,
            addr: p.peer[0],
            rma_iov: &rio,
            rma_iov_count: 1,
            context: ctx(&mut cr),
            data: 0,
        };
        let fenced = (sys::FI_FENCE | sys::FI_COMPLETION) as u64;
        // 2 MiB cannot have landed yet: the target has not been progressed.
        assert_eq!(rma.readmsg.unwrap()(a.ep, &msg, fenced), EAGAIN);
        let t = Instant::now();
        let mut tries = 1;
        loop {
            let _ = cq_read(b.cq, &mut []);
            let rc = rma.readmsg.unwrap()(a.ep, &msg, fenced);
            if rc == 0 {
                break;
            }
            assert_eq!(rc, EAGAIN, "fenced fi_readmsg");
            tries += 1;
            assert!(t.elapsed() < Duration::from_secs(10), "fence never opened");
        }
        assert!(tries > 1);
        // The write's completion was produced before the fence opened.
        let e = ok(wait_one(a.cq, b.cq));
        assert_eq!(e.op_context, ctx(&mut cw));
        let e = ok(wait_one(a.cq, b.cq));
        assert_eq!(e.op_context, ctx(&mut cr));
        assert!(rx == tx, "fenced read saw the whole write");
    }
    drop(mr);
}

/// Post `fi_write` (`write`) or `fi_read` of `buf` at offset 0 of `key` on side 0's peer.
fn post_rw(p: &Pair, write: bool, buf: &mut [u8], key: u64, c: &mut u64) {
    unsafe {
        let rma = &*(*p.s[0].ep).rma;
        let rc = if write {
            rma.write.unwrap()(
                p.s[0].ep,
                buf.as_ptr().cast(),
                buf.len(),
                null_mut(),
                p.peer[0],
                0,
                key,
                ctx(c),
            )
        } else {
            rma.read.unwrap()(
                p.s[0].ep,
                buf.as_mut_ptr().cast(),
                buf.len(),
                null_mut(),
                p.peer[0],
                0,
                key,
                ctx(c),
            )
        };
        assert_eq!(rc, 0, "post (write {write})");
    }
}

/// An endpoint opened with FI_ORDER_RAW | WAR | WAW keeps them through the
/// whole stack (the hints reach the engine): ops posted back to back on the
/// same 2 MiB take effect in post order. A read posted right behind a write
/// sees all of it and completes after it; a write posted right behind a read
/// leaves the read all old bytes (the target streams a read from memory as it
/// sends it, so without WAR the write's bytes land under a read in progress);
/// of two writes the second wins. (The deterministic check of every pattern
/// under reordering paths is `provider/tests/msg_rma_order.rs`.)
#[test]
fn asked_orders_hold_through_the_provider() {
    let order = (sys::FI_ORDER_RAW | sys::FI_ORDER_WAR | sys::FI_ORDER_WAW) as u64;
    let p = Pair::ordered(0, order);
    let (a, b) = (&p.s[0], &p.s[1]);
    let size = 2 << 20;
    let mut region = pattern(size, 1);
    let mr = mr_reg(b.dom, &mut region, REMOTE_RW, 41).unwrap();
    let key = mr.key();
    for round in 0..3 {
        let (mut c1, mut c2) = (10 + round as u64 * 2, 11 + round as u64 * 2);
        let mut first = pattern(size, 2 + round * 2);
        let mut second = pattern(size, 3 + round * 2);
        let mut back = vec![0u8; size];
        // RAW: write, then read back.
        post_rw(&p, true, &mut first, key, &mut c1);
        post_rw(&p, false, &mut back, key, &mut c2);
        let e1 = ok(wait_one(a.cq, b.cq));
        let e2 = ok(wait_one(a.cq, b.cq));
        assert_eq!(
            (e1.op_context, e2.op_context),
            (ctx(&mut c1), ctx(&mut c2)),
            "round {round} RAW: completion order"
        );
        assert!(
            back == first,
            "round {round} RAW: the read missed the write"
        );
        // WAR: read, then overwrite; only the initiator runs for a while (it
        // sends what it may), then only the target.
        let mut back = vec![0u8; size];
        post_rw(&p, false, &mut back, key, &mut c1);
        post_rw(&p, true, &mut second, key, &mut c2);
        let spin = |cq, ms| {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(ms) {
                let _ = cq_read(cq, &mut []);
            }
        };
        spin(a.cq, 30);
        // The target takes what came: the read request, and without the
        // order the write's first datagrams, which it applies at once. The
        // initiator, not running, cannot have seen the read complete, so the
        // write must not have left it.
        spin(b.cq, 20);
        assert!(
            region == first,
            "round {round} WAR: the write left before the read completed"
        );
        let _ = ok(wait_one(a.cq, b.cq));
        let _ = ok(wait_one(a.cq, b.cq));
        assert!(
            back == first,
            "round {round} WAR: the read saw the later write"
        );
        // WAW: two writes, the second wins.
        let mut third = pattern(size, 100 + round);
        post_rw(&p, true, &mut third, key, &mut c1);
        post_rw(&p, true, &mut second, key, &mut c2);
        let _ = ok(wait_one(a.cq, b.cq));
        let _ = ok(wait_one(a.cq, b.cq));
        quiet(a.cq, b.cq);
        assert!(
            region == second,
            "round {round} WAW: the first write landed last"
        );
    }
    drop(mr);
}
