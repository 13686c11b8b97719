//! Completion counters: success and error counts, add/set, waits that progress.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::consts::*;
use crate::ep::endpoint::EpCore;
use crate::fabric::domain::{self, Domain};
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

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, None, Some(control));
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
        d.refs.inc();
        let p: *mut sys::fid_cntr = obj::into_c(obj);
        // SAFETY: p is the counter just made (the set, if any, watches it from
        // now); cntr is a valid out-pointer.
        unsafe {
            if let Some(s) = &(*(p as *const Cntr)).set {
                s.attach(obj::fid_of(p));
            }
            *cntr = p;
        }
        0
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

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { get(fid) } {
            None => err::EINVAL,
            Some(c) if c.core.bound.busy() => err::EBUSY,
            Some(c) => {
                if let Some(s) = &c.set {
                    s.detach(fid);
                }
                // SAFETY: the domain outlives its counters.
                unsafe { (*c.domain).refs.dec() };
                // SAFETY: validated; C stops using it now.
                drop(unsafe { obj::take::<Cntr>(fid) });
                0
            }
        }
    })
}

unsafe extern "C" fn control(fid: *mut sys::fid, cmd: c_int, arg: *mut c_void) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { get(fid) } {
            // SAFETY: arg is the out-pointer the command calls for (API contract).
            Some(c) => unsafe { wait::control(&c.core.wake, c.core.wait_obj, cmd, arg) },
            None => err::EINVAL,
        }
    })
}

fn with<T: Copy>(cntr: *mut sys::fid_cntr, bad: T, f: impl FnOnce(&CntrCore) -> T) -> T {
    guard::guard(bad, || {
        // SAFETY: cntr from the application; validated by get.
        match unsafe { get(obj::fid_of(cntr)) } {
            Some(c) => f(&c.core),
            None => bad,
        }
    })
}

unsafe extern "C" fn read(cntr: *mut sys::fid_cntr) -> u64 {
    with(cntr, 0, |c| {
        c.progress();
        c.count.load(Ordering::Acquire)
    })
}
unsafe extern "C" fn readerr(cntr: *mut sys::fid_cntr) -> u64 {
    with(cntr, 0, |c| {
        c.progress();
        c.errs.load(Ordering::Acquire)
    })
}
unsafe extern "C" fn add(cntr: *mut sys::fid_cntr, v: u64) -> c_int {
    with(cntr, err::EINVAL, |c| {
        c.count.fetch_add(v, Ordering::AcqRel);
        c.wake.wake();
        0
    })
}
unsafe extern "C" fn set(cntr: *mut sys::fid_cntr, v: u64) -> c_int {
    with(cntr, err::EINVAL, |c| {
        c.count.store(v, Ordering::Release);
        c.wake.wake();
        0
    })
}
unsafe extern "C" fn adderr(cntr: *mut sys::fid_cntr, v: u64) -> c_int {
    with(cntr, err::EINVAL, |c| {
        c.errs.fetch_add(v, Ordering::AcqRel);
        c.wake.wake();
        0
    })
}
unsafe extern "C" fn seterr(cntr: *mut sys::fid_cntr, v: u64) -> c_int {
    with(cntr, err::EINVAL, |c| {
        c.errs.store(v, Ordering::Release);
        c.wake.wake();
        0
    })
}
unsafe extern "C" fn cwait(cntr: *mut sys::fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    with(cntr, err::EINVAL, |c| c.wait(threshold, timeout))
}
