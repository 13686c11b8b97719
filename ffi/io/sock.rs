//! Opening an endpoint's UDP sockets: socket 0 on the main port (the only one
//! that receives), sockets 1..K on ephemeral ports (the entropy values).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::addr;

/// How many ports after `FI_SPRAY_PORT` an endpoint tries when it is taken.
const PORT_SEARCH: u16 = 256;

/// An endpoint's sockets.
pub struct Sockets {
    /// One per path; `fds[0]` receives.
    pub fds: Vec<OwnedFd>,
    /// Address of socket 0 (the endpoint's name), IPv4 or IPv6.
    pub local: SocketAddr,
    /// With rails (`open_rails`): every rail's IP, rail 0 (`local`'s) first;
    /// `fds` holds `fds.len() / rails.len()` sockets per rail. Empty: one rail.
    pub rails: Vec<IpAddr>,
}

fn set_buf(fd: i32, force: libc::c_int, plain: libc::c_int, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: setsockopt reads one c_int from a local.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            force,
            (&v as *const libc::c_int).cast(),
            len,
        )
    };
    if rc != 0 {
        // Not root: the plain option, capped by net.core.[rw]mem_max.
        // SAFETY: as above.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                plain,
                (&v as *const libc::c_int).cast(),
                len,
            )
        };
    }
}

/// SO_RCVBUF of the sending sockets (all but socket 0), bytes: nothing reads
/// them, so a large buffer would only be kernel memory anyone can fill (the
/// kernel doubles it and raises it to its minimum, about 4.5 KiB).
const SEND_ONLY_RCVBUF: usize = 4096;

/// A non-blocking UDP socket bound to `at` (either family), with `rcvbuf` /
/// `sndbuf` bytes of kernel buffer, and the address it got.
fn udp_socket(at: SocketAddr, rcvbuf: usize, sndbuf: usize) -> io::Result<(OwnedFd, SocketAddr)> {
    udp_socket_opts(at, rcvbuf, sndbuf, false)
}

/// `udp_socket`, IPv6 only (`IPV6_V6ONLY`) if `v6only`: a wildcard IPv6
/// socket then takes no IPv4 traffic (an endpoint speaks one family).
fn udp_socket_opts(
    at: SocketAddr,
    rcvbuf: usize,
    sndbuf: usize,
    v6only: bool,
) -> io::Result<(OwnedFd, SocketAddr)> {
    let family = if at.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket creation; ownership passes to OwnedFd below.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    set_buf(fd, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, rcvbuf);
    set_buf(fd, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, sndbuf);
    if v6only {
        let one: libc::c_int = 1;
        // SAFETY: setsockopt reads one c_int from a local.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let sa = addr::CAddr::from(at);
    // SAFETY: binds our socket to a valid address of the stated length.
    if unsafe { libc::bind(fd, sa.as_ptr(), sa.len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut got = addr::CAddr::none();
    let mut len = addr::CAddr::ROOM;
    // SAFETY: got/len are a valid out-parameter and its size.
    if unsafe { libc::getsockname(owned.as_raw_fd(), got.as_mut_ptr(), &mut len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let got = got
        .get()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EAFNOSUPPORT))?;
    Ok((owned, got))
}

/// `open` with the path count and buffer size from `FI_SPRAY_PATHS` / `FI_SPRAY_SOCKBUF`.
pub fn open_configured(at: SocketAddr, search: bool) -> Result<Sockets, i32> {
    let paths = crate::params::int_or("paths", crate::params::DEFAULT_PATHS, 1, 64) as usize;
    let sockbuf = crate::params::get_size("sockbuf").unwrap_or(16 << 20);
    open(at, search, paths, sockbuf)
}

/// Open `paths` sockets at `at.ip()`: socket 0 on `at.port()` (0 = ephemeral;
/// with `search`, the next free port after a taken one), the rest ephemeral.
pub fn open(at: SocketAddr, search: bool, paths: usize, sockbuf: usize) -> Result<Sockets, i32> {
    let tries = if search && at.port() != 0 {
        PORT_SEARCH
    } else {
        1
    };
    let mut first = None;
    let mut last_err = None;
    for i in 0..tries {
        let port = at.port().wrapping_add(i);
        match udp_socket(SocketAddr::new(at.ip(), port), sockbuf, sockbuf) {
            Ok(s) => {
                first = Some(s);
                break;
            }
            Err(e) => last_err = Some(e),
        }
    }
    let Some((fd0, local)) = first else {
        let e = last_err
            .and_then(|e| e.raw_os_error())
            .unwrap_or(libc::EADDRINUSE);
        crate::log::warn(&format!(
            "cannot bind UDP socket at {at}: {}",
            io::Error::from_raw_os_error(e)
        ));
        return Err(-e);
    };
    let mut fds = vec![fd0];
    for _ in 1..paths {
        match udp_socket(SocketAddr::new(at.ip(), 0), SEND_ONLY_RCVBUF, sockbuf) {
            Ok((fd, _)) => fds.push(fd),
            Err(e) => return Err(-e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }
    Ok(Sockets {
        fds,
        local,
        rails: Vec::new(),
    })
}

/// Paths per rail of an endpoint with `rails` rails: `FI_SPRAY_PATHS`,
/// at most 64 in all.
pub fn paths_per_rail(rails: usize) -> usize {
    let paths = crate::params::int_or("paths", crate::params::DEFAULT_PATHS, 1, 64) as usize;
    paths.min(64 / rails.max(1)).max(1)
}

/// The sockets of an endpoint with rails (`PROTOCOL.md` §5.1): socket 0
/// bound to the wildcard address of the family at `port` (0 = ephemeral;
/// with `search`, the next free port after a taken one), the only one that
/// receives, on every rail (all rails share the main port); then rail 0's
/// other `paths - 1` sending sockets bound to `rails[0]`, and `paths`
/// sending sockets bound to each further rail's address. Path `r * paths +
/// i` leaves from socket `r * paths + i`, except rail 0's, which keep the
/// one-rail order (`tx::sock_of_path`). The name is `rails[0]:port`.
pub fn open_rails(
    rails: &[IpAddr],
    port: u16,
    search: bool,
    paths: usize,
    sockbuf: usize,
) -> Result<Sockets, i32> {
    let Some(&main) = rails.first() else {
        return Err(-libc::EINVAL);
    };
    let any = if main.is_ipv6() {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    let tries = if search && port != 0 { PORT_SEARCH } else { 1 };
    let mut first = None;
    let mut last_err = None;
    for i in 0..tries {
        let at = SocketAddr::new(any, port.wrapping_add(i));
        match udp_socket_opts(at, sockbuf, sockbuf, main.is_ipv6()) {
            Ok(s) => {
                first = Some(s);
                break;
            }
            Err(e) => last_err = Some(e),
        }
    }
    let Some((fd0, bound)) = first else {
        let e = last_err
            .and_then(|e| e.raw_os_error())
            .unwrap_or(libc::EADDRINUSE);
        crate::log::warn(&format!(
            "cannot bind UDP socket at {any}:{port} (rails {rails:?}): {}",
            io::Error::from_raw_os_error(e)
        ));
        return Err(-e);
    };
    let mut fds = vec![fd0];
    for (r, &ip) in rails.iter().enumerate() {
        let n = if r == 0 { paths - 1 } else { paths };
        for _ in 0..n {
            match udp_socket(SocketAddr::new(ip, 0), SEND_ONLY_RCVBUF, sockbuf) {
                Ok((fd, _)) => fds.push(fd),
                Err(e) => return Err(-e.raw_os_error().unwrap_or(libc::EIO)),
            }
        }
    }
    Ok(Sockets {
        fds,
        local: SocketAddr::new(main, bound.port()),
        rails: rails.to_vec(),
    })
}
