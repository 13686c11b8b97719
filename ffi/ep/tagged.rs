//! Tagged data calls (`fi_ops_tagged`), including FI_PEEK / FI_CLAIM / FI_DISCARD.

use std::os::raw::c_void;

use crate::consts::*;
use crate::ep::endpoint::with_state;
use crate::ep::msg::iov1;
use crate::{check, sys};

/// The endpoint's `fi_ops_tagged`.
pub static TAGGED_OPS: sys::fi_ops_tagged = sys::fi_ops_tagged {
    size: std::mem::size_of::<sys::fi_ops_tagged>(),
    recv: Some(trecv),
    recvv: Some(trecvv),
    recvmsg: Some(trecvmsg),
    send: Some(tsend),
    sendv: Some(tsendv),
    sendmsg: Some(tsendmsg),
    inject: Some(tinject),
    senddata: Some(tsenddata),
    injectdata: Some(tinjectdata),
};

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn trecv(
    ep: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: u64,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let flags = *st.op_flags(true);
        // SAFETY: buf valid for len bytes until completion.
        unsafe { st.post_recv(&v, 1, src, Some((tag, ignore)), context as u64, flags) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn trecvv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: u64,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    with_state(ep, |st| {
        let flags = *st.op_flags(true);
        // SAFETY: iov holds count entries valid until completion.
        unsafe {
            st.post_recv(
                iov.cast(),
                count,
                src,
                Some((tag, ignore)),
                context as u64,
                flags,
            )
        }
    })
}

unsafe extern "C" fn trecvmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_tagged,
    flags: u64,
) -> isize {
    with_state(ep, |st| {
        if let Err(e) = check::flags(flags, check::TAGGED_RX_FLAGS) {
            return e;
        }
        // SAFETY: msg NULL or valid.
        let Some(m) = (unsafe { msg.as_ref() }) else {
            return err::EINVAL as isize;
        };
        // A peek, or a claim/discard of a peeked message, may come without buffers.
        let count = if m.msg_iov.is_null() { 0 } else { m.iov_count };
        // SAFETY: m.msg_iov holds iov_count entries valid until completion.
        unsafe {
            st.post_recv(
                m.msg_iov.cast(),
                count,
                m.addr,
                Some((m.tag, m.ignore)),
                m.context as u64,
                flags,
            )
        }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tsend(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: u64,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let flags = *st.op_flags(false);
        // SAFETY: buf valid until completion.
        unsafe { st.post_send(&v, 1, dest, Some(tag), None, context as u64, flags, true) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tsendv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: u64,
    tag: u64,
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
                Some(tag),
                None,
                context as u64,
                flags,
                true,
            )
        }
    })
}

unsafe extern "C" fn tsendmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_tagged,
    flags: u64,
) -> isize {
    with_state(ep, |st| {
        if let Err(e) = check::flags(flags, check::TX_FLAGS) {
            return e;
        }
        // SAFETY: msg NULL or valid.
        let Some(m) = (unsafe { msg.as_ref() }) else {
            return err::EINVAL as isize;
        };
        let data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data);
        // SAFETY: m.msg_iov holds iov_count entries valid until completion (or return with FI_INJECT).
        unsafe {
            st.post_send(
                m.msg_iov.cast(),
                m.iov_count,
                m.addr,
                Some(m.tag),
                data,
                m.context as u64,
                flags,
                true,
            )
        }
    })
}

unsafe extern "C" fn tinject(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: u64,
    tag: u64,
) -> isize {
    let v = iov1(buf, len);
    // SAFETY: buf valid during the call; FI_INJECT copies it now.
    with_state(ep, |st| unsafe {
        st.post_send(&v, 1, dest, Some(tag), None, 0, FI_INJECT, false)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tsenddata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: u64,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let v = iov1(buf, len);
    with_state(ep, |st| {
        let flags = *st.op_flags(false) | FI_REMOTE_CQ_DATA;
        // SAFETY: buf valid until completion.
        unsafe {
            st.post_send(
                &v,
                1,
                dest,
                Some(tag),
                Some(data),
                context as u64,
                flags,
                true,
            )
        }
    })
}

unsafe extern "C" fn tinjectdata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: u64,
    tag: u64,
) -> isize {
    let v = iov1(buf, len);
    // SAFETY: buf valid during the call; FI_INJECT copies it now.
    with_state(ep, |st| unsafe {
        st.post_send(&v, 1, dest, Some(tag), Some(data), 0, FI_INJECT, false)
    })
}
