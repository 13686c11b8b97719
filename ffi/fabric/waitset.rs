//! Wait sets (`fi_wait_open`, `fi_wait`): one eventfd shared by every CQ,
//! counter and EQ opened with `wait_obj = FI_WAIT_SET` on the set.
//!
//! The members signal the shared eventfd as they signal their own (only while
//! a waiter is armed, `wait::Wake`). `fi_wait` progresses the endpoints bound
//! to the members, returns 0 once a member has something to report (entries,
//! events, a changed counter: `poll::Members`) or the eventfd was signalled
//! (`fi_cq_signal`, `fi_cntr_add`), and otherwise sleeps like `fi_cq_sread`:
//! ppoll on those endpoints' receive sockets and the eventfd, never past an
//! engine timer. `fi_control(FI_GETWAIT)` hands out the eventfd for the
//! application's own poll loop, armed by `fi_trywait` on the set.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use crate::consts::*;
use crate::fabric::poll::{Members, Watched};
use crate::fabric::wait::{Waiter, Wake};
use crate::fabric::Fabric;
use crate::obj::{self, FiObject};
use crate::refs::Refs;
use crate::{fabric::wait, guard, nosys, sys};

/// `FI_WAIT_SET`: the object signals a wait set.
pub const FI_WAIT_SET: u32 = sys::fi_wait_obj_FI_WAIT_SET;

/// The shared state of a wait set.
pub struct WaitCore {
    /// The eventfd every member signals (`FI_GETWAIT`).
    pub wake: Arc<Wake>,
    /// The attached CQs, counters and EQs.
    members: Members,
    /// Members still open: the set cannot close before them.
    attached: Refs,
}

impl WaitCore {
    /// Attach the object behind `fid` (just opened with this set).
    ///
    /// # Safety
    /// `fid` is a live CQ, counter or EQ of ours.
    pub unsafe fn attach(&self, fid: *const sys::fid) {
        // SAFETY: forwarded contract.
        if let Some((what, ctx)) = unsafe { Watched::of(fid) } {
            self.members.add(fid as usize, ctx, what);
            self.attached.inc();
        }
    }

    /// Detach the object behind `fid` (it is closing).
    pub fn detach(&self, fid: *const sys::fid) {
        if self.members.remove(fid as usize) {
            self.attached.dec();
        }
    }

    /// `fi_wait`: 0 once a member has something to report or the set was
    /// signalled, `-FI_ETIMEDOUT` after `timeout_ms` (negative = forever).
    fn wait(&self, timeout_ms: c_int) -> c_int {
        let waiter = Waiter::new(timeout_ms);
        loop {
            self.members.progress();
            if self.members.any_ready() {
                return 0;
            }
            match waiter.spin() {
                Some(true) => {}
                Some(false) => return err::ETIMEDOUT,
                None => {
                    self.wake.arm();
                    if self.members.any_ready() {
                        return 0;
                    }
                    if waiter.sleep(&self.members.endpoints(), &self.wake) {
                        // Signalled: by a member's new entry or change (taken
                        // as reported here, as when found above), or by
                        // fi_cq_signal / fi_cntr_add, which wake the waiter.
                        self.members.progress();
                        let _ = self.members.any_ready();
                        return 0;
                    }
                }
            }
        }
    }

    /// `fi_trywait` on the set: -FI_EAGAIN when a member has something to
    /// report, else 0 with the eventfd armed and the endpoints handed to the
    /// progress assist (which progresses them while the application sleeps).
    pub fn trywait(&self) -> c_int {
        self.members.progress();
        if self.members.any_ready() {
            return err::EAGAIN;
        }
        self.wake.arm();
        if self.members.any_ready() {
            return err::EAGAIN;
        }
        crate::assist::hand_over(&self.members.endpoints());
        0
    }
}

/// `struct fid_wait` plus our state.
#[repr(C)]
pub struct WaitSet {
    fid: sys::fid_wait,
    fabric: *const Fabric,
    /// Shared with the members.
    pub core: Arc<WaitCore>,
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, None, Some(control));
static OPS: sys::fi_ops_wait = sys::fi_ops_wait {
    size: std::mem::size_of::<sys::fi_ops_wait>(),
    wait: Some(wait),
};

// SAFETY: repr(C), fid_wait first, FI_OPS set by wait_open.
unsafe impl FiObject for WaitSet {
    const FCLASS: u32 = sys::FI_CLASS_WAIT;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

/// `fi_wait_open`: `FI_WAIT_FD` or `FI_WAIT_UNSPEC` (an eventfd either way);
/// other wait objects are `-FI_ENOSYS`, flags `-FI_EBADFLAGS`.
pub unsafe extern "C" fn wait_open(
    fabric: *mut sys::fid_fabric,
    attr: *mut sys::fi_wait_attr,
    waitset: *mut *mut sys::fid_wait,
) -> c_int {
    guard::int(|| {
        // SAFETY: fabric from the application; validated by get.
        let Some(f) = (unsafe { obj::get::<Fabric>(obj::fid_of(fabric)) }) else {
            return err::EINVAL;
        };
        if waitset.is_null() {
            return err::EINVAL;
        }
        // SAFETY: attr NULL or valid.
        let a = unsafe { attr.as_ref() }.copied().unwrap_or_default();
        if a.flags != 0 {
            return err::EBADFLAGS;
        }
        match a.wait_obj {
            FI_WAIT_UNSPEC | FI_WAIT_FD => {}
            FI_WAIT_NONE | FI_WAIT_SET => return err::EINVAL,
            _ => return err::ENOSYS,
        }
        let Some(wake) = Wake::new() else {
            return err::ENOMEM;
        };
        let w = WaitSet {
            fid: sys::fid_wait {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_WAIT as usize,
                    context: std::ptr::null_mut(),
                    ops: obj::ops_ptr(&FI_OPS),
                },
                ops: obj::ops_ptr(&OPS),
            },
            fabric: f,
            core: Arc::new(WaitCore {
                wake: Arc::new(wake),
                members: Members::default(),
                attached: Refs::default(),
            }),
        };
        f.refs.inc();
        // SAFETY: waitset is a valid out-pointer (checked non-null).
        unsafe { *waitset = obj::into_c(w) };
        0
    })
}

/// The wake-up an object opened with `wait_obj` signals, and the wait set it
/// belongs to: the set's eventfd for `FI_WAIT_SET` (`wait_set` must be one
/// of ours, else `-FI_EINVAL`), a new one otherwise; `-FI_ENOSYS` for wait
/// objects spray lacks.
///
/// # Safety
/// `wait_set` is NULL or a live fid.
pub unsafe fn wake_for(
    wait_obj: u32,
    wait_set: *mut sys::fid_wait,
) -> Result<(Arc<Wake>, Option<Arc<WaitCore>>), c_int> {
    if wait_obj == FI_WAIT_SET {
        // SAFETY: forwarded contract; get checks class and ops.
        let w = unsafe { obj::get::<WaitSet>(obj::fid_of(wait_set)) }.ok_or(err::EINVAL)?;
        return Ok((w.core.wake.clone(), Some(w.core.clone())));
    }
    if !wait::supported(wait_obj) {
        return Err(err::ENOSYS);
    }
    Wake::new().map(|w| (Arc::new(w), None)).ok_or(err::ENOMEM)
}

/// The wait set behind a fid, if it is one.
///
/// # Safety
/// `fid` NULL or live.
pub unsafe fn get<'a>(fid: *const sys::fid) -> Option<&'a WaitSet> {
    // SAFETY: forwarded.
    unsafe { obj::get::<WaitSet>(fid) }
}

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { get(fid) } {
            None => err::EINVAL,
            Some(w) if w.core.attached.busy() => err::EBUSY,
            Some(w) => {
                // SAFETY: the fabric outlives its wait sets (its refs count this one).
                unsafe { (*w.fabric).refs.dec() };
                // SAFETY: validated; C stops using it now.
                drop(unsafe { obj::take::<WaitSet>(fid) });
                0
            }
        }
    })
}

/// `fi_control` of a wait set: FI_GETWAIT gives its eventfd, FI_GETWAITOBJ
/// says FI_WAIT_FD.
unsafe extern "C" fn control(fid: *mut sys::fid, cmd: c_int, arg: *mut c_void) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { get(fid) } {
            // SAFETY: arg is the out-pointer the command calls for (API contract).
            Some(w) => unsafe { wait::control(&w.core.wake, FI_WAIT_FD, cmd, arg) },
            None => err::EINVAL,
        }
    })
}

unsafe extern "C" fn wait(waitset: *mut sys::fid_wait, timeout: c_int) -> c_int {
    guard::int(|| {
        // SAFETY: waitset from the application; validated by get.
        match unsafe { get(obj::fid_of(waitset)) } {
            Some(w) => w.core.wait(timeout),
            None => err::EINVAL,
        }
    })
}
