//! Blocking waits (fi_cq_sread, fi_cntr_wait): sleep in ppoll(2) on the bound
//! endpoints' receive sockets plus a wake-up eventfd, never past the engine's
//! next timer, after a short busy-poll phase (a wake-up from another vCPU costs
//! tens of microseconds).
//!
//! Each CQ, counter and EQ owns a `Wake`: the eventfd that its sleepers poll
//! and that `fi_control(FI_GETWAIT)` hands to the application (FI_WAIT_FD).
//! Whoever adds an entry signals it, but only while someone is armed to wait
//! (a sleeping `sread`, or `fi_trywait` returned 0): a busy application that
//! never blocks pays no system call per completion.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;

use std::os::raw::{c_int, c_void};

use crate::consts::*;
use crate::ep::endpoint::EpCore;
use crate::io::clock;
use crate::sys;

/// Wait objects a CQ, counter or EQ can be opened with on its own
/// (`FI_WAIT_SET` joins a wait set: `waitset::wake_for`).
pub fn supported(wait_obj: u32) -> bool {
    [FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_YIELD].contains(&wait_obj)
}

/// `fi_control` of a waitable object: FI_GETWAIT gives the eventfd (an
/// `int`), FI_GETWAITOBJ the wait object (FI_WAIT_FD); objects opened with
/// FI_WAIT_NONE or FI_WAIT_YIELD have none (-FI_ENODATA).
///
/// # Safety
/// `arg` is NULL or points to the `int` / `enum fi_wait_obj` the command fills.
pub unsafe fn control(wake: &Wake, wait_obj: u32, cmd: c_int, arg: *mut c_void) -> c_int {
    let cmd = cmd as u32;
    if cmd != sys::FI_GETWAIT && cmd != sys::FI_GETWAITOBJ {
        return err::ENOSYS;
    }
    if wait_obj != FI_WAIT_FD && wait_obj != FI_WAIT_UNSPEC {
        return err::ENODATA;
    }
    if arg.is_null() {
        return err::EINVAL;
    }
    // SAFETY: arg points to an int (FI_GETWAIT) or a C enum, also an int (caller).
    unsafe {
        if cmd == sys::FI_GETWAIT {
            *(arg as *mut c_int) = wake.fd();
        } else {
            *(arg as *mut u32) = FI_WAIT_FD;
        }
    }
    0
}

/// How long a waiter spins (progressing) before it sleeps, ns.
const SPIN_NS: u64 = 50_000;

/// An eventfd that wakes sleeping waiters (`fi_cq_signal`, new entries).
pub struct Wake(OwnedFd, AtomicBool);

impl Wake {
    /// A new, unsignalled eventfd.
    pub fn new() -> Option<Wake> {
        // SAFETY: plain eventfd creation; ownership passes to OwnedFd.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        // SAFETY: fd is a fresh descriptor we own.
        (fd >= 0).then(|| Wake(unsafe { OwnedFd::from_raw_fd(fd) }, AtomicBool::new(false)))
    }
    /// The eventfd (`FI_GETWAIT`): readable when entries may have arrived.
    pub fn fd(&self) -> i32 {
        self.0.as_raw_fd()
    }
    /// Someone is about to block on the fd: clear it, and have the next
    /// `notify` signal it. The caller re-checks its condition afterwards.
    pub fn arm(&self) {
        self.drain();
        self.1.store(true, Ordering::SeqCst);
        // Pairs with the fence in `notify`: either the adder sees us armed, or
        // our re-check sees its entry.
        fence(Ordering::SeqCst);
    }
    /// An entry was added: wake an armed waiter (one system call), else nothing.
    pub fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.1.load(Ordering::Relaxed) && self.1.swap(false, Ordering::AcqRel) {
            self.wake();
        }
    }
    /// Wake every waiter.
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a local to our eventfd.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
    /// Clear a pending wake-up.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a local from our non-blocking eventfd.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

/// One blocking wait: a deadline and a busy-poll phase. Callers loop:
/// progress, check their condition, `block`.
pub struct Waiter {
    deadline: Option<u64>,
    spin_until: u64,
}

impl Waiter {
    /// A wait of `timeout_ms` (negative = forever), starting now.
    pub fn new(timeout_ms: i32) -> Waiter {
        let now = clock::now_ns();
        Waiter {
            deadline: (timeout_ms >= 0).then(|| now + timeout_ms as u64 * 1_000_000),
            spin_until: now + SPIN_NS,
        }
    }

    /// The cheap part of a wait: `Some(false)` once the deadline passed,
    /// `Some(true)` while still in the busy-poll phase (after a spin hint),
    /// `None` when the caller should `sleep`.
    pub fn spin(&self) -> Option<bool> {
        let now = clock::now_ns();
        if self.deadline.is_some_and(|d| now >= d) {
            return Some(false);
        }
        if now < self.spin_until {
            std::hint::spin_loop();
            return Some(true);
        }
        None
    }

    /// Wait a little for input on `eps` (or a wake-up). False once the deadline passed.
    pub fn block(&self, eps: &[Arc<EpCore>], wake: &Wake) -> bool {
        if let Some(go_on) = self.spin() {
            return go_on;
        }
        self.sleep(eps, wake);
        true
    }

    /// Sleep in ppoll until input on `eps`, a wake-up, the engines' next timer
    /// or the deadline (at most 100 ms). True when the wake-up fd was signalled.
    pub fn sleep(&self, eps: &[Arc<EpCore>], wake: &Wake) -> bool {
        let now = clock::now_ns();
        let mut limit = self.deadline.map_or(u64::MAX, |d| d - now);
        let mut fds = Vec::with_capacity(eps.len() + 1);
        for ep in eps {
            if let Some(t) = ep.next_timer_ns() {
                limit = limit.min(t.saturating_sub(now));
            }
            if let Some(fd) = ep.rx_fd() {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
        }
        fds.push(libc::pollfd {
            fd: wake.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        // Bounded sleeps keep a lost wake-up from hanging a waiter.
        let limit = limit.min(100_000_000);
        let ts = libc::timespec {
            tv_sec: (limit / 1_000_000_000) as libc::time_t,
            tv_nsec: (limit % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: fds is a valid array of fds.len() pollfds; ts a valid timespec.
        unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        wake.drain();
        fds.last().is_some_and(|p| p.revents & libc::POLLIN != 0)
    }
}
