//! Socket address conversions at the C boundary, either family: `sockaddr_in` /
//! `sockaddr_in6` ⇄ `SocketAddr` (the AV and endpoint names) and `CAddr` (the I/O layer).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::raw::c_void;

/// Size of an IPv4 address (`FI_SOCKADDR_IN`).
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

/// Size of an IPv6 address (`FI_SOCKADDR_IN6`).
pub const SOCKADDR_IN6_LEN: usize = std::mem::size_of::<libc::sockaddr_in6>();

/// Bytes of the C form of `a` (`sockaddr_in` or `sockaddr_in6`).
pub fn len_of(a: SocketAddr) -> usize {
    if a.is_ipv4() {
        SOCKADDR_IN_LEN
    } else {
        SOCKADDR_IN6_LEN
    }
}

/// The libfabric address format of `a` (`FI_SOCKADDR_IN` or `FI_SOCKADDR_IN6`).
pub fn format_of(a: SocketAddr) -> u32 {
    if a.is_ipv4() {
        crate::consts::FI_SOCKADDR_IN
    } else {
        crate::consts::FI_SOCKADDR_IN6
    }
}

/// The family of a C address in a caller buffer of `len` bytes (`AF_INET`,
/// `AF_INET6`, ...), or `None` when NULL or too short to hold the field.
///
/// # Safety
/// `p` is NULL or points to at least `len` readable bytes.
pub unsafe fn family_of(p: *const c_void, len: usize) -> Option<i32> {
    if p.is_null() || len < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: at least the family field is readable (checked above); any alignment.
    let f = unsafe { std::ptr::read_unaligned(p as *const libc::sa_family_t) };
    Some(i32::from(f))
}

/// Read an IPv4 or IPv6 address from a caller buffer of `len` bytes; `None` when
/// NULL, too short for its family or of another family. The IPv6 flow label is
/// dropped (peers are keyed by address, port and scope only: the kernel reports
/// received datagrams with flow label 0).
///
/// # Safety
/// `p` is NULL or points to at least `len` readable bytes.
pub unsafe fn read_sockaddr(p: *const c_void, len: usize) -> Option<SocketAddr> {
    // SAFETY: forwarded.
    match unsafe { family_of(p, len) }? {
        libc::AF_INET if len >= SOCKADDR_IN_LEN => {
            // SAFETY: p has at least SOCKADDR_IN_LEN readable bytes; any alignment.
            let s = unsafe { std::ptr::read_unaligned(p as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(from_c(&s)))
        }
        libc::AF_INET6 if len >= SOCKADDR_IN6_LEN => {
            // SAFETY: p has at least SOCKADDR_IN6_LEN readable bytes; any alignment.
            let s = unsafe { std::ptr::read_unaligned(p as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(from_c6(&s)))
        }
        _ => None,
    }
}

/// The Rust form of a C `sockaddr_in6`, flow label dropped, and the scope id
/// too unless the address is link-local: the engine keys a peer by the packet's
/// source IP and header port, with scope 0, as the kernel reports other addresses.
pub fn from_c6(s: &libc::sockaddr_in6) -> SocketAddrV6 {
    let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
    let link_local = ip.segments()[0] & 0xffc0 == 0xfe80;
    let scope = if link_local { s.sin6_scope_id } else { 0 };
    SocketAddrV6::new(ip, u16::from_be(s.sin6_port), 0, scope)
}

/// Write `a` (either family) into a caller buffer of `*len` bytes; always stores
/// the needed size in `*len`. Returns false when the buffer is too small
/// (`-FI_ETOOSMALL`).
///
/// # Safety
/// `p` is NULL or writable for `*len` bytes; `len` is valid.
pub unsafe fn write_sockaddr(a: SocketAddr, p: *mut c_void, len: *mut usize) -> bool {
    let need = len_of(a);
    // SAFETY: len is valid per the caller.
    let room = unsafe { *len };
    // SAFETY: as above.
    unsafe { *len = need };
    if p.is_null() || room < need {
        return false;
    }
    let c = CAddr::from(a);
    // SAFETY: p is writable for at least `need` bytes; c.ss holds `need` bytes.
    unsafe { std::ptr::copy_nonoverlapping(c.as_ptr() as *const u8, p as *mut u8, need) };
    true
}

/// A `malloc`'d C address holding `a` (owned by an `fi_info`) and its length,
/// or NULL and 0.
pub fn alloc_sockaddr(a: SocketAddr) -> (*mut c_void, usize) {
    let need = len_of(a);
    // SAFETY: malloc of a POD size; checked for NULL before writing.
    let p = unsafe { libc::malloc(need) };
    if p.is_null() {
        return (p, 0);
    }
    let c = CAddr::from(a);
    // SAFETY: p is a fresh allocation of `need` bytes; c.ss holds `need` bytes.
    unsafe { std::ptr::copy_nonoverlapping(c.as_ptr() as *const u8, p as *mut u8, need) };
    (p, need)
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
                Some(std::net::SocketAddr::V6(from_c6(s)))
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
