//! Endpoint control ops (`fi_ops_ep`: cancel, options) and naming (`fi_ops_cm`:
//! getname/setname; the connection calls are ENOSYS for connectionless endpoints).

use std::os::raw::{c_int, c_void};

use crate::consts::*;
use crate::ep::endpoint::{self, with_state};
use crate::{addr, guard, nosys, sys};

/// The endpoint's `fi_ops_ep`.
pub static EP_OPS: sys::fi_ops_ep = sys::fi_ops_ep {
    size: std::mem::size_of::<sys::fi_ops_ep>(),
    cancel: Some(cancel),
    getopt: Some(getopt),
    setopt: Some(setopt),
    tx_ctx: Some(tx_ctx),
    rx_ctx: Some(rx_ctx),
    rx_size_left: Some(rx_size_left),
    tx_size_left: Some(tx_size_left),
};

/// The endpoint's `fi_ops_cm`.
pub static CM_OPS: sys::fi_ops_cm = sys::fi_ops_cm {
    size: std::mem::size_of::<sys::fi_ops_cm>(),
    setname: Some(setname),
    getname: Some(getname),
    getpeer: nosys::CM_GETPEER,
    connect: nosys::CM_CONNECT,
    listen: nosys::CM_LISTEN,
    accept: nosys::CM_ACCEPT,
    reject: nosys::CM_REJECT,
    shutdown: nosys::CM_SHUTDOWN,
    join: nosys::CM_JOIN,
};

unsafe extern "C" fn cancel(fid: sys::fid_t, context: *mut c_void) -> isize {
    with_state(fid as *mut sys::fid_ep, |st| {
        if st.cancel(context as u64) {
            0
        } else {
            err::ENOENT as isize
        }
    })
}

unsafe extern "C" fn getopt(
    fid: sys::fid_t,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut usize,
) -> c_int {
    with_state(fid as *mut sys::fid_ep, |st| {
        if level != sys::FI_OPT_ENDPOINT as c_int {
            return err::ENOPROTOOPT as isize;
        }
        if name != sys::FI_OPT_MIN_MULTI_RECV as c_int {
            return err::ENOPROTOOPT as isize;
        }
        if val.is_null() || len.is_null() {
            return err::EINVAL as isize;
        }
        // SAFETY: len valid; val writable for *len bytes.
        unsafe {
            if *len < std::mem::size_of::<usize>() {
                *len = std::mem::size_of::<usize>();
                return err::ETOOSMALL as isize;
            }
            std::ptr::write_unaligned(val as *mut usize, st.min_multi_recv());
            *len = std::mem::size_of::<usize>();
        }
        0
    }) as c_int
}

unsafe extern "C" fn setopt(
    fid: sys::fid_t,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: usize,
) -> c_int {
    with_state(fid as *mut sys::fid_ep, |st| {
        if level != sys::FI_OPT_ENDPOINT as c_int || name != sys::FI_OPT_MIN_MULTI_RECV as c_int {
            // CUDA/HMEM and vendor options: not ours.
            return err::ENOPROTOOPT as isize;
        }
        if val.is_null() || len < std::mem::size_of::<usize>() {
            return err::EINVAL as isize;
        }
        // SAFETY: val readable for len >= size_of::<usize>() bytes.
        st.set_min_multi_recv(unsafe { std::ptr::read_unaligned(val as *const usize) });
        0
    }) as c_int
}

unsafe extern "C" fn tx_ctx(
    _: *mut sys::fid_ep,
    _: c_int,
    _: *mut sys::fi_tx_attr,
    _: *mut *mut sys::fid_ep,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}

unsafe extern "C" fn rx_ctx(
    _: *mut sys::fid_ep,
    _: c_int,
    _: *mut sys::fi_rx_attr,
    _: *mut *mut sys::fid_ep,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}

/// `fi_tx_size_left`: operations the transmit queue takes before `-FI_EAGAIN`.
unsafe extern "C" fn tx_size_left(ep: *mut sys::fid_ep) -> isize {
    with_state(ep, |st| st.room(true) as isize)
}

/// `fi_rx_size_left`: receives that may still be posted before `-FI_EAGAIN`.
unsafe extern "C" fn rx_size_left(ep: *mut sys::fid_ep) -> isize {
    with_state(ep, |st| st.room(false) as isize)
}

unsafe extern "C" fn getname(fid: sys::fid_t, out: *mut c_void, len: *mut usize) -> c_int {
    with_state(fid as *mut sys::fid_ep, |st| {
        if len.is_null() {
            return err::EINVAL as isize;
        }
        // SAFETY: out NULL or writable for *len bytes; len valid.
        if unsafe { addr::write_sockaddr(st.local, out, len) } {
            0
        } else {
            err::ETOOSMALL as isize
        }
    }) as c_int
}

unsafe extern "C" fn setname(fid: sys::fid_t, a: *mut c_void, len: usize) -> c_int {
    guard::int(|| {
        // SAFETY: a NULL or readable for len bytes.
        let Some(want) = (unsafe { addr::read_sockaddr(a, len) }) else {
            return err::EINVAL;
        };
        // SAFETY: fid from the application; validated by get.
        let Some(e) = (unsafe { endpoint::get(fid) }) else {
            return err::EINVAL;
        };
        let mut st = e.core.state.lock();
        if st.enabled() {
            return err::EOPBADSTATE;
        }
        if want == st.local {
            return 0;
        }
        if want.is_ipv6() != st.local.is_ipv6() {
            // The domain, its AV and the peers' names are of the endpoint's family.
            crate::log::warn(&format!(
                "fi_setname: {want} is not of the endpoint's address family ({})",
                st.local
            ));
            return err::EINVAL;
        }
        let opened = if st.rails().len() >= 2 {
            // An endpoint of several rails rebinds them all at the new port;
            // its main address stays rail 0's.
            let rails = st.rails().to_vec();
            if !want.ip().is_unspecified() && want.ip() != rails[0] {
                crate::log::warn(&format!(
                    "fi_setname: {want} is not the address of rail 0 ({})",
                    rails[0]
                ));
                return err::EINVAL;
            }
            let sockbuf = crate::params::get_size("sockbuf").unwrap_or(16 << 20);
            let per_rail = crate::io::sock::paths_per_rail(rails.len());
            crate::io::sock::open_rails(&rails, want.port(), false, per_rail, sockbuf)
        } else {
            crate::io::sock::open_configured(want, false)
        };
        match opened {
            Ok(s) => match st.set_local(s) {
                Ok(()) => 0,
                Err(e) => e as c_int,
            },
            Err(e) => e,
        }
    })
}
