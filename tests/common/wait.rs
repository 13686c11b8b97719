//! Helpers of the blocking-wait tests (`ffi_wait.rs`, `ffi_waitset.rs`): CPU
//! clocks to show that a waiter sleeps, `FI_GETWAIT`, and a sender-side
//! progress loop.
#![allow(dead_code)]

use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

use spray_fi::sys;

use super::fab::{control, cq_read};

fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY (test): clock_gettime into a local.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the calling thread, ns.
pub fn thread_cpu_ns() -> u64 {
    cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process, ns.
pub fn process_cpu_ns() -> u64 {
    cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// `fi_control(FI_GETWAIT)`: (return code, the fd).
pub fn getwait<T>(fid: *mut T) -> (i32, c_int) {
    let mut fd: c_int = -1;
    let rc = control(
        fid,
        sys::FI_GETWAIT,
        (&mut fd as *mut c_int).cast::<c_void>(),
    );
    (rc, fd)
}

/// Keep an endpoint progressing through its CQ for `dur` (reads every
/// 200 us): the sender's side while the other side sleeps.
pub fn drive(cq: *mut sys::fid_cq, dur: Duration) {
    let t0 = Instant::now();
    let mut e = [sys::fi_cq_tagged_entry::default(); 4];
    while t0.elapsed() < dur {
        let _ = cq_read(cq, &mut e);
        std::thread::sleep(Duration::from_micros(200));
    }
}
