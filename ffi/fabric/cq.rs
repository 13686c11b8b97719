//! Completion queues: entries in every format, error entries (old and new
//! layout), FI_SOURCE addresses, blocking reads that progress the endpoints.

use std::collections::VecDeque;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// One successful completion, format-independent.
#[derive(Copy, Clone, Debug, Default)]
pub struct Entry {
    /// The operation's context pointer.
    pub ctx: u64,
    /// FI_SEND / FI_RECV / FI_MSG / FI_TAGGED / FI_REMOTE_CQ_DATA / FI_MULTI_RECV.
    pub flags: u64,
    /// Bytes transferred.
    pub len: usize,
    /// Start of the received data (receives), else 0.
    pub buf: usize,
    /// Remote CQ data.
    pub data: u64,
    /// Message tag.
    pub tag: u64,
    /// Source fi_addr (receives), `FI_ADDR_NOTAVAIL` when unknown.
    pub src: u64,
}

/// One failed operation.
#[derive(Copy, Clone, Debug, Default)]
pub struct ErrEntry {
    /// What a success entry would have said.
    pub e: Entry,
    /// Bytes that did not fit (truncation).
    pub olen: usize,
    /// Positive FI_E* code.
    pub err: i32,
}

/// The shared state of a CQ (endpoints push into it; the app reads it).
pub struct CqCore {
    format: u32,
    api_version: u32,
    q: Mutex<VecDeque<Entry>>,
    errq: Mutex<VecDeque<ErrEntry>>,
    /// Entries in `q` and `errq` together, read without their locks: an idle
    /// `fi_cq_read` (the MPI progress loop's usual case) takes none of them.
    queued: AtomicUsize,
    /// Endpoints bound to it: reading progresses them.
    eps: Mutex<Vec<Arc<EpCore>>>,
    /// Bindings that keep it from closing.
    pub bound: Refs,
    signaled: AtomicBool,
    /// Woken by new entries while armed; the FI_GETWAIT fd (its wait set's
    /// with FI_WAIT_SET).
    wake: Arc<wait::Wake>,
    /// FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_YIELD or FI_WAIT_SET.
    wait_obj: u32,
}

impl CqCore {
    /// Queue a successful completion.
    pub fn push(&self, e: Entry) {
        self.q.lock().push_back(e);
        self.queued.fetch_add(1, Ordering::Release);
        self.wake.notify();
    }
    /// Queue an error completion.
    pub fn push_err(&self, e: ErrEntry) {
        self.errq.lock().push_back(e);
        self.queued.fetch_add(1, Ordering::Release);
        self.wake.notify();
    }
    /// Start progressing `ep` from reads of this CQ.
    pub fn attach(&self, ep: &Arc<EpCore>) {
        let mut eps = self.eps.lock();
        if !eps.iter().any(|e| Arc::ptr_eq(e, ep)) {
            eps.push(ep.clone());
        }
    }
    /// Stop progressing `ep` (it is closing).
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
    /// True while it holds entries or error entries.
    pub fn has_entries(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0
    }

    fn entry_size(&self) -> usize {
        use std::mem::size_of;
        match self.format {
            FI_CQ_FORMAT_MSG => size_of::<sys::fi_cq_msg_entry>(),
            FI_CQ_FORMAT_DATA => size_of::<sys::fi_cq_data_entry>(),
            FI_CQ_FORMAT_TAGGED => size_of::<sys::fi_cq_tagged_entry>(),
            _ => size_of::<sys::fi_cq_entry>(),
        }
    }

    /// Write `e` in our format at `dst`.
    ///
    /// # Safety
    /// `dst` is writable for `entry_size()` bytes.
    unsafe fn write(&self, e: &Entry, dst: *mut u8) {
        let ctx = e.ctx as *mut c_void;
        // SAFETY (all arms): dst is writable for the size of this format's entry (caller);
        // write_unaligned copes with any alignment.
        unsafe {
            match self.format {
                FI_CQ_FORMAT_MSG => std::ptr::write_unaligned(
                    dst.cast(),
                    sys::fi_cq_msg_entry {
                        op_context: ctx,
                        flags: e.flags,
                        len: e.len,
                    },
                ),
                FI_CQ_FORMAT_DATA => std::ptr::write_unaligned(
                    dst.cast(),
                    sys::fi_cq_data_entry {
                        op_context: ctx,
                        flags: e.flags,
                        len: e.len,
                        buf: e.buf as *mut c_void,
                        data: e.data,
                    },
                ),
                FI_CQ_FORMAT_TAGGED => std::ptr::write_unaligned(
                    dst.cast(),
                    sys::fi_cq_tagged_entry {
                        op_context: ctx,
                        flags: e.flags,
                        len: e.len,
                        buf: e.buf as *mut c_void,
                        data: e.data,
                        tag: e.tag,
                    },
                ),
                _ => std::ptr::write_unaligned(dst.cast(), sys::fi_cq_entry { op_context: ctx }),
            }
        }
    }

    /// Non-blocking read of up to `count` entries.
    ///
    /// # Safety
    /// `buf` writable for `count` entries; `src` NULL or writable for `count` fi_addrs.
    unsafe fn read(&self, buf: *mut c_void, count: usize, src: *mut u64) -> isize {
        if buf.is_null() && count > 0 {
            return err::EINVAL as isize;
        }
        self.progress();
        if self.queued.load(Ordering::Acquire) == 0 {
            return err::EAGAIN as isize;
        }
        if !self.errq.lock().is_empty() {
            return err::EAVAIL as isize;
        }
        let size = self.entry_size();
        let mut q = self.q.lock();
        let n = count.min(q.len());
        if n == 0 {
            return err::EAGAIN as isize;
        }
        self.queued.fetch_sub(n, Ordering::AcqRel);
        for (i, e) in q.drain(..n).enumerate() {
            // SAFETY: i < count, so the slot lies inside the caller's buffer.
            unsafe { self.write(&e, (buf as *mut u8).add(i * size)) };
            if !src.is_null() {
                // SAFETY: src has count slots (caller).
                unsafe { *src.add(i) = e.src };
            }
        }
        n as isize
    }

    /// Blocking read: progress, then sleep on the endpoints' sockets until data,
    /// a signal, or `timeout_ms` (negative = forever).
    unsafe fn sread(
        &self,
        buf: *mut c_void,
        count: usize,
        src: *mut u64,
        timeout_ms: c_int,
    ) -> isize {
        let waiter = wait::Waiter::new(timeout_ms);
        loop {
            // SAFETY: forwarded contract.
            let n = unsafe { self.read(buf, count, src) };
            if n != err::EAGAIN as isize {
                return n;
            }
            if self.signaled.swap(false, Ordering::AcqRel) {
                return err::EAGAIN as isize;
            }
            match waiter.spin() {
                Some(true) => {}
                Some(false) => return err::EAGAIN as isize,
                None => {
                    // Armed, a completion another thread adds (the assist
                    // thread, a second reader) wakes us as well.
                    self.wake.arm();
                    if self.queued.load(Ordering::Acquire) == 0 {
                        // Sleeping is rare: copying the endpoint list is fine here.
                        waiter.sleep(&self.eps.lock().clone(), &self.wake);
                    }
                }
            }
        }
    }

    /// `fi_trywait` on this CQ: -FI_EAGAIN when entries are there, else 0
    /// with the fd armed and the endpoints handed to the assist thread, which
    /// progresses them while the application blocks on the fd.
    pub fn trywait(&self) -> c_int {
        self.progress();
        if self.queued.load(Ordering::Acquire) > 0 {
            return err::EAGAIN;
        }
        self.wake.arm();
        if self.queued.load(Ordering::Acquire) > 0 {
            return err::EAGAIN;
        }
        crate::assist::hand_over(&self.eps.lock());
        0
    }

    /// Pop one error entry into the caller's `fi_cq_err_entry`.
    unsafe fn readerr(&self, out: *mut sys::fi_cq_err_entry) -> isize {
        if out.is_null() {
            return err::EINVAL as isize;
        }
        let Some(e) = self.errq.lock().pop_front() else {
            return err::EAGAIN as isize;
        };
        self.queued.fetch_sub(1, Ordering::AcqRel);
        // SAFETY: out is a valid fi_cq_err_entry of the layout of the app's API version.
        let o = unsafe { &mut *out };
        o.op_context = e.e.ctx as *mut c_void;
        o.flags = e.e.flags;
        o.len = e.e.len;
        o.buf = e.e.buf as *mut c_void;
        o.data = e.e.data;
        o.tag = e.e.tag;
        o.olen = e.olen;
        o.err = e.err;
        o.prov_errno = e.err;
        if o.err_data_size == 0 || self.api_version < fi_version(1, 5) {
            o.err_data = std::ptr::null_mut();
        }
        o.err_data_size = 0;
        if self.api_version >= fi_version(1, 20) {
            // API 1.20 appended `fi_addr_t src_addr`: the app's struct has room for it.
            // SAFETY: apps built against ≥ 1.20 headers pass the larger struct.
            unsafe { (*(out as *mut ErrEntry120)).src_addr = e.e.src };
        }
        1
    }
}

/// `fi_cq_err_entry` as of API 1.20.
#[repr(C)]
struct ErrEntry120 {
    base: sys::fi_cq_err_entry,
    src_addr: u64,
}

/// `struct fid_cq` plus our state.
#[repr(C)]
pub struct Cq {
    fid: sys::fid_cq,
    domain: *const Domain,
    /// Shared with the endpoints bound to it.
    pub core: Arc<CqCore>,
    /// The wait set it signals (FI_WAIT_SET).
    set: Option<Arc<WaitCore>>,
}

static FI_OPS: sys::fi_ops =
    nosys::fid_ops(waitable::close::<Cq>, None, Some(waitable::control::<Cq>));
static OPS: sys::fi_ops_cq = sys::fi_ops_cq {
    size: std::mem::size_of::<sys::fi_ops_cq>(),
    read: Some(read),
    readfrom: Some(readfrom),
    readerr: Some(readerr),
    sread: Some(sread),
    sreadfrom: Some(sreadfrom),
    signal: Some(signal),
    strerror: Some(strerror),
};

// SAFETY: repr(C), fid_cq first, FI_OPS set by cq_open.
unsafe impl FiObject for Cq {
    const FCLASS: u32 = sys::FI_CLASS_CQ;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

impl Waitable for Cq {
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

/// `fi_cq_open`.
pub unsafe extern "C" fn cq_open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_cq_attr,
    cq: *mut *mut sys::fid_cq,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        // SAFETY: domain from the application; validated by get.
        let Some(d) = (unsafe { domain::get(domain) }) else {
            return err::EINVAL;
        };
        if cq.is_null() {
            return err::EINVAL;
        }
        // SAFETY: attr NULL or valid.
        let a = unsafe { attr.as_ref() }.copied().unwrap_or_default();
        let format = match a.format {
            FI_CQ_FORMAT_UNSPEC => FI_CQ_FORMAT_CONTEXT,
            f @ (FI_CQ_FORMAT_CONTEXT | FI_CQ_FORMAT_MSG | FI_CQ_FORMAT_DATA
            | FI_CQ_FORMAT_TAGGED) => f,
            _ => return err::ENOSYS,
        };
        // SAFETY: wait_set is NULL or the application's live wait set.
        let (wake, set) = match unsafe { waitset::wake_for(a.wait_obj, a.wait_set) } {
            Ok(w) => w,
            Err(e) => return e,
        };
        let depth = if a.size == 0 {
            1024
        } else {
            a.size.min(1 << 20)
        };
        let core = Arc::new(CqCore {
            format,
            api_version: d.api_version,
            q: Mutex::new(VecDeque::with_capacity(depth)),
            errq: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            eps: Mutex::new(Vec::new()),
            bound: Refs::default(),
            signaled: AtomicBool::new(false),
            wake,
            wait_obj: a.wait_obj,
        });
        let obj = Cq {
            fid: sys::fid_cq {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_CQ as usize,
                    context,
                    ops: obj::ops_ptr(&FI_OPS),
                },
                ops: obj::ops_ptr(&OPS),
            },
            domain: d,
            core,
            set,
        };
        // SAFETY: cq is a valid out-pointer (checked non-NULL; API contract).
        unsafe { waitable::publish(d, obj, cq) }
    })
}

/// The CQ behind a fid.
///
/// # Safety
/// `fid` NULL or live.
pub unsafe fn get<'a>(fid: *const sys::fid) -> Option<&'a Cq> {
    // SAFETY: forwarded.
    unsafe { obj::get::<Cq>(fid) }
}

unsafe extern "C" fn read(cq: *mut sys::fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: buf holds count entries of the CQ's format (API contract).
    obj::with_ssize(cq, |c: &Cq| unsafe {
        c.core.read(buf, count, std::ptr::null_mut())
    })
}

unsafe extern "C" fn readfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
) -> isize {
    // SAFETY: buf holds count entries, src count fi_addrs (API contract).
    obj::with_ssize(cq, |c: &Cq| unsafe { c.core.read(buf, count, src) })
}

unsafe extern "C" fn readerr(
    cq: *mut sys::fid_cq,
    buf: *mut sys::fi_cq_err_entry,
    _flags: u64,
) -> isize {
    // SAFETY: buf is the app's error entry (API contract).
    obj::with_ssize(cq, |c: &Cq| unsafe { c.core.readerr(buf) })
}

unsafe extern "C" fn sread(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: as read.
    obj::with_ssize(cq, |c: &Cq| unsafe {
        c.core.sread(buf, count, std::ptr::null_mut(), timeout)
    })
}

unsafe extern "C" fn sreadfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: as readfrom.
    obj::with_ssize(cq, |c: &Cq| unsafe {
        c.core.sread(buf, count, src, timeout)
    })
}

unsafe extern "C" fn signal(cq: *mut sys::fid_cq) -> c_int {
    obj::with_ssize(cq, |c: &Cq| {
        c.core.signaled.store(true, Ordering::Release);
        c.core.wake.wake();
        0
    }) as c_int
}

unsafe extern "C" fn strerror(
    _cq: *mut sys::fid_cq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // SAFETY: buf is NULL or has len bytes (API contract).
    guard::guard(std::ptr::null(), || unsafe {
        strerror_into(prov_errno, buf, len)
    })
}

/// `fi_strerror(prov_errno)`, also copied into `buf` when one is given (the
/// `strerror` entry of CQs and EQs).
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
pub unsafe fn strerror_into(prov_errno: c_int, buf: *mut c_char, len: usize) -> *const c_char {
    // SAFETY: fi_strerror returns a static string for any code.
    let s = unsafe { sys::fi_strerror(prov_errno.abs()) };
    if !buf.is_null() && len > 0 && !s.is_null() {
        // SAFETY: buf has len bytes; strncpy writes at most len-1 then we terminate.
        unsafe {
            libc::strncpy(buf, s, len - 1);
            *buf.add(len - 1) = 0;
        }
    }
    s
}
