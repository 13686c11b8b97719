//! Static ops tables for what an object does not do: RMA and atomics on
//! DGRAM endpoints only (RDM endpoints implement both, in `ep/rma.rs` and
//! `ep/atomic.rs`; `ep/endpoint.rs` picks the tables by endpoint type),
//! connection management (spray is connectionless) and collectives. Every
//! entry returns `-FI_ENOSYS`; nothing crashes.
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use crate::consts::err::ENOSYS;
use crate::sys::*;

/// Define `extern "C"` functions that ignore their arguments and return -FI_ENOSYS.
macro_rules! nosys {
    ($($name:ident ( $($t:ty),* ) -> $r:ty;)*) => {$(
        unsafe extern "C" fn $name($(_: $t),*) -> $r { ENOSYS as $r }
    )*};
}

nosys! {
    rma_read(*mut fid_ep, *mut c_void, usize, *mut c_void, fi_addr_t, u64, u64, *mut c_void) -> isize;
    rma_readv(*mut fid_ep, *const iovec, *mut *mut c_void, usize, fi_addr_t, u64, u64, *mut c_void) -> isize;
    rma_msg(*mut fid_ep, *const fi_msg_rma, u64) -> isize;
    rma_write(*mut fid_ep, *const c_void, usize, *mut c_void, fi_addr_t, u64, u64, *mut c_void) -> isize;
    rma_writev(*mut fid_ep, *const iovec, *mut *mut c_void, usize, fi_addr_t, u64, u64, *mut c_void) -> isize;
    rma_inject(*mut fid_ep, *const c_void, usize, fi_addr_t, u64, u64) -> isize;
    rma_writedata(*mut fid_ep, *const c_void, usize, *mut c_void, u64, fi_addr_t, u64, u64, *mut c_void) -> isize;
    rma_injectdata(*mut fid_ep, *const c_void, usize, u64, fi_addr_t, u64, u64) -> isize;

    at_write(*mut fid_ep, *const c_void, usize, *mut c_void, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize;
    at_writev(*mut fid_ep, *const fi_ioc, *mut *mut c_void, usize, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize;
    at_writemsg(*mut fid_ep, *const fi_msg_atomic, u64) -> isize;
    at_inject(*mut fid_ep, *const c_void, usize, fi_addr_t, u64, u64, fi_datatype, fi_op) -> isize;
    at_readwrite(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize;
    at_readwritev(*mut fid_ep, *const fi_ioc, *mut *mut c_void, usize, *mut fi_ioc, *mut *mut c_void, usize, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize;
    at_readwritemsg(*mut fid_ep, *const fi_msg_atomic, *mut fi_ioc, *mut *mut c_void, usize, u64) -> isize;
    at_compwrite(*mut fid_ep, *const c_void, usize, *mut c_void, *const c_void, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize;
    at_compwritev(*mut fid_ep, *const fi_ioc, *mut *mut c_void, usize, *const fi_ioc, *mut *mut c_void, usize, *mut fi_ioc, *mut *mut c_void, usize, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize;
    at_compwritemsg(*mut fid_ep, *const fi_msg_atomic, *const fi_ioc, *mut *mut c_void, usize, *mut fi_ioc, *mut *mut c_void, usize, u64) -> isize;
    at_valid(*mut fid_ep, fi_datatype, fi_op, *mut usize) -> c_int;

    cm_getpeer(*mut fid_ep, *mut c_void, *mut usize) -> c_int;
    cm_connect(*mut fid_ep, *const c_void, *const c_void, usize) -> c_int;
    cm_listen(*mut fid_pep) -> c_int;
    cm_accept(*mut fid_ep, *const c_void, usize) -> c_int;
    cm_reject(*mut fid_pep, fid_t, *const c_void, usize) -> c_int;
    cm_shutdown(*mut fid_ep, u64) -> c_int;
    cm_join(*mut fid_ep, *const c_void, u64, *mut *mut fid_mc, *mut c_void) -> c_int;

    co_barrier(*mut fid_ep, fi_addr_t, *mut c_void) -> isize;
    co_broadcast(*mut fid_ep, *mut c_void, usize, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize;
    co_alltoall(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize;
    co_allreduce(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, fi_op, u64, *mut c_void) -> isize;
    co_reduce(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, fi_op, u64, *mut c_void) -> isize;
    co_scatter(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize;
    co_msg(*mut fid_ep, *const fi_msg_collective, *mut fi_ioc, *mut *mut c_void, usize, u64) -> isize;
    co_barrier2(*mut fid_ep, fi_addr_t, u64, *mut c_void) -> isize;

    // fi_ops.ops_open, ops_set, tostr, bind, control of every object.
    fid_ops_open(*mut fid, *const std::os::raw::c_char, u64, *mut *mut c_void, *mut c_void) -> c_int;
    fid_ops_set(*mut fid, *const std::os::raw::c_char, u64, *mut c_void, *mut c_void) -> c_int;
    fid_tostr(*const fid, *mut std::os::raw::c_char, usize) -> c_int;
    fid_bind(*mut fid, *mut fid, u64) -> c_int;
    fid_control(*mut fid, c_int, *mut c_void) -> c_int;
}

/// RMA on DGRAM endpoints: not offered (RDM endpoints use `ep::rma`).
pub static RMA: fi_ops_rma = fi_ops_rma {
    size: std::mem::size_of::<fi_ops_rma>(),
    read: Some(rma_read),
    readv: Some(rma_readv),
    readmsg: Some(rma_msg),
    write: Some(rma_write),
    writev: Some(rma_writev),
    writemsg: Some(rma_msg),
    inject: Some(rma_inject),
    writedata: Some(rma_writedata),
    injectdata: Some(rma_injectdata),
};

/// Atomics on DGRAM endpoints: not offered (RDM endpoints use `ep::atomic`).
pub static ATOMIC: fi_ops_atomic = fi_ops_atomic {
    size: std::mem::size_of::<fi_ops_atomic>(),
    write: Some(at_write),
    writev: Some(at_writev),
    writemsg: Some(at_writemsg),
    inject: Some(at_inject),
    readwrite: Some(at_readwrite),
    readwritev: Some(at_readwritev),
    readwritemsg: Some(at_readwritemsg),
    compwrite: Some(at_compwrite),
    compwritev: Some(at_compwritev),
    compwritemsg: Some(at_compwritemsg),
    writevalid: Some(at_valid),
    readwritevalid: Some(at_valid),
    compwritevalid: Some(at_valid),
};

/// Collectives: not offered.
pub static COLLECTIVE: fi_ops_collective = fi_ops_collective {
    size: std::mem::size_of::<fi_ops_collective>(),
    barrier: Some(co_barrier),
    broadcast: Some(co_broadcast),
    alltoall: Some(co_alltoall),
    allreduce: Some(co_allreduce),
    allgather: Some(co_alltoall),
    reduce_scatter: Some(co_allreduce),
    reduce: Some(co_reduce),
    scatter: Some(co_scatter),
    gather: Some(co_scatter),
    msg: Some(co_msg),
    barrier2: Some(co_barrier2),
};

/// Connection management entries we do not serve (RDM/DGRAM are connectionless).
pub const CM_GETPEER: Option<unsafe extern "C" fn(*mut fid_ep, *mut c_void, *mut usize) -> c_int> =
    Some(cm_getpeer);
pub const CM_CONNECT: Option<
    unsafe extern "C" fn(*mut fid_ep, *const c_void, *const c_void, usize) -> c_int,
> = Some(cm_connect);
pub const CM_LISTEN: Option<unsafe extern "C" fn(*mut fid_pep) -> c_int> = Some(cm_listen);
pub const CM_ACCEPT: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize) -> c_int> =
    Some(cm_accept);
pub const CM_REJECT: Option<
    unsafe extern "C" fn(*mut fid_pep, fid_t, *const c_void, usize) -> c_int,
> = Some(cm_reject);
pub const CM_SHUTDOWN: Option<unsafe extern "C" fn(*mut fid_ep, u64) -> c_int> = Some(cm_shutdown);
pub const CM_JOIN: Option<
    unsafe extern "C" fn(*mut fid_ep, *const c_void, u64, *mut *mut fid_mc, *mut c_void) -> c_int,
> = Some(cm_join);

/// `fi_ops` for an object class: its own close, optional bind/control, the rest ENOSYS.
pub const fn fid_ops(
    close: unsafe extern "C" fn(*mut fid) -> c_int,
    bind: Option<unsafe extern "C" fn(*mut fid, *mut fid, u64) -> c_int>,
    control: Option<unsafe extern "C" fn(*mut fid, c_int, *mut c_void) -> c_int>,
) -> fi_ops {
    fi_ops {
        size: std::mem::size_of::<fi_ops>(),
        close: Some(close),
        bind: match bind {
            Some(b) => Some(b),
            None => Some(fid_bind),
        },
        control: match control {
            Some(c) => Some(c),
            None => Some(fid_control),
        },
        ops_open: Some(fid_ops_open),
        tostr: Some(fid_tostr),
        ops_set: Some(fid_ops_set),
    }
}
