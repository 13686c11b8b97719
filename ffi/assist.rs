//! Progress assist: one background thread drives endpoints the application has
//! stopped calling for a while.
//!
//! spray reports FI_PROGRESS_MANUAL unless asked for FI_PROGRESS_AUTO, and a
//! manual endpoint normally moves data only inside the application's calls. But reliability lives in user space here: a lost packet
//! is resent, and a received one acknowledged, only when someone runs the
//! engine. An application that injects a message and then blocks elsewhere
//! (fi_pingpong on its TCP control channel, an MPI rank computing) would strand
//! a lost packet forever and its peer would hang. So when an endpoint has seen
//! no application call for `FI_SPRAY_ASSIST_US` (default 1000 µs), this thread
//! progresses it: it sleeps in ppoll on the idle endpoints' sockets, never past
//! their next engine timer, and takes an endpoint's lock only with `try_lock`.
//! The provider's cleanup stops it (see `shutdown` for exit from any thread).
//!
//! An endpoint opened with `data_progress = FI_PROGRESS_AUTO` is taken over
//! after `AUTO_IDLE_NS` instead: from then on this thread sleeps on its socket
//! and handles every datagram as it arrives, so transfers complete while the
//! application makes no call. The price: while the application keeps calling,
//! the thread wakes once per `AUTO_IDLE_NS` to see whether it stopped.
//!
//! It also bounds how long a send held back for its burst (`ep/hold.rs`)
//! waits when the application stops calling: `HOLD_BOUND_NS` after the hold
//! began, the endpoint is flushed whether or not it went idle. A post that
//! starts a hold wakes the thread only if it sleeps past that bound.

use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::consts::FI_PROGRESS_AUTO;
use crate::ep::endpoint::EpCore;
use crate::io::clock;
use crate::{fabric::wait, log, params, stats, sys};

struct Assist {
    eps: Mutex<Vec<Weak<EpCore>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    stop: AtomicBool,
    /// When the thread's current sleep ends, monotonic ns (0 = awake).
    wake_at: AtomicU64,
    /// Wakes the thread early: an application blocks on a wait fd (`hand_over`).
    kick: Option<wait::Wake>,
}

static ASSIST: Lazy<Assist> = Lazy::new(|| Assist {
    eps: Mutex::new(Vec::new()),
    thread: Mutex::new(None),
    stop: AtomicBool::new(false),
    wake_at: AtomicU64::new(0),
    kick: wait::Wake::new(),
});

/// The application is about to block on a CQ's or counter's wait fd
/// (`fi_trywait` returned 0): progress `eps` from now on, without waiting for
/// them to go quiet, and sleep on their sockets. Their next application call
/// takes them back.
pub fn hand_over(eps: &[Arc<EpCore>]) {
    let mut any = false;
    for ep in eps.iter().filter(|e| e.assist_idle_ns != 0) {
        ep.mark_blocked();
        any = true;
    }
    if let (true, Some(k)) = (any, ASSIST.kick.as_ref()) {
        k.wake();
    }
}

/// Longest wait of a send held back for its burst (`ep/hold.rs`) when the
/// application makes no call, ns. The application's next call flushes it
/// sooner; this is for the rank that posts its sends and computes. Each
/// hold the thread must watch costs it a wake-up or two, taken from the
/// application's CPU: IMB Uniband of 8 bytes across 2 hosts (a burst every
/// ~45 us) ran at 1.17 M messages/s with a bound of 50 us, 1.23 M with 200,
/// 1.35 M with 500 and 1.28 M without any wake-up (n=4, noisy).
pub const HOLD_BOUND_NS: u64 = 200_000;

/// An endpoint began holding sends at `since_ns`: wake the thread if it
/// would sleep past the bound (one system call per burst at most).
pub fn held(since_ns: u64) {
    if ASSIST.wake_at.load(Ordering::SeqCst) > since_ns + HOLD_BOUND_NS {
        if let Some(k) = ASSIST.kick.as_ref() {
            k.wake();
        }
    }
}

/// When an endpoint's held sends are due for a flush, ns (None = none held).
fn held_due(ep: &EpCore) -> Option<u64> {
    match ep.held_ns() {
        0 => None,
        t => Some(t + HOLD_BOUND_NS),
    }
}

/// How long an endpoint may go without an application call before the assist
/// thread steps in, ns (0 = never).
pub fn idle_ns() -> u64 {
    params::int_or("assist_us", 1000, 0, 60_000_000) as u64 * 1000
}

/// How long an FI_PROGRESS_AUTO endpoint may go without an application call
/// before the assist thread progresses it, ns.
pub const AUTO_IDLE_NS: u64 = 100_000;

/// The assist delay of an endpoint opened with these domain attributes, ns:
/// `AUTO_IDLE_NS` (or the shorter `idle_ns`) for automatic data progress,
/// `idle_ns` otherwise; 0 when the assist is off (getinfo then refuses
/// FI_PROGRESS_AUTO).
pub fn idle_ns_for(domain_attr: Option<&sys::fi_domain_attr>) -> u64 {
    let base = idle_ns();
    let auto = domain_attr.is_some_and(|d| d.data_progress == FI_PROGRESS_AUTO);
    if auto && base != 0 {
        base.min(AUTO_IDLE_NS)
    } else {
        base
    }
}

/// Watch `ep` (called when it is enabled); starts the thread on first use.
pub fn register(ep: &Arc<EpCore>) {
    if ep.assist_idle_ns == 0 {
        return;
    }
    ASSIST.eps.lock().push(Arc::downgrade(ep));
    let mut t = ASSIST.thread.lock();
    if t.is_none() && !ASSIST.stop.load(Ordering::Acquire) {
        match std::thread::Builder::new()
            .name("spray-assist".into())
            .spawn(run)
        {
            Ok(h) => *t = Some(h),
            Err(e) => log::warn(&format!("cannot start the progress assist thread: {e}")),
        }
    }
}

/// How long `shutdown` waits for the thread to finish, at most.
const JOIN_LIMIT: Duration = Duration::from_secs(2);

/// Stop the thread (provider cleanup, before libfabric unloads us).
///
/// libfabric runs cleanup from its destructor, on whichever thread called
/// `exit()`, possibly from a signal handler; so this never joins the calling
/// thread, never blocks on a lock the interrupted code may hold, and never
/// waits without bound.
pub fn shutdown() {
    ASSIST.stop.store(true, Ordering::Release);
    // A handler may have interrupted `register` on this very thread, with the
    // lock held: wait briefly, never for good.
    let Some(mut slot) = ASSIST.thread.try_lock_for(Duration::from_millis(100)) else {
        return;
    };
    let Some(h) = slot.take() else { return };
    drop(slot);
    // Compared by pthread id: at exit the calling thread's Rust thread-locals
    // (`thread::current`) may already be gone.
    // SAFETY: pthread_self and pthread_equal have no preconditions.
    if unsafe { libc::pthread_equal(h.as_pthread_t(), libc::pthread_self()) } != 0 {
        // A signal handler called exit() on the assist thread itself: it never
        // returns into `run`. Joining it here would be joining ourselves
        // (EDEADLK, a panic). Dropping the handle detaches it.
        return;
    }
    let start = Instant::now();
    while !h.is_finished() {
        if start.elapsed() > JOIN_LIMIT {
            // It waits for a lock that the thread now exiting holds (a handler
            // interrupted it inside an endpoint call) and will never get it.
            log::warn("the progress assist thread did not stop; leaving it");
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = h.join();
}

fn run() {
    /// Longest sleep: how soon an endpoint that just went idle is noticed.
    const TICK_NS: u64 = 1_000_000;
    let mut fds: Vec<libc::pollfd> = Vec::new();
    while !ASSIST.stop.load(Ordering::Acquire) {
        let eps: Vec<Arc<EpCore>> = {
            let mut list = ASSIST.eps.lock();
            list.retain(|w| w.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        let now = clock::now_ns();
        let mut limit = TICK_NS;
        fds.clear();
        if stats::periodic_due(now) {
            // A short blocking lock: a busy application must not starve its
            // endpoint's statistics.
            for ep in &eps {
                ep.state.lock().dump_stats("periodic");
            }
        }
        for ep in &eps {
            if let Some(due) = held_due(ep) {
                if due > now {
                    limit = limit.min(due - now);
                } else if let Some(mut st) = ep.state.try_lock() {
                    st.progress();
                    ep.sync_held(&mut st);
                } else {
                    // The application is inside a call, which flushes.
                    limit = limit.min(HOLD_BOUND_NS);
                }
            }
            let quiet = now.saturating_sub(ep.last_app_ns());
            if quiet < ep.assist_idle_ns {
                // Wake when it would have been quiet long enough (for
                // automatic progress that is sooner than the tick).
                limit = limit.min(ep.assist_idle_ns - quiet);
                continue;
            }
            let Some(mut st) = ep.state.try_lock() else {
                continue;
            };
            st.progress();
            if let Some(t) = st.next_timer_ns() {
                limit = limit.min(t.saturating_sub(clock::now_ns()));
            }
            if let Some(fd) = st.rx_fd() {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
        }
        if let Some(k) = ASSIST.kick.as_ref() {
            fds.push(libc::pollfd {
                fd: k.fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // Announce the sleep, then look again for holds that began while we
        // scanned: a post either sees this deadline (and kicks) or its hold
        // is seen here (both sides SeqCst).
        let now = clock::now_ns();
        ASSIST.wake_at.store(now + limit, Ordering::SeqCst);
        for due in eps.iter().filter_map(|ep| held_due(ep)) {
            limit = limit.min(due.saturating_sub(now));
        }
        // Do not keep endpoints alive while sleeping.
        drop(eps);
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: limit as libc::c_long,
        };
        // SAFETY: fds is a valid array of fds.len() pollfds (possibly empty);
        // ts a valid timespec below one second. A descriptor closed meanwhile
        // only makes ppoll report POLLNVAL.
        unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        ASSIST.wake_at.store(0, Ordering::SeqCst);
        if let Some(k) = ASSIST.kick.as_ref() {
            k.drain();
        }
    }
}
