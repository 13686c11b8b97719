//! The panic and error boundary: every export and trampoline runs its body here.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::log;

/// Run `f`; if it panics, log and return `on_panic` instead of unwinding into C
/// (an unwind across `extern "C"` would abort the application).
pub fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            log::warn(&format!("internal error caught at the C boundary: {what}"));
            on_panic
        }
    }
}

/// `guard` for calls returning a C `int` error code (panic → `-FI_EOTHER`).
pub fn int(f: impl FnOnce() -> i32) -> i32 {
    guard(crate::consts::err::EOTHER, f)
}

/// `guard` for calls returning `ssize_t` (panic → `-FI_EOTHER`).
pub fn ssize(f: impl FnOnce() -> isize) -> isize {
    guard(crate::consts::err::EOTHER as isize, f)
}
