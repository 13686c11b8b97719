//! Operation flags of the `*msg` data calls and of memory registration,
//! through the real libfabric core: bits libfabric does not define for a call,
//! and flags spray would silently break (FI_TRIGGER, FI_MULTICAST, FI_AUTH_KEY,
//! FI_COMMIT_COMPLETE, FI_PEEK on an untagged receive, FI_MULTI_RECV on a
//! tagged one), get `-FI_EBADFLAGS` and post nothing; the flag sets MPICH,
//! OpenMPI and Intel MPI pass are accepted and their operations complete.

mod common;
use common::duo::*;
use common::fab::*;

use std::ptr::null_mut;

use spray_fi::sys;

const EBADFLAGS: isize = -(sys::FI_EBADFLAGS as isize);
const ANY: u64 = u64::MAX;
const COMPLETION: u64 = sys::FI_COMPLETION as u64;
const REMOTE_CQ_DATA: u64 = sys::FI_REMOTE_CQ_DATA as u64;
const DELIVERY: u64 = sys::FI_DELIVERY_COMPLETE as u64;
const MATCH: u64 = 1 << 31; // FI_MATCH_COMPLETE
const PRIORITY: u64 = 1 << 22; // FI_PRIORITY (libfabric 1.x)
const COMMIT: u64 = 1 << 30; // FI_COMMIT_COMPLETE
const AUTH_KEY: u64 = 1 << 57; // FI_AUTH_KEY (2.x)
/// The MR key of the RMA target buffer.
const KEY: u64 = 0x5EED;

/// Bits no data call accepts: undefined ones, provider-specific ones, and
/// defined flags spray does not implement.
fn never() -> Vec<u64> {
    let mut v: Vec<u64> = [0, 7, 14, 15, 23, 32, 60, 61, 62, 63]
        .iter()
        .map(|b| 1u64 << b)
        .collect();
    v.extend([
        PRIORITY,
        COMMIT,
        sys::FI_TRIGGER as u64,
        1 << 5, // FI_MULTICAST
        sys::FI_MSG as u64,
        sys::FI_SEND as u64,
    ]);
    v
}

/// A tagged message descriptor over `iov`.
fn tmsg(iov: &[sys::iovec], addr: u64, tag: u64, context: usize) -> sys::fi_msg_tagged {
    sys::fi_msg_tagged {
        msg_iov: iov.as_ptr(),
        desc: null_mut(),
        iov_count: iov.len(),
        addr,
        tag,
        ignore: 0,
        context: ctx(context),
        data: 0xDA7A,
    }
}

fn umsg(iov: &[sys::iovec], addr: u64, context: usize) -> sys::fi_msg {
    sys::fi_msg {
        msg_iov: iov.as_ptr(),
        desc: null_mut(),
        iov_count: iov.len(),
        addr,
        context: ctx(context),
        data: 0xDA7A,
    }
}

/// Every `*msg` call refuses bits outside its set with `-FI_EBADFLAGS`.
#[test]
fn unknown_flags_are_refused() {
    let d = Duo::new();
    let mut buf = vec![0u8; 256];
    let target = vec![0u8; 256];
    let mr = mr_reg(
        d.dom,
        target.as_ptr(),
        256,
        (sys::FI_REMOTE_READ | sys::FI_REMOTE_WRITE) as u64,
        KEY,
        0,
    )
    .expect("fi_mr_reg");
    let v = [iov(buf.as_mut_ptr(), 64)];
    let rma_iov = [sys::fi_rma_iov {
        addr: 0,
        len: 64,
        key: KEY,
    }];
    let mut res = 0u64;
    let mut cmp = 0u64;
    let op1 = [sys::fi_ioc {
        addr: (&mut res as *mut u64).cast(),
        count: 1,
    }];
    let mut res_ioc = [sys::fi_ioc {
        addr: (&mut res as *mut u64).cast(),
        count: 1,
    }];
    let cmp_ioc = [sys::fi_ioc {
        addr: (&mut cmp as *mut u64).cast(),
        count: 1,
    }];
    let rma_ioc = [sys::fi_rma_ioc {
        addr: 0,
        count: 1,
        key: KEY,
    }];
    let (s, r) = (d.ep[0], d.ep[1]);
    let to = d.addr[1];
    let rx_only = [sys::FI_MULTI_RECV as u64, sys::FI_PEEK as u64];
    unsafe {
        let (smsg, stag, srma, satom) = (&*(*s).msg, &*(*s).tagged, &*(*s).rma, &*(*s).atomic);
        let (rmsg, rtag) = (&*(*r).msg, &*(*r).tagged);
        let rma = sys::fi_msg_rma {
            msg_iov: v.as_ptr(),
            desc: null_mut(),
            iov_count: 1,
            addr: to,
            rma_iov: rma_iov.as_ptr(),
            rma_iov_count: 1,
            context: ctx(1),
            data: 0,
        };
        let atomic = sys::fi_msg_atomic {
            msg_iov: op1.as_ptr(),
            desc: null_mut(),
            iov_count: 1,
            addr: to,
            rma_iov: rma_ioc.as_ptr(),
            rma_iov_count: 1,
            datatype: sys::fi_datatype_FI_UINT64,
            op: sys::fi_op_FI_SUM,
            context: ctx(1),
            data: 0,
        };
        let catomic = sys::fi_msg_atomic {
            op: sys::fi_op_FI_CSWAP,
            ..atomic
        };
        let tx_bad: Vec<u64> = never()
            .into_iter()
            .chain(rx_only)
            .chain([AUTH_KEY])
            .collect();
        for &f in &tx_bad {
            let calls: [(&str, isize); 7] = [
                ("fi_sendmsg", smsg.sendmsg.unwrap()(s, &umsg(&v, to, 1), f)),
                (
                    "fi_tsendmsg",
                    stag.sendmsg.unwrap()(s, &tmsg(&v, to, 3, 1), f),
                ),
                ("fi_writemsg", srma.writemsg.unwrap()(s, &rma, f)),
                ("fi_readmsg", srma.readmsg.unwrap()(s, &rma, f)),
                ("fi_atomicmsg", satom.writemsg.unwrap()(s, &atomic, f)),
                (
                    "fi_fetch_atomicmsg",
                    satom.readwritemsg.unwrap()(s, &atomic, res_ioc.as_mut_ptr(), null_mut(), 1, f),
                ),
                (
                    "fi_compare_atomicmsg",
                    satom.compwritemsg.unwrap()(
                        s,
                        &catomic,
                        cmp_ioc.as_ptr(),
                        null_mut(),
                        1,
                        res_ioc.as_mut_ptr(),
                        null_mut(),
                        1,
                        f,
                    ),
                ),
            ];
            for (name, rc) in calls {
                assert_eq!(rc, EBADFLAGS, "{name} with flags {f:#x}");
            }
        }
        let mut rx_bad = never();
        rx_bad.push(AUTH_KEY);
        for &f in rx_bad.iter().chain(&[sys::FI_PEEK as u64]) {
            let rc = rmsg.recvmsg.unwrap()(r, &umsg(&v, ANY, 1), f);
            assert_eq!(rc, EBADFLAGS, "fi_recvmsg with flags {f:#x}");
        }
        for &f in rx_bad.iter().chain(&[sys::FI_MULTI_RECV as u64]) {
            let rc = rtag.recvmsg.unwrap()(r, &tmsg(&v, ANY, 3, 1), f);
            assert_eq!(rc, EBADFLAGS, "fi_trecvmsg with flags {f:#x}");
        }
    }
    // None of them was posted.
    d.quiet();
    assert_eq!(
        target,
        vec![0u8; 256],
        "a refused RMA or atomic reached memory"
    );
    for (f, what) in [
        (PRIORITY, "FI_PRIORITY"),
        (sys::FI_RMA_EVENT, "FI_RMA_EVENT"),
        (1 << 40, "FI_MR_DMABUF"),
        (1 << 46, "FI_HMEM_DEVICE_ONLY"),
    ] {
        assert_eq!(
            mr_reg(d.dom, buf.as_ptr(), 64, sys::FI_REMOTE_READ as u64, 77, f).err(),
            Some(EBADFLAGS as i32),
            "fi_mr_reg with {what}"
        );
    }
    assert_eq!(close(mr), 0);
    d.close();
}

/// Run one tagged exchange: `send_flags` on fi_tsendmsg, `recv_flags` on
/// fi_trecvmsg; both must be accepted and complete.
fn tagged_exchange(d: &Duo, send_flags: u64, recv_flags: u64, n: usize) {
    let mut rx = vec![0u8; 64];
    let tx = [n as u8; 64];
    let rv = [iov(rx.as_mut_ptr(), 64)];
    let sv = [iov(tx.as_ptr(), 64)];
    unsafe {
        let rc = (*(*d.ep[1]).tagged).recvmsg.unwrap()(
            d.ep[1],
            &tmsg(&rv, ANY, n as u64, 100 + n),
            recv_flags,
        );
        assert_eq!(rc, 0, "fi_trecvmsg flags {recv_flags:#x}");
        let rc = (*(*d.ep[0]).tagged).sendmsg.unwrap()(
            d.ep[0],
            &tmsg(&sv, d.addr[1], n as u64, 200 + n),
            send_flags,
        );
        assert_eq!(rc, 0, "fi_tsendmsg flags {send_flags:#x}");
    }
    let e = d.wait(1).expect("receive");
    assert_eq!((e.op_context as usize, e.tag), (100 + n, n as u64));
    assert_eq!(
        e.flags & REMOTE_CQ_DATA != 0,
        send_flags & REMOTE_CQ_DATA != 0
    );
    assert!(rx.iter().all(|&b| b == n as u8));
    // With FI_INJECT and without FI_COMPLETION a send still reports here: the
    // CQ is not bound with FI_SELECTIVE_COMPLETION.
    let e = d.wait(0).expect("send");
    assert_eq!(e.op_context as usize, 200 + n);
}

/// The flag sets real clients pass are accepted and their operations complete:
/// OpenMPI's mtl (FI_COMPLETION | FI_REMOTE_CQ_DATA, 0 for the ssend ack,
/// FI_PEEK / FI_CLAIM probes), MPICH's ch4 (FI_COMPLETION | FI_TRANSMIT_COMPLETE,
/// FI_COMPLETION | FI_MATCH_COMPLETE | FI_DELIVERY_COMPLETE, FI_MULTI_RECV
/// receives, FI_DELIVERY_COMPLETE on RMA reads, writes and atomics), FI_INJECT,
/// FI_INJECT_COMPLETE, FI_MORE and FI_FENCE.
#[test]
fn client_flags_are_accepted() {
    let d = Duo::new();
    let tx_sets = [
        0,
        COMPLETION,
        COMPLETION | REMOTE_CQ_DATA,
        COMPLETION | sys::FI_TRANSMIT_COMPLETE as u64 | REMOTE_CQ_DATA,
        COMPLETION | MATCH | DELIVERY,
        COMPLETION | sys::FI_INJECT as u64,
        COMPLETION | sys::FI_INJECT_COMPLETE as u64,
        COMPLETION | sys::FI_MORE as u64,
        COMPLETION | sys::FI_FENCE as u64,
    ];
    for (n, &f) in tx_sets.iter().enumerate() {
        tagged_exchange(&d, f, COMPLETION, n);
    }
    // Receive-side flags a receive ignores (prov/cxi ignores them too).
    tagged_exchange(
        &d,
        COMPLETION,
        COMPLETION | REMOTE_CQ_DATA | sys::FI_INJECT as u64,
        20,
    );

    // FI_PEEK | FI_COMPLETION with nothing there: FI_ENOMSG; then a peek with
    // FI_CLAIM finds the message and FI_CLAIM | FI_COMPLETION takes it.
    let mut rx = vec![0u8; 64];
    let rv = [iov(rx.as_mut_ptr(), 64)];
    let tx = [9u8; 64];
    let sv = [iov(tx.as_ptr(), 64)];
    let peek = sys::FI_PEEK as u64;
    let claim = sys::FI_CLAIM;
    unsafe {
        let rtag = &*(*d.ep[1]).tagged;
        assert_eq!(
            rtag.recvmsg.unwrap()(d.ep[1], &tmsg(&rv, ANY, 30, 30), peek | COMPLETION),
            0
        );
        let e = d.wait(1).expect_err("peek without a message");
        assert_eq!(e.err, sys::FI_ENOMSG as i32);
        let rc = (*(*d.ep[0]).tagged).sendmsg.unwrap()(
            d.ep[0],
            &tmsg(&sv, d.addr[1], 30, 31),
            COMPLETION,
        );
        assert_eq!(rc, 0);
        let claimed = tmsg(&rv, ANY, 30, 32);
        let mut found = false;
        for _ in 0..1000 {
            assert_eq!(
                rtag.recvmsg.unwrap()(d.ep[1], &claimed, peek | claim | COMPLETION),
                0
            );
            match d.wait(1) {
                Ok(e) => {
                    assert_eq!(e.op_context as usize, 32);
                    found = true;
                    break;
                }
                Err(e) => assert_eq!(e.err, sys::FI_ENOMSG as i32),
            }
        }
        assert!(found, "the peek never found the message");
        // The claim names the message by the peek's context (as OpenMPI does).
        assert_eq!(
            rtag.recvmsg.unwrap()(d.ep[1], &claimed, claim | COMPLETION),
            0
        );
        let e = d.wait(1).expect("claimed receive");
        assert_eq!((e.op_context as usize, e.len), (32, 64));
        assert!(rx.iter().all(|&b| b == 9));
        assert_eq!(d.wait(0).expect("send").op_context as usize, 31);
    }

    // MPICH's active-message receive: FI_MULTI_RECV | FI_COMPLETION on fi_recvmsg.
    let mut pool = vec![0u8; 4096];
    let pv = [iov(pool.as_mut_ptr(), pool.len())];
    unsafe {
        let rc = (*(*d.ep[1]).msg).recvmsg.unwrap()(
            d.ep[1],
            &umsg(&pv, ANY, 40),
            sys::FI_MULTI_RECV as u64 | COMPLETION,
        );
        assert_eq!(rc, 0);
        let rc = (*(*d.ep[0]).msg).sendmsg.unwrap()(
            d.ep[0],
            &umsg(&sv, d.addr[1], 41),
            COMPLETION | sys::FI_INJECT as u64 | REMOTE_CQ_DATA,
        );
        assert_eq!(rc, 0);
    }
    let e = d.wait(1).expect("multi-recv");
    assert_eq!((e.op_context as usize, e.len, e.data), (40, 64, 0xDA7A));
    assert_eq!(d.wait(0).expect("sendmsg").op_context as usize, 41);

    // MPICH's RMA: FI_DELIVERY_COMPLETE with and without FI_COMPLETION on
    // writes, reads and atomics.
    let mut target = vec![0u8; 64];
    let remote = (sys::FI_REMOTE_READ | sys::FI_REMOTE_WRITE) as u64;
    let mr = mr_reg(d.dom, target.as_mut_ptr(), 64, remote, KEY, 0).expect("fi_mr_reg");
    let mut src = [3u8; 8];
    let sv = [iov(src.as_mut_ptr(), 8)];
    let rma_iov = [sys::fi_rma_iov {
        addr: 0,
        len: 8,
        key: KEY,
    }];
    let mut add = 5u64;
    let ops = [sys::fi_ioc {
        addr: (&mut add as *mut u64).cast(),
        count: 1,
    }];
    let rma_ioc = [sys::fi_rma_ioc {
        addr: 8,
        count: 1,
        key: KEY,
    }];
    for (i, f) in [COMPLETION | DELIVERY, DELIVERY].into_iter().enumerate() {
        let m = sys::fi_msg_rma {
            msg_iov: sv.as_ptr(),
            desc: null_mut(),
            iov_count: 1,
            addr: d.addr[1],
            rma_iov: rma_iov.as_ptr(),
            rma_iov_count: 1,
            context: ctx(50 + i),
            data: 0,
        };
        let a = sys::fi_msg_atomic {
            msg_iov: ops.as_ptr(),
            desc: null_mut(),
            iov_count: 1,
            addr: d.addr[1],
            rma_iov: rma_ioc.as_ptr(),
            rma_iov_count: 1,
            datatype: sys::fi_datatype_FI_UINT64,
            op: sys::fi_op_FI_SUM,
            context: ctx(60 + i),
            data: 0,
        };
        unsafe {
            let rma = &*(*d.ep[0]).rma;
            assert_eq!(
                rma.writemsg.unwrap()(d.ep[0], &m, f),
                0,
                "fi_writemsg {f:#x}"
            );
            assert_eq!(d.wait(0).expect("write").op_context as usize, 50 + i);
            assert_eq!(rma.readmsg.unwrap()(d.ep[0], &m, f), 0, "fi_readmsg {f:#x}");
            assert_eq!(d.wait(0).expect("read").op_context as usize, 50 + i);
            let atomic = &*(*d.ep[0]).atomic;
            assert_eq!(
                atomic.writemsg.unwrap()(d.ep[0], &a, f),
                0,
                "fi_atomicmsg {f:#x}"
            );
            assert_eq!(d.wait(0).expect("atomic").op_context as usize, 60 + i);
        }
    }
    assert_eq!(&target[..8], &[3u8; 8]);
    assert_eq!(u64::from_ne_bytes(target[8..16].try_into().unwrap()), 10);
    assert_eq!(close(mr), 0);
    d.quiet();
    d.close();
}
