//! One-sided data calls (`fi_ops_rma`: read, write, writedata, inject forms)
//! and the endpoint-state half every RMA and atomic call shares: posting a
//! `RmaOp` and turning its completions into CQ entries and counter increments.

use std::os::raw::c_void;

use spray::msg::{CompKind, Completion, RmaKind, RmaOp};
use spray::UserBuf;

use crate::consts::*;
use crate::ep::endpoint::with_state;
use crate::ep::msg::iov1;
use crate::ep::state::{op_result, pos_err, EpState, Errno};
use crate::fabric::cq::{Entry, ErrEntry};
use crate::io::buf::FfiBuf;
use crate::{check, sys};

/// The endpoint's `fi_ops_rma` (RDM endpoints).
pub static RMA_OPS: sys::fi_ops_rma = sys::fi_ops_rma {
    size: std::mem::size_of::<sys::fi_ops_rma>(),
    read: Some(read),
    readv: Some(readv),
    readmsg: Some(readmsg),
    write: Some(write),
    writev: Some(writev),
    writemsg: Some(writemsg),
    inject: Some(inject),
    writedata: Some(writedata),
    injectdata: Some(injectdata),
};

impl EpState {
    /// Post a one-sided operation on `buf` (source of a write / operands of an
    /// atomic, destination of a read) against `key`/`addr` at `dest`.
    /// `FI_INJECT` copies the source now; `report` asks for a CQ entry.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_rma(
        &mut self,
        dest: u64,
        kind: RmaKind<FfiBuf>,
        buf: FfiBuf,
        key: u64,
        addr: u64,
        context: u64,
        flags: u64,
        report: bool,
    ) -> Errno {
        if self.run.is_none() {
            return err::EOPBADSTATE as isize;
        }
        if flags & FI_FENCE != 0 {
            // A fenced op starts only after every earlier op of this endpoint completed
            // (RMA and atomics are unordered in spray). Until then the caller retries;
            // nothing later can overtake it, since it is not posted either.
            self.progress();
            if self
                .run
                .as_ref()
                .is_some_and(|r| r.engine.pending_initiated() > 0)
            {
                return err::EAGAIN as isize;
            }
        }
        let peer = match self.peer_of(dest) {
            Ok(p) => p,
            Err(e) => return e,
        };
        if let Err(e) = self.check_source(&buf) {
            return e;
        }
        if !self.make_room(true) {
            return err::EAGAIN as isize;
        }
        let fetch = matches!(
            kind,
            RmaKind::FetchAtomic { .. } | RmaKind::CompareAtomic { .. }
        );
        let buf = if flags & FI_INJECT != 0 {
            // Only data leaving this process can be injected: reads and fetching
            // atomics write into application memory later.
            if fetch || matches!(kind, RmaKind::Read) {
                return err::EINVAL as isize;
            }
            match self.inject_copy(buf) {
                Ok(b) => b,
                Err(e) => return e,
            }
        } else {
            buf
        };
        let report = report && (!self.tx_selective || flags & FI_COMPLETION != 0);
        let op = RmaOp {
            peer,
            kind,
            buf,
            key,
            addr,
            context,
            report,
        };
        if fetch {
            *self.fetch_ctx.entry(context).or_insert(0) += 1;
        }
        let Some(run) = &mut self.run else {
            return err::EOPBADSTATE as isize;
        };
        let rc = run.engine.post_rma(op);
        if rc.is_err() && fetch {
            self.untrack_fetch(context);
        }
        if flags & FI_MORE == 0 || rc.is_err() {
            self.progress_after_post();
        }
        op_result(rc)
    }

    /// Forget one outstanding fetching atomic of `context`; true if there was one.
    fn untrack_fetch(&mut self, context: u64) -> bool {
        match self.fetch_ctx.get_mut(&context) {
            Some(n) if *n > 1 => {
                *n -= 1;
                true
            }
            Some(_) => {
                self.fetch_ctx.remove(&context);
                true
            }
            None => false,
        }
    }

    /// CQ entry and counter increment of an RMA / atomic completion (initiator
    /// side) or of a remote write with CQ data (target side).
    pub(crate) fn complete_rma(&mut self, c: Completion<FfiBuf>) {
        if c.kind == CompKind::RemoteWrite {
            let src = c.src.map_or(FI_ADDR_NOTAVAIL, |p| self.fi_addr_of(p));
            let mut flags = FI_RMA | FI_REMOTE_WRITE;
            if c.data.is_some() {
                flags |= FI_REMOTE_CQ_DATA;
            }
            let e = Entry {
                ctx: 0,
                flags,
                len: c.len,
                buf: 0,
                data: c.data.unwrap_or(0),
                tag: 0,
                src,
            };
            if let Some(q) = &self.rx_cq {
                q.push(e);
            }
            return;
        }
        let read = match c.kind {
            CompKind::Read => true,
            CompKind::Atomic => self.untrack_fetch(c.context),
            _ => false,
        };
        let class = if c.kind == CompKind::Atomic {
            FI_ATOMIC
        } else {
            FI_RMA
        };
        let flags = class | if read { FI_READ } else { FI_WRITE };
        let (error, report, olen, len, context) = (c.error, c.report, c.olen, c.len, c.context);
        self.recycle(c.buf);
        let cntr = if read {
            &self.read_cntr
        } else {
            &self.write_cntr
        };
        let e = Entry {
            ctx: context,
            flags,
            len,
            buf: 0,
            data: 0,
            tag: 0,
            src: FI_ADDR_NOTAVAIL,
        };
        match error {
            None => {
                if let Some(k) = cntr {
                    k.inc();
                }
                if let (Some(q), true) = (&self.tx_cq, report) {
                    q.push(e);
                }
            }
            Some(why) => {
                if let Some(k) = cntr {
                    k.inc_err();
                }
                if let Some(q) = &self.tx_cq {
                    q.push_err(ErrEntry {
                        e,
                        olen,
                        err: pos_err(why),
                    });
                }
            }
        }
    }
}

/// The single remote target of a msg-form call: exactly one `fi_rma_iov` whose
/// length covers the `local` bytes.
///
/// # Safety
/// `rma_iov` is NULL or points to `count` entries.
unsafe fn one_target(
    rma_iov: *const sys::fi_rma_iov,
    count: usize,
    local: usize,
) -> Option<(u64, u64)> {
    if count != 1 || rma_iov.is_null() {
        return None;
    }
    // SAFETY: one entry (checked above, caller contract).
    let r = unsafe { &*rma_iov };
    (r.len >= local).then_some((r.key, r.addr))
}

/// Post a read or write over `iov[..count]` (the common body of every call).
///
/// # Safety
/// `iov` points to `count` iovecs valid until completion (until return with FI_INJECT).
#[allow(clippy::too_many_arguments)]
unsafe fn post(
    st: &mut EpState,
    iov: *const libc::iovec,
    count: usize,
    peer: u64,
    kind: RmaKind<FfiBuf>,
    key: u64,
    addr: u64,
    context: u64,
    flags: u64,
    report: bool,
) -> Errno {
    // SAFETY: forwarded contract.
    let Some(buf) = (unsafe { FfiBuf::from_iov(iov, count) }) else {
        return err::EINVAL as isize;
    };
    st.post_rma(peer, kind, buf, key, addr, context, flags, report)
}

unsafe extern "C" fn read(
    ep: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let flags = *st.op_flags(false) & !FI_INJECT;
        // SAFETY: buf valid and writable for len bytes until completion.
        unsafe {
            post(
                st,
                &v,
                1,
                src,
                RmaKind::Read,
                key,
                addr,
                context as u64,
                flags,
                true,
            )
        }
    })
}

unsafe extern "C" fn readv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let flags = *st.op_flags(false) & !FI_INJECT;
        // SAFETY: iov holds count entries valid until completion.
        unsafe {
            post(
                st,
                iov.cast(),
                count,
                src,
                RmaKind::Read,
                key,
                addr,
                context as u64,
                flags,
                true,
            )
        }
    })
}

/// `fi_readmsg` / `fi_writemsg`.
fn msg_call(ep: *mut sys::fid_ep, msg: *const sys::fi_msg_rma, flags: u64, write: bool) -> isize {
    with_state(ep, |st| {
        if let Err(e) = check::flags(flags, check::TX_FLAGS) {
            return e;
        }
        // SAFETY: msg NULL or valid.
        let Some(m) = (unsafe { msg.as_ref() }) else {
            return err::EINVAL as isize;
        };
        // SAFETY: msg_iov holds iov_count entries valid until completion.
        let Some(buf) = (unsafe { FfiBuf::from_iov(m.msg_iov.cast(), m.iov_count) }) else {
            return err::EINVAL as isize;
        };
        // SAFETY: rma_iov holds rma_iov_count entries.
        let Some((key, addr)) = (unsafe { one_target(m.rma_iov, m.rma_iov_count, buf.len()) })
        else {
            return err::EINVAL as isize;
        };
        let kind = if write {
            RmaKind::Write {
                data: (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data),
            }
        } else {
            RmaKind::Read
        };
        st.post_rma(m.addr, kind, buf, key, addr, m.context as u64, flags, true)
    })
}

unsafe extern "C" fn readmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_rma,
    flags: u64,
) -> isize {
    msg_call(ep, msg, flags, false)
}

unsafe extern "C" fn writemsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_rma,
    flags: u64,
) -> isize {
    msg_call(ep, msg, flags, true)
}

unsafe extern "C" fn write(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let flags = *st.op_flags(false);
        let kind = RmaKind::Write { data: None };
        // SAFETY: buf valid for len bytes until completion.
        unsafe {
            post(
                st,
                &v,
                1,
                dest,
                kind,
                key,
                addr,
                context as u64,
                flags,
                true,
            )
        }
    })
}

unsafe extern "C" fn writev(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let flags = *st.op_flags(false);
        let kind = RmaKind::Write { data: None };
        // SAFETY: iov holds count entries valid until completion.
        unsafe {
            post(
                st,
                iov.cast(),
                count,
                dest,
                kind,
                key,
                addr,
                context as u64,
                flags,
                true,
            )
        }
    })
}

unsafe extern "C" fn inject(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: u64,
    addr: u64,
    key: u64,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let kind = RmaKind::Write { data: None };
        // SAFETY: buf valid for len bytes during the call; FI_INJECT copies it now.
        unsafe { post(st, &v, 1, dest, kind, key, addr, 0, FI_INJECT, false) }
    })
}

unsafe extern "C" fn writedata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let flags = *st.op_flags(false) | FI_REMOTE_CQ_DATA;
        let kind = RmaKind::Write { data: Some(data) };
        // SAFETY: buf valid for len bytes until completion.
        unsafe {
            post(
                st,
                &v,
                1,
                dest,
                kind,
                key,
                addr,
                context as u64,
                flags,
                true,
            )
        }
    })
}

unsafe extern "C" fn injectdata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: u64,
    addr: u64,
    key: u64,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let kind = RmaKind::Write { data: Some(data) };
        // SAFETY: buf valid for len bytes during the call; FI_INJECT copies it now.
        unsafe { post(st, &v, 1, dest, kind, key, addr, 0, FI_INJECT, false) }
    })
}
