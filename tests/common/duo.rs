//! Two RDM endpoints of one domain with messages, tags, RMA and atomics, over
//! loopback, and the completion helpers the API-strictness tests share.
#![allow(dead_code)]

use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};

use spray_fi::sys;

use super::fab::*;

pub const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
pub const EAVAIL: isize = -(sys::FI_EAVAIL as isize);

/// `fi_getinfo` for RDM with `caps`, `mr_mode` 0 (keys as requested, offsets from 0).
pub fn info_with(caps: u64) -> *mut sys::fi_info {
    init();
    unsafe {
        let hints = sys::fi_dupinfo(null());
        (*(*hints).ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
        (*hints).caps = caps;
        let name = CString::new("spray").unwrap();
        (*(*hints).fabric_attr).prov_name = libc::strdup(name.as_ptr());
        let mut info = null_mut();
        let rc = sys::fi_getinfo(sys::fi_version(), null(), null(), 0, hints, &mut info);
        sys::fi_freeinfo(hints);
        assert_eq!(rc, 0, "fi_getinfo");
        info
    }
}

/// Endpoint 0 sends to endpoint 1; each has its own CQ.
pub struct Duo {
    pub info: *mut sys::fi_info,
    pub fab: *mut sys::fid_fabric,
    pub dom: *mut sys::fid_domain,
    pub av: *mut sys::fid_av,
    pub ep: [*mut sys::fid_ep; 2],
    pub cq: [*mut sys::fid_cq; 2],
    /// fi_addr of each endpoint in the AV.
    pub addr: [u64; 2],
}

impl Duo {
    pub fn new() -> Duo {
        let caps = (sys::FI_MSG | sys::FI_TAGGED | sys::FI_RMA | sys::FI_ATOMIC) as u64;
        let info = info_with(caps);
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
            addr,
        }
    }

    pub fn close(self) {
        for i in 0..2 {
            assert_eq!(close(self.ep[i]), 0);
            assert_eq!(close(self.cq[i]), 0);
        }
        assert_eq!(close(self.av), 0);
        assert_eq!(close(self.dom), 0);
        assert_eq!(close(self.fab), 0);
        unsafe { sys::fi_freeinfo(self.info) };
    }

    /// Wait for one completion on endpoint `i`'s CQ, progressing the other.
    pub fn wait(&self, i: usize) -> Result<sys::fi_cq_tagged_entry, sys::fi_cq_err_entry> {
        wait_one(self.cq[i], self.cq[1 - i])
    }

    /// Neither CQ gets anything for a little while.
    pub fn quiet(&self) {
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            for i in 0..2 {
                let mut e = [sys::fi_cq_tagged_entry::default(); 1];
                let n = cq_read(self.cq[i], &mut e);
                assert_eq!(n, EAGAIN, "unexpected completion on cq {i}: {:?}", e[0]);
            }
        }
    }
}

/// Poll `cq` (progressing `other`) for one entry, 20 s at most.
pub fn wait_one(
    cq: *mut sys::fid_cq,
    other: *mut sys::fid_cq,
) -> Result<sys::fi_cq_tagged_entry, sys::fi_cq_err_entry> {
    let t = Instant::now();
    loop {
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        match cq_read(cq, &mut e) {
            1 => return Ok(e[0]),
            EAVAIL => {
                let (n, err) = cq_readerr(cq);
                assert_eq!(n, 1, "fi_cq_readerr");
                return Err(err);
            }
            EAGAIN => {}
            n => panic!("fi_cq_read: {n}"),
        }
        if !other.is_null() {
            let _ = cq_read(other, &mut []);
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no completion in 20 s"
        );
    }
}

/// A context pointer from a number (completions give it back).
pub fn ctx(n: usize) -> *mut c_void {
    n as *mut c_void
}

/// An iovec over `len` bytes at `base`.
pub fn iov(base: *const u8, len: usize) -> sys::iovec {
    sys::iovec {
        iov_base: base as *mut c_void,
        iov_len: len,
    }
}

/// `fi_mr_reg` on `dom` of `len` bytes at `base`; the MR or the error.
pub fn mr_reg(
    dom: *mut sys::fid_domain,
    base: *const u8,
    len: usize,
    access: u64,
    key: u64,
    flags: u64,
) -> Result<*mut sys::fid_mr, i32> {
    unsafe {
        let mut mr = null_mut();
        let rc = ((*(*dom).mr).reg.unwrap())(
            &mut (*dom).fid,
            base.cast(),
            len,
            access,
            0,
            key,
            flags,
            &mut mr,
            null_mut(),
        );
        if rc == 0 {
            Ok(mr)
        } else {
            Err(rc)
        }
    }
}
