//! Logging through libfabric's own `fi_log`, so `FI_LOG_LEVEL` controls spray's output.

use std::ffi::CString;

use crate::prov;
use crate::sys;

fn emit(level: sys::fi_log_level, subsys: sys::fi_log_subsys, msg: &str) {
    let prov = prov::provider();
    // SAFETY: `prov` points to our static, initialised provider; fi_log_enabled only reads it.
    if unsafe { sys::fi_log_enabled(prov, level, subsys) } == 0 {
        return;
    }
    let Ok(text) = CString::new(msg.replace('\0', " ")) else {
        return;
    };
    // SAFETY: fmt is the literal "%s" and its one argument a valid NUL-terminated string
    // that outlives the call; func is a static NUL-terminated string.
    unsafe {
        sys::fi_log(
            prov,
            level,
            subsys,
            b"spray\0".as_ptr().cast(),
            0,
            b"%s\n\0".as_ptr().cast(),
            text.as_ptr(),
        );
    }
}

/// Log a warning (shown by default).
pub fn warn(msg: &str) {
    emit(
        sys::fi_log_level_FI_LOG_WARN,
        sys::fi_log_subsys_FI_LOG_CORE,
        msg,
    );
}

/// Log an informational line (`FI_LOG_LEVEL=info`).
pub fn info(msg: &str) {
    emit(
        sys::fi_log_level_FI_LOG_INFO,
        sys::fi_log_subsys_FI_LOG_CORE,
        msg,
    );
}
