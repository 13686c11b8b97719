//! The fabric object (`fid_fabric`, opens domains and event queues), and
//! below it, as in libfabric's object tree, the objects a domain opens.
//! (The fabric itself lives here rather than in `fabric/fabric.rs`, which
//! clippy's `module_inception` refuses.)

pub mod av;
pub mod cntr;
pub mod cq;
pub mod domain;
pub mod eq;
pub mod mr;
pub mod poll;
pub mod wait;
pub mod waitable;
pub mod waitset;

use std::os::raw::{c_int, c_void};

use crate::consts::err;
use crate::obj::{self, FiObject};
use crate::refs::Refs;
use crate::{guard, nosys, prov, sys};

/// `struct fid_fabric` plus our state.
#[repr(C)]
pub struct Fabric {
    fid: sys::fid_fabric,
    /// Domains and EQs opened from it.
    pub refs: Refs,
    /// API version the application asked for.
    pub api_version: u32,
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, None, None);
static OPS: sys::fi_ops_fabric = sys::fi_ops_fabric {
    size: std::mem::size_of::<sys::fi_ops_fabric>(),
    domain: Some(domain::domain_open),
    passive_ep: Some(passive_ep),
    eq_open: Some(eq::eq_open),
    wait_open: Some(crate::fabric::waitset::wait_open),
    trywait: Some(trywait),
    domain2: Some(domain::domain_open2),
};

// SAFETY: repr(C), fid_fabric first, FI_OPS set by fabric_open.
unsafe impl FiObject for Fabric {
    const FCLASS: u32 = sys::FI_CLASS_FABRIC;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

/// The provider's `fabric` callback.
pub unsafe extern "C" fn fabric_open(
    attr: *mut sys::fi_fabric_attr,
    fabric: *mut *mut sys::fid_fabric,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        if attr.is_null() || fabric.is_null() {
            return err::EINVAL;
        }
        // SAFETY: attr is non-null and valid (core contract).
        let a = unsafe { &*attr };
        if !a.name.is_null() {
            // SAFETY: non-null attribute strings are NUL-terminated.
            let n = unsafe { std::ffi::CStr::from_ptr(a.name) };
            if !n
                .to_bytes()
                .eq_ignore_ascii_case(prov::FABRIC_NAME.as_bytes())
            {
                return err::EINVAL;
            }
        }
        let api_version = if a.api_version != 0 {
            a.api_version
        } else {
            prov::api_version()
        };
        let f = Fabric {
            fid: sys::fid_fabric {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_FABRIC as usize,
                    context,
                    ops: obj::ops_ptr(&FI_OPS),
                },
                ops: obj::ops_ptr(&OPS),
                api_version,
            },
            refs: Refs::default(),
            api_version,
        };
        // SAFETY: fabric is a valid out-pointer (checked non-null).
        unsafe { *fabric = obj::into_c(f) };
        0
    })
}

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid comes from the application; get validates it.
        match unsafe { obj::get::<Fabric>(fid) } {
            None => err::EINVAL,
            Some(f) if f.refs.busy() => err::EBUSY,
            Some(_) => {
                // SAFETY: validated above; C stops using it now.
                drop(unsafe { obj::take::<Fabric>(fid) });
                0
            }
        }
    })
}

unsafe extern "C" fn passive_ep(
    _: *mut sys::fid_fabric,
    _: *mut sys::fi_info,
    _: *mut *mut sys::fid_pep,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}

/// `fi_trywait`: 0 when the application may block on every listed object's
/// wait fd, -FI_EAGAIN when one has entries (read them first).
unsafe extern "C" fn trywait(
    _: *mut sys::fid_fabric,
    fids: *mut *mut sys::fid,
    count: c_int,
) -> c_int {
    guard::int(|| {
        if count < 0 || (fids.is_null() && count > 0) {
            return err::EINVAL;
        }
        for i in 0..count as usize {
            // SAFETY: fids holds count fid pointers (API contract).
            let fid = unsafe { *fids.add(i) };
            // SAFETY: each get validates the fid's class before use.
            let rc = unsafe {
                if let Some(c) = crate::fabric::cq::get(fid) {
                    c.core.trywait()
                } else if let Some(c) = crate::fabric::cntr::get(fid) {
                    c.core.trywait()
                } else if let Some(e) = eq::get(fid) {
                    e.trywait()
                } else if let Some(w) = crate::fabric::waitset::get(fid) {
                    w.core.trywait()
                } else {
                    err::EINVAL
                }
            };
            if rc != 0 {
                return rc;
            }
        }
        0
    })
}
