//! Blocking waits (fi_cq_sread, fi_cntr_wait): sleep in ppoll(2) on the bound
//! endpoints' receive sockets plus a wake-up eventfd, never past the engine's
//! next timer, after a short busy-poll phase (a wake-up from another vCPU costs
//! tens of microseconds).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use crate::ep::EpCore;
use crate::io::clock;

/// How long a waiter spins (progressing) before it sleeps, ns.
const SPIN_NS: u64 = 50_000;

/// An eventfd that wakes sleeping waiters (`fi_cq_signal`).
pub struct Wake(OwnedFd);

impl Wake {
    /// A new, unsignalled eventfd.
    pub fn new() -> Option<Wake> {
        // SAFETY: plain eventfd creation; ownership passes to OwnedFd.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        // SAFETY: fd is a fresh descriptor we own.
        (fd >= 0).then(|| Wake(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    /// Wake every waiter.
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a local to our eventfd.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
    fn drain(&self) {
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
    /// or the deadline (at most 100 ms).
    pub fn sleep(&self, eps: &[Arc<EpCore>], wake: &Wake) {
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
    }
}
