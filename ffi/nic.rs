//! `fi_info->nic` of each interface, filled from sysfs (`/sys/class/net/X`).
//!
//! How libfabric handles it (v1.17 and v2.5.1 alike, `src/fabric.c`):
//! `fi_freeinfo` calls `fi_close(&nic->fid)` when the nic's ops table has a
//! `close`; `fi_dupinfo` copies the whole `fi_info` (so the copy first points
//! at the same nic) and then calls `fi_control(&nic->fid, FI_DUP, &dup->nic)`,
//! keeping the shared pointer when that returns `-FI_ENOSYS` (a double free
//! later); `fi_tostr` calls the nic's `tostr`. The core's own `ofi_nic_*`
//! helpers are not exported to providers. So a nic is safe to hand out when
//! it carries its own ops table with `close`, `control(FI_DUP)` and `tostr`,
//! all here, and its memory is laid out and allocated as the core's
//! `ofi_nic_close` would free it (malloc'd struct, attributes and strings;
//! `prov_attr` NULL), so that even a core that freed it itself would free it
//! correctly. The structures are the same in both versions.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use crate::iface::Iface;
use crate::{guard, nosys, sys};

/// `fi_ops` of every nic spray returns.
static NIC_OPS: sys::fi_ops = nosys::fid_ops(close, None, Some(control));
/// The same table with our `tostr` (nosys' entry for it returns -FI_ENOSYS).
static NIC_FI_OPS: sys::fi_ops = sys::fi_ops {
    tostr: Some(tostr),
    ..NIC_OPS
};

/// What sysfs says about one interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicInfo {
    /// Interface name.
    pub name: String,
    /// Link-level (MAC) address, `aa:bb:..`.
    pub address: Option<String>,
    /// MTU, bytes.
    pub mtu: usize,
    /// Link speed, bits per second (0 = unknown).
    pub speed: usize,
    /// `FI_LINK_UP` / `FI_LINK_DOWN` / `FI_LINK_UNKNOWN`.
    pub state: u32,
    /// "Ethernet", "Loopback", or none.
    pub network_type: Option<String>,
    /// PCI function hosting the NIC: (domain, bus, device, function).
    pub pci: Option<(u16, u8, u8, u8)>,
    /// PCI vendor id, device id and revision as sysfs writes them ("0x1af4").
    pub vendor_id: Option<String>,
    pub device_id: Option<String>,
    pub device_version: Option<String>,
    /// Kernel driver of the device ("virtio_net", "ena").
    pub driver: Option<String>,
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The last path component of a symlink's target.
fn link_name(p: &Path) -> Option<String> {
    std::fs::read_link(p)
        .ok()?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// "0000:00:03.0" → (0, 0, 3, 0).
fn parse_pci(s: &str) -> Option<(u16, u8, u8, u8)> {
    let (dom, rest) = s.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (dev, func) = rest.split_once('.')?;
    Some((
        u16::from_str_radix(dom, 16).ok()?,
        u8::from_str_radix(bus, 16).ok()?,
        u8::from_str_radix(dev, 16).ok()?,
        u8::from_str_radix(func, 16).ok()?,
    ))
}

/// The PCI device directory of a net device: its `device` when that is on
/// the PCI bus, else the parent of `device` when that is (a virtio NIC sits
/// on a virtio bus under its PCI function).
fn pci_dir(net: &Path) -> Option<PathBuf> {
    let dev = std::fs::canonicalize(net.join("device")).ok()?;
    [Some(dev.clone()), dev.parent().map(Path::to_path_buf)]
        .into_iter()
        .flatten()
        .find(|d| link_name(&d.join("subsystem")).as_deref() == Some("pci"))
}

impl NicInfo {
    /// Read `/sys/class/net/<name>` (fields sysfs lacks stay empty).
    pub fn read(name: &str, mtu: u32) -> NicInfo {
        Self::read_at(Path::new("/sys/class/net"), name, mtu)
    }

    /// As `read`, below another sysfs root.
    pub fn read_at(root: &Path, name: &str, mtu: u32) -> NicInfo {
        let net = root.join(name);
        let speed = read_trim(&net.join("speed"))
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&mbps| mbps > 0)
            .map_or(0, |mbps| mbps as usize * 1_000_000);
        let state = match read_trim(&net.join("operstate")).as_deref() {
            Some("up") => sys::fi_link_state_FI_LINK_UP,
            Some("down" | "lowerlayerdown" | "notpresent" | "dormant") => {
                sys::fi_link_state_FI_LINK_DOWN
            }
            _ => sys::fi_link_state_FI_LINK_UNKNOWN,
        };
        let network_type = match read_trim(&net.join("type")).as_deref() {
            Some("1") => Some("Ethernet".to_owned()),
            Some("772") => Some("Loopback".to_owned()),
            _ => None,
        };
        let pci = pci_dir(&net);
        let pci_file = |f: &str| pci.as_ref().and_then(|d| read_trim(&d.join(f)));
        NicInfo {
            name: name.to_owned(),
            address: read_trim(&net.join("address")),
            mtu: read_trim(&net.join("mtu"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(mtu as usize),
            speed,
            state,
            network_type,
            pci: pci
                .as_ref()
                .and_then(|d| d.file_name())
                .and_then(|n| parse_pci(&n.to_string_lossy())),
            vendor_id: pci_file("vendor"),
            device_id: pci_file("device"),
            device_version: pci_file("revision"),
            driver: link_name(&net.join("device/driver")),
        }
    }
}

/// A malloc'd copy of `s` (NULL for `None`).
fn c_str(s: Option<&str>) -> *mut c_char {
    match s.map(CString::new) {
        // SAFETY: c is a valid C string; strdup returns malloc'd memory or NULL.
        Some(Ok(c)) => unsafe { libc::strdup(c.as_ptr()) },
        _ => std::ptr::null_mut(),
    }
}

/// calloc of one `T` (NULL on failure).
fn calloc<T>() -> *mut T {
    // SAFETY: calloc returns zeroed memory for one T or NULL; an all-zero T is
    // valid for the plain C structs used here.
    unsafe { libc::calloc(1, std::mem::size_of::<T>()) as *mut T }
}

/// A new `fid_nic` for `iface` (NULL when memory runs out), freed by
/// `fi_freeinfo` through our `close`.
///
/// The PCI location is reported only with `FI_SPRAY_NIC_PCI=1`: MPICH
/// (`MPIDI_OFI_init_multi_nic`) looks every `FI_BUS_PCI` nic up in its own
/// hwloc topology and asserts it is there, so a build whose hwloc sees no
/// PCI devices (the PyPI wheel's), or a nic whose function hwloc filters
/// out, aborts every rank in `MPI_Init`. Vendor, device and driver stay.
pub fn alloc(iface: &Iface) -> *mut sys::fid_nic {
    let mut n = NicInfo::read(&iface.name, iface.mtu);
    if crate::params::int_or("nic_pci", 0, 0, 1) != 1 {
        n.pci = None;
    }
    build(&n)
}

/// A new `fid_nic` holding `n`.
fn build(n: &NicInfo) -> *mut sys::fid_nic {
    let nic = calloc::<sys::fid_nic>();
    let dev = calloc::<sys::fi_device_attr>();
    let bus = calloc::<sys::fi_bus_attr>();
    let link = calloc::<sys::fi_link_attr>();
    if nic.is_null() || dev.is_null() || bus.is_null() || link.is_null() {
        // SAFETY: each is NULL or ours from calloc; free(NULL) is a no-op.
        unsafe {
            libc::free(nic.cast());
            libc::free(dev.cast());
            libc::free(bus.cast());
            libc::free(link.cast());
        }
        return std::ptr::null_mut();
    }
    // SAFETY: all four were just allocated, zeroed, and are ours.
    unsafe {
        *dev = sys::fi_device_attr {
            name: c_str(Some(&n.name)),
            device_id: c_str(n.device_id.as_deref()),
            device_version: c_str(n.device_version.as_deref()),
            vendor_id: c_str(n.vendor_id.as_deref()),
            driver: c_str(n.driver.as_deref()),
            firmware: std::ptr::null_mut(),
        };
        if let Some((domain_id, bus_id, device_id, function_id)) = n.pci {
            (*bus).bus_type = sys::fi_bus_type_FI_BUS_PCI;
            (*bus).attr.pci = sys::fi_pci_attr {
                domain_id,
                bus_id,
                device_id,
                function_id,
            };
        } else {
            (*bus).bus_type = sys::fi_bus_type_FI_BUS_UNKNOWN;
        }
        *link = sys::fi_link_attr {
            address: c_str(n.address.as_deref()),
            mtu: n.mtu,
            speed: n.speed,
            state: n.state,
            network_type: c_str(n.network_type.as_deref()),
        };
        (*nic).fid = sys::fid {
            fclass: sys::FI_CLASS_NIC as usize,
            context: std::ptr::null_mut(),
            ops: crate::obj::ops_ptr(&NIC_FI_OPS),
        };
        (*nic).device_attr = dev;
        (*nic).bus_attr = bus;
        (*nic).link_attr = link;
        (*nic).prov_attr = std::ptr::null_mut();
    }
    nic
}

/// The nic behind a fid, if it is one of ours.
///
/// # Safety
/// `fid` is NULL or a live fid.
unsafe fn ours<'a>(fid: *const sys::fid) -> Option<&'a sys::fid_nic> {
    // SAFETY: fid is NULL or live (caller).
    let f = unsafe { fid.as_ref() }?;
    if f.fclass != sys::FI_CLASS_NIC as usize || !std::ptr::eq(f.ops, &NIC_FI_OPS) {
        return None;
    }
    // SAFETY: class and ops say alloc made it: a fid_nic whose first field is fid.
    Some(unsafe { &*(fid as *const sys::fid_nic) })
}

/// A C string field as `Option<String>`.
///
/// # Safety
/// `p` is NULL or NUL-terminated.
unsafe fn opt(p: *const c_char) -> Option<String> {
    // SAFETY: forwarded.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// `fi_close` of a nic (from `fi_freeinfo`): free what `alloc` made.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the core; checked to be one of ours.
        let Some(n) = (unsafe { ours(fid) }) else {
            return crate::consts::err::EINVAL;
        };
        // SAFETY: every pointer below is NULL or malloc'd by alloc/dup, and the
        // core hands the nic back once.
        unsafe {
            if let Some(d) = n.device_attr.as_ref() {
                for p in [
                    d.name,
                    d.device_id,
                    d.device_version,
                    d.vendor_id,
                    d.driver,
                    d.firmware,
                ] {
                    libc::free(p.cast());
                }
            }
            if let Some(l) = n.link_attr.as_ref() {
                libc::free(l.address.cast());
                libc::free(l.network_type.cast());
            }
            libc::free(n.device_attr.cast());
            libc::free(n.bus_attr.cast());
            libc::free(n.link_attr.cast());
            libc::free(fid.cast());
        }
        0
    })
}

/// The attributes of a nic, back in Rust form.
///
/// # Safety
/// `n` was made by `alloc` (its attribute pointers valid or NULL).
unsafe fn info_of(n: &sys::fid_nic) -> NicInfo {
    // SAFETY: attribute pointers are NULL or valid (alloc), strings NUL-terminated.
    unsafe {
        let d = n.device_attr.as_ref();
        let l = n.link_attr.as_ref();
        let b = n.bus_attr.as_ref();
        NicInfo {
            name: d.and_then(|d| opt(d.name)).unwrap_or_default(),
            address: l.and_then(|l| opt(l.address)),
            mtu: l.map_or(0, |l| l.mtu),
            speed: l.map_or(0, |l| l.speed),
            state: l.map_or(sys::fi_link_state_FI_LINK_UNKNOWN, |l| l.state),
            network_type: l.and_then(|l| opt(l.network_type)),
            pci: b
                .filter(|b| b.bus_type == sys::fi_bus_type_FI_BUS_PCI)
                .map(|b| {
                    let p = b.attr.pci;
                    (p.domain_id, p.bus_id, p.device_id, p.function_id)
                }),
            vendor_id: d.and_then(|d| opt(d.vendor_id)),
            device_id: d.and_then(|d| opt(d.device_id)),
            device_version: d.and_then(|d| opt(d.device_version)),
            driver: d.and_then(|d| opt(d.driver)),
        }
    }
}

/// `fi_control` of a nic: `FI_DUP` (from `fi_dupinfo`) writes a deep copy.
unsafe extern "C" fn control(fid: *mut sys::fid, cmd: c_int, arg: *mut c_void) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the core; checked to be one of ours.
        let Some(n) = (unsafe { ours(fid) }) else {
            return crate::consts::err::EINVAL;
        };
        if cmd as u32 != sys::FI_DUP {
            return crate::consts::err::ENOSYS;
        }
        if arg.is_null() {
            return crate::consts::err::EINVAL;
        }
        // SAFETY: n came from alloc.
        let i = unsafe { info_of(n) };
        let copy = build(&i);
        if copy.is_null() {
            return crate::consts::err::ENOMEM;
        }
        // SAFETY: for FI_DUP, arg points to the `struct fid_nic *` to fill.
        unsafe { *(arg as *mut *mut sys::fid_nic) = copy };
        0
    })
}

/// `tostr` of a nic (from `fi_tostr` of an `fi_info`): appends its
/// attributes to `buf`, whose total size is `len`.
unsafe extern "C" fn tostr(fid: *const sys::fid, buf: *mut c_char, len: usize) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the core; checked to be one of ours.
        let Some(n) = (unsafe { ours(fid) }) else {
            return crate::consts::err::EINVAL;
        };
        if buf.is_null() || len == 0 {
            return crate::consts::err::EINVAL;
        }
        // SAFETY: n came from alloc.
        let i = unsafe { info_of(n) };
        let s = text(&i);
        // SAFETY: buf holds a NUL-terminated string within len bytes (fi_tostr).
        unsafe {
            let used = libc::strnlen(buf, len);
            if used + 1 >= len {
                return 0;
            }
            let room = len - used - 1;
            let k = s.len().min(room);
            std::ptr::copy_nonoverlapping(s.as_ptr(), buf.add(used) as *mut u8, k);
            *buf.add(used + k) = 0;
        }
        0
    })
}

/// The nic part of `fi_tostr` (the layout of libfabric's own).
pub fn text(i: &NicInfo) -> String {
    let o = |s: &Option<String>| s.clone().unwrap_or_else(|| "(null)".into());
    let state = match i.state {
        sys::fi_link_state_FI_LINK_UP => "FI_LINK_UP",
        sys::fi_link_state_FI_LINK_DOWN => "FI_LINK_DOWN",
        _ => "FI_LINK_UNKNOWN",
    };
    let mut s = format!(
        "    nic:\n        fi_device_attr:\n            name: {}\n            device_id: {}\n            device_version: {}\n            vendor_id: {}\n            driver: {}\n            firmware: (null)\n        fi_bus_attr:\n            bus_type: {}\n",
        i.name,
        o(&i.device_id),
        o(&i.device_version),
        o(&i.vendor_id),
        o(&i.driver),
        if i.pci.is_some() { "FI_BUS_PCI" } else { "FI_BUS_UNKNOWN" },
    );
    if let Some((d, b, dev, f)) = i.pci {
        s += &format!(
            "            fi_pci_attr:\n                domain_id: {d}\n                bus_id: {b}\n                device_id: {dev}\n                function_id: {f}\n"
        );
    }
    s += &format!(
        "        fi_link_attr:\n            address: {}\n            mtu: {}\n            speed: {}\n            state: {state}\n            network_type: {}\n",
        o(&i.address),
        i.mtu,
        i.speed,
        o(&i.network_type),
    );
    s
}
