//! Completion counters: success and error counts, add/set, waits that progress.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::consts::*;
use crate::ep::endpoint::EpCore;
use crate::fabric::domain::{self, Domain};
use crate::fabric::waitable::{self, Waitable};
use crate::fabric::waitset::{self, WaitCore};
use crate::obj::{self, FiObject};
use crate::refs::Refs;
use crate::{fabric::wait, guard, nosys, sys};

/// Shared state of a counter.
pub struct CntrCore {
    count: AtomicU64,
    errs: AtomicU64,
    eps: Mutex<Vec<Arc<EpCore>>>,
    /// Bindings that keep it from closing.
    pub bound: Refs,
    /// Woken by changes while armed; the FI_GETWAIT fd (its wait set's with
    /// FI_WAIT_SET).
    wake: Arc<wait::Wake>,
    /// FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_YIELD or FI_WAIT_SET.
    wait_obj: u32,
}

impl CntrCore {
    /// One more successful completion.
    pub fn inc(&self) {
        self.count.fetch_add(1, Ordering::AcqRel);
        self.wake.notify();
    }
    /// One more failed completion.
    pub fn inc_err(&self) {
        self.errs.fetch_add(1, Ordering::AcqRel);
        self.wake.notify();
    }
    /// Start progressing `ep` from reads of this counter.
    pub fn attach(&self, ep: &Arc<EpCore>) {
        let mut eps = self.eps.lock();
        if !eps.iter().any(|e| Arc::ptr_eq(e, ep)) {
            eps.push(ep.clone());
        }
    }
    /// Stop progressing `ep`.
    pub fn detach(&self, ep: &Arc<EpCore>) {
        self.eps.lock().retain(|e| !Arc::ptr_eq(e, ep));
    }
    fn progress(&self) {
        for ep in self.eps.lock().iter() {
            ep.progress();
        }
    }
    /// The endpoints bound to it (what a wait or poll set progresses).
    pub fn endpoints(&self) -> Vec<Arc<EpCore>> {
        self.eps.lock().clone()
    }
    /// Its value and error count.
    pub fn values(&self) -> (u64, u64) {
        (
            self.count.load(Ordering::Acquire),
            self.errs.load(Ordering::Acquire),
        )
    }
    fn wait(&self, threshold: u64, timeout_ms: c_int) -> c_int {
        let errs0 = self.errs.load(Ordering::Acquire);
        let waiter = wait::Waiter::new(timeout_ms);
        loop {
            self.progress();
            if self.count.load(Ordering::Acquire) >= threshold {
                return 0;
            }
            if self.errs.load(Ordering::Acquire) != errs0 {
                return err::EAVAIL;
            }
            match waiter.spin() {
                Some(true) => {}
                Some(false) => return err::ETIMEDOUT,
                None => {
                    self.wake.arm();
                    if self.count.load(Ordering::Acquire) < threshold
                        && self.errs.load(Ordering::Acquire) == errs0
                    {
                        waiter.sleep(&self.eps.lock().clone(), &self.wake);
                    }
                }
            }
        }
    }
    /// `fi_trywait` on this counter: counters have no "entries", so always 0,
    /// with the fd armed (any change signals it) and the endpoints handed to
    /// the assist thread.
    pub fn trywait(&self) -> c_int {
        self.progress();
        self.wake.arm();
        crate::assist::hand_over(&self.eps.lock());
        0
    }
}

/// `struct fid_cntr` plus our state.
#[repr(C)]
pub struct Cntr {
    fid: sys::fid_cntr,
    domain: *const Domain,
    /// Shared with the endpoints bound to it.
    pub core: Arc<CntrCore>,
    /// The wait set it signals (FI_WAIT_SET).
    set: Option<Arc<WaitCore>>,
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(
    waitable::close::<Cntr>,
    None,
    Some(waitable::control::<Cntr>),
);
static OPS: sys::fi_ops_cntr = sys::fi_ops_cntr {
    size: std::mem::size_of::<sys::fi_ops_cntr>(),
    read: Some(read),
    readerr: Some(readerr),
    add: Some(add),
    set: Some(set),
    wait: Some(cwait),
    adderr: Some(adderr),
    seterr: Some(seterr),
};

// SAFETY: repr(C), fid_cntr first, FI_OPS set by cntr_open.
unsafe impl FiObject for Cntr {
    const FCLASS: u32 = sys::FI_CLASS_CNTR;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

impl Waitable for Cntr {
    fn domain(&self) -> *const Domain {
        self.domain
    }
    fn set(&self) -> Option<&Arc<WaitCore>> {
        self.set.as_ref()
    }
    fn busy(&self) -> bool {
        self.core.bound.busy()
    }
    fn wake(&self) -> (&wait::Wake, u32) {
        (&self.core.wake, self.core.wait_obj)
    }
}

/// `fi_cntr_open`.
pub unsafe extern "C" fn cntr_open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_cntr_attr,
    cntr: *mut *mut sys::fid_cntr,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        // SAFETY: domain from the application; validated by get.
        let Some(d) = (unsafe { domain::get(domain) }) else {
            return err::EINVAL;
        };
        if cntr.is_null() {
            return err::EINVAL;
        }
        // SAFETY: attr NULL or valid.
        let a = unsafe { attr.as_ref() };
        if a.is_some_and(|a| a.events != sys::fi_cntr_events_FI_CNTR_EVENTS_COMP) {
            return err::ENOSYS;
        }
        let (wait_obj, wait_set) = a.map_or((FI_WAIT_UNSPEC, std::ptr::null_mut()), |a| {
            (a.wait_obj, a.wait_set)
        });
        // SAFETY: wait_set is NULL or the application's live wait set.
        let (wake, set) = match unsafe { waitset::wake_for(wait_obj, wait_set) } {
            Ok(w) => w,
            Err(e) => return e,
        };
        let core = Arc::new(CntrCore {
            count: AtomicU64::new(0),
            errs: AtomicU64::new(0),
            eps: Mutex::new(Vec::new()),
            bound: Refs::default(),
            wake,
            wait_obj,
        });
        let obj = Cntr {
            fid: sys::fid_cntr {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_CNTR as usize,
                    context,
                    ops: obj::ops_ptr(&FI_OPS),
                },
                ops: obj::ops_ptr(&OPS),
            },
            domain: d,
            core,
            set,
        };
        // SAFETY: cntr is a valid out-pointer (checked non-NULL; API contract).
        unsafe { waitable::publish(d, obj, cntr) }
    })
}

/// The counter behind a fid.
///
/// # Safety
/// `fid` NULL or live.
pub unsafe fn get<'a>(fid: *const sys::fid) -> Option<&'a Cntr> {
    // SAFETY: forwarded.
    unsafe { obj::get::<Cntr>(fid) }
}

unsafe extern "C" fn read(cntr: *mut sys::fid_cntr) -> u64 {
    obj::with(cntr, 0, 0, |c: &Cntr| {
        c.core.progress();
        c.core.count.load(Ordering::Acquire)
    })
}
unsafe extern "C" fn readerr(cntr: *mut sys::fid_cntr) -> u64 {
    obj::with(cntr, 0, 0, |c: &Cntr| {
        c.core.progress();
        c.core.errs.load(Ordering::Acquire)
    })
}
unsafe extern "C" fn add(cntr: *mut sys::fid_cntr, v: u64) -> c_int {
    obj::with(cntr, err::EINVAL, err::EINVAL, |c: &Cntr| {
        c.core.count.fetch_add(v, Ordering::AcqRel);
        c.core.wake.wake();
        0
    })
}
unsafe extern "C" fn set(cntr: *mut sys::fid_cntr, v: u64) -> c_int {
    obj::with(cntr, err::EINVAL, err::EINVAL, |c: &Cntr| {
        c.core.count.store(v, Ordering::Release);
        c.core.wake.wake();
        0
    })
}
unsafe extern "C" fn adderr(cntr: *mut sys::fid_cntr, v: u64) -> c_int {
    obj::with(cntr, err::EINVAL, err::EINVAL, |c: &Cntr| {
        c.core.errs.fetch_add(v, Ordering::AcqRel);
        c.core.wake.wake();
        0
    })
}
unsafe extern "C" fn seterr(cntr: *mut sys::fid_cntr, v: u64) -> c_int {
    obj::with(cntr, err::EINVAL, err::EINVAL, |c: &Cntr| {
        c.core.errs.store(v, Ordering::Release);
        c.core.wake.wake();
        0
    })
}
unsafe extern "C" fn cwait(cntr: *mut sys::fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    obj::with(cntr, err::EINVAL, err::EINVAL, |c: &Cntr| {
        c.core.wait(threshold, timeout)
    })
}
