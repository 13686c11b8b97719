//! In-process access to libfabric objects of the spray provider, through the
//! real libfabric core (fi_getinfo / fi_fabric and the ops tables, which is what
//! the header's static inline wrappers do).
#![allow(dead_code)]

use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr::null_mut;
use std::sync::Once;

use spray_fi::sys;

/// Make libfabric load spray from this build, on loopback only (once per process,
/// before the core initialises).
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::env::set_var("FI_PROVIDER_PATH", super::provider_dir());
        std::env::set_var("FI_PROVIDER", "spray");
        std::env::set_var("FI_SPRAY_IFACE", "lo");
    });
}

/// An `fi_info` list from `fi_getinfo` for spray and `ep_type`.
pub fn getinfo(ep_type: u32, caps: u64) -> *mut sys::fi_info {
    init();
    unsafe {
        let hints = sys::fi_dupinfo(std::ptr::null());
        (*(*hints).ep_attr).type_ = ep_type;
        (*hints).caps = caps;
        let name = CString::new("spray").unwrap();
        (*(*hints).fabric_attr).prov_name = libc::strdup(name.as_ptr());
        let mut info = null_mut();
        let rc = sys::fi_getinfo(
            sys::fi_version(),
            std::ptr::null(),
            std::ptr::null(),
            0,
            hints,
            &mut info,
        );
        sys::fi_freeinfo(hints);
        assert_eq!(rc, 0, "fi_getinfo");
        assert!(!info.is_null());
        info
    }
}

/// `fi_close`.
pub fn close<T>(fid: *mut T) -> i32 {
    unsafe {
        let f = fid as *mut sys::fid;
        ((*(*f).ops).close.unwrap())(f)
    }
}

/// `fi_bind` / `fi_ep_bind`.
pub fn bind<T, U>(fid: *mut T, bfid: *mut U, flags: u64) -> i32 {
    unsafe {
        let f = fid as *mut sys::fid;
        ((*(*f).ops).bind.unwrap())(f, bfid as *mut sys::fid, flags)
    }
}

/// `fi_control`.
pub fn control<T>(fid: *mut T, cmd: u32, arg: *mut c_void) -> i32 {
    unsafe {
        let f = fid as *mut sys::fid;
        ((*(*f).ops).control.unwrap())(f, cmd as i32, arg)
    }
}

/// fabric + domain for `info`.
pub fn open_domain(info: *mut sys::fi_info) -> (*mut sys::fid_fabric, *mut sys::fid_domain) {
    unsafe {
        let mut fab = null_mut();
        assert_eq!(sys::fi_fabric((*info).fabric_attr, &mut fab, null_mut()), 0);
        let mut dom = null_mut();
        assert_eq!(
            ((*(*fab).ops).domain.unwrap())(fab, info, &mut dom, null_mut()),
            0
        );
        (fab, dom)
    }
}

/// An AV of the given type.
pub fn open_av(dom: *mut sys::fid_domain) -> *mut sys::fid_av {
    unsafe {
        let mut attr: sys::fi_av_attr = std::mem::zeroed();
        attr.type_ = sys::fi_av_type_FI_AV_TABLE;
        let mut av = null_mut();
        assert_eq!(
            ((*(*dom).ops).av_open.unwrap())(dom, &mut attr, &mut av, null_mut()),
            0
        );
        av
    }
}

/// A CQ of `format`.
pub fn open_cq(dom: *mut sys::fid_domain, format: u32) -> *mut sys::fid_cq {
    unsafe {
        let mut attr: sys::fi_cq_attr = std::mem::zeroed();
        attr.format = format;
        attr.size = 256;
        let mut cq = null_mut();
        assert_eq!(
            ((*(*dom).ops).cq_open.unwrap())(dom, &mut attr, &mut cq, null_mut()),
            0
        );
        cq
    }
}

/// A counter.
pub fn open_cntr(dom: *mut sys::fid_domain) -> *mut sys::fid_cntr {
    unsafe {
        let mut attr: sys::fi_cntr_attr = std::mem::zeroed();
        let mut c = null_mut();
        assert_eq!(
            ((*(*dom).ops).cntr_open.unwrap())(dom, &mut attr, &mut c, null_mut()),
            0
        );
        c
    }
}

/// An endpoint for `info`.
pub fn open_ep(dom: *mut sys::fid_domain, info: *mut sys::fi_info) -> *mut sys::fid_ep {
    unsafe {
        let mut ep = null_mut();
        assert_eq!(
            ((*(*dom).ops).endpoint.unwrap())(dom, info, &mut ep, null_mut()),
            0
        );
        ep
    }
}

/// `fi_getname` as a sockaddr_in.
pub fn getname(ep: *mut sys::fid_ep) -> libc::sockaddr_in {
    unsafe {
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_in>();
        let rc = ((*(*ep).cm).getname.unwrap())(
            ep as sys::fid_t,
            (&mut sa as *mut libc::sockaddr_in).cast(),
            &mut len,
        );
        assert_eq!(rc, 0);
        assert_eq!(len, 16);
        sa
    }
}

/// `fi_av_insert` of one address; returns the fi_addr.
pub fn av_insert(av: *mut sys::fid_av, sa: &libc::sockaddr_in) -> u64 {
    unsafe {
        let mut fi_addr = 0u64;
        let n = ((*(*av).ops).insert.unwrap())(
            av,
            (sa as *const libc::sockaddr_in).cast(),
            1,
            &mut fi_addr,
            0,
            null_mut(),
        );
        assert_eq!(n, 1);
        fi_addr
    }
}

/// `fi_cq_read` of tagged entries.
pub fn cq_read(cq: *mut sys::fid_cq, out: &mut [sys::fi_cq_tagged_entry]) -> isize {
    unsafe { ((*(*cq).ops).read.unwrap())(cq, out.as_mut_ptr().cast(), out.len()) }
}

/// `fi_cq_readfrom` of tagged entries.
pub fn cq_readfrom(
    cq: *mut sys::fid_cq,
    out: &mut [sys::fi_cq_tagged_entry],
    src: &mut [u64],
) -> isize {
    unsafe {
        ((*(*cq).ops).readfrom.unwrap())(cq, out.as_mut_ptr().cast(), out.len(), src.as_mut_ptr())
    }
}

/// `fi_cq_readerr`.
pub fn cq_readerr(cq: *mut sys::fid_cq) -> (isize, sys::fi_cq_err_entry) {
    unsafe {
        // Room for the 1.20+ layout too.
        let mut buf = [0u64; 32];
        let e = buf.as_mut_ptr() as *mut sys::fi_cq_err_entry;
        let n = ((*(*cq).ops).readerr.unwrap())(cq, e, 0);
        (n, *e)
    }
}
