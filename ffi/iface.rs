//! Which local IPv4 interface endpoints use, and its MTU.

use std::ffi::CStr;
use std::net::Ipv4Addr;

use crate::params;

/// A local IPv4 interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Iface {
    /// Interface name (the libfabric domain name).
    pub name: String,
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// Its MTU, bytes.
    pub mtu: u32,
    /// True for the loopback interface.
    pub loopback: bool,
}

/// Every UP IPv4 interface, in the kernel's order.
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
        if i32::from(family) != libc::AF_INET || ifa.ifa_flags & libc::IFF_UP as u32 == 0 {
            continue;
        }
        // SAFETY: the family is AF_INET, so the address is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
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

/// The interface endpoints use: `FI_SPRAY_IFACE`, else the first UP non-loopback
/// IPv4 interface, else loopback (127.0.0.1).
pub fn choose() -> Iface {
    let all = list();
    if let Some(want) = params::get_str("iface") {
        if let Some(i) = all.iter().find(|i| i.name == want) {
            return i.clone();
        }
        crate::log::warn(&format!(
            "FI_SPRAY_IFACE={want}: no UP IPv4 interface of that name"
        ));
    }
    all.iter()
        .find(|i| !i.loopback)
        .or_else(|| all.iter().find(|i| i.loopback))
        .cloned()
        .unwrap_or(Iface {
            name: "lo".into(),
            ip: Ipv4Addr::LOCALHOST,
            mtu: 65536,
            loopback: true,
        })
}

/// The interface that owns `ip` (for addresses given by the application).
pub fn owning(ip: Ipv4Addr) -> Option<Iface> {
    list().into_iter().find(|i| i.ip == ip)
}

/// Largest UDP payload for `iface`: `FI_SPRAY_MTU`, else its MTU − 28 capped by
/// `FI_SPRAY_MTU_CAP` (default 65000).
pub fn max_datagram(iface: &Iface) -> usize {
    let cap = params::int_or("mtu_cap", 65000, 576, 65507) as usize;
    let auto = (iface.mtu as usize).saturating_sub(28).clamp(548, cap);
    params::int_or("mtu", auto as i64, 548, 65507) as usize
}
