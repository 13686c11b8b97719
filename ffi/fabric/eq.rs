//! Event queues: spray's RDM/DGRAM endpoints raise no connection events, but
//! applications open EQs and bind them; read/write/readerr/sread work on
//! whatever the application (or a future event source) queues.

use std::collections::VecDeque;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::consts::*;
use crate::fabric::waitset::{self, WaitCore};
use crate::fabric::Fabric;
use crate::obj::{self, FiObject};
use crate::refs::Refs;
use crate::{fabric::wait, guard, nosys, sys};

/// An error event (pointers kept as integers so the queue is `Send`).
#[derive(Copy, Clone, Debug, Default)]
pub struct EqErr {
    /// The fid the error is about.
    pub fid: usize,
    /// Its context.
    pub context: usize,
    /// Event data.
    pub data: u64,
    /// Positive FI_E* code.
    pub err: i32,
}

/// Shared state of an EQ.
#[derive(Default)]
pub struct EqCore {
    events: Mutex<VecDeque<(u32, Vec<u8>)>>,
    errors: Mutex<VecDeque<EqErr>>,
    /// Bindings that keep it from closing.
    pub bound: Refs,
}

/// `struct fid_eq` plus our state.
#[repr(C)]
pub struct Eq {
    fid: sys::fid_eq,
    fabric: *const Fabric,
    /// Queued events.
    pub core: Arc<EqCore>,
    /// Signalled by every write; the FI_GETWAIT fd (its wait set's with
    /// FI_WAIT_SET).
    wake: Arc<wait::Wake>,
    /// FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_YIELD or FI_WAIT_SET.
    wait_obj: u32,
    /// The wait set it signals (FI_WAIT_SET).
    set: Option<Arc<WaitCore>>,
}

impl EqCore {
    /// True while events or error events are queued.
    pub fn has_events(&self) -> bool {
        !self.events.lock().is_empty() || !self.errors.lock().is_empty()
    }
}

impl Eq {
    /// `fi_trywait` on this EQ: -FI_EAGAIN when events are queued, else 0
    /// with the fd cleared (the next write signals it).
    pub fn trywait(&self) -> c_int {
        self.wake.drain();
        if self.core.events.lock().is_empty() && self.core.errors.lock().is_empty() {
            0
        } else {
            err::EAGAIN
        }
    }
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, None, Some(control));
static OPS: sys::fi_ops_eq = sys::fi_ops_eq {
    size: std::mem::size_of::<sys::fi_ops_eq>(),
    read: Some(read),
    readerr: Some(readerr),
    write: Some(write),
    sread: Some(sread),
    strerror: Some(strerror),
};

// SAFETY: repr(C), fid_eq first, FI_OPS set by eq_open.
unsafe impl FiObject for Eq {
    const FCLASS: u32 = sys::FI_CLASS_EQ;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

/// `fi_eq_open`.
pub unsafe extern "C" fn eq_open(
    fabric: *mut sys::fid_fabric,
    attr: *mut sys::fi_eq_attr,
    eq: *mut *mut sys::fid_eq,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        // SAFETY: fabric from the application; validated by get.
        let Some(f) = (unsafe { obj::get::<Fabric>(obj::fid_of(fabric)) }) else {
            return err::EINVAL;
        };
        if eq.is_null() {
            return err::EINVAL;
        }
        // SAFETY: attr NULL or valid.
        let (wait_obj, wait_set) = unsafe { attr.as_ref() }
            .map_or((FI_WAIT_UNSPEC, std::ptr::null_mut()), |a| {
                (a.wait_obj, a.wait_set)
            });
        // SAFETY: wait_set is NULL or the application's live wait set.
        let (wake, set) = match unsafe { waitset::wake_for(wait_obj, wait_set) } {
            Ok(w) => w,
            Err(e) => return e,
        };
        let obj = Eq {
            fid: sys::fid_eq {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_EQ as usize,
                    context,
                    ops: obj::ops_ptr(&FI_OPS),
                },
                ops: obj::ops_ptr(&OPS),
            },
            fabric: f,
            core: Arc::new(EqCore::default()),
            wake,
            wait_obj,
            set,
        };
        f.refs.inc();
        let p: *mut sys::fid_eq = obj::into_c(obj);
        // SAFETY: p is the EQ just made (the set, if any, watches it from now);
        // eq is a valid out-pointer.
        unsafe {
            if let Some(s) = &(*(p as *const Eq)).set {
                s.attach(obj::fid_of(p));
            }
            *eq = p;
        }
        0
    })
}

/// The EQ behind a fid.
///
/// # Safety
/// `fid` NULL or live.
pub unsafe fn get<'a>(fid: *const sys::fid) -> Option<&'a Eq> {
    // SAFETY: forwarded.
    unsafe { obj::get::<Eq>(fid) }
}

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { get(fid) } {
            None => err::EINVAL,
            Some(e) if e.core.bound.busy() => err::EBUSY,
            Some(e) => {
                if let Some(s) = &e.set {
                    s.detach(fid);
                }
                // SAFETY: the fabric outlives its EQs.
                unsafe { (*e.fabric).refs.dec() };
                // SAFETY: validated; C stops using it now.
                drop(unsafe { obj::take::<Eq>(fid) });
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
            Some(e) => unsafe { wait::control(&e.wake, e.wait_obj, cmd, arg) },
            None => err::EINVAL,
        }
    })
}

unsafe fn read_one(e: &Eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> isize {
    if !e.core.errors.lock().is_empty() {
        return err::EAVAIL as isize;
    }
    let mut q = e.core.events.lock();
    let Some((ev, data)) = q.front() else {
        return err::EAGAIN as isize;
    };
    if len < data.len() || (buf.is_null() && !data.is_empty()) {
        return err::ETOOSMALL as isize;
    }
    // SAFETY: event NULL or valid; buf writable for len >= data.len() bytes.
    unsafe {
        if !event.is_null() {
            *event = *ev;
        }
        std::ptr::copy_nonoverlapping(data.as_ptr(), buf as *mut u8, data.len());
    }
    let n = data.len() as isize;
    if flags & FI_PEEK == 0 {
        q.pop_front();
    }
    n
}

unsafe extern "C" fn read(
    eq: *mut sys::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    // SAFETY: API contract on event/buf/len.
    obj::with_ssize(eq, |e: &Eq| unsafe { read_one(e, event, buf, len, flags) })
}

unsafe extern "C" fn sread(
    eq: *mut sys::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    obj::with_ssize(eq, |e: &Eq| {
        let waiter = wait::Waiter::new(timeout);
        loop {
            // SAFETY: API contract on event/buf/len.
            let n = unsafe { read_one(e, event, buf, len, flags) };
            if n != err::EAGAIN as isize || !waiter.block(&[], &e.wake) {
                return n;
            }
        }
    })
}

unsafe extern "C" fn readerr(
    eq: *mut sys::fid_eq,
    buf: *mut sys::fi_eq_err_entry,
    flags: u64,
) -> isize {
    obj::with_ssize(eq, |e: &Eq| {
        if buf.is_null() {
            return err::EINVAL as isize;
        }
        let mut q = e.core.errors.lock();
        let Some(ent) = q.front().copied() else {
            return err::EAGAIN as isize;
        };
        // SAFETY: buf is a valid fi_eq_err_entry.
        unsafe {
            *buf = sys::fi_eq_err_entry {
                fid: ent.fid as sys::fid_t,
                context: ent.context as *mut c_void,
                data: ent.data,
                err: ent.err,
                prov_errno: ent.err,
                err_data: std::ptr::null_mut(),
                err_data_size: 0,
            }
        };
        if flags & FI_PEEK == 0 {
            q.pop_front();
        }
        std::mem::size_of::<sys::fi_eq_err_entry>() as isize
    })
}

unsafe extern "C" fn write(
    eq: *mut sys::fid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    _flags: u64,
) -> isize {
    obj::with_ssize(eq, |e: &Eq| {
        if buf.is_null() && len > 0 {
            return err::EINVAL as isize;
        }
        let data = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: buf readable for len bytes.
            unsafe { std::slice::from_raw_parts(buf as *const u8, len) }.to_vec()
        };
        e.core.events.lock().push_back((event, data));
        e.wake.wake();
        len as isize
    })
}

unsafe extern "C" fn strerror(
    _: *mut sys::fid_eq,
    prov_errno: c_int,
    _: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // SAFETY: buf is NULL or has len bytes (API contract).
    guard::guard(std::ptr::null(), || unsafe {
        crate::fabric::cq::strerror_into(prov_errno, buf, len)
    })
}
