//! `struct sockaddr_in` ⇄ `SocketAddrV4` conversions at the C boundary.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::raw::c_void;

/// Size of the address spray uses everywhere (`FI_SOCKADDR_IN`).
pub const SOCKADDR_IN_LEN: usize = std::mem::size_of::<libc::sockaddr_in>();

/// The C form of `a`.
pub fn to_c(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// The Rust form of a C `sockaddr_in`.
pub fn from_c(s: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
        u16::from_be(s.sin_port),
    )
}

/// Read an IPv4 address from a caller buffer of `len` bytes; `None` when NULL,
/// too short or not AF_INET.
///
/// # Safety
/// `p` is NULL or points to at least `len` readable bytes.
pub unsafe fn read_sockaddr_in(p: *const c_void, len: usize) -> Option<SocketAddrV4> {
    if p.is_null() || len < SOCKADDR_IN_LEN {
        return None;
    }
    // SAFETY: p has at least SOCKADDR_IN_LEN readable bytes (caller); read_unaligned
    // copes with any alignment.
    let s = unsafe { std::ptr::read_unaligned(p as *const libc::sockaddr_in) };
    (i32::from(s.sin_family) == libc::AF_INET).then(|| from_c(&s))
}

/// Write `a` into a caller buffer of `*len` bytes; always stores the needed size in
/// `*len`. Returns false when the buffer is too small (`-FI_ETOOSMALL`).
///
/// # Safety
/// `p` is NULL or writable for `*len` bytes; `len` is valid.
pub unsafe fn write_sockaddr_in(a: SocketAddrV4, p: *mut c_void, len: *mut usize) -> bool {
    // SAFETY: len is valid per the caller.
    let room = unsafe { *len };
    // SAFETY: as above.
    unsafe { *len = SOCKADDR_IN_LEN };
    if p.is_null() || room < SOCKADDR_IN_LEN {
        return false;
    }
    // SAFETY: p is writable for at least SOCKADDR_IN_LEN bytes.
    unsafe { std::ptr::write_unaligned(p as *mut libc::sockaddr_in, to_c(a)) };
    true
}

/// A `malloc`'d `sockaddr_in` holding `a` (owned by an `fi_info`), or NULL.
pub fn alloc_sockaddr_in(a: SocketAddrV4) -> *mut libc::sockaddr_in {
    // SAFETY: malloc of a POD size; checked for NULL before writing.
    let p = unsafe { libc::malloc(SOCKADDR_IN_LEN) } as *mut libc::sockaddr_in;
    if !p.is_null() {
        // SAFETY: p is a fresh allocation of the right size (malloc aligns for any type).
        unsafe { p.write(to_c(a)) };
    }
    p
}
