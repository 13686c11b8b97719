//! Poll sets (`fi_poll_open`, `fi_poll_add`/`del`, `fi_poll`) and the list of
//! CQs, counters and EQs that a poll set or a wait set watches.
//!
//! A member has something to report when a CQ holds entries (or error
//! entries), an EQ holds events, or a counter's value or error count changed
//! since the set last reported it (libfabric's utility providers keep the same
//! per-counter checkpoint). Members are held weakly: a closed object stops
//! being reported instead of keeping memory alive.

use std::os::raw::{c_int, c_void};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::consts::err;
use crate::ep::endpoint::EpCore;
use crate::fabric::cntr::CntrCore;
use crate::fabric::cq::CqCore;
use crate::fabric::domain::{self, Domain};
use crate::fabric::eq::EqCore;
use crate::obj::{self, FiObject};
use crate::{fabric::cntr, fabric::cq, fabric::eq, guard, nosys, sys};

/// The object behind a member.
pub enum Watched {
    /// A completion queue: ready while it holds entries.
    Cq(Weak<CqCore>),
    /// A counter: ready once per change of its value or error count.
    Cntr(Weak<CntrCore>),
    /// An event queue: ready while it holds events.
    Eq(Weak<EqCore>),
}

impl Watched {
    /// The CQ, counter or EQ behind `fid` (one of ours), with its context.
    ///
    /// # Safety
    /// `fid` is NULL or a live fid.
    pub unsafe fn of(fid: *const sys::fid) -> Option<(Watched, usize)> {
        // SAFETY: each get checks the class and ops table before use (caller: live fid).
        unsafe {
            if let Some(c) = cq::get(fid) {
                Some((
                    Watched::Cq(Arc::downgrade(&c.core)),
                    (*fid).context as usize,
                ))
            } else if let Some(c) = cntr::get(fid) {
                Some((
                    Watched::Cntr(Arc::downgrade(&c.core)),
                    (*fid).context as usize,
                ))
            } else {
                eq::get(fid).map(|e| {
                    (
                        Watched::Eq(Arc::downgrade(&e.core)),
                        (*fid).context as usize,
                    )
                })
            }
        }
    }
}

/// One watched object.
struct Member {
    /// Its fid pointer (the key of `remove`).
    fid: usize,
    /// The context `fi_poll` returns for it (its fid's context when added).
    context: usize,
    what: Watched,
    /// Counter value and error count last reported.
    seen: (u64, u64),
}

/// The objects a poll set or wait set watches.
#[derive(Default)]
pub struct Members(Mutex<Vec<Member>>);

impl Members {
    /// Watch `what` (known by its `fid`); watching it twice is watching it once.
    pub fn add(&self, fid: usize, context: usize, what: Watched) {
        let mut m = self.0.lock();
        if !m.iter().any(|x| x.fid == fid) {
            m.push(Member {
                fid,
                context,
                what,
                seen: (0, 0),
            });
        }
    }

    /// Stop watching `fid`; false when it was not watched.
    pub fn remove(&self, fid: usize) -> bool {
        let mut m = self.0.lock();
        let before = m.len();
        m.retain(|x| x.fid != fid);
        m.len() != before
    }

    /// The endpoints bound to the watched CQs and counters, each once.
    pub fn endpoints(&self) -> Vec<Arc<EpCore>> {
        let mut out: Vec<Arc<EpCore>> = Vec::new();
        for m in self.0.lock().iter() {
            let eps = match &m.what {
                Watched::Cq(c) => c.upgrade().map(|c| c.endpoints()),
                Watched::Cntr(c) => c.upgrade().map(|c| c.endpoints()),
                Watched::Eq(_) => None,
            };
            for ep in eps.into_iter().flatten() {
                if !out.iter().any(|e| Arc::ptr_eq(e, &ep)) {
                    out.push(ep);
                }
            }
        }
        out
    }

    /// Progress every endpoint bound to a watched object once.
    pub fn progress(&self) {
        for ep in self.endpoints() {
            ep.progress();
        }
    }

    /// Write the contexts of the members with something to report into
    /// `out` (at most its length); returns how many. A counter reported here
    /// is not reported again until it changes again.
    pub fn collect(&self, out: &mut [usize]) -> usize {
        let mut n = 0;
        for m in self.0.lock().iter_mut() {
            if n == out.len() {
                break;
            }
            let ready = match &m.what {
                Watched::Cq(c) => c.upgrade().is_some_and(|c| c.has_entries()),
                Watched::Eq(e) => e.upgrade().is_some_and(|e| e.has_events()),
                Watched::Cntr(c) => match c.upgrade().map(|c| c.values()) {
                    Some(v) if v != m.seen => {
                        m.seen = v;
                        true
                    }
                    _ => false,
                },
            };
            if ready {
                out[n] = m.context;
                n += 1;
            }
        }
        n
    }

    /// How many objects are watched.
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }

    /// True when nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when a member has something to report (`collect` of one).
    pub fn any_ready(&self) -> bool {
        self.collect(&mut [0usize; 1]) > 0
    }
}

/// `struct fid_poll` plus our state.
#[repr(C)]
pub struct PollSet {
    fid: sys::fid_poll,
    domain: *const Domain,
    members: Members,
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, None, None);
static OPS: sys::fi_ops_poll = sys::fi_ops_poll {
    size: std::mem::size_of::<sys::fi_ops_poll>(),
    poll: Some(poll),
    poll_add: Some(poll_add),
    poll_del: Some(poll_del),
};

// SAFETY: repr(C), fid_poll first, FI_OPS set by poll_open.
unsafe impl FiObject for PollSet {
    const FCLASS: u32 = sys::FI_CLASS_POLL;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

/// `fi_poll_open`: a poll set of the domain (no flags are defined).
pub unsafe extern "C" fn poll_open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_poll_attr,
    pollset: *mut *mut sys::fid_poll,
) -> c_int {
    guard::int(|| {
        // SAFETY: domain from the application; validated by get.
        let Some(d) = (unsafe { domain::get(domain) }) else {
            return err::EINVAL;
        };
        if pollset.is_null() {
            return err::EINVAL;
        }
        // SAFETY: attr NULL or valid.
        if unsafe { attr.as_ref() }.is_some_and(|a| a.flags != 0) {
            return err::EBADFLAGS;
        }
        let p = PollSet {
            fid: sys::fid_poll {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_POLL as usize,
                    context: std::ptr::null_mut(),
                    ops: obj::ops_ptr(&FI_OPS),
                },
                ops: obj::ops_ptr(&OPS),
            },
            domain: d,
            members: Members::default(),
        };
        d.refs.inc();
        // SAFETY: pollset is a valid out-pointer (checked non-null).
        unsafe { *pollset = obj::into_c(p) };
        0
    })
}

/// The poll set behind a `fid_poll`.
///
/// # Safety
/// `p` is NULL or a live fid.
unsafe fn get<'a>(p: *mut sys::fid_poll) -> Option<&'a PollSet> {
    // SAFETY: forwarded contract.
    unsafe { obj::get::<PollSet>(obj::fid_of(p)) }
}

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { obj::get::<PollSet>(fid) } {
            None => err::EINVAL,
            Some(p) => {
                // SAFETY: the domain outlives its poll sets (its refs count this one).
                unsafe { (*p.domain).refs.dec() };
                // SAFETY: validated; C stops using it now.
                drop(unsafe { obj::take::<PollSet>(fid) });
                0
            }
        }
    })
}

/// `fi_poll`: progress the endpoints of the watched objects, then write the
/// contexts of those with events (at most `count`); 0 when none has any.
unsafe extern "C" fn poll(
    pollset: *mut sys::fid_poll,
    context: *mut *mut c_void,
    count: c_int,
) -> c_int {
    guard::int(|| {
        // SAFETY: pollset from the application; validated by get.
        let Some(p) = (unsafe { get(pollset) }) else {
            return err::EINVAL;
        };
        if count < 0 || (context.is_null() && count > 0) {
            return err::EINVAL;
        }
        p.members.progress();
        // No more slots than members (count is the application's array size).
        let mut ready = vec![0usize; (count as usize).min(p.members.len())];
        let n = p.members.collect(&mut ready);
        for (i, c) in ready[..n].iter().enumerate() {
            // SAFETY: context holds count slots (API contract) and i < n <= count.
            unsafe { *context.add(i) = *c as *mut c_void };
        }
        n as c_int
    })
}

/// `fi_poll_add`: watch a CQ, counter or EQ of spray (flags are ignored).
unsafe extern "C" fn poll_add(
    pollset: *mut sys::fid_poll,
    event_fid: *mut sys::fid,
    _flags: u64,
) -> c_int {
    guard::int(|| {
        // SAFETY: pollset from the application; validated by get.
        let Some(p) = (unsafe { get(pollset) }) else {
            return err::EINVAL;
        };
        // SAFETY: event_fid is NULL or a live fid (API contract); `of` checks its class.
        match unsafe { Watched::of(event_fid) } {
            Some((what, ctx)) => {
                p.members.add(event_fid as usize, ctx, what);
                0
            }
            None => err::EINVAL,
        }
    })
}

/// `fi_poll_del`: stop watching an object (`-FI_EINVAL` when it was not watched).
unsafe extern "C" fn poll_del(
    pollset: *mut sys::fid_poll,
    event_fid: *mut sys::fid,
    _flags: u64,
) -> c_int {
    guard::int(|| {
        // SAFETY: pollset from the application; validated by get.
        let Some(p) = (unsafe { get(pollset) }) else {
            return err::EINVAL;
        };
        if p.members.remove(event_fid as usize) {
            0
        } else {
            err::EINVAL
        }
    })
}
