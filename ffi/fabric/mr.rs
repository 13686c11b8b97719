//! Memory regions: the domain's table of registered memory (key → range and
//! access) that RMA and atomics aimed at this process resolve through.
//!
//! spray needs no registration for local buffers (it copies through the kernel's
//! UDP stack); the table exists for the target side of one-sided operations.

use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use spray::{RmaAccess, RmaTarget};

use crate::consts::err;
use crate::consts::{fi_version, FI_HMEM_SYSTEM, FI_REMOTE_READ, FI_REMOTE_WRITE};
use crate::fabric::domain::{self, Domain};
use crate::io::buf::FfiBuf;
use crate::limits::IOV_LIMIT;
use crate::obj::{self, FiObject};
use crate::{check, guard, nosys, sys};

/// `-FI_ENOKEY`: a requested key is already in use.
pub const ENOKEY: c_int = -(sys::FI_ENOKEY as c_int);

/// One registered region: up to `IOV_LIMIT` pieces of application memory.
#[derive(Copy, Clone, Debug)]
struct Region {
    /// (address, bytes) of each piece, in order.
    segs: [(usize, usize); IOV_LIMIT],
    /// Pieces in use.
    count: usize,
    /// Total bytes.
    len: usize,
    /// `FI_REMOTE_READ` / `FI_REMOTE_WRITE` as registered.
    access: u64,
}

/// The domain's registrations, shared with its endpoints' engines.
#[derive(Debug)]
pub struct MrTable {
    regions: RwLock<HashMap<u64, Region>>,
    /// Next provider-chosen key (`FI_MR_PROV_KEY`).
    next_key: AtomicU64,
    /// Remote addresses are virtual addresses (`FI_MR_VIRT_ADDR`); otherwise
    /// 0-based byte offsets into the region.
    pub virt_addr: bool,
    /// The provider picks keys (`FI_MR_PROV_KEY`); otherwise the application's
    /// requested key is used and must be unique.
    pub prov_key: bool,
}

impl MrTable {
    /// An empty table for a domain opened with `mr_mode`.
    pub fn new(mr_mode: i32) -> MrTable {
        let basic = mr_mode == crate::consts::FI_MR_BASIC;
        let bits = if basic || mr_mode == crate::consts::FI_MR_SCALABLE {
            0
        } else {
            mr_mode as u32
        };
        MrTable {
            regions: RwLock::new(HashMap::new()),
            next_key: AtomicU64::new(1),
            virt_addr: basic || bits & sys::FI_MR_VIRT_ADDR != 0,
            prov_key: basic || bits & sys::FI_MR_PROV_KEY != 0,
        }
    }

    /// Register `segs` under `requested` (or a fresh key in `FI_MR_PROV_KEY` mode).
    fn insert(&self, segs: &[(usize, usize)], access: u64, requested: u64) -> Result<u64, c_int> {
        if segs.len() > IOV_LIMIT {
            return Err(err::EINVAL);
        }
        let mut r = Region {
            segs: [(0, 0); IOV_LIMIT],
            count: segs.len(),
            len: 0,
            access,
        };
        for (dst, &(base, len)) in r.segs.iter_mut().zip(segs) {
            if len > 0 && base == 0 {
                return Err(err::EINVAL);
            }
            *dst = (base, len);
            r.len = r.len.checked_add(len).ok_or(err::EINVAL)?;
        }
        let mut map = self.regions.write();
        let key = if self.prov_key {
            loop {
                let k = self.next_key.fetch_add(1, Ordering::Relaxed);
                if !map.contains_key(&k) {
                    break k;
                }
            }
        } else if map.contains_key(&requested) {
            return Err(ENOKEY);
        } else {
            requested
        };
        map.insert(key, r);
        Ok(key)
    }

    fn remove(&self, key: u64) {
        self.regions.write().remove(&key);
    }

    /// Number of live registrations (tests, logs).
    pub fn len(&self) -> usize {
        self.regions.read().len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The region's memory for `len` bytes at remote address `addr`, as iovecs.
    fn lookup(&self, key: u64, addr: u64, len: usize, access: RmaAccess) -> Option<FfiBuf> {
        let map = self.regions.read();
        let r = map.get(&key)?;
        let need = match access {
            RmaAccess::Read => FI_REMOTE_READ,
            // fi_mr(3): FI_REMOTE_WRITE covers "the target buffer of an RMA write or
            // atomic operation" (fetching atomics included).
            RmaAccess::Write | RmaAccess::Atomic => FI_REMOTE_WRITE,
        };
        if r.access & need == 0 {
            return None;
        }
        let first = r.segs[0].0 as u64;
        let start = if self.virt_addr {
            if r.count == 0 {
                addr
            } else {
                addr.checked_sub(first)?
            }
        } else {
            addr
        };
        let start = usize::try_from(start).ok()?;
        if start.checked_add(len)? > r.len {
            return None;
        }
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; IOV_LIMIT];
        let (mut n, mut skip, mut left) = (0, start, len);
        for &(base, seg_len) in &r.segs[..r.count] {
            if left == 0 {
                break;
            }
            if skip >= seg_len {
                skip -= seg_len;
                continue;
            }
            let take = (seg_len - skip).min(left);
            iov[n] = libc::iovec {
                iov_base: (base + skip) as *mut c_void,
                iov_len: take,
            };
            n += 1;
            left -= take;
            skip = 0;
        }
        // SAFETY: every iovec lies inside a region the application registered and
        // keeps valid until it closes the MR (fi_mr(3)); a remote access after that
        // is the application's error, as on RDMA hardware.
        unsafe { FfiBuf::from_iov(iov.as_ptr(), n) }
    }
}

/// The engine's view of a domain's table (`RmaTarget`): cheap to call, `Send`.
pub struct MrTarget(pub Arc<MrTable>);

impl RmaTarget<FfiBuf> for MrTarget {
    fn resolve(&self, key: u64, addr: u64, len: usize, access: RmaAccess) -> Option<FfiBuf> {
        self.0.lookup(key, addr, len, access)
    }
}

/// `struct fid_mr` plus our state.
#[repr(C)]
pub struct Mr {
    fid: sys::fid_mr,
    domain: *const Domain,
    /// First byte of the region (for tracing; nothing is pinned).
    pub base: usize,
    /// Length in bytes.
    pub len: usize,
    /// Its key is in the domain's table (it allows remote access).
    in_table: bool,
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, Some(bind), Some(control));

/// The domain's `fi_ops_mr` table.
pub static MR_OPS: sys::fi_ops_mr = sys::fi_ops_mr {
    size: std::mem::size_of::<sys::fi_ops_mr>(),
    reg: Some(reg),
    regv: Some(regv),
    regattr: Some(regattr),
};

// SAFETY: repr(C), fid_mr first, FI_OPS set by new_mr.
unsafe impl FiObject for Mr {
    const FCLASS: u32 = sys::FI_CLASS_MR;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

/// True when every piece lies inside the address space (no wrap past its end)
/// and the whole is at most `isize::MAX` bytes: a `SIZE_MAX` length is not memory.
fn addressable(segs: &[(usize, usize)]) -> bool {
    let mut total = 0usize;
    segs.iter().all(|&(base, len)| {
        total = total.saturating_add(len);
        base.checked_add(len).is_some() && total <= isize::MAX as usize
    })
}

/// Register `segs` with the domain `dom` and hand out an MR object (`flags`
/// as passed to `fi_mr_reg*`: none is supported).
#[allow(clippy::too_many_arguments)]
fn new_mr(
    dom: *mut sys::fid,
    segs: &[(usize, usize)],
    access: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: dom comes from the application; validated by get.
    let Some(d) = (unsafe { domain::get(dom as *mut sys::fid_domain) }) else {
        return err::EINVAL;
    };
    if mr.is_null() || !addressable(segs) {
        return err::EINVAL;
    }
    if flags & !check::MR_FLAGS != 0 {
        return err::EBADFLAGS;
    }
    // Only regions peers may access take a key in the table: local-only
    // registrations (FI_SEND / FI_RECV / FI_READ / FI_WRITE) need no unique key,
    // and some applications register many buffers under the same key (aws-ofi-nccl
    // reuses key 0).
    let remote = access & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0;
    let key = if remote {
        match d.mrs.insert(segs, access, requested_key) {
            Ok(k) => k,
            Err(e) => return e,
        }
    } else {
        requested_key
    };
    let base = segs.first().map_or(0, |s| s.0);
    let len = segs.iter().map(|s| s.1).sum();
    let obj = Mr {
        fid: sys::fid_mr {
            fid: sys::fid {
                fclass: sys::FI_CLASS_MR as usize,
                context,
                ops: obj::ops_ptr(&FI_OPS),
            },
            mem_desc: std::ptr::null_mut(),
            key,
        },
        domain: d,
        base,
        len,
        in_table: remote,
    };
    d.refs.inc();
    let p: *mut sys::fid_mr = obj::into_c(obj);
    // SAFETY: p is the fresh object; its descriptor is its own address (any
    // non-NULL value the app passes back as `desc` is accepted and ignored).
    unsafe {
        (*p).mem_desc = p.cast();
        *mr = p;
    }
    0
}

/// The (base, len) pieces of `count` iovecs (`None` if NULL with a count or too many).
///
/// # Safety
/// `iov` is NULL or points to `count` iovecs.
unsafe fn segs_of(iov: *const sys::iovec, count: usize) -> Option<Vec<(usize, usize)>> {
    if count > IOV_LIMIT || (count > 0 && iov.is_null()) {
        return None;
    }
    // SAFETY: iov has count entries (caller; non-NULL checked when count > 0).
    Some(
        (0..count)
            .map(|i| unsafe { *iov.add(i) })
            .map(|v| (v.iov_base as usize, v.iov_len))
            .collect(),
    )
}

unsafe extern "C" fn reg(
    fid: *mut sys::fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    _offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        new_mr(
            fid,
            &[(buf as usize, len)],
            access,
            requested_key,
            flags,
            mr,
            context,
        )
    })
}

unsafe extern "C" fn regv(
    fid: *mut sys::fid,
    iov: *const sys::iovec,
    count: usize,
    access: u64,
    _offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        // SAFETY: iov has count entries (API contract).
        let Some(segs) = (unsafe { segs_of(iov, count) }) else {
            return err::EINVAL;
        };
        new_mr(fid, &segs, access, requested_key, flags, mr, context)
    })
}

unsafe extern "C" fn regattr(
    fid: *mut sys::fid,
    attr: *const sys::fi_mr_attr,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
) -> c_int {
    guard::int(|| {
        if attr.is_null() {
            return err::EINVAL;
        }
        if flags & !check::MR_FLAGS != 0 {
            // Before reading the iovecs: with FI_MR_DMABUF they are not iovecs.
            return err::EBADFLAGS;
        }
        // SAFETY: attr is valid; we read only the leading fields, whose layout is
        // the same in every libfabric version (1.x and 2.x only appended / unioned later ones).
        let a = unsafe { &*attr };
        // Only host memory: device memory (CUDA, ROCr, ZE, ...) would need
        // FI_HMEM, which spray does not offer. libfabric's util providers
        // return -FI_ENOSYS for an interface they cannot register
        // (ofi_mr_regattr). `iface` exists from API 1.9 on; older
        // applications' attributes end before it.
        // SAFETY: dom comes from the application; validated by get.
        let api = unsafe { domain::get(fid as *mut sys::fid_domain) }.map_or(0, |d| d.api_version);
        if api >= fi_version(1, 9) && a.iface != FI_HMEM_SYSTEM {
            crate::log::warn(&format!(
                "fi_mr_regattr: iface {} is not host memory",
                a.iface
            ));
            return err::ENOSYS;
        }
        // SAFETY: mr_iov has iov_count entries.
        let Some(segs) = (unsafe { segs_of(a.mr_iov, a.iov_count) }) else {
            return err::EINVAL;
        };
        new_mr(fid, &segs, a.access, a.requested_key, flags, mr, a.context)
    })
}

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; take validates it.
        match unsafe { obj::take::<Mr>(fid) } {
            None => err::EINVAL,
            Some(m) => {
                // SAFETY: the domain outlives its MRs (its refs count this one).
                let d = unsafe { &*m.domain };
                if m.in_table {
                    d.mrs.remove(m.fid.key);
                }
                d.refs.dec();
                0
            }
        }
    })
}

unsafe extern "C" fn bind(_: *mut sys::fid, _: *mut sys::fid, _: u64) -> c_int {
    0
}

unsafe extern "C" fn control(_: *mut sys::fid, command: c_int, _: *mut c_void) -> c_int {
    if command == sys::FI_REFRESH as c_int || command == sys::FI_ENABLE as c_int {
        0
    } else {
        err::ENOSYS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spray::UserBuf;

    /// A region of two pieces: ranges crossing the seam land in both, bounds,
    /// access rights and both addressing modes are enforced.
    #[test]
    fn lookup_spans_pieces_and_checks_bounds() {
        let mut a = vec![0u8; 100];
        let mut b = vec![0u8; 50];
        let segs = [
            (a.as_mut_ptr() as usize, 100),
            (b.as_mut_ptr() as usize, 50),
        ];
        for virt in [false, true] {
            let mode = if virt {
                (sys::FI_MR_VIRT_ADDR | sys::FI_MR_PROV_KEY) as i32
            } else {
                0
            };
            let t = MrTable::new(mode);
            let key = t.insert(&segs, FI_REMOTE_WRITE, 9).unwrap();
            assert_eq!(key == 9, !virt, "requested key only without PROV_KEY");
            let at = |off: u64| if virt { segs[0].0 as u64 + off } else { off };
            let mut buf = t.lookup(key, at(90), 20, RmaAccess::Write).unwrap();
            assert_eq!(buf.len(), 20);
            buf.write_at(0, &[7u8; 20]);
            assert!(a[90..].iter().all(|&x| x == 7) && b[..10].iter().all(|&x| x == 7));
            assert!(a[..90].iter().chain(&b[10..]).all(|&x| x == 0));
            a.fill(0);
            b.fill(0);
            assert!(
                t.lookup(key, at(131), 20, RmaAccess::Write).is_none(),
                "past the end"
            );
            assert!(
                t.lookup(key, at(130), 20, RmaAccess::Write).is_some(),
                "up to the end"
            );
            assert!(
                t.lookup(key, at(0), 1, RmaAccess::Read).is_none(),
                "not readable"
            );
            assert!(
                t.lookup(key + 1, at(0), 1, RmaAccess::Write).is_none(),
                "unknown key"
            );
            if virt {
                assert!(
                    t.lookup(key, 5, 1, RmaAccess::Write).is_none(),
                    "below the base"
                );
            } else {
                assert_eq!(t.insert(&segs, FI_REMOTE_READ, 9), Err(ENOKEY));
            }
            t.remove(key);
            assert!(t.is_empty());
        }
    }
}
