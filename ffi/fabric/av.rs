//! Address vectors (TABLE, and MAP reported as asked): socket addresses of the
//! domain's family (IPv4 or IPv6) indexed by `fi_addr_t`.

use std::collections::HashMap;
use std::ffi::CString;
use std::net::SocketAddr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::addr::{self, SOCKADDR_IN6_LEN, SOCKADDR_IN_LEN};
use crate::consts::*;
use crate::fabric::domain::{self, Domain};
use crate::obj::{self, FiObject};
use crate::refs::Refs;
use crate::{guard, nosys, sys};

#[derive(Default)]
struct Table {
    /// fi_addr → address (`None` once removed; indices are never reused).
    addrs: Vec<Option<SocketAddr>>,
    /// address → first fi_addr holding it (for FI_SOURCE).
    by_addr: HashMap<SocketAddr, u64>,
}

/// Shared state of an AV.
#[derive(Default)]
pub struct AvCore {
    table: Mutex<Table>,
    /// True when it holds IPv6 addresses (its domain's family), false for IPv4.
    pub v6: bool,
    /// Bumped on every removal, so endpoints drop cached translations.
    generation: AtomicU64,
    /// Endpoints bound to it.
    pub bound: Refs,
}

impl AvCore {
    /// The address of `fi_addr`.
    pub fn addr_of(&self, fi_addr: u64) -> Option<SocketAddr> {
        let t = self.table.lock();
        t.addrs
            .get(usize::try_from(fi_addr).ok()?)
            .copied()
            .flatten()
    }
    /// The fi_addr of `a`, if inserted.
    pub fn fi_addr_of(&self, a: SocketAddr) -> Option<u64> {
        self.table.lock().by_addr.get(&a).copied()
    }
    /// Current generation (changes when entries are removed).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
    fn insert(&self, a: SocketAddr) -> u64 {
        let mut t = self.table.lock();
        let id = t.addrs.len() as u64;
        t.addrs.push(Some(a));
        t.by_addr.entry(a).or_insert(id);
        id
    }
    fn remove(&self, fi_addr: u64) -> bool {
        let mut t = self.table.lock();
        let Some(slot) = usize::try_from(fi_addr)
            .ok()
            .and_then(|i| t.addrs.get_mut(i))
        else {
            return false;
        };
        let Some(a) = slot.take() else { return false };
        if t.by_addr.get(&a) == Some(&fi_addr) {
            t.by_addr.remove(&a);
            // Another live entry with the same address takes over the reverse map.
            if let Some(other) = t.addrs.iter().position(|x| *x == Some(a)) {
                t.by_addr.insert(a, other as u64);
            }
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        true
    }
}

/// `struct fid_av` plus our state.
#[repr(C)]
pub struct Av {
    fid: sys::fid_av,
    domain: *const Domain,
    /// Shared with bound endpoints.
    pub core: Arc<AvCore>,
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, Some(bind), None);
static OPS: sys::fi_ops_av = sys::fi_ops_av {
    // Callers check `size` before using entries newer than libfabric 1.17's table.
    size: std::mem::size_of::<sys::fi_ops_av>(),
    insert: Some(insert),
    insertsvc: Some(insertsvc),
    insertsym: Some(insertsym),
    remove: Some(remove),
    lookup: Some(lookup),
    straddr: Some(straddr),
    av_set: Some(av_set),
};

// SAFETY: repr(C), fid_av first, FI_OPS set by av_open.
unsafe impl FiObject for Av {
    const FCLASS: u32 = sys::FI_CLASS_AV;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

/// `fi_av_open`.
pub unsafe extern "C" fn av_open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_av_attr,
    av: *mut *mut sys::fid_av,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        // SAFETY: domain from the application; validated by get.
        let Some(d) = (unsafe { domain::get(domain) }) else {
            return err::EINVAL;
        };
        if av.is_null() {
            return err::EINVAL;
        }
        // SAFETY: attr NULL or valid.
        if let Some(a) = unsafe { attr.as_mut() } {
            if ![FI_AV_UNSPEC, FI_AV_TABLE, FI_AV_MAP].contains(&a.type_) {
                return err::EINVAL;
            }
            if a.type_ == FI_AV_UNSPEC {
                // fi_av(3): the provider picks, and says which through `type`.
                a.type_ = FI_AV_TABLE;
            }
            if !a.name.is_null() || a.rx_ctx_bits != 0 {
                // Named (shared) AVs and scalable endpoints are not offered.
                return err::ENOSYS;
            }
        }
        let obj = Av {
            fid: sys::fid_av {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_AV as usize,
                    context,
                    ops: obj::ops_ptr(&FI_OPS),
                },
                ops: obj::ops_ptr(&OPS),
            },
            domain: d,
            core: Arc::new(AvCore {
                v6: d.v6,
                ..AvCore::default()
            }),
        };
        d.refs.inc();
        // SAFETY: av is a valid out-pointer.
        unsafe { *av = obj::into_c(obj) };
        0
    })
}

/// The AV behind a fid.
///
/// # Safety
/// `fid` NULL or live.
pub unsafe fn get<'a>(fid: *const sys::fid) -> Option<&'a Av> {
    // SAFETY: forwarded.
    unsafe { obj::get::<Av>(fid) }
}

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { get(fid) } {
            None => err::EINVAL,
            Some(a) if a.core.bound.busy() => err::EBUSY,
            Some(a) => {
                // SAFETY: the domain outlives its AVs.
                unsafe { (*a.domain).refs.dec() };
                // SAFETY: validated; C stops using it now.
                drop(unsafe { obj::take::<Av>(fid) });
                0
            }
        }
    })
}

unsafe extern "C" fn bind(_: *mut sys::fid, _: *mut sys::fid, _: u64) -> c_int {
    // Asynchronous insertion (an EQ bound to the AV) is not offered.
    err::ENOSYS
}

unsafe extern "C" fn insert(
    av: *mut sys::fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut u64,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    obj::with_int(av, |Av { core: a, .. }: &Av| {
        if count > 0 && addr.is_null() {
            return err::EINVAL;
        }
        // FI_SYNC_ERR: context is an array of `count` ints, one status per
        // address: 0 inserted, a positive fabric errno refused (fi_av(3)).
        let sync_err = if flags & FI_SYNC_ERR != 0 {
            if count > 0 && context.is_null() {
                return err::EINVAL;
            }
            context as *mut c_int
        } else {
            std::ptr::null_mut()
        };
        // Entries are packed in the domain's format: sockaddr_in or sockaddr_in6.
        let (stride, family) = if a.v6 {
            (SOCKADDR_IN6_LEN, libc::AF_INET6)
        } else {
            (SOCKADDR_IN_LEN, libc::AF_INET)
        };
        let mut ok = 0;
        let mut warned = false;
        for i in 0..count {
            // SAFETY: addr holds count packed entries of `stride` bytes (the
            // domain's address format).
            let one = unsafe { (addr as *const u8).add(i * stride).cast::<c_void>() };
            // SAFETY: as above.
            let (fam, one) = unsafe {
                (
                    addr::family_of(one, stride),
                    addr::read_sockaddr(one, stride),
                )
            };
            if fam != Some(family) && !warned {
                warned = true;
                crate::log::warn(&format!(
                    "fi_av_insert: entry {i} has address family {}, not the AV's {} ({}): refused",
                    fam.unwrap_or(-1),
                    family,
                    if a.v6 {
                        "FI_SOCKADDR_IN6"
                    } else {
                        "FI_SOCKADDR_IN"
                    }
                ));
            }
            let (id, status) = match one {
                Some(sa) if fam == Some(family) && !sa.ip().is_unspecified() && sa.port() != 0 => {
                    ok += 1;
                    (a.insert(sa), 0)
                }
                _ => (FI_ADDR_NOTAVAIL, -err::EINVAL),
            };
            if !sync_err.is_null() {
                // SAFETY: with FI_SYNC_ERR, context has count int slots.
                unsafe { *sync_err.add(i) = status };
            }
            if !fi_addr.is_null() {
                // SAFETY: fi_addr has count slots when non-NULL.
                unsafe { *fi_addr.add(i) = id };
            }
        }
        ok
    })
}

unsafe extern "C" fn insertsvc(
    av: *mut sys::fid_av,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut u64,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        if node.is_null() || service.is_null() {
            return err::EINVAL;
        }
        // SAFETY: node and service are NUL-terminated strings (API contract).
        let (n, s) = unsafe {
            (
                std::ffi::CStr::from_ptr(node),
                std::ffi::CStr::from_ptr(service),
            )
        };
        // SAFETY: av from the application; validated by get.
        let Some(v6) = (unsafe { get(obj::fid_of(av)) }).map(|a| a.core.v6) else {
            return err::EINVAL;
        };
        // An IPv6 literal is written in brackets for the resolver.
        let (n, s) = (n.to_string_lossy(), s.to_string_lossy());
        let text = if n.contains(':') && !n.starts_with('[') {
            format!("[{n}]:{s}")
        } else {
            format!("{n}:{s}")
        };
        // Only an address of the AV's family will do.
        let resolved = std::net::ToSocketAddrs::to_socket_addrs(&text)
            .ok()
            .and_then(|mut it| it.find(|a| a.is_ipv6() == v6));
        let Some(sa) = resolved else {
            if !fi_addr.is_null() {
                // SAFETY: one fi_addr slot.
                unsafe { *fi_addr = FI_ADDR_NOTAVAIL };
            }
            return 0;
        };
        let c = addr::CAddr::from(sa);
        // SAFETY: one address of the AV's format on the stack; the rest forwarded.
        unsafe { insert(av, c.as_ptr().cast(), 1, fi_addr, flags, context) }
    })
}

unsafe extern "C" fn insertsym(
    _: *mut sys::fid_av,
    _: *const c_char,
    _: usize,
    _: *const c_char,
    _: usize,
    _: *mut u64,
    _: u64,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}

unsafe extern "C" fn remove(
    av: *mut sys::fid_av,
    fi_addr: *mut u64,
    count: usize,
    _flags: u64,
) -> c_int {
    obj::with_int(av, |Av { core: a, .. }: &Av| {
        if count > 0 && fi_addr.is_null() {
            return err::EINVAL;
        }
        let mut rc = 0;
        for i in 0..count {
            // SAFETY: fi_addr has count entries.
            if !a.remove(unsafe { *fi_addr.add(i) }) {
                rc = err::EINVAL;
            }
        }
        rc
    })
}

unsafe extern "C" fn lookup(
    av: *mut sys::fid_av,
    fi_addr: u64,
    out: *mut c_void,
    len: *mut usize,
) -> c_int {
    obj::with_int(av, |Av { core: a, .. }: &Av| {
        if len.is_null() {
            return err::EINVAL;
        }
        let Some(sa) = a.addr_of(fi_addr) else {
            return err::ENODATA;
        };
        // SAFETY: out NULL or writable for *len bytes; len valid.
        unsafe { addr::write_sockaddr(sa, out, len) };
        0
    })
}

unsafe extern "C" fn straddr(
    av: *mut sys::fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    guard::guard(std::ptr::null(), || {
        if buf.is_null() || len.is_null() {
            return std::ptr::null();
        }
        // SAFETY: av from the application; validated by get.
        let room = match unsafe { get(obj::fid_of(av)) } {
            Some(a) if a.core.v6 => SOCKADDR_IN6_LEN,
            _ => SOCKADDR_IN_LEN,
        };
        // SAFETY: addr is an address of the AV's format, `room` bytes.
        let text = match unsafe { addr::read_sockaddr(addr, room) } {
            Some(sa @ SocketAddr::V4(_)) => format!("fi_sockaddr_in://{sa}"),
            Some(sa @ SocketAddr::V6(_)) => format!("fi_sockaddr_in6://{sa}"),
            None => "fi_addr_unknown".to_owned(),
        };
        let Ok(c) = CString::new(text) else {
            return std::ptr::null();
        };
        let bytes = c.as_bytes_with_nul();
        // SAFETY: len is valid; buf writable for *len bytes.
        unsafe {
            let room = *len;
            *len = bytes.len();
            if room > 0 {
                let n = bytes.len().min(room);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, n);
                *buf.add(n - 1) = 0;
            }
        }
        buf
    })
}

unsafe extern "C" fn av_set(
    _: *mut sys::fid_av,
    _: *mut sys::fi_av_set_attr,
    _: *mut *mut sys::fid_av_set,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}
