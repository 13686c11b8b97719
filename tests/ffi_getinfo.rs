//! The provider's getinfo called directly with the hints real consumers send
//! (MPICH 5 at API 2.5, OpenMPI's mtl ofi, fi_pingpong), including API 2.x rules
//! the Debian 1.17 core cannot exercise.

use std::ptr::null_mut;

use spray_fi::consts::*;
use spray_fi::sys;

fn version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// Hints from the core's allocator, adjusted by `f`.
fn hints(f: impl FnOnce(&mut sys::fi_info)) -> *mut sys::fi_info {
    // Register our parameters with the core (getinfo reads them).
    spray_fi::fi_prov_ini();
    unsafe {
        let h = sys::fi_dupinfo(std::ptr::null());
        f(&mut *h);
        h
    }
}

/// Run getinfo; the list of returned infos (freed by the caller) or the error.
fn getinfo(ver: u32, flags: u64, h: *mut sys::fi_info) -> Result<Vec<*mut sys::fi_info>, i32> {
    let mut out = null_mut();
    let rc = unsafe {
        spray_fi::getinfo::getinfo(ver, std::ptr::null(), std::ptr::null(), flags, h, &mut out)
    };
    unsafe { sys::fi_freeinfo(h) };
    if rc != 0 {
        assert!(out.is_null());
        return Err(rc);
    }
    let mut v = Vec::new();
    let mut p = out;
    while !p.is_null() {
        v.push(p);
        p = unsafe { (*p).next };
    }
    Ok(v)
}

fn free(v: Vec<*mut sys::fi_info>) {
    if let Some(first) = v.first() {
        unsafe { sys::fi_freeinfo(*first) };
    }
}

#[test]
fn no_hints_gives_rdm_then_dgram() {
    let v = getinfo(version(1, 17), 0, std::ptr::null_mut()).unwrap();
    // RDM then DGRAM for each interface (domain).
    assert!(
        v.len() >= 2 && v.len().is_multiple_of(2),
        "{} infos",
        v.len()
    );
    unsafe {
        assert_eq!((*(*v[0]).ep_attr).type_, FI_EP_RDM);
        assert_eq!((*(*v[1]).ep_attr).type_, FI_EP_DGRAM);
        let name = |i: *mut sys::fi_info| std::ffi::CStr::from_ptr((*(*i).domain_attr).name);
        assert_eq!(name(v[0]), name(v[1]), "one domain's two infos");
        assert!(
            (*(*v[0]).fabric_attr).prov_name.is_null(),
            "the core fills prov_name"
        );
        // The interface's attributes (tests/ffi_nics.rs checks them).
        let nic = (*v[0]).nic;
        assert!(!nic.is_null(), "nic attributes");
        assert_eq!(
            std::ffi::CStr::from_ptr((*(*nic).device_attr).name),
            name(v[0])
        );
        assert_eq!((*v[0]).mode, 0);
        assert_eq!((*(*v[0]).domain_attr).mr_mode, 0);
    }
    free(v);
}

#[test]
fn core_only_flag_is_refused() {
    assert_eq!(
        getinfo(version(1, 17), OFI_CORE_PROV_ONLY, std::ptr::null_mut()),
        Err(-(sys::FI_ENODATA as i32))
    );
}

#[test]
fn mpich5_hints() {
    let h = hints(|h| unsafe {
        h.caps = FI_MSG | FI_TAGGED | FI_MULTI_RECV | FI_DIRECTED_RECV;
        h.mode = sys::FI_CONTEXT | sys::FI_ASYNC_IOV | sys::FI_RX_CQ_DATA | sys::FI_CONTEXT2;
        (*h.ep_attr).type_ = FI_EP_RDM;
        (*h.ep_attr).mem_tag_format = 0x00c0_0000_7fff_ffff;
        (*h.domain_attr).threading = sys::fi_threading_FI_THREAD_DOMAIN;
        (*h.domain_attr).control_progress = FI_PROGRESS_MANUAL;
        (*h.domain_attr).data_progress = FI_PROGRESS_MANUAL;
        (*h.domain_attr).av_type = FI_AV_TABLE;
        (*h.domain_attr).mr_mode = sys::FI_MR_ENDPOINT as i32;
        (*h.tx_attr).op_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
        (*h.tx_attr).msg_order = FI_ORDER_SAS | sys::FI_ORDER_RAR as u64 | sys::FI_ORDER_WAW as u64;
        (*h.rx_attr).msg_order = FI_ORDER_SAS;
    });
    let v = getinfo(version(2, 5), 0, h).unwrap();
    assert_eq!(v.len(), 1);
    unsafe {
        let i = &*v[0];
        assert_eq!((*i.ep_attr).type_, FI_EP_RDM);
        assert_eq!(
            (*i.domain_attr).threading,
            sys::fi_threading_FI_THREAD_DOMAIN,
            "MPICH needs equality"
        );
        assert_eq!((*i.ep_attr).mem_tag_format, 0x00c0_0000_7fff_ffff);
        assert_eq!((*i.domain_attr).mr_mode, 0, "no registration needed");
        assert_eq!(i.mode, 0);
        assert_eq!((*i.tx_attr).op_flags, FI_COMPLETION | FI_DELIVERY_COMPLETE);
        assert_eq!((*i.tx_attr).msg_order & FI_ORDER_SAS, FI_ORDER_SAS);
        assert!((*i.ep_attr).max_msg_size >= 16 << 10);
        assert_eq!(
            i.caps & (FI_MSG | FI_TAGGED | FI_MULTI_RECV),
            FI_MSG | FI_TAGGED | FI_MULTI_RECV
        );
    }
    free(v);
}

#[test]
fn api2_tag_format_codes() {
    for code in [0u64, 1, 2] {
        let h = hints(|h| unsafe {
            h.caps = FI_TAGGED;
            (*h.ep_attr).mem_tag_format = code;
        });
        let v = getinfo(version(2, 0), 0, h).unwrap();
        let got = unsafe { (*(*v[0]).ep_attr).mem_tag_format };
        assert_eq!(got, if code == 0 { u64::MAX } else { code });
        free(v);
    }
    // An unknown format code is not served under 2.x; under 1.x it is a mask.
    let h = hints(|h| unsafe { (*h.ep_attr).mem_tag_format = 5 });
    let v = getinfo(version(2, 5), 0, h).unwrap();
    unsafe {
        assert_eq!(
            (*(*v[0]).ep_attr).type_,
            FI_EP_DGRAM,
            "only DGRAM (no tags) remains"
        )
    };
    free(v);
    let h = hints(|h| unsafe { (*h.ep_attr).mem_tag_format = 5 });
    let v = getinfo(version(1, 17), 0, h).unwrap();
    unsafe { assert_eq!((*(*v[0]).ep_attr).mem_tag_format, 5) };
    free(v);
}

#[test]
fn openmpi_mtl_hints() {
    let h = hints(|h| unsafe {
        h.caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
        h.mode = sys::FI_CONTEXT | sys::FI_CONTEXT2;
        (*h.ep_attr).type_ = FI_EP_RDM;
        (*h.domain_attr).threading = sys::fi_threading_FI_THREAD_DOMAIN;
        (*h.domain_attr).av_type = FI_AV_MAP;
        (*h.domain_attr).resource_mgmt = FI_RM_ENABLED;
        (*h.tx_attr).msg_order = FI_ORDER_SAS;
        (*h.rx_attr).msg_order = FI_ORDER_SAS;
    });
    let v = getinfo(version(1, 5), 0, h).unwrap();
    unsafe {
        let i = &*v[0];
        assert_eq!((*i.domain_attr).av_type, FI_AV_MAP);
        assert!((*i.domain_attr).cq_data_size >= 4);
        assert!((*i.ep_attr).mem_tag_format.count_ones() >= 60);
        assert!((*i.ep_attr).max_msg_size > 1 << 30);
    }
    free(v);
}

/// A hint mutation.
type HintFn = dyn Fn(&mut sys::fi_info);

#[test]
fn unservable_hints() {
    let cases: Vec<Box<HintFn>> = vec![
        Box::new(|h| h.caps = FI_HMEM),
        Box::new(|h| unsafe { (*h.tx_attr).rma_iov_limit = 2 }),
        Box::new(|h| unsafe { (*h.ep_attr).type_ = sys::fi_ep_type_FI_EP_MSG }),
        Box::new(|h| h.addr_format = sys::FI_ADDR_STR),
        Box::new(|h| unsafe { (*h.tx_attr).iov_limit = 64 }),
        Box::new(|h| unsafe { (*h.domain_attr).cq_data_size = 16 }),
        Box::new(|h| unsafe { (*h.ep_attr).tx_ctx_cnt = 4 }),
        Box::new(|h| unsafe { (*h.tx_attr).comp_order = sys::FI_ORDER_STRICT as u64 }),
        Box::new(|h| unsafe { (*h.rx_attr).msg_order = sys::FI_ORDER_DATA as u64 }),
    ];
    for (n, c) in cases.iter().enumerate() {
        let h = hints(|h| c(h));
        assert_eq!(
            getinfo(version(1, 17), 0, h),
            Err(-(sys::FI_ENODATA as i32)),
            "case {n}"
        );
    }
    // One-sided operations: RDM only.
    for caps in [FI_RMA, FI_ATOMIC, FI_RMA | FI_ATOMIC | FI_TAGGED] {
        let h = hints(|h| h.caps = caps);
        let v = getinfo(version(1, 17), 0, h).unwrap();
        assert_eq!(v.len(), 1);
        unsafe {
            assert_eq!((*(*v[0]).ep_attr).type_, FI_EP_RDM);
            let modifiers =
                sys::FI_READ | sys::FI_WRITE | sys::FI_REMOTE_READ | sys::FI_REMOTE_WRITE;
            assert_eq!(
                (*v[0]).caps & modifiers as u64,
                modifiers as u64,
                "implied modifiers"
            );
            assert_eq!((*(*v[0]).tx_attr).rma_iov_limit, 1);
        }
        free(v);
    }
    // Too large for one datagram: only RDM remains.
    let h = hints(|h| unsafe { (*h.ep_attr).max_msg_size = 1 << 20 });
    let v = getinfo(version(1, 17), 0, h).unwrap();
    assert_eq!(v.len(), 1);
    unsafe { assert_eq!((*(*v[0]).ep_attr).type_, FI_EP_RDM) };
    free(v);
}
