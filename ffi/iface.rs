//! Which local interface address (IPv4 or IPv6) endpoints use, and its MTU.

use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::params;

/// A local interface address (one entry per address: an interface with an IPv4
/// and an IPv6 address is listed twice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Iface {
    /// Interface name (the libfabric domain name).
    pub name: String,
    /// Its address (IPv4, or IPv6 other than link-local).
    pub ip: IpAddr,
    /// Its MTU, bytes.
    pub mtu: u32,
    /// True for the loopback interface.
    pub loopback: bool,
}

/// Every address of every UP interface, IPv4 and IPv6, in the kernel's order.
/// IPv6 link-local addresses (fe80::/10) are left out: they need a scope id
/// that peers could not derive from the address alone.
pub fn list() -> Vec<Iface> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr of at least the family field.
        let family = unsafe { (*ifa.ifa_addr).sa_family };
        if ifa.ifa_flags & libc::IFF_UP as u32 == 0 {
            continue;
        }
        let ip = match i32::from(family) {
            libc::AF_INET => {
                // SAFETY: the family is AF_INET, so the address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
            }
            libc::AF_INET6 => {
                // SAFETY: the family is AF_INET6, so the address is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                if ip.segments()[0] & 0xffc0 == 0xfe80 {
                    continue;
                }
                IpAddr::V6(ip)
            }
            _ => continue,
        };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let loopback = ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0;
        let mtu = mtu_of(&name).unwrap_or(if loopback { 65536 } else { 1500 });
        out.push(Iface {
            name,
            ip,
            mtu,
            loopback,
        });
    }
    // SAFETY: head came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The MTU of interface `name` (SIOCGIFMTU).
fn mtu_of(name: &str) -> Option<u32> {
    let mut req: libc::ifreq = libc::ifreq {
        ifr_name: [0; libc::IFNAMSIZ],
        // SAFETY: an all-zero ifreq union is a valid value.
        ifr_ifru: unsafe { std::mem::zeroed() },
    };
    if name.len() >= libc::IFNAMSIZ {
        return None;
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: a plain datagram socket used only for the ioctl and closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: SIOCGIFMTU reads ifr_name and writes ifr_mtu of the ifreq we own.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) };
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd) };
    if rc != 0 {
        return None;
    }
    // SAFETY: after a successful SIOCGIFMTU the union holds ifru_mtu.
    Some(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}

/// The interfaces getinfo offers a domain for, of the family asked (`v6`),
/// one entry per interface (its first address of that family), best first:
/// those `FI_SPRAY_IFACE` names (a comma-separated list, in its order; names
/// without an UP interface with such an address are skipped with a warning,
/// and when none is left the default applies), else every UP non-loopback
/// interface with such an address in the kernel's order, else loopback.
/// IPv4 falls back to 127.0.0.1 when nothing is UP; IPv6 gives an empty list
/// when no interface has an IPv6 address (IPv6 disabled).
pub fn usable(v6: bool) -> Vec<Iface> {
    let mut all: Vec<Iface> = Vec::new();
    for i in list().into_iter().filter(|i| i.ip.is_ipv6() == v6) {
        if !all.iter().any(|a| a.name == i.name) {
            all.push(i);
        }
    }
    let fam = if v6 { "IPv6" } else { "IPv4" };
    if let Some(want) = params::get_str("iface") {
        let mut out: Vec<Iface> = Vec::new();
        for name in want.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match all.iter().find(|i| i.name == name) {
                Some(i) if !out.contains(i) => out.push(i.clone()),
                Some(_) => {}
                None => crate::log::warn(&format!(
                    "FI_SPRAY_IFACE: no UP interface {name} with an {fam} address"
                )),
            }
        }
        if !out.is_empty() {
            return out;
        }
    }
    let others: Vec<Iface> = all.iter().filter(|i| !i.loopback).cloned().collect();
    if !others.is_empty() {
        return others;
    }
    let lo: Vec<Iface> = all.into_iter().filter(|i| i.loopback).collect();
    if lo.is_empty() && !v6 {
        vec![loopback_v4()]
    } else {
        lo
    }
}

/// The interface endpoints use when nothing names one: the first of `usable`.
pub fn choose(v6: bool) -> Option<Iface> {
    usable(v6).into_iter().next()
}

/// The UP interface `name` with an address of the family asked (its first).
pub fn by_name(name: &str, v6: bool) -> Option<Iface> {
    list()
        .into_iter()
        .find(|i| i.name == name && i.ip.is_ipv6() == v6)
}

/// The local address the kernel would send from to reach `dest` (a UDP
/// `connect`, which sends nothing), if it has a route.
pub fn route_source(dest: SocketAddr) -> Option<IpAddr> {
    let s = std::net::UdpSocket::bind(if dest.is_ipv6() {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
    })
    .ok()?;
    let port = if dest.port() == 0 { 9 } else { dest.port() };
    s.connect(SocketAddr::new(dest.ip(), port)).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

/// The family used when the application chooses none: IPv6 with `FI_SPRAY_IPV6=1`.
pub fn default_v6() -> bool {
    params::int_or("ipv6", 0, 0, 1) == 1
}

/// The IPv4 interface endpoints use (`choose(false)`, never `None`).
pub fn choose_v4() -> Iface {
    choose(false).unwrap_or_else(loopback_v4)
}

/// Loopback at 127.0.0.1, assumed when no interface is UP.
fn loopback_v4() -> Iface {
    Iface {
        name: "lo".into(),
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        mtu: 65536,
        loopback: true,
    }
}

/// The domain name of a rail set: its interfaces' names joined by `+`.
pub fn rails_name(rails: &[Iface]) -> String {
    rails
        .iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join("+")
}

/// The rails a domain name made of interface names joined by `+` names
/// (`PROTOCOL.md` §5.1): each an UP interface with an address of the family,
/// none twice, none loopback, at least two (and at most
/// `spray::wire::rails::MAX_RAILS`). `None` for any other name.
pub fn rails_named(name: &str, v6: bool) -> Option<Vec<Iface>> {
    if !name.contains('+') {
        return None;
    }
    let mut out: Vec<Iface> = Vec::new();
    for n in name.split('+').map(str::trim) {
        let i = by_name(n, v6)?;
        if i.loopback || out.iter().any(|o| o.name == i.name || o.ip == i.ip) {
            return None;
        }
        out.push(i);
    }
    (2..=spray::wire::rails::MAX_RAILS)
        .contains(&out.len())
        .then_some(out)
}

/// With `FI_SPRAY_RAILS=1`: the rail set getinfo offers first, of every
/// interface it offers (`usable`) but loopback, if at least two (at most
/// `MAX_RAILS`, the first ones).
pub fn default_rails(v6: bool) -> Option<Vec<Iface>> {
    if params::int_or("rails", 0, 0, 1) != 1 {
        return None;
    }
    let mut v: Vec<Iface> = usable(v6).into_iter().filter(|i| !i.loopback).collect();
    v.truncate(spray::wire::rails::MAX_RAILS);
    (v.len() >= 2).then_some(v)
}

/// Largest UDP payload over every rail of a set (`max_datagram` of each).
pub fn rails_max_datagram(rails: &[Iface]) -> usize {
    rails.iter().map(max_datagram).min().unwrap_or(548)
}

/// The interface that owns `ip` (for addresses given by the application).
pub fn owning(ip: IpAddr) -> Option<Iface> {
    list().into_iter().find(|i| i.ip == ip)
}

/// Largest UDP payload for `iface`: `FI_SPRAY_MTU`, else its MTU − 28 (IPv4 and
/// UDP headers; − 48 over IPv6) capped by `FI_SPRAY_MTU_CAP` (default 65000).
pub fn max_datagram(iface: &Iface) -> usize {
    let cap = params::int_or("mtu_cap", 65000, 576, 65507) as usize;
    let headers = if iface.ip.is_ipv6() { 48 } else { 28 };
    let auto = (iface.mtu as usize).saturating_sub(headers).clamp(548, cap);
    params::int_or("mtu", auto as i64, 548, 65507) as usize
}
