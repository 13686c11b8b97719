//! Socket address conversions at the C boundary: `sockaddr_in` ⇄ `SocketAddrV4`
//! (the AV and endpoint names) and `CAddr`, either family (the I/O layer).

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

/// A socket address in C form, either family: what the I/O layer hands the
/// kernel (`msg_name`) and gets back from it.
#[derive(Copy, Clone)]
pub struct CAddr {
    /// The address (`sockaddr_in` or `sockaddr_in6` at its start).
    pub ss: libc::sockaddr_storage,
    /// Bytes of `ss` in use.
    pub len: libc::socklen_t,
}

impl CAddr {
    /// An unspecified IPv4 address (a placeholder).
    pub fn none() -> CAddr {
        CAddr::from(std::net::SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::UNSPECIFIED,
            0,
        )))
    }

    /// Room for any address the kernel may write (`msg_namelen` of a receive).
    pub const ROOM: libc::socklen_t =
        std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

    /// The Rust form; `None` for a family other than IPv4 and IPv6.
    pub fn get(&self) -> Option<std::net::SocketAddr> {
        match i32::from(self.ss.ss_family) {
            libc::AF_INET => {
                // SAFETY: ss holds a sockaddr_in (family AF_INET); storage is
                // larger and suitably aligned.
                let s = unsafe { &*(&self.ss as *const _ as *const libc::sockaddr_in) };
                Some(std::net::SocketAddr::V4(from_c(s)))
            }
            libc::AF_INET6 => {
                // SAFETY: as above for sockaddr_in6 (family AF_INET6).
                let s = unsafe { &*(&self.ss as *const _ as *const libc::sockaddr_in6) };
                Some(std::net::SocketAddr::V6(std::net::SocketAddrV6::new(
                    std::net::Ipv6Addr::from(s.sin6_addr.s6_addr),
                    u16::from_be(s.sin6_port),
                    u32::from_be(s.sin6_flowinfo),
                    s.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }

    /// A pointer for `msg_name` / `connect` / `bind`.
    pub fn as_ptr(&self) -> *const libc::sockaddr {
        (&self.ss as *const libc::sockaddr_storage).cast()
    }

    /// A mutable pointer for `msg_name` of a receive.
    pub fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        (&mut self.ss as *mut libc::sockaddr_storage).cast()
    }
}

impl From<std::net::SocketAddr> for CAddr {
    fn from(a: std::net::SocketAddr) -> CAddr {
        // SAFETY: an all-zero sockaddr_storage is a valid value.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match a {
            std::net::SocketAddr::V4(v4) => {
                // SAFETY: storage is larger than and aligned for sockaddr_in.
                unsafe { (&mut ss as *mut _ as *mut libc::sockaddr_in).write(to_c(v4)) };
                SOCKADDR_IN_LEN
            }
            std::net::SocketAddr::V6(v6) => {
                let s = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                // SAFETY: storage is larger than and aligned for sockaddr_in6.
                unsafe { (&mut ss as *mut _ as *mut libc::sockaddr_in6).write(s) };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        CAddr {
            ss,
            len: len as libc::socklen_t,
        }
    }
}
