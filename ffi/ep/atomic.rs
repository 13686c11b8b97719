//! Atomic data calls (`fi_ops_atomic`): plain, fetching and compare atomics in
//! their buffer, vector, msg and inject forms, and the `*valid` queries.
#![allow(clippy::too_many_arguments)]

use std::net::SocketAddr;
use std::os::raw::{c_int, c_void};
use std::sync::OnceLock;

// The op and datatype tables are the provider's, indexed by the libfabric enum values
// (the same codes travel on the wire: PROTOCOL.md §10).
use spray::msg::atomic::{ATOMIC_OPS as OPS, ATOMIC_TYPES as TYPES};
use spray::msg::{atomic_valid, AtomicCall, AtomicOp, AtomicType, RmaKind};
use spray::{Config, Engine, EpMode, UserBuf};

use crate::consts::*;
use crate::ep::endpoint::with_state;
use crate::ep::state::{EpState, Errno};
use crate::io::buf::FfiBuf;
use crate::limits::IOV_LIMIT;
use crate::{check, iface, sys};

/// `-FI_EOPNOTSUPP`: a datatype / operation spray does not offer.
pub const EOPNOTSUPP: c_int = -(sys::FI_EOPNOTSUPP as c_int);

/// The endpoint's `fi_ops_atomic` (RDM endpoints).
pub static ATOMIC_OPS: sys::fi_ops_atomic = sys::fi_ops_atomic {
    size: std::mem::size_of::<sys::fi_ops_atomic>(),
    write: Some(write),
    writev: Some(writev),
    writemsg: Some(writemsg),
    inject: Some(inject),
    readwrite: Some(readwrite),
    readwritev: Some(readwritev),
    readwritemsg: Some(readwritemsg),
    compwrite: Some(compwrite),
    compwritev: Some(compwritev),
    compwritemsg: Some(compwritemsg),
    writevalid: Some(writevalid),
    readwritevalid: Some(readwritevalid),
    compwritevalid: Some(compwritevalid),
};

/// `enum fi_datatype` → ours: complex, long double and 128-bit types exist but are
/// not offered (`-FI_EOPNOTSUPP`); anything else is not a datatype (`-FI_EINVAL`).
pub fn dt_of(dt: sys::fi_datatype) -> Result<AtomicType, c_int> {
    match TYPES.get(dt as usize) {
        Some(t) => Ok(*t),
        None if dt <= sys::fi_datatype_FI_UINT128 => Err(EOPNOTSUPP),
        None => Err(err::EINVAL),
    }
}

/// `enum fi_op` → ours (`-FI_EINVAL` for a value that is no point-to-point op).
pub fn op_of(op: sys::fi_op) -> Result<AtomicOp, c_int> {
    OPS.get(op as usize).copied().ok_or(err::EINVAL)
}

/// The kind of call `fi_query_atomic` flags ask about.
pub fn call_of(flags: u64) -> AtomicCall {
    if flags & sys::FI_COMPARE_ATOMIC != 0 {
        AtomicCall::Compare
    } else if flags & sys::FI_FETCH_ATOMIC != 0 {
        AtomicCall::Fetch
    } else {
        AtomicCall::Plain
    }
}

/// Map and check a datatype / op pair for `call` (`-FI_EOPNOTSUPP` when spray
/// does not offer it).
pub fn check(
    dt: sys::fi_datatype,
    op: sys::fi_op,
    call: AtomicCall,
) -> Result<(AtomicOp, AtomicType), c_int> {
    let t = dt_of(dt)?;
    let o = op_of(op)?;
    if atomic_valid(o, t, call) {
        Ok((o, t))
    } else {
        Err(EOPNOTSUPP)
    }
}

/// Largest element count of one atomic before an endpoint exists (`fi_query_atomic`):
/// what an engine for the default interface's datagram size allows.
pub fn default_max_count(t: AtomicType, call: AtomicCall) -> usize {
    static LIMITS: OnceLock<[(usize, usize); 10]> = OnceLock::new();
    let lim = LIMITS.get_or_init(|| {
        let nic = iface::choose_v4();
        let mut cfg = Config::new(EpMode::Rdm, SocketAddr::new(nic.ip, 0));
        cfg.max_datagram = iface::max_datagram(&nic);
        let e: Engine<FfiBuf> = Engine::new(cfg);
        TYPES.map(|t| (e.max_atomic_count(t, false), e.max_atomic_count(t, true)))
    });
    let i = TYPES.iter().position(|x| *x == t).unwrap_or(0);
    if call == AtomicCall::Compare {
        lim[i].1
    } else {
        lim[i].0
    }
}

impl EpState {
    /// Largest element count of one atomic on this endpoint.
    fn max_atomic(&self, t: AtomicType, call: AtomicCall) -> usize {
        match &self.run {
            Some(r) => r.engine.max_atomic_count(t, call == AtomicCall::Compare),
            None => default_max_count(t, call),
        }
    }
}

/// C iovecs over `n` `fi_ioc`s of `size`-byte elements (`None` if too many, NULL,
/// or overflowing).
///
/// # Safety
/// `ioc` is NULL or points to `n` entries.
unsafe fn iovecs(
    ioc: *const sys::fi_ioc,
    n: usize,
    size: usize,
) -> Option<([libc::iovec; IOV_LIMIT], usize)> {
    if n > IOV_LIMIT || (n > 0 && ioc.is_null()) {
        return None;
    }
    let mut out = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; IOV_LIMIT];
    for (i, o) in out.iter_mut().enumerate().take(n) {
        // SAFETY: i < n entries (caller).
        let c = unsafe { *ioc.add(i) };
        *o = libc::iovec {
            iov_base: c.addr,
            iov_len: c.count.checked_mul(size)?,
        };
    }
    Some((out, n))
}

/// A buffer over `n` `fi_ioc`s (see `iovecs`).
///
/// # Safety
/// As `iovecs`; the memory stays valid until the operation completes.
unsafe fn ioc_buf(ioc: *const sys::fi_ioc, n: usize, size: usize) -> Option<FfiBuf> {
    // SAFETY: forwarded.
    let (v, n) = unsafe { iovecs(ioc, n, size) }?;
    // SAFETY: forwarded.
    unsafe { FfiBuf::from_iov(v.as_ptr(), n) }
}

/// What an atomic call hands the common body.
struct Call {
    dest: u64,
    key: u64,
    addr: u64,
    /// Elements the target range holds (at least the operand count).
    remote_count: usize,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: u64,
    flags: u64,
    report: bool,
}

impl Call {
    /// A call of the plain (non-msg) API: the endpoint's default transmit op
    /// flags, a CQ entry per the usual rules.
    #[allow(clippy::too_many_arguments)]
    fn default_flags(
        st: &mut EpState,
        dest: u64,
        addr: u64,
        key: u64,
        remote_count: usize,
        dt: sys::fi_datatype,
        op: sys::fi_op,
        context: *mut c_void,
    ) -> Call {
        Call {
            dest,
            key,
            addr,
            remote_count,
            dt,
            op,
            context: context as u64,
            flags: *st.op_flags(false),
            report: true,
        }
    }
}

/// Check and post one atomic. `operands` is `None` when the application passed
/// no operand buffer (allowed for `FI_ATOMIC_READ`), then `count` elements of zeros
/// stand in.
fn post(
    st: &mut EpState,
    c: Call,
    call: AtomicCall,
    operands: Option<FfiBuf>,
    count: usize,
    compare: Option<FfiBuf>,
    result: Option<FfiBuf>,
) -> Errno {
    let (op, dt) = match check(c.dt, c.op, call) {
        Ok(x) => x,
        Err(e) => return e as isize,
    };
    let size = dt.size();
    let Some(bytes) = count.checked_mul(size) else {
        return err::EINVAL as isize;
    };
    if count == 0 || c.remote_count < count || count > st.max_atomic(dt, call) {
        return err::EINVAL as isize;
    }
    let operands = match operands {
        Some(b) if b.len() == bytes => b,
        None if op == AtomicOp::Read => FfiBuf::Owned(vec![0; bytes]),
        _ => return err::EINVAL as isize,
    };
    let kind = match (call, compare, result) {
        (AtomicCall::Plain, None, None) => RmaKind::Atomic { op, dt },
        (AtomicCall::Fetch, None, Some(result)) if result.len() >= bytes => {
            RmaKind::FetchAtomic { op, dt, result }
        }
        (AtomicCall::Compare, Some(compare), Some(result))
            if result.len() >= bytes && compare.len() >= bytes =>
        {
            RmaKind::CompareAtomic {
                op,
                dt,
                compare,
                result,
            }
        }
        _ => return err::EINVAL as isize,
    };
    st.post_rma(
        c.dest, kind, operands, c.key, c.addr, c.context, c.flags, c.report,
    )
}

/// Element size of `dt`, or 0 when it is no datatype we offer (the checks in
/// `post` then refuse the call).
fn size_of(dt: sys::fi_datatype) -> usize {
    dt_of(dt).map_or(0, AtomicType::size)
}

/// The operand count of a single-buffer call, `None` for a NULL buffer.
///
/// # Safety
/// `buf` is NULL or valid for `count` elements of `dt` until completion.
unsafe fn one(buf: *const c_void, count: usize, dt: sys::fi_datatype) -> Option<FfiBuf> {
    if buf.is_null() {
        return None;
    }
    let ioc = sys::fi_ioc {
        addr: buf as *mut c_void,
        count,
    };
    // SAFETY: forwarded.
    unsafe { ioc_buf(&ioc, 1, size_of(dt)) }
}

/// The remote target of a msg-form call: exactly one `fi_rma_ioc`.
///
/// # Safety
/// `rma` is NULL or points to `n` entries.
unsafe fn target(rma: *const sys::fi_rma_ioc, n: usize) -> Option<(u64, u64, usize)> {
    if n != 1 || rma.is_null() {
        return None;
    }
    // SAFETY: one entry (checked).
    let r = unsafe { &*rma };
    Some((r.key, r.addr, r.count))
}

/// Total element count of `n` iocs (0 when invalid; the call is then refused).
///
/// # Safety
/// `ioc` is NULL or points to `n` entries.
unsafe fn ioc_count(ioc: *const sys::fi_ioc, n: usize) -> usize {
    if ioc.is_null() || n > IOV_LIMIT {
        return 0;
    }
    // SAFETY: n entries (caller).
    (0..n).map(|i| unsafe { (*ioc.add(i)).count }).sum()
}

unsafe extern "C" fn write(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    dest: u64,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let c = Call::default_flags(st, dest, addr, key, count, dt, op, context);
        // SAFETY: buf valid for count elements until completion.
        let b = unsafe { one(buf, count, dt) };
        post(st, c, AtomicCall::Plain, b, count, None, None)
    })
}

unsafe extern "C" fn writev(
    ep: *mut sys::fid_ep,
    iov: *const sys::fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    dest: u64,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        // SAFETY: iov holds count entries valid until completion.
        let (n, b) = unsafe { (ioc_count(iov, count), ioc_buf(iov, count, size_of(dt))) };
        let c = Call::default_flags(st, dest, addr, key, n, dt, op, context);
        post(st, c, AtomicCall::Plain, b, n, None, None)
    })
}

unsafe extern "C" fn inject(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    count: usize,
    dest: u64,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
) -> isize {
    with_state(ep, |st| {
        let c = Call {
            dest,
            key,
            addr,
            remote_count: count,
            dt,
            op,
            context: 0,
            flags: FI_INJECT,
            report: false,
        };
        // SAFETY: buf valid for count elements during the call; FI_INJECT copies it.
        let b = unsafe { one(buf, count, dt) };
        post(st, c, AtomicCall::Plain, b, count, None, None)
    })
}

/// The common body of the three msg forms.
///
/// # Safety
/// `msg` NULL or valid; the ioc arrays hold their counts, valid until completion.
unsafe fn msg_call(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_atomic,
    compare: (*const sys::fi_ioc, usize),
    result: (*const sys::fi_ioc, usize),
    flags: u64,
    call: AtomicCall,
) -> isize {
    with_state(ep, |st| {
        if let Err(e) = check::flags(flags, check::TX_FLAGS) {
            return e;
        }
        // SAFETY: msg NULL or valid.
        let Some(m) = (unsafe { msg.as_ref() }) else {
            return err::EINVAL as isize;
        };
        // SAFETY: rma_iov holds rma_iov_count entries.
        let Some((key, addr, remote_count)) = (unsafe { target(m.rma_iov, m.rma_iov_count) })
        else {
            return err::EINVAL as isize;
        };
        let size = size_of(m.datatype);
        // SAFETY: each array holds its count of entries valid until completion.
        let (n, b, cmp, res) = unsafe {
            (
                ioc_count(m.msg_iov, m.iov_count),
                ioc_buf(m.msg_iov, m.iov_count, size),
                ioc_buf(compare.0, compare.1, size),
                ioc_buf(result.0, result.1, size),
            )
        };
        // An operand list of NULL addresses (FI_ATOMIC_READ) is "no operands".
        let b = b.filter(|b| !b.base().is_null() || b.is_empty());
        let c = Call {
            dest: m.addr,
            key,
            addr,
            remote_count,
            dt: m.datatype,
            op: m.op,
            context: m.context as u64,
            flags,
            report: true,
        };
        let cmp = if call == AtomicCall::Compare {
            cmp
        } else {
            None
        };
        let res = if call == AtomicCall::Plain { None } else { res };
        post(st, c, call, b, n, cmp, res)
    })
}

unsafe extern "C" fn writemsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_atomic,
    flags: u64,
) -> isize {
    let none = (std::ptr::null(), 0);
    // SAFETY: forwarded API contract.
    unsafe { msg_call(ep, msg, none, none, flags, AtomicCall::Plain) }
}

unsafe extern "C" fn readwrite(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    result: *mut c_void,
    _result_desc: *mut c_void,
    dest: u64,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let c = Call::default_flags(st, dest, addr, key, count, dt, op, context);
        // SAFETY: buf (unless NULL) and result valid for count elements until completion.
        let (b, r) = unsafe { (one(buf, count, dt), one(result, count, dt)) };
        post(st, c, AtomicCall::Fetch, b, count, None, r)
    })
}

unsafe extern "C" fn readwritev(
    ep: *mut sys::fid_ep,
    iov: *const sys::fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    resultv: *mut sys::fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    dest: u64,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let size = size_of(dt);
        // SAFETY: the arrays hold their counts of entries valid until completion.
        let (n, b, r) = unsafe {
            (
                ioc_count(iov, count),
                ioc_buf(iov, count, size),
                ioc_buf(resultv, result_count, size),
            )
        };
        let b = b.filter(|b| !b.base().is_null() || b.is_empty());
        let c = Call::default_flags(st, dest, addr, key, n, dt, op, context);
        post(st, c, AtomicCall::Fetch, b, n, None, r)
    })
}

unsafe extern "C" fn readwritemsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_atomic,
    resultv: *mut sys::fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    let none = (std::ptr::null(), 0);
    // SAFETY: forwarded API contract.
    unsafe {
        msg_call(
            ep,
            msg,
            none,
            (resultv, result_count),
            flags,
            AtomicCall::Fetch,
        )
    }
}

unsafe extern "C" fn compwrite(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    compare: *const c_void,
    _compare_desc: *mut c_void,
    result: *mut c_void,
    _result_desc: *mut c_void,
    dest: u64,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let c = Call::default_flags(st, dest, addr, key, count, dt, op, context);
        // SAFETY: the three buffers are valid for count elements until completion.
        let (b, k, r) = unsafe {
            (
                one(buf, count, dt),
                one(compare, count, dt),
                one(result, count, dt),
            )
        };
        post(st, c, AtomicCall::Compare, b, count, k, r)
    })
}

unsafe extern "C" fn compwritev(
    ep: *mut sys::fid_ep,
    iov: *const sys::fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    comparev: *const sys::fi_ioc,
    _compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut sys::fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    dest: u64,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let size = size_of(dt);
        // SAFETY: the arrays hold their counts of entries valid until completion.
        let (n, b, k, r) = unsafe {
            (
                ioc_count(iov, count),
                ioc_buf(iov, count, size),
                ioc_buf(comparev, compare_count, size),
                ioc_buf(resultv, result_count, size),
            )
        };
        let c = Call::default_flags(st, dest, addr, key, n, dt, op, context);
        post(st, c, AtomicCall::Compare, b, n, k, r)
    })
}

unsafe extern "C" fn compwritemsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_atomic,
    comparev: *const sys::fi_ioc,
    _compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut sys::fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    // SAFETY: forwarded API contract.
    unsafe {
        msg_call(
            ep,
            msg,
            (comparev, compare_count),
            (resultv, result_count),
            flags,
            AtomicCall::Compare,
        )
    }
}

/// The `*valid` queries: 0 and the largest count, or `-FI_EOPNOTSUPP`.
fn valid(
    ep: *mut sys::fid_ep,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    count: *mut usize,
    call: AtomicCall,
) -> c_int {
    with_state(ep, |st| {
        if count.is_null() {
            return err::EINVAL as isize;
        }
        match check(dt, op, call) {
            Err(e) => e as isize,
            Ok((_, t)) => {
                let n = st.max_atomic(t, call);
                // SAFETY: count checked non-NULL; the caller passes a writable size_t.
                unsafe { *count = n };
                0
            }
        }
    }) as c_int
}

unsafe extern "C" fn writevalid(
    ep: *mut sys::fid_ep,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    count: *mut usize,
) -> c_int {
    valid(ep, dt, op, count, AtomicCall::Plain)
}

unsafe extern "C" fn readwritevalid(
    ep: *mut sys::fid_ep,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    count: *mut usize,
) -> c_int {
    valid(ep, dt, op, count, AtomicCall::Fetch)
}

unsafe extern "C" fn compwritevalid(
    ep: *mut sys::fid_ep,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    count: *mut usize,
) -> c_int {
    valid(ep, dt, op, count, AtomicCall::Compare)
}
