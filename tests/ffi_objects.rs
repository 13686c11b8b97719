//! Object lifecycle through the real libfabric core: open/close order and
//! EBUSY, AV insert/lookup/straddr, CQ and counter reads and waits, MRs,
//! endpoint names and options, and ENOSYS for what spray does not offer.

mod common;
use common::fab::*;

use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
const EBUSY: i32 = -(sys::FI_EBUSY as i32);
const EINVAL: i32 = -(sys::FI_EINVAL as i32);
const ENOSYS: i32 = -(sys::FI_ENOSYS as i32);

fn sockaddr(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_be_bytes(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

#[test]
fn lifecycle_and_busy_close() {
    let info = getinfo(sys::fi_ep_type_FI_EP_RDM, 0);
    let (fab, dom) = open_domain(info);
    let av = open_av(dom);
    let cq = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
    let cntr = open_cntr(dom);
    let ep = open_ep(dom, info);
    assert_eq!(bind(ep, av, 0), 0);
    assert_eq!(bind(ep, cq, (sys::FI_TRANSMIT | sys::FI_RECV) as u64), 0);
    assert_eq!(
        bind(
            ep,
            cntr,
            (sys::FI_SEND | sys::FI_RECV | sys::FI_READ | sys::FI_WRITE) as u64
        ),
        0
    );
    // A second AV binding and a bogus fid are refused.
    assert_eq!(bind(ep, av, 0), EINVAL);
    assert_eq!(bind(ep, dom, 0), EINVAL);

    // Wrong order: everything still in use says EBUSY, nothing crashes.
    assert_eq!(close(fab), EBUSY);
    assert_eq!(close(dom), EBUSY);
    assert_eq!(close(av), EBUSY);
    assert_eq!(close(cq), EBUSY);
    assert_eq!(close(cntr), EBUSY);

    // The address is on loopback and has a real port.
    let name = getname(ep);
    assert_eq!(u32::from_be(name.sin_addr.s_addr), 0x7f00_0001);
    assert_ne!(name.sin_port, 0);

    // Options.
    unsafe {
        let mut v: usize = 4096;
        let set = (*(*ep).ops).setopt.unwrap();
        let get = (*(*ep).ops).getopt.unwrap();
        let fid = ep as sys::fid_t;
        let lvl = sys::FI_OPT_ENDPOINT as i32;
        assert_eq!(
            set(
                fid,
                lvl,
                sys::FI_OPT_MIN_MULTI_RECV as i32,
                (&v as *const usize).cast(),
                8
            ),
            0
        );
        v = 0;
        let mut len = 8usize;
        assert_eq!(
            get(
                fid,
                lvl,
                sys::FI_OPT_MIN_MULTI_RECV as i32,
                (&mut v as *mut usize).cast(),
                &mut len
            ),
            0
        );
        assert_eq!(v, 4096);
        assert_eq!(
            set(
                fid,
                lvl,
                10, /* FI_OPT_CUDA_API_PERMITTED (1.18+) */
                (&v as *const usize).cast(),
                8
            ),
            -(sys::FI_ENOPROTOOPT as i32)
        );
        // RMA before enable is refused; connection management is not offered.
        let rma = (*(*ep).rma).write.unwrap()(ep, null_mut(), 0, null_mut(), 0, 0, 0, null_mut());
        assert!(rma < 0, "RMA on a disabled endpoint: {rma}");
        assert_eq!(
            (*(*ep).cm).connect.unwrap()(ep, null_mut(), null_mut(), 0),
            ENOSYS
        );
    }

    assert_eq!(close(ep), 0);
    assert_eq!(close(cq), 0);
    assert_eq!(close(cntr), 0);
    assert_eq!(close(av), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}

#[test]
fn av_insert_lookup_remove() {
    let info = getinfo(sys::fi_ep_type_FI_EP_RDM, 0);
    let (fab, dom) = open_domain(info);
    let av = open_av(dom);
    unsafe {
        let ops = &*(*av).ops;
        let addrs = [
            sockaddr([127, 0, 0, 1], 5000),
            sockaddr([0, 0, 0, 0], 0),
            sockaddr([127, 0, 0, 2], 5001),
        ];
        let mut ids = [0u64; 3];
        let n = ops.insert.unwrap()(
            av,
            addrs.as_ptr().cast(),
            3,
            ids.as_mut_ptr(),
            0,
            null_mut(),
        );
        assert_eq!(n, 2);
        assert_eq!(ids[0], 0);
        assert_eq!(ids[1], u64::MAX, "bad entry → FI_ADDR_NOTAVAIL");
        assert_eq!(ids[2], 1);
        let mut out: libc::sockaddr_in = std::mem::zeroed();
        let mut len = 16usize;
        assert_eq!(
            ops.lookup.unwrap()(
                av,
                ids[2],
                (&mut out as *mut libc::sockaddr_in).cast(),
                &mut len
            ),
            0
        );
        assert_eq!(u16::from_be(out.sin_port), 5001);
        let mut buf = [0i8; 64];
        let mut blen = buf.len();
        let s = ops.straddr.unwrap()(av, addrs.as_ptr().cast(), buf.as_mut_ptr(), &mut blen);
        let s = std::ffi::CStr::from_ptr(s).to_string_lossy().into_owned();
        assert_eq!(s, "fi_sockaddr_in://127.0.0.1:5000");
        let mut rm = [ids[0]];
        assert_eq!(ops.remove.unwrap()(av, rm.as_mut_ptr(), 1, 0), 0);
        assert_eq!(
            ops.lookup.unwrap()(
                av,
                ids[0],
                (&mut out as *mut libc::sockaddr_in).cast(),
                &mut len
            ),
            -(sys::FI_ENODATA as i32)
        );
        // NULL address array with a count.
        assert_eq!(
            ops.insert.unwrap()(av, std::ptr::null(), 1, null_mut(), 0, null_mut()),
            EINVAL
        );
        // insertsvc.
        let node = c"127.0.0.1";
        let svc = c"6000";
        let mut id = 0u64;
        assert_eq!(
            ops.insertsvc.unwrap()(av, node.as_ptr(), svc.as_ptr(), &mut id, 0, null_mut()),
            1
        );
        assert_eq!(id, 2);
    }
    assert_eq!(close(av), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}

#[test]
fn cq_and_counter_waits() {
    let info = getinfo(sys::fi_ep_type_FI_EP_RDM, 0);
    let (fab, dom) = open_domain(info);
    let cq = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
    let cntr = open_cntr(dom);
    let mut e = [sys::fi_cq_tagged_entry::default(); 4];
    assert_eq!(cq_read(cq, &mut e), EAGAIN);
    assert_eq!(cq_readerr(cq).0, EAGAIN);
    unsafe {
        let t = Instant::now();
        let n = (*(*cq).ops).sread.unwrap()(cq, e.as_mut_ptr().cast(), 4, std::ptr::null(), 20);
        assert_eq!(n, EAGAIN);
        assert!(
            t.elapsed() >= Duration::from_millis(19),
            "sread returned early: {:?}",
            t.elapsed()
        );
        assert!(t.elapsed() < Duration::from_secs(2));
        // fi_cq_signal wakes a waiter at once.
        assert_eq!((*(*cq).ops).signal.unwrap()(cq), 0);
        let t = Instant::now();
        let n = (*(*cq).ops).sread.unwrap()(cq, e.as_mut_ptr().cast(), 4, std::ptr::null(), 5000);
        assert_eq!(n, EAGAIN);
        assert!(t.elapsed() < Duration::from_secs(1));

        let ops = &*(*cntr).ops;
        assert_eq!(ops.read.unwrap()(cntr), 0);
        assert_eq!(ops.add.unwrap()(cntr, 5), 0);
        assert_eq!(ops.read.unwrap()(cntr), 5);
        assert_eq!(ops.wait.unwrap()(cntr, 5, 0), 0);
        let t = Instant::now();
        assert_eq!(ops.wait.unwrap()(cntr, 6, 10), -(sys::FI_ETIMEDOUT as i32));
        assert!(t.elapsed() >= Duration::from_millis(9));
        assert_eq!(ops.set.unwrap()(cntr, 1), 0);
        assert_eq!(ops.read.unwrap()(cntr), 1);
        assert_eq!(ops.adderr.unwrap()(cntr, 2), 0);
        assert_eq!(ops.readerr.unwrap()(cntr), 2);
        assert_eq!(ops.seterr.unwrap()(cntr, 0), 0);
        assert_eq!(ops.readerr.unwrap()(cntr), 0);
    }
    assert_eq!(close(cq), 0);
    assert_eq!(close(cntr), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}

#[test]
fn memory_regions_and_eq() {
    let info = getinfo(sys::fi_ep_type_FI_EP_RDM, 0);
    let (fab, dom) = open_domain(info);
    let buf = vec![0u8; 4096];
    unsafe {
        let mut mr = null_mut();
        let reg = (*(*dom).mr).reg.unwrap();
        let rc = reg(
            dom as *mut sys::fid,
            buf.as_ptr().cast(),
            buf.len(),
            0,
            0,
            42,
            0,
            &mut mr,
            null_mut(),
        );
        assert_eq!(rc, 0);
        assert_eq!((*mr).key, 42);
        assert!(!(*mr).mem_desc.is_null());
        assert_eq!(close(dom), EBUSY);
        assert_eq!(close(mr), 0);
        // fi_query_atomic without an attribute struct is refused, not a crash.
        let q = (*(*dom).ops).query_atomic.unwrap()(dom, 0, 0, null_mut(), 0);
        assert_eq!(q, -(sys::FI_EINVAL as i32));

        let mut eq = null_mut();
        let mut attr: sys::fi_eq_attr = std::mem::zeroed();
        attr.size = 16;
        assert_eq!(
            (*(*fab).ops).eq_open.unwrap()(fab, &mut attr, &mut eq, null_mut()),
            0
        );
        let ops = &*(*eq).ops;
        let mut ev = 0u32;
        let mut out = [0u8; 32];
        assert_eq!(
            ops.read.unwrap()(eq, &mut ev, out.as_mut_ptr().cast(), 32, 0),
            EAGAIN
        );
        let msg = [7u8; 24];
        assert_eq!(ops.write.unwrap()(eq, 3, msg.as_ptr().cast(), 24, 0), 24);
        assert_eq!(
            ops.read.unwrap()(eq, &mut ev, out.as_mut_ptr().cast(), 32, 0),
            24
        );
        assert_eq!(ev, 3);
        assert_eq!(&out[..24], &msg);
        assert_eq!(close(fab), EBUSY);
        assert_eq!(close(eq), 0);
    }
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}

#[test]
fn foreign_pointers_are_rejected() {
    // A fid of the wrong class (or NULL) handed to a CQ call: EINVAL, not a crash.
    let info = getinfo(sys::fi_ep_type_FI_EP_RDM, 0);
    let (fab, dom) = open_domain(info);
    let cq = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_CONTEXT);
    unsafe {
        let mut fake: sys::fid_cq = std::mem::zeroed();
        fake.fid.fclass = sys::FI_CLASS_CNTR as usize;
        fake.fid.ops = (*cq).fid.ops;
        fake.ops = (*cq).ops;
        let mut e = [0u64; 4];
        let n = (*(*cq).ops).read.unwrap()(&mut fake, e.as_mut_ptr().cast(), 1);
        assert_eq!(n, EINVAL as isize);
        let n = (*(*cq).ops).read.unwrap()(std::ptr::null_mut(), e.as_mut_ptr().cast(), 1);
        assert_eq!(n, EINVAL as isize);
    }
    assert_eq!(close(cq), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}
