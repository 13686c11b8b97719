//! Untagged data calls (`fi_ops_msg`): send/recv and their vector, msg, inject
//! and data forms.

use std::os::raw::c_void;

use crate::consts::*;
use crate::ep::endpoint::with_state;
use crate::{check, sys};

/// The endpoint's `fi_ops_msg`.
pub static MSG_OPS: sys::fi_ops_msg = sys::fi_ops_msg {
    size: std::mem::size_of::<sys::fi_ops_msg>(),
    recv: Some(recv),
    recvv: Some(recvv),
    recvmsg: Some(recvmsg),
    send: Some(send),
    sendv: Some(sendv),
    sendmsg: Some(sendmsg),
    inject: Some(inject),
    senddata: Some(senddata),
    injectdata: Some(injectdata),
};

/// One iovec for a contiguous buffer.
pub fn iov1(buf: *const c_void, len: usize) -> libc::iovec {
    libc::iovec {
        iov_base: buf as *mut c_void,
        iov_len: len,
    }
}

unsafe extern "C" fn recv(
    ep: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: u64,
    context: *mut c_void,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let flags = *st.op_flags(true);
        // SAFETY: buf valid for len bytes until completion (API contract).
        unsafe { st.post_recv(&v, 1, src, None, context as u64, flags) }
    })
}

unsafe extern "C" fn recvv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: u64,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let flags = *st.op_flags(true);
        // SAFETY: iov holds count entries valid until completion (API contract).
        unsafe { st.post_recv(iov.cast(), count, src, None, context as u64, flags) }
    })
}

unsafe extern "C" fn recvmsg(ep: *mut sys::fid_ep, msg: *const sys::fi_msg, flags: u64) -> isize {
    with_state(ep, |st| {
        if let Err(e) = check::flags(flags, check::RX_FLAGS) {
            return e;
        }
        // SAFETY: msg NULL or valid.
        let Some(m) = (unsafe { msg.as_ref() }) else {
            return err::EINVAL as isize;
        };
        // SAFETY: m.msg_iov holds iov_count entries valid until completion.
        unsafe {
            st.post_recv(
                m.msg_iov.cast(),
                m.iov_count,
                m.addr,
                None,
                m.context as u64,
                flags,
            )
        }
    })
}

unsafe extern "C" fn send(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: u64,
    context: *mut c_void,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let flags = *st.op_flags(false);
        // SAFETY: buf valid for len bytes until completion (API contract).
        unsafe { st.post_send(&v, 1, dest, None, None, context as u64, flags, true) }
    })
}

unsafe extern "C" fn sendv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: u64,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let flags = *st.op_flags(false);
        // SAFETY: iov holds count entries valid until completion.
        unsafe {
            st.post_send(
                iov.cast(),
                count,
                dest,
                None,
                None,
                context as u64,
                flags,
                true,
            )
        }
    })
}

unsafe extern "C" fn sendmsg(ep: *mut sys::fid_ep, msg: *const sys::fi_msg, flags: u64) -> isize {
    with_state(ep, |st| {
        if let Err(e) = check::flags(flags, check::TX_FLAGS) {
            return e;
        }
        // SAFETY: msg NULL or valid.
        let Some(m) = (unsafe { msg.as_ref() }) else {
            return err::EINVAL as isize;
        };
        let data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data);
        // SAFETY: m.msg_iov holds iov_count entries valid until completion (or
        // until return with FI_INJECT).
        unsafe {
            st.post_send(
                m.msg_iov.cast(),
                m.iov_count,
                m.addr,
                None,
                data,
                m.context as u64,
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
) -> isize {
    let v = iov1(buf, len);
    // SAFETY: buf valid for len bytes during the call; FI_INJECT copies it now.
    with_state(ep, |st| unsafe {
        st.post_send(&v, 1, dest, None, None, 0, FI_INJECT, false)
    })
}

unsafe extern "C" fn senddata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: u64,
    context: *mut c_void,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let flags = *st.op_flags(false) | FI_REMOTE_CQ_DATA;
        // SAFETY: buf valid until completion.
        unsafe { st.post_send(&v, 1, dest, None, Some(data), context as u64, flags, true) }
    })
}

unsafe extern "C" fn injectdata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: u64,
) -> isize {
    let v = iov1(buf, len);
    // SAFETY: buf valid during the call; FI_INJECT copies it now.
    with_state(ep, |st| unsafe {
        st.post_send(&v, 1, dest, None, Some(data), 0, FI_INJECT, false)
    })
}
