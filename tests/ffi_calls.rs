//! Data calls and formats the other loopback tests leave out, through the real
//! libfabric core: `fi_sendv`/`fi_recvv` scattered over several iovecs,
//! `fi_injectdata` and `fi_tinjectdata` (remote CQ data, no local completion),
//! the `FI_CQ_FORMAT_MSG` and `FI_CQ_FORMAT_DATA` layouts, an AV opened as
//! `FI_AV_MAP`, and `fi_setname` before and after enable.

mod common;
use common::fab::*;

use std::os::raw::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);

/// Poll `cq` for one `T`-format entry, progressing `other` meanwhile.
fn read_one<T: Default + Copy>(cq: *mut sys::fid_cq, other: *mut sys::fid_cq) -> T {
    let t = Instant::now();
    loop {
        let mut e = [T::default(); 1];
        let n = unsafe { ((*(*cq).ops).read.unwrap())(cq, e.as_mut_ptr().cast(), 1) };
        if n == 1 {
            return e[0];
        }
        assert_eq!(n, EAGAIN, "fi_cq_read: {n}");
        let _ = cq_read(other, &mut []);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no completion in 10 s"
        );
    }
}

fn open_map_av(dom: *mut sys::fid_domain) -> *mut sys::fid_av {
    unsafe {
        let mut attr: sys::fi_av_attr = std::mem::zeroed();
        attr.type_ = sys::fi_av_type_FI_AV_MAP;
        let mut av = null_mut();
        assert_eq!(
            ((*(*dom).ops).av_open.unwrap())(dom, &mut attr, &mut av, null_mut()),
            0
        );
        av
    }
}

fn setname(ep: *mut sys::fid_ep, sa: *const libc::sockaddr_in) -> i32 {
    unsafe {
        ((*(*ep).cm).setname.unwrap())(
            &mut (*ep).fid,
            sa as *mut c_void,
            std::mem::size_of::<libc::sockaddr_in>(),
        )
    }
}

#[test]
fn vectored_calls_cq_data_formats_map_av_and_setname() {
    init();
    let info = getinfo(
        sys::fi_ep_type_FI_EP_RDM,
        (sys::FI_MSG | sys::FI_TAGGED) as u64,
    );
    let (fab, dom) = open_domain(info);
    let av = open_map_av(dom);
    let (a, b) = (open_ep(dom, info), open_ep(dom, info));
    let cq_a = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_MSG);
    let cq_b = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_DATA);

    // fi_setname before enable moves the endpoint to the asked address.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("free port")
        .port();
    let mut want: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    want.sin_family = libc::AF_INET as libc::sa_family_t;
    want.sin_port = port.to_be();
    want.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
    assert_eq!(setname(b, &want), 0, "fi_setname before enable");
    assert_eq!(setname(b, std::ptr::null()), -(sys::FI_EINVAL as i32));

    for (ep, cq) in [(a, cq_a), (b, cq_b)] {
        assert_eq!(bind(ep, av, 0), 0);
        assert_eq!(bind(ep, cq, (sys::FI_TRANSMIT | sys::FI_RECV) as u64), 0);
        assert_eq!(control(ep, sys::FI_ENABLE, null_mut()), 0);
    }
    let got = getname(b);
    assert_eq!(u16::from_be(got.sin_port), port, "getname after setname");
    assert_eq!(
        setname(b, &want),
        -(sys::FI_EOPBADSTATE as i32),
        "setname after enable"
    );
    let _ = av_insert(av, &getname(a));
    let to_b = av_insert(av, &got);

    unsafe {
        let msg_a = &*(*a).msg;
        let msg_b = &*(*b).msg;

        // sendv over 3 iovecs -> recvv into 2 iovecs of other sizes.
        let parts: [Vec<u8>; 3] = [vec![1u8; 100], vec![2u8; 3000], vec![3u8; 7]];
        let whole: Vec<u8> = parts.concat();
        let iov_tx: Vec<sys::iovec> = parts
            .iter()
            .map(|p| sys::iovec {
                iov_base: p.as_ptr() as *mut c_void,
                iov_len: p.len(),
            })
            .collect();
        let (mut r1, mut r2) = (vec![0u8; 1000], vec![0u8; 4000]);
        let iov_rx = [
            sys::iovec {
                iov_base: r1.as_mut_ptr().cast(),
                iov_len: r1.len(),
            },
            sys::iovec {
                iov_base: r2.as_mut_ptr().cast(),
                iov_len: r2.len(),
            },
        ];
        let mut desc = [null_mut::<c_void>(); 3];
        let (rctx, sctx) = (0x51u64, 0x52u64);
        assert_eq!(
            msg_b.recvv.unwrap()(
                b,
                iov_rx.as_ptr(),
                desc.as_mut_ptr(),
                2,
                u64::MAX,
                rctx as *mut c_void
            ),
            0
        );
        assert_eq!(
            msg_a.sendv.unwrap()(
                a,
                iov_tx.as_ptr(),
                desc.as_mut_ptr(),
                3,
                to_b,
                sctx as *mut c_void
            ),
            0
        );
        let r: sys::fi_cq_data_entry = read_one(cq_b, cq_a);
        assert_eq!(r.op_context as u64, rctx);
        assert_eq!(r.len, whole.len());
        assert_eq!(
            r.flags & (sys::FI_RECV | sys::FI_MSG) as u64,
            (sys::FI_RECV | sys::FI_MSG) as u64
        );
        assert_eq!(
            r.flags & sys::FI_REMOTE_CQ_DATA as u64,
            0,
            "no CQ data was sent"
        );
        let mut placed = r1.clone();
        placed.extend_from_slice(&r2);
        assert!(
            placed[..whole.len()] == whole[..],
            "scattered bytes misplaced"
        );
        assert!(
            placed[whole.len()..].iter().all(|&x| x == 0),
            "wrote past the message"
        );
        let s: sys::fi_cq_msg_entry = read_one(cq_a, cq_b);
        assert_eq!(s.op_context as u64, sctx);
        assert_eq!(
            s.flags & (sys::FI_SEND | sys::FI_MSG) as u64,
            (sys::FI_SEND | sys::FI_MSG) as u64
        );

        // fi_injectdata: remote CQ data arrives in the DATA-format entry, and the
        // sender gets no completion.
        let payload = *b"inject!";
        let mut rx = [0u8; 64];
        assert_eq!(
            msg_b.recv.unwrap()(
                b,
                rx.as_mut_ptr().cast(),
                rx.len(),
                null_mut(),
                u64::MAX,
                0x61 as *mut c_void
            ),
            0
        );
        assert_eq!(
            msg_a.injectdata.unwrap()(a, payload.as_ptr().cast(), payload.len(), 0xdead_beef, to_b),
            0
        );
        let r: sys::fi_cq_data_entry = read_one(cq_b, cq_a);
        assert_eq!(r.op_context as usize, 0x61);
        assert_eq!(r.data, 0xdead_beef);
        assert_ne!(r.flags & sys::FI_REMOTE_CQ_DATA as u64, 0);
        assert_eq!(&rx[..payload.len()], &payload);
        assert_eq!(
            r.buf as usize,
            rx.as_ptr() as usize,
            "DATA entry buf = receive buffer"
        );

        // fi_tinjectdata: the tagged twin.
        let tagged_a = &*(*a).tagged;
        let tagged_b = &*(*b).tagged;
        let mut trx = [0u8; 16];
        assert_eq!(
            tagged_b.recv.unwrap()(
                b,
                trx.as_mut_ptr().cast(),
                trx.len(),
                null_mut(),
                u64::MAX,
                77,
                0,
                0x71 as *mut c_void
            ),
            0
        );
        assert_eq!(
            tagged_a.injectdata.unwrap()(a, payload.as_ptr().cast(), payload.len(), 42, to_b, 77),
            0
        );
        let r: sys::fi_cq_data_entry = read_one(cq_b, cq_a);
        assert_eq!(r.op_context as usize, 0x71);
        assert_eq!(r.data, 42);
        assert_ne!(r.flags & sys::FI_TAGGED as u64, 0);
        assert_eq!(&trx[..payload.len()], &payload);

        // Injects produced no sender completion.
        let mut none = [sys::fi_cq_msg_entry::default(); 1];
        std::thread::sleep(Duration::from_millis(20));
        let _ = cq_read(cq_b, &mut []);
        let n = ((*(*cq_a).ops).read.unwrap())(cq_a, none.as_mut_ptr().cast(), 1);
        assert_eq!(n, EAGAIN, "an inject produced a completion");
    }

    for ep in [a, b] {
        assert_eq!(close(ep), 0);
    }
    for f in [cq_a, cq_b] {
        assert_eq!(close(f), 0);
    }
    assert_eq!(close(av), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}
