//! Memory regions: real objects with a key and a descriptor, although spray
//! needs no registration (it copies through the kernel's UDP stack).

use std::os::raw::{c_int, c_void};

use crate::consts::err;
use crate::domain::{self, Domain};
use crate::obj::{self, FiObject};
use crate::{guard, nosys, sys};

/// `struct fid_mr` plus our state.
#[repr(C)]
pub struct Mr {
    fid: sys::fid_mr,
    domain: *const Domain,
    /// First byte of the region (for tracing; nothing is pinned).
    pub base: usize,
    /// Length in bytes.
    pub len: usize,
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, Some(bind), Some(control));

/// The domain's `fi_ops_mr` table.
pub static MR_OPS: sys::fi_ops_mr = sys::fi_ops_mr {
    size: std::mem::size_of::<sys::fi_ops_mr>(),
    reg: Some(reg),
    regv: Some(regv),
    regattr: Some(regattr),
};

// SAFETY: repr(C), fid_mr first, FI_OPS set by new_mr.
unsafe impl FiObject for Mr {
    const FCLASS: u32 = sys::FI_CLASS_MR;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

fn new_mr(
    dom: *mut sys::fid,
    base: usize,
    len: usize,
    key: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: dom comes from the application; validated by get.
    let Some(d) = (unsafe { domain::get(dom as *mut sys::fid_domain) }) else {
        return err::EINVAL;
    };
    if mr.is_null() {
        return err::EINVAL;
    }
    let obj = Mr {
        fid: sys::fid_mr {
            fid: sys::fid {
                fclass: sys::FI_CLASS_MR as usize,
                context,
                ops: obj::ops_ptr(&FI_OPS),
            },
            mem_desc: std::ptr::null_mut(),
            key,
        },
        domain: d,
        base,
        len,
    };
    d.refs.inc();
    let p: *mut sys::fid_mr = obj::into_c(obj);
    // SAFETY: p is the fresh object; its descriptor is its own address (any
    // non-NULL value the app passes back as `desc` is accepted and ignored).
    unsafe {
        (*p).mem_desc = p.cast();
        *mr = p;
    }
    0
}

unsafe extern "C" fn reg(
    fid: *mut sys::fid,
    buf: *const c_void,
    len: usize,
    _access: u64,
    _offset: u64,
    requested_key: u64,
    _flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    guard::int(|| new_mr(fid, buf as usize, len, requested_key, mr, context))
}

unsafe extern "C" fn regv(
    fid: *mut sys::fid,
    iov: *const sys::iovec,
    count: usize,
    _access: u64,
    _offset: u64,
    requested_key: u64,
    _flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        if count > 0 && iov.is_null() {
            return err::EINVAL;
        }
        // SAFETY: iov has count entries (checked non-null when count > 0).
        let (base, len) = if count == 0 {
            (0, 0)
        } else {
            let first = unsafe { &*iov };
            // SAFETY: as above.
            let total: usize = (0..count).map(|i| unsafe { (*iov.add(i)).iov_len }).sum();
            (first.iov_base as usize, total)
        };
        new_mr(fid, base, len, requested_key, mr, context)
    })
}

unsafe extern "C" fn regattr(
    fid: *mut sys::fid,
    attr: *const sys::fi_mr_attr,
    _flags: u64,
    mr: *mut *mut sys::fid_mr,
) -> c_int {
    guard::int(|| {
        if attr.is_null() {
            return err::EINVAL;
        }
        // SAFETY: attr is valid; we read only the leading fields, whose layout is
        // the same in every libfabric version (1.x and 2.x only appended / unioned later ones).
        let a = unsafe { &*attr };
        let (base, len) = if a.iov_count == 0 || a.mr_iov.is_null() {
            (0, 0)
        } else {
            // SAFETY: mr_iov has iov_count entries.
            let total: usize = (0..a.iov_count)
                .map(|i| unsafe { (*a.mr_iov.add(i)).iov_len })
                .sum();
            // SAFETY: as above, index 0 exists.
            (unsafe { (*a.mr_iov).iov_base } as usize, total)
        };
        new_mr(fid, base, len, a.requested_key, mr, a.context)
    })
}

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; take validates it.
        match unsafe { obj::take::<Mr>(fid) } {
            None => err::EINVAL,
            Some(m) => {
                // SAFETY: the domain outlives its MRs (its refs count this one).
                unsafe { (*m.domain).refs.dec() };
                0
            }
        }
    })
}

unsafe extern "C" fn bind(_: *mut sys::fid, _: *mut sys::fid, _: u64) -> c_int {
    0
}

unsafe extern "C" fn control(_: *mut sys::fid, command: c_int, _: *mut c_void) -> c_int {
    if command == sys::FI_REFRESH as c_int || command == sys::FI_ENABLE as c_int {
        0
    } else {
        err::ENOSYS
    }
}
