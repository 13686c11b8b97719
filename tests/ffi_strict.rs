//! Arguments libfabric's man pages rule out get an error code, through the real
//! libfabric core: `fi_enable` without the completion queues the endpoint's
//! capabilities need (`-FI_ENOCQ`, as prov/tcp, udp, shm and rxm answer), while
//! the bindings real clients make still enable; lengths no memory can have
//! (`SIZE_MAX`, a range wrapping past the end of the address space) in sends,
//! receives, RMA and memory registration (`-FI_EMSGSIZE` above `max_msg_size`,
//! `-FI_EINVAL` otherwise), with nothing posted; and a zero-length multi-receive
//! buffer (`-FI_EINVAL`).

mod common;
use common::duo::*;
use common::fab::*;

use std::ptr::null_mut;

use spray_fi::sys;

const EINVAL: isize = -(sys::FI_EINVAL as isize);
const EMSGSIZE: isize = -(sys::FI_EMSGSIZE as isize);
const ENOCQ: i32 = -(sys::FI_ENOCQ as i32);
const TX: u64 = sys::FI_TRANSMIT as u64;
const RX: u64 = sys::FI_RECV as u64;
const ANY: u64 = u64::MAX;

/// What gets bound to an endpoint before `fi_enable`.
#[derive(Clone, Copy, Debug)]
enum Bind {
    Cq(u64),
    Cntr(u64),
}

/// Open an endpoint of `info` in `dom`, bind `av` and `binds` (fresh CQs and
/// counters), and return it with `fi_enable`'s answer.
fn try_enable(
    dom: *mut sys::fid_domain,
    av: *mut sys::fid_av,
    info: *mut sys::fi_info,
    binds: &[Bind],
) -> (*mut sys::fid_ep, i32, Vec<*mut sys::fid>) {
    let ep = open_ep(dom, info);
    assert_eq!(bind(ep, av, 0), 0);
    let mut objs = Vec::new();
    for b in binds {
        let (fid, flags) = match *b {
            Bind::Cq(f) => (
                open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED) as *mut sys::fid,
                f,
            ),
            Bind::Cntr(f) => (open_cntr(dom) as *mut sys::fid, f),
        };
        assert_eq!(bind(ep, fid, flags), 0, "bind {b:?}");
        objs.push(fid);
    }
    let rc = control(ep, sys::FI_ENABLE, null_mut());
    (ep, rc, objs)
}

fn close_all(ep: *mut sys::fid_ep, objs: Vec<*mut sys::fid>) {
    assert_eq!(close(ep), 0);
    for o in objs {
        assert_eq!(close(o), 0);
    }
}

/// `fi_enable` demands the CQs the capabilities need: a transmit CQ for an
/// endpoint that sends or initiates RMA, a receive CQ for one that receives;
/// counters alone never do. The bindings of MPICH (one CQ with
/// FI_SELECTIVE_COMPLETION plus a counter bound FI_READ | FI_WRITE), OpenMPI and
/// fi_pingpong (separate transmit and receive CQs) enable.
#[test]
fn enable_needs_the_cqs_the_capabilities_need() {
    let full = info_with((sys::FI_MSG | sys::FI_TAGGED | sys::FI_RMA | sys::FI_ATOMIC) as u64);
    let send_only = info_with((sys::FI_MSG | sys::FI_SEND) as u64);
    let recv_only = info_with((sys::FI_TAGGED | sys::FI_RECV) as u64);
    let rma_only = info_with((sys::FI_RMA | sys::FI_READ | sys::FI_WRITE) as u64);
    let dgram = getinfo(sys::fi_ep_type_FI_EP_DGRAM, sys::FI_MSG as u64);
    let (fab, dom) = open_domain(full);
    let av = open_av(dom);
    let sel = sys::FI_SELECTIVE_COMPLETION;
    let rw = (sys::FI_READ | sys::FI_WRITE) as u64;
    let cases: &[(&str, *mut sys::fi_info, &[Bind], i32)] = &[
        ("no CQ", full, &[], ENOCQ),
        ("transmit CQ only", full, &[Bind::Cq(TX)], ENOCQ),
        ("receive CQ only", full, &[Bind::Cq(RX)], ENOCQ),
        (
            "counters only",
            full,
            &[Bind::Cntr(TX | RX), Bind::Cntr(rw)],
            ENOCQ,
        ),
        (
            "MPICH: one selective CQ + RMA counter",
            full,
            &[Bind::Cq(TX | RX | sel), Bind::Cntr(rw)],
            0,
        ),
        (
            "fi_pingpong: two CQs",
            full,
            &[Bind::Cq(TX), Bind::Cq(RX)],
            0,
        ),
        (
            "OpenMPI: one selective CQ",
            full,
            &[Bind::Cq(TX | RX | sel)],
            0,
        ),
        ("send-only caps, transmit CQ", send_only, &[Bind::Cq(TX)], 0),
        (
            "send-only caps, receive CQ",
            send_only,
            &[Bind::Cq(RX)],
            ENOCQ,
        ),
        (
            "receive-only caps, receive CQ",
            recv_only,
            &[Bind::Cq(RX)],
            0,
        ),
        ("receive-only caps, no CQ", recv_only, &[], ENOCQ),
        ("RMA initiator, transmit CQ", rma_only, &[Bind::Cq(TX)], 0),
        ("RMA initiator, no CQ", rma_only, &[Bind::Cntr(rw)], ENOCQ),
    ];
    for &(what, info, binds, want) in cases {
        let (ep, rc, objs) = try_enable(dom, av, info, binds);
        assert_eq!(rc, want, "{what}: fi_enable");
        close_all(ep, objs);
    }

    // The error is not final: bind what was missing and enable again.
    let (ep, rc, mut objs) = try_enable(dom, av, full, &[Bind::Cq(TX)]);
    assert_eq!(rc, ENOCQ);
    let cq = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
    assert_eq!(bind(ep, cq, RX), 0);
    objs.push(cq as *mut sys::fid);
    assert_eq!(control(ep, sys::FI_ENABLE, null_mut()), 0, "after binding");
    close_all(ep, objs);

    // DGRAM endpoints follow the same rule.
    let (dfab, ddom) = open_domain(dgram);
    let dav = open_av(ddom);
    let (ep, rc, objs) = try_enable(ddom, dav, dgram, &[]);
    assert_eq!(rc, ENOCQ, "DGRAM without CQ");
    close_all(ep, objs);
    let (ep, rc, objs) = try_enable(ddom, dav, dgram, &[Bind::Cq(TX | RX)]);
    assert_eq!(rc, 0, "DGRAM with CQ");
    close_all(ep, objs);
    for f in [dav as *mut sys::fid, ddom.cast(), dfab.cast()] {
        assert_eq!(close(f), 0);
    }

    assert_eq!(close(av), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    for i in [full, send_only, recv_only, rma_only, dgram] {
        unsafe { sys::fi_freeinfo(i) };
    }
}

/// Lengths that no memory can have are refused, and nothing was posted: the
/// next real message lands in the next real receive.
#[test]
fn absurd_lengths_are_refused() {
    let d = Duo::new();
    let mut buf = vec![0u8; 64];
    let p = buf.as_mut_ptr();
    // Base + length wraps past the end of the address space.
    let top = (usize::MAX - 7) as *const u8;
    unsafe {
        let msg = &*(*d.ep[1]).msg;
        let tagged = &*(*d.ep[1]).tagged;
        let huge = [usize::MAX, 1 << 63, usize::MAX - p as usize + 1];
        for len in huge {
            let r = msg.recv.unwrap()(d.ep[1], p.cast(), len, null_mut(), ANY, ctx(1));
            assert_eq!(r, EINVAL, "fi_recv of {len:#x} bytes");
            let r = tagged.recv.unwrap()(d.ep[1], p.cast(), len, null_mut(), ANY, 5, 0, ctx(1));
            assert_eq!(r, EINVAL, "fi_trecv of {len:#x} bytes");
        }
        let wrap = [iov(top, 16)];
        let r = msg.recvv.unwrap()(d.ep[1], wrap.as_ptr(), null_mut(), 1, ANY, ctx(1));
        assert_eq!(r, EINVAL, "fi_recvv wrapping the address space");
        let split = [iov(p, 16), iov(p, 1 << 63)];
        let m = sys::fi_msg {
            msg_iov: split.as_ptr(),
            desc: null_mut(),
            iov_count: 2,
            addr: ANY,
            context: ctx(1),
            data: 0,
        };
        assert_eq!(msg.recvmsg.unwrap()(d.ep[1], &m, 0), EINVAL, "fi_recvmsg");

        let msg = &*(*d.ep[0]).msg;
        let tagged = &*(*d.ep[0]).tagged;
        let rma = &*(*d.ep[0]).rma;
        let to = d.addr[1];
        let r = msg.send.unwrap()(d.ep[0], p.cast(), usize::MAX, null_mut(), to, ctx(2));
        assert_eq!(r, EMSGSIZE, "fi_send SIZE_MAX");
        let r = tagged.send.unwrap()(d.ep[0], p.cast(), usize::MAX, null_mut(), to, 5, ctx(2));
        assert_eq!(r, EMSGSIZE, "fi_tsend SIZE_MAX");
        assert_eq!(
            msg.inject.unwrap()(d.ep[0], p.cast(), usize::MAX, to),
            EMSGSIZE,
            "fi_inject SIZE_MAX"
        );
        let r = msg.sendv.unwrap()(d.ep[0], wrap.as_ptr(), null_mut(), 1, to, ctx(2));
        assert_eq!(r, EINVAL, "fi_sendv wrapping the address space");
        let r = rma.write.unwrap()(d.ep[0], p.cast(), usize::MAX, null_mut(), to, 0, 9, ctx(2));
        assert_eq!(r, EMSGSIZE, "fi_write SIZE_MAX");
        let r = rma.read.unwrap()(d.ep[0], p.cast(), usize::MAX, null_mut(), to, 0, 9, ctx(2));
        assert_eq!(r, EMSGSIZE, "fi_read SIZE_MAX");
        let r = rma.readv.unwrap()(d.ep[0], wrap.as_ptr(), null_mut(), 1, to, 0, 9, ctx(2));
        assert_eq!(r, EINVAL, "fi_readv wrapping the address space");
    }

    // Memory registration: local or remote access, every form.
    let remote = (sys::FI_REMOTE_READ | sys::FI_REMOTE_WRITE) as u64;
    let local = (sys::FI_SEND | sys::FI_RECV) as u64;
    for access in [remote, local] {
        for len in [usize::MAX, 1 << 63] {
            assert_eq!(
                mr_reg(d.dom, p, len, access, 7, 0).err(),
                Some(EINVAL as i32),
                "fi_mr_reg {len:#x} bytes, access {access:#x}"
            );
        }
        assert_eq!(
            mr_reg(d.dom, top, 16, access, 7, 0).err(),
            Some(EINVAL as i32),
            "fi_mr_reg wrapping"
        );
        unsafe {
            let ops = &*(*d.dom).mr;
            let segs = [iov(p, 16), iov(top, 16)];
            let mut mr = null_mut();
            let r = ops.regv.unwrap()(
                &mut (*d.dom).fid,
                segs.as_ptr(),
                2,
                access,
                0,
                7,
                0,
                &mut mr,
                null_mut(),
            );
            assert_eq!(r, EINVAL as i32, "fi_mr_regv wrapping");
            let big = [iov(p, usize::MAX)];
            let mut attr: sys::fi_mr_attr = std::mem::zeroed();
            attr.mr_iov = big.as_ptr();
            attr.iov_count = 1;
            attr.access = access;
            attr.requested_key = 7;
            let r = ops.regattr.unwrap()(&mut (*d.dom).fid, &attr, 0, &mut mr);
            assert_eq!(r, EINVAL as i32, "fi_mr_regattr SIZE_MAX");
        }
        // A sane registration under the same key still works.
        let mr = mr_reg(d.dom, p, 64, access, 7, 0).expect("fi_mr_reg of 64 bytes");
        assert_eq!(close(mr), 0);
    }

    // Nothing of the above was posted.
    d.quiet();
    let data = *b"8 bytes!";
    unsafe {
        let r = (*(*d.ep[1]).msg).recv.unwrap()(d.ep[1], p.cast(), 64, null_mut(), ANY, ctx(10));
        assert_eq!(r, 0);
        let r = (*(*d.ep[0]).msg).send.unwrap()(
            d.ep[0],
            data.as_ptr().cast(),
            8,
            null_mut(),
            d.addr[1],
            ctx(11),
        );
        assert_eq!(r, 0);
    }
    let e = d.wait(1).expect("receive");
    assert_eq!((e.op_context as usize, e.len), (10, 8));
    assert_eq!(&buf[..8], &data);
    let e = d.wait(0).expect("send");
    assert_eq!(e.op_context as usize, 11);
    d.quiet();
    d.close();
}

/// A multi-receive buffer must have room: zero bytes (one empty iovec, no
/// iovec, or fi_recv with FI_MULTI_RECV as the default receive flag) is
/// refused, and a real one still receives.
#[test]
fn zero_length_multi_recv_is_refused() {
    let d = Duo::new();
    let mut buf = vec![0u8; 4096];
    let mr_flag = sys::FI_MULTI_RECV as u64;
    unsafe {
        let msg = &*(*d.ep[1]).msg;
        let empty = [iov(buf.as_ptr(), 0)];
        for count in [1, 0] {
            let m = sys::fi_msg {
                msg_iov: empty.as_ptr(),
                desc: null_mut(),
                iov_count: count,
                addr: ANY,
                context: ctx(1),
                data: 0,
            };
            let r = msg.recvmsg.unwrap()(d.ep[1], &m, mr_flag | sys::FI_COMPLETION as u64);
            assert_eq!(r, EINVAL, "zero-length multi-recv with {count} iovecs");
        }
        let mut f = mr_flag | RX;
        assert_eq!(
            control(d.ep[1], sys::FI_SETOPSFLAG, (&mut f as *mut u64).cast()),
            0
        );
        let r = msg.recv.unwrap()(d.ep[1], buf.as_mut_ptr().cast(), 0, null_mut(), ANY, ctx(1));
        assert_eq!(r, EINVAL, "fi_recv of 0 bytes with FI_MULTI_RECV");
        let mut f = RX;
        assert_eq!(
            control(d.ep[1], sys::FI_SETOPSFLAG, (&mut f as *mut u64).cast()),
            0
        );

        let room = [iov(buf.as_mut_ptr(), buf.len())];
        let m = sys::fi_msg {
            msg_iov: room.as_ptr(),
            desc: null_mut(),
            iov_count: 1,
            addr: ANY,
            context: ctx(2),
            data: 0,
        };
        assert_eq!(msg.recvmsg.unwrap()(d.ep[1], &m, mr_flag), 0);
        let data = [0x5Au8; 100];
        let r = (*(*d.ep[0]).msg).send.unwrap()(
            d.ep[0],
            data.as_ptr().cast(),
            100,
            null_mut(),
            d.addr[1],
            ctx(3),
        );
        assert_eq!(r, 0);
    }
    let e = d.wait(1).expect("multi-recv completion");
    assert_eq!((e.op_context as usize, e.len), (2, 100));
    assert_eq!(e.buf as usize, buf.as_ptr() as usize);
    assert!(buf[..100].iter().all(|&b| b == 0x5A));
    assert_eq!(d.wait(0).expect("send").op_context as usize, 3);
    assert_eq!(
        unsafe { ((*(*d.ep[1]).ops).cancel.unwrap())(&mut (*d.ep[1]).fid, ctx(2)) },
        0
    );
    let e = d.wait(1).expect_err("canceled multi-recv buffer");
    assert_eq!(e.err, sys::FI_ECANCELED as i32);
    d.close();
}
