//! What CQs and counters share: objects a domain opens, endpoints bind and a
//! wait set may watch. Their hand-over to C, `fi_close` and `fi_control`
//! (the wait object) are the same code for both.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use crate::consts::err;
use crate::fabric::domain::Domain;
use crate::fabric::wait::{self, Wake};
use crate::fabric::waitset::WaitCore;
use crate::obj::{self, FiObject};
use crate::{guard, sys};

/// A CQ or a counter.
pub trait Waitable: FiObject {
    /// The domain that opened it (it outlives the object: its refs count it).
    fn domain(&self) -> *const Domain;
    /// The wait set that watches it (FI_WAIT_SET), if any.
    fn set(&self) -> Option<&Arc<WaitCore>>;
    /// Endpoints are still bound to it (close is then `-FI_EBUSY`).
    fn busy(&self) -> bool;
    /// Its wake-up and wait object kind (`FI_GETWAIT`).
    fn wake(&self) -> (&Wake, u32);
}

/// Hand `obj`, just opened on domain `d`, to C through `out`: the domain
/// counts it, its wait set (if any) watches it from now. Returns 0.
///
/// # Safety
/// `out` is a valid out-pointer.
pub unsafe fn publish<T: Waitable, F>(d: &Domain, obj: T, out: *mut *mut F) -> c_int {
    d.refs.inc();
    let p: *mut F = obj::into_c(obj);
    // SAFETY: p is the object just made as a T (the set, if any, watches it
    // from now); out is a valid out-pointer (caller).
    unsafe {
        if let Some(s) = (*(p as *const T)).set() {
            s.attach(obj::fid_of(p));
        }
        *out = p;
    }
    0
}

/// `fi_close` of a CQ or counter.
pub unsafe extern "C" fn close<T: Waitable>(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { obj::get::<T>(fid) } {
            None => err::EINVAL,
            Some(c) if c.busy() => err::EBUSY,
            Some(c) => {
                if let Some(s) = c.set() {
                    s.detach(fid);
                }
                // SAFETY: the domain outlives its CQs and counters (its refs
                // count this one).
                unsafe { (*c.domain()).refs.dec() };
                // SAFETY: validated; C stops using it now.
                drop(unsafe { obj::take::<T>(fid) });
                0
            }
        }
    })
}

/// `fi_control` of a CQ or counter (its wait object).
pub unsafe extern "C" fn control<T: Waitable>(
    fid: *mut sys::fid,
    cmd: c_int,
    arg: *mut c_void,
) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { obj::get::<T>(fid) } {
            Some(c) => {
                let (wake, wait_obj) = c.wake();
                // SAFETY: arg is the out-pointer the command calls for (API contract).
                unsafe { wait::control(wake, wait_obj, cmd, arg) }
            }
            None => err::EINVAL,
        }
    })
}
