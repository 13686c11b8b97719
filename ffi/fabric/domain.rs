//! The domain object: opens AVs, CQs, counters, endpoints and memory regions.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use crate::consts::err;
use crate::consts::*;
use crate::fabric::Fabric;
use crate::obj::{self, FiObject};
use crate::refs::Refs;
use crate::{ep::endpoint, fabric::av, fabric::cntr, fabric::cq, fabric::mr, guard, nosys, sys};

/// `struct fid_domain` plus our state.
#[repr(C)]
pub struct Domain {
    fid: sys::fid_domain,
    fabric: *const Fabric,
    /// Objects opened from this domain (AVs, CQs, counters, endpoints, MRs).
    pub refs: Refs,
    /// API version of the fabric.
    pub api_version: u32,
    /// AV type from the info it was opened with.
    pub av_type: u32,
    /// True for an IPv6 domain (`FI_SOCKADDR_IN6` info or an IPv6 source
    /// address): its AVs hold `sockaddr_in6` entries, and only those.
    pub v6: bool,
    /// Registered memory that RMA and atomics from peers may access.
    pub mrs: Arc<mr::MrTable>,
    /// The domain's default job key (`domain_attr->auth_key`), if any.
    pub auth_key: Option<Vec<u8>>,
    /// Its interface (the info's source address's, else its domain name's):
    /// where endpoints opened without a source address bind.
    pub iface: Option<crate::iface::Iface>,
    /// Its rails, for a domain named for several interfaces (`a+b`,
    /// `iface::rails_named`): its endpoints bind to all of them and `iface`
    /// is the first. Empty: one interface.
    pub rails: Vec<crate::iface::Iface>,
}

static FI_OPS: sys::fi_ops = nosys::fid_ops(close, None, None);
static OPS: sys::fi_ops_domain = sys::fi_ops_domain {
    size: std::mem::size_of::<sys::fi_ops_domain>(),
    av_open: Some(av::av_open),
    cq_open: Some(cq::cq_open),
    endpoint: Some(endpoint::endpoint_open),
    scalable_ep: Some(scalable_ep),
    cntr_open: Some(cntr::cntr_open),
    poll_open: Some(crate::fabric::poll::poll_open),
    stx_ctx: Some(stx_ctx),
    srx_ctx: Some(srx_ctx),
    query_atomic: Some(query_atomic),
    query_collective: Some(query_collective),
    endpoint2: Some(endpoint::endpoint_open2),
};

// SAFETY: repr(C), fid_domain first, FI_OPS set by open.
unsafe impl FiObject for Domain {
    const FCLASS: u32 = sys::FI_CLASS_DOMAIN;
    fn fid_ops() -> *const sys::fi_ops {
        &FI_OPS
    }
}

/// `fi_domain`.
pub unsafe extern "C" fn domain_open(
    fabric: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    dom: *mut *mut sys::fid_domain,
    context: *mut c_void,
) -> c_int {
    guard::int(|| {
        // SAFETY: fabric comes from the application; get validates it.
        let Some(f) = (unsafe { obj::get::<Fabric>(obj::fid_of(fabric)) }) else {
            return err::EINVAL;
        };
        if dom.is_null() || info.is_null() {
            return err::EINVAL;
        }
        // SAFETY: info is a valid fi_info (non-null checked); domain_attr NULL or valid.
        let dattr = unsafe { (*info).domain_attr.as_ref() };
        let av_type = dattr.map_or(FI_AV_TABLE, |d| d.av_type);
        let mr_mode = dattr.map_or(0, |d| d.mr_mode);
        // SAFETY: as above; src_addr is NULL or src_addrlen readable bytes.
        let v6 = unsafe {
            let i = &*info;
            crate::addr::read_sockaddr(i.src_addr, i.src_addrlen).map_or_else(
                || match i.addr_format {
                    FI_SOCKADDR_IN6 => true,
                    FI_SOCKADDR_IN => false,
                    _ => crate::iface::default_v6(),
                },
                |a| a.is_ipv6(),
            )
        };
        // SAFETY: as above; a non-NULL domain name is NUL-terminated.
        let iface = unsafe {
            let i = &*info;
            match crate::addr::read_sockaddr(i.src_addr, i.src_addrlen) {
                Some(a) if !a.ip().is_unspecified() => crate::iface::owning(a.ip()),
                _ => dattr.filter(|d| !d.name.is_null()).and_then(|d| {
                    let name = std::ffi::CStr::from_ptr(d.name).to_string_lossy();
                    crate::iface::by_name(&name, v6)
                }),
            }
        };
        // A domain named for several interfaces (`a+b`) spans them as rails,
        // unless a source address of another interface is given.
        // SAFETY: as above.
        let rails = unsafe {
            let i = &*info;
            let src = crate::addr::read_sockaddr(i.src_addr, i.src_addrlen);
            dattr
                .filter(|d| !d.name.is_null())
                .and_then(|d| {
                    let name = std::ffi::CStr::from_ptr(d.name).to_string_lossy();
                    crate::iface::rails_named(&name, v6)
                })
                .filter(|r| src.is_none_or(|a| a.ip().is_unspecified() || a.ip() == r[0].ip))
                .unwrap_or_default()
        };
        let iface = rails.first().cloned().or(iface);
        // SAFETY: auth_key holds auth_key_size bytes (libfabric contract).
        let auth_key =
            match dattr.map(|d| unsafe { crate::auth::key_of(d.auth_key, d.auth_key_size) }) {
                Some(Ok(k)) => k,
                Some(Err(crate::auth::BadKey)) => return err::EINVAL,
                None => None,
            };
        let d = Domain {
            fid: sys::fid_domain {
                fid: sys::fid {
                    fclass: sys::FI_CLASS_DOMAIN as usize,
                    context,
                    ops: obj::ops_ptr(&FI_OPS),
                },
                ops: obj::ops_ptr(&OPS),
                mr: obj::ops_ptr(&mr::MR_OPS),
            },
            fabric: f,
            refs: Refs::default(),
            api_version: f.api_version,
            av_type,
            v6,
            mrs: Arc::new(mr::MrTable::new(mr_mode)),
            auth_key,
            iface,
            rails,
        };
        f.refs.inc();
        // SAFETY: dom is a valid out-pointer.
        unsafe { *dom = obj::into_c(d) };
        0
    })
}

/// `fi_domain2`: no flags are supported.
pub unsafe extern "C" fn domain_open2(
    fabric: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    dom: *mut *mut sys::fid_domain,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    if flags != 0 {
        return err::ENOSYS;
    }
    // SAFETY: same contract as fi_domain.
    unsafe { domain_open(fabric, info, dom, context) }
}

unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    guard::int(|| {
        // SAFETY: fid from the application; validated by get.
        match unsafe { obj::get::<Domain>(fid) } {
            None => err::EINVAL,
            Some(d) if d.refs.busy() => err::EBUSY,
            Some(d) => {
                // SAFETY: the fabric outlives its domains (its refs count this one).
                unsafe { (*d.fabric).refs.dec() };
                // SAFETY: validated above; C stops using it now.
                drop(unsafe { obj::take::<Domain>(fid) });
                0
            }
        }
    })
}

/// The domain behind a `fid_domain` pointer.
///
/// # Safety
/// `d` is NULL or a live fid.
pub unsafe fn get<'a>(d: *mut sys::fid_domain) -> Option<&'a Domain> {
    // SAFETY: forwarded contract.
    unsafe { obj::get::<Domain>(obj::fid_of(d)) }
}

unsafe extern "C" fn scalable_ep(
    _: *mut sys::fid_domain,
    _: *mut sys::fi_info,
    _: *mut *mut sys::fid_ep,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}
unsafe extern "C" fn stx_ctx(
    _: *mut sys::fid_domain,
    _: *mut sys::fi_tx_attr,
    _: *mut *mut sys::fid_stx,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}
unsafe extern "C" fn srx_ctx(
    _: *mut sys::fid_domain,
    _: *mut sys::fi_rx_attr,
    _: *mut *mut sys::fid_ep,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}
/// `fi_query_atomic`: whether spray supports `op` on `dt` (plain, `FI_FETCH_ATOMIC`
/// or `FI_COMPARE_ATOMIC`), with the element size and the largest count.
unsafe extern "C" fn query_atomic(
    domain: *mut sys::fid_domain,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    attr: *mut sys::fi_atomic_attr,
    flags: u64,
) -> c_int {
    guard::int(|| {
        // SAFETY: domain from the application; validated by get.
        if unsafe { get(domain) }.is_none() || attr.is_null() {
            return err::EINVAL;
        }
        let call = crate::ep::atomic::call_of(flags);
        match crate::ep::atomic::check(dt, op, call) {
            Err(e) => e,
            Ok((_, t)) => {
                let count = crate::ep::atomic::default_max_count(t, call);
                // SAFETY: attr checked non-NULL; the caller passes a writable struct.
                unsafe {
                    (*attr).size = t.size();
                    (*attr).count = count;
                }
                0
            }
        }
    })
}
unsafe extern "C" fn query_collective(
    _: *mut sys::fid_domain,
    _: sys::fi_collective_op,
    _: *mut sys::fi_collective_attr,
    _: u64,
) -> c_int {
    err::ENOSYS
}
