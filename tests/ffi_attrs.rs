//! The attribute rules of libfabric's own acceptance tests (fabtests v1.17
//! `fi_getinfo_test`, `fi_av_test`, `fi_multi_ep`), checked here through the
//! real core: transmit caps are initiator caps and receive caps target caps,
//! granted orderings come with a size (and the rest are refused), FI_PROGRESS_AUTO really progresses, the
//! pre-1.5 `mr_mode` enum, the provider's own fi_info accepted as hints,
//! FI_SYNC_ERR slots, the AV type reported, and `fi_mr_regattr` refusing
//! device memory (issue 20).

mod common;
use common::fab::*;

use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

const ENODATA: i32 = -(sys::FI_ENODATA as i32);
const ENOSYS: i32 = -(sys::FI_ENOSYS as i32);

/// The OR of libfabric constants of mixed integer types, as u64.
macro_rules! bits {
    ($($b:ident)|+) => { 0u64 $(| sys::$b as u64)+ };
}

fn version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// The assist delay of MANUAL endpoints in this process, µs: long, so that
/// only FI_PROGRESS_AUTO can explain an endpoint progressing on its own.
const MANUAL_ASSIST_US: &str = "10000000";

fn setup() {
    std::env::set_var("FI_SPRAY_ASSIST_US", MANUAL_ASSIST_US);
    init();
}

/// An `fi_info` list returned by the core; freed on drop.
struct Infos(*mut sys::fi_info);

impl Infos {
    fn iter(&self) -> impl Iterator<Item = &sys::fi_info> {
        let mut p = self.0;
        std::iter::from_fn(move || {
            // SAFETY (test): a list the core returned, alive while self is.
            let i = unsafe { p.as_ref()? };
            p = i.next;
            Some(i)
        })
    }
}

impl Drop for Infos {
    fn drop(&mut self) {
        unsafe { sys::fi_freeinfo(self.0) };
    }
}

/// `fi_getinfo(ver)` for spray with hints from the core's allocator set by `f`.
fn query(ver: u32, f: impl FnOnce(&mut sys::fi_info)) -> Result<Infos, i32> {
    setup();
    unsafe {
        let h = sys::fi_dupinfo(std::ptr::null());
        let name = CString::new("spray").unwrap();
        (*(*h).fabric_attr).prov_name = libc::strdup(name.as_ptr());
        f(&mut *h);
        let r = getinfo_hints(ver, h);
        sys::fi_freeinfo(h);
        r
    }
}

/// `fi_getinfo(ver)` with `hints` as they are.
unsafe fn getinfo_hints(ver: u32, hints: *const sys::fi_info) -> Result<Infos, i32> {
    let mut out = null_mut();
    let rc = unsafe {
        sys::fi_getinfo(
            ver,
            std::ptr::null(),
            std::ptr::null(),
            0,
            hints as *mut _,
            &mut out,
        )
    };
    if rc != 0 {
        assert!(out.is_null());
        return Err(rc);
    }
    assert!(!out.is_null());
    Ok(Infos(out))
}

fn api() -> u32 {
    unsafe { sys::fi_version() }
}

// fabtests' capability classes (unit/getinfo_test.c).
const PRIMARY_TX_CAPS: u64 = bits!(
    FI_MSG
        | FI_RMA
        | FI_TAGGED
        | FI_ATOMIC
        | FI_MULTICAST
        | FI_NAMED_RX_CTX
        | FI_HMEM
        | FI_COLLECTIVE
);
const PRIMARY_RX_CAPS: u64 = bits!(
    FI_MSG
        | FI_RMA
        | FI_TAGGED
        | FI_ATOMIC
        | FI_DIRECTED_RECV
        | FI_VARIABLE_MSG
        | FI_HMEM
        | FI_COLLECTIVE
);
const PRIMARY_CAPS: u64 = PRIMARY_TX_CAPS | PRIMARY_RX_CAPS;
const DOMAIN_CAPS: u64 = bits!(FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV);
const SEC_TX_CAPS: u64 = bits!(FI_TRIGGER | FI_FENCE | FI_RMA_PMEM);
const SEC_RX_CAPS: u64 =
    bits!(FI_RMA_PMEM | FI_SOURCE | FI_SOURCE_ERR | FI_RMA_EVENT | FI_MULTI_RECV | FI_TRIGGER);
const MOD_TX_CAPS: u64 = bits!(FI_SEND | FI_READ | FI_WRITE);
const MOD_RX_CAPS: u64 = bits!(FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE);
const OPT_TX_CAPS: u64 = MOD_TX_CAPS | SEC_TX_CAPS;
const OPT_RX_CAPS: u64 = MOD_RX_CAPS | SEC_RX_CAPS;
const OPT_CAPS: u64 = DOMAIN_CAPS | OPT_TX_CAPS | OPT_RX_CAPS;

/// Every subset of the bits of `mask` (fabtests' `ft_alloc_bit_combo`).
fn combos(mask: u64) -> Vec<u64> {
    let bits: Vec<u64> = (0..64)
        .map(|b| 1u64 << b)
        .filter(|b| mask & b != 0)
        .collect();
    (0..1u64 << bits.len())
        .map(|n| {
            bits.iter()
                .enumerate()
                .filter(|(k, _)| n >> k & 1 != 0)
                .fold(0, |acc, (_, b)| acc | b)
        })
        .collect()
}

/// fabtests' `check_no_extra_caps` + `check_caps`: the transmit attributes carry
/// initiator caps only, the receive attributes target caps only, both within
/// the info's caps, and every asked primary cap is where it belongs.
fn check_caps(i: &sys::fi_info, asked: u64) -> Result<(), String> {
    let (tx, rx) = unsafe { ((*i.tx_attr).caps, (*i.rx_attr).caps) };
    let ep = unsafe { (*i.ep_attr).type_ };
    let who = format!("ep type {ep}, asked {asked:#x}");
    if asked & (i.caps & !(asked | OPT_CAPS)) != 0 {
        return Err(format!("{who}: info caps {:#x} beyond the asked", i.caps));
    }
    if tx & !(PRIMARY_TX_CAPS | OPT_TX_CAPS) != 0 {
        return Err(format!(
            "{who}: tx caps {tx:#x} has {:#x}",
            tx & !(PRIMARY_TX_CAPS | OPT_TX_CAPS)
        ));
    }
    if rx & !(PRIMARY_RX_CAPS | OPT_RX_CAPS) != 0 {
        return Err(format!(
            "{who}: rx caps {rx:#x} has {:#x}",
            rx & !(PRIMARY_RX_CAPS | OPT_RX_CAPS)
        ));
    }
    if tx & !i.caps != 0 || rx & !i.caps != 0 {
        return Err(format!(
            "{who}: tx {tx:#x} / rx {rx:#x} beyond info caps {:#x}",
            i.caps
        ));
    }
    if i.caps & asked != asked
        || tx & asked & PRIMARY_TX_CAPS != asked & PRIMARY_TX_CAPS
        || rx & asked & PRIMARY_RX_CAPS != asked & PRIMARY_RX_CAPS
    {
        return Err(format!(
            "{who}: caps {:#x} tx {tx:#x} rx {rx:#x} miss asked",
            i.caps
        ));
    }
    Ok(())
}

#[test]
fn default_caps_split_by_direction() {
    let infos = query(api(), |_| {}).unwrap();
    for i in infos.iter() {
        check_caps(i, 0).unwrap();
        let (tx, rx) = unsafe { ((*i.tx_attr).caps, (*i.rx_attr).caps) };
        if i.caps & sys::FI_RMA as u64 != 0 {
            // The initiator reads and writes; the target is read and written.
            assert_eq!(tx & bits!(FI_READ | FI_WRITE), bits!(FI_READ | FI_WRITE));
            assert_eq!(
                rx & bits!(FI_REMOTE_READ | FI_REMOTE_WRITE),
                bits!(FI_REMOTE_READ | FI_REMOTE_WRITE)
            );
        }
    }
}

#[test]
fn every_primary_cap_combination() {
    let mut served = 0;
    for asked in combos(PRIMARY_CAPS) {
        match query(api(), |h| h.caps = asked) {
            Err(e) => assert_eq!(e, ENODATA, "caps {asked:#x}"),
            Ok(infos) => {
                served += 1;
                for i in infos.iter() {
                    check_caps(i, asked).unwrap();
                }
            }
        }
    }
    // MSG, TAGGED, RMA, ATOMIC, DIRECTED_RECV and their combinations.
    assert_eq!(served, 32);
}

const STRICT: u64 = sys::FI_ORDER_STRICT as u64;
const DATA: u64 = sys::FI_ORDER_DATA as u64;

/// fabtests' rule: a granted RAW / WAR / WAW ordering (any form) comes with a
/// `max_order_*_size` > 0. spray keeps them for every size (the initiator
/// holds an op back until the ops it must follow completed), so each size is
/// `max_msg_size`, whatever was asked.
fn check_order_sizes(i: &sys::fi_info) -> Result<(), String> {
    let ep = unsafe { &*i.ep_attr };
    let sizes = [
        ep.max_order_raw_size,
        ep.max_order_war_size,
        ep.max_order_waw_size,
    ];
    if sizes != [ep.max_msg_size; 3] || ep.max_msg_size == 0 {
        return Err(format!(
            "max_order sizes {sizes:?}, max_msg_size {}",
            ep.max_msg_size
        ));
    }
    Ok(())
}

/// Orderings of one-sided ops among themselves: every form of RAR, RAW, WAR
/// and WAW is granted with a size at least the one asked (Intel MPI and MPICH
/// ask the ATOMIC_ forms and have no fallback when refused; fabtests'
/// getinfo test asks the plain ones with and without a size).
#[test]
fn one_sided_orders_granted_with_a_size() {
    let plain = [
        (sys::FI_ORDER_RAR as u64, "RAR"),
        (sys::FI_ORDER_RAW as u64, "RAW"),
        (sys::FI_ORDER_WAR as u64, "WAR"),
        (sys::FI_ORDER_WAW as u64, "WAW"),
    ];
    let rma = [
        (sys::FI_ORDER_RMA_RAR, "RMA_RAR"),
        (sys::FI_ORDER_RMA_RAW, "RMA_RAW"),
        (sys::FI_ORDER_RMA_WAR, "RMA_WAR"),
        (sys::FI_ORDER_RMA_WAW, "RMA_WAW"),
        (sys::FI_ORDER_ATOMIC_RAR, "ATOMIC_RAR"),
        (sys::FI_ORDER_ATOMIC_RAW, "ATOMIC_RAW"),
        (sys::FI_ORDER_ATOMIC_WAR, "ATOMIC_WAR"),
        (sys::FI_ORDER_ATOMIC_WAW, "ATOMIC_WAW"),
    ];
    for (bit, name) in plain.into_iter().chain(rma) {
        for asked_size in [0usize, 1, 4096] {
            let infos = query(api(), |h| unsafe {
                h.caps = sys::FI_RMA as u64 | sys::FI_ATOMIC as u64;
                (*h.tx_attr).msg_order = bit;
                (*h.rx_attr).msg_order = bit;
                (*h.ep_attr).max_order_raw_size = asked_size;
                (*h.ep_attr).max_order_war_size = asked_size;
                (*h.ep_attr).max_order_waw_size = asked_size;
            })
            .unwrap_or_else(|e| panic!("{name} size {asked_size} refused: {e}"));
            for i in infos.iter() {
                let (tx, rx) = unsafe { ((*i.tx_attr).msg_order, (*i.rx_attr).msg_order) };
                assert_eq!((tx & bit, rx & bit), (bit, bit), "{name} not echoed");
                check_order_sizes(i).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(unsafe { (*i.ep_attr).max_order_raw_size } >= asked_size);
            }
        }
    }
}

/// One-sided ops against messages (RAS, WAS, SAR, SAW) are not ordered, so
/// asking for them is refused rather than echoed; a size over the largest
/// op is refused too.
#[test]
fn orders_spray_does_not_keep_are_refused() {
    for (bit, name) in [
        (sys::FI_ORDER_RAS as u64, "RAS"),
        (sys::FI_ORDER_WAS as u64, "WAS"),
        (sys::FI_ORDER_SAR as u64, "SAR"),
        (sys::FI_ORDER_SAW as u64, "SAW"),
    ] {
        for tx_side in [true, false] {
            let r = query(api(), |h| unsafe {
                h.caps = sys::FI_RMA as u64;
                if tx_side {
                    (*h.tx_attr).msg_order = bit;
                } else {
                    (*h.rx_attr).msg_order = bit;
                }
            });
            assert_eq!(r.err(), Some(ENODATA), "{name} tx_side {tx_side}");
        }
    }
    let r = query(api(), |h| unsafe {
        (*h.tx_attr).msg_order = sys::FI_ORDER_RAW as u64;
        (*h.ep_attr).max_order_raw_size = usize::MAX;
    });
    assert_eq!(r.err(), Some(ENODATA), "a RAW size over max_msg_size");
}

#[test]
fn every_order_combination_granted_as_asked() {
    for asked in combos(STRICT | DATA) {
        for tx_side in [true, false] {
            let r = query(api(), |h| unsafe {
                if tx_side {
                    (*h.tx_attr).msg_order = asked;
                } else {
                    (*h.rx_attr).msg_order = asked;
                }
            });
            let Ok(infos) = r else {
                assert_eq!(r.err(), Some(ENODATA), "order {asked:#x}");
                continue;
            };
            for i in infos.iter() {
                let got = unsafe {
                    if tx_side {
                        (*i.tx_attr).msg_order
                    } else {
                        (*i.rx_attr).msg_order
                    }
                };
                assert_eq!(got & asked, asked, "order {asked:#x} tx_side {tx_side}");
                check_order_sizes(i).unwrap();
            }
        }
    }
    // What spray does order is still granted: send after send.
    assert!(query(api(), |h| unsafe {
        (*h.ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
        (*h.tx_attr).msg_order = FI_ORDER_SAS;
    })
    .is_ok());
}

const FI_ORDER_SAS: u64 = sys::FI_ORDER_SAS as u64;

#[test]
fn api_1_0_mr_unspec_is_basic_or_scalable() {
    let basic = sys::fi_mr_mode_FI_MR_BASIC as i32;
    let scalable = sys::fi_mr_mode_FI_MR_SCALABLE as i32;
    let infos = query(version(1, 0), |h| unsafe {
        h.caps = sys::FI_RMA as u64;
        (*h.domain_attr).mr_mode = sys::fi_mr_mode_FI_MR_UNSPEC as i32;
    })
    .unwrap();
    for i in infos.iter() {
        let m = unsafe { (*i.domain_attr).mr_mode };
        assert!(m == basic || m == scalable, "mr_mode {m}");
    }
    for asked in [basic, scalable] {
        for ver in [version(1, 0), api()] {
            let infos = query(ver, |h| unsafe {
                h.caps = sys::FI_RMA as u64;
                (*h.domain_attr).mr_mode = asked;
            })
            .unwrap();
            for i in infos.iter() {
                assert_eq!(unsafe { (*i.domain_attr).mr_mode }, asked);
            }
        }
    }
}

#[test]
fn progress_auto_and_manual_granted_as_asked() {
    let auto = sys::fi_progress_FI_PROGRESS_AUTO;
    let manual = sys::fi_progress_FI_PROGRESS_MANUAL;
    for p in [auto, manual] {
        let infos = query(api(), |h| unsafe { (*h.domain_attr).data_progress = p }).unwrap();
        for i in infos.iter() {
            assert_eq!(unsafe { (*i.domain_attr).data_progress }, p);
        }
        let infos = query(api(), |h| unsafe { (*h.domain_attr).control_progress = p }).unwrap();
        for i in infos.iter() {
            assert_eq!(unsafe { (*i.domain_attr).control_progress }, p);
        }
    }
    // Unasked: manual (no thread steps in for 1 ms by default).
    let infos = query(api(), |_| {}).unwrap();
    for i in infos.iter() {
        assert_eq!(unsafe { (*i.domain_attr).data_progress }, manual);
    }
}

/// Two endpoints with their own CQs on one domain of `info`.
struct Two {
    fab: *mut sys::fid_fabric,
    dom: *mut sys::fid_domain,
    av: *mut sys::fid_av,
    ep: [*mut sys::fid_ep; 2],
    cq: [*mut sys::fid_cq; 2],
    addr: [u64; 2],
}

impl Two {
    fn new(info: *mut sys::fi_info) -> Two {
        let (fab, dom) = open_domain(info);
        let av = open_av(dom);
        let mut ep = [null_mut(); 2];
        let mut cq = [null_mut(); 2];
        for k in 0..2 {
            ep[k] = open_ep(dom, info);
            cq[k] = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
            assert_eq!(bind(ep[k], av, 0), 0);
            assert_eq!(bind(ep[k], cq[k], bits!(FI_TRANSMIT | FI_RECV)), 0);
            assert_eq!(control(ep[k], sys::FI_ENABLE, null_mut()), 0);
        }
        let addr = [
            av_insert(av, &getname(ep[0])),
            av_insert(av, &getname(ep[1])),
        ];
        Two {
            fab,
            dom,
            av,
            ep,
            cq,
            addr,
        }
    }

    fn close(self) {
        for k in 0..2 {
            assert_eq!(close(self.ep[k]), 0);
            assert_eq!(close(self.cq[k]), 0);
        }
        assert_eq!(close(self.av), 0);
        assert_eq!(close(self.dom), 0);
        assert_eq!(close(self.fab), 0);
    }

    /// Endpoint 1 posts a receive, endpoint 0 sends to it; then only endpoint
    /// 0's CQ is read, for at most `wait`. True when the send completed: it
    /// completes when endpoint 1 acknowledged it, which endpoint 1 can only do
    /// if something progressed it while its application made no call.
    fn send_completes_without_receiver_calls(&self, wait: Duration) -> bool {
        let mut rbuf = [0u8; 8];
        let sbuf = *b"progress";
        unsafe {
            let rc = (*(*self.ep[1]).tagged).recv.unwrap()(
                self.ep[1],
                rbuf.as_mut_ptr().cast(),
                rbuf.len(),
                null_mut(),
                u64::MAX,
                7,
                0,
                12 as *mut c_void,
            );
            assert_eq!(rc, 0, "fi_trecv");
            let rc = (*(*self.ep[0]).tagged).send.unwrap()(
                self.ep[0],
                sbuf.as_ptr().cast(),
                sbuf.len(),
                null_mut(),
                self.addr[1],
                7,
                11 as *mut c_void,
            );
            assert_eq!(rc, 0, "fi_tsend");
        }
        let start = Instant::now();
        let mut e = [unsafe { std::mem::zeroed::<sys::fi_cq_tagged_entry>() }; 4];
        let mut done = false;
        while start.elapsed() < wait {
            let n = cq_read(self.cq[0], &mut e);
            if n > 0 {
                assert_eq!(e[0].op_context as usize, 11);
                done = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        // Drain the receive either way (bounded), so closing is clean.
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if cq_read(self.cq[1], &mut e) > 0 {
                assert_eq!(&rbuf, b"progress");
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if !done {
            while start.elapsed() < Duration::from_secs(5) && cq_read(self.cq[0], &mut e) <= 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        done
    }
}

fn rdm_with_progress(p: u32) -> Infos {
    query(api(), |h| unsafe {
        (*h.ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
        h.caps = bits!(FI_MSG | FI_TAGGED);
        (*h.domain_attr).data_progress = p;
    })
    .unwrap_or_else(|e| panic!("fi_getinfo with data_progress {p}: {e}"))
}

#[test]
fn progress_auto_moves_data_without_application_calls() {
    let infos = rdm_with_progress(sys::fi_progress_FI_PROGRESS_AUTO);
    let two = Two::new(infos.0);
    let t = Instant::now();
    assert!(
        two.send_completes_without_receiver_calls(Duration::from_secs(3)),
        "FI_PROGRESS_AUTO endpoint was not progressed"
    );
    eprintln!("auto: send completed after {:?}", t.elapsed());
    two.close();
    // The control: a manual endpoint is not progressed within that time
    // (its assist delay here is 10 s), so the test can tell them apart.
    let infos = rdm_with_progress(sys::fi_progress_FI_PROGRESS_MANUAL);
    let two = Two::new(infos.0);
    assert!(!two.send_completes_without_receiver_calls(Duration::from_millis(300)));
    two.close();
}

#[test]
fn own_info_accepted_as_hints() {
    let infos = query(api(), |_| {}).unwrap();
    for i in infos.iter() {
        let d = unsafe { &*i.domain_attr };
        // Each endpoint has one transmit and one receive context.
        assert_eq!(d.max_ep_tx_ctx, 1);
        assert_eq!(d.max_ep_rx_ctx, 1);
        assert_eq!(d.tx_ctx_cnt, d.ep_cnt);
        assert_eq!(d.rx_ctx_cnt, d.ep_cnt);
        let ty = unsafe { (*i.ep_attr).type_ };
        let again = unsafe { getinfo_hints(api(), i) }
            .unwrap_or_else(|e| panic!("own info of ep type {ty} refused as hints: {e}"));
        assert!(again.iter().any(|j| unsafe { (*j.ep_attr).type_ } == ty));
        // Up to what the domain advertises, and no further.
        let (cnt, eps) = (d.tx_ctx_cnt, d.ep_cnt);
        let ok = query(api(), |h| unsafe {
            (*h.ep_attr).type_ = ty;
            (*h.domain_attr).tx_ctx_cnt = cnt;
            (*h.domain_attr).rx_ctx_cnt = cnt;
            (*h.domain_attr).ep_cnt = eps;
        });
        assert!(ok.is_ok(), "advertised counts refused: {:?}", ok.err());
        let over = query(api(), |h| unsafe {
            (*h.ep_attr).type_ = ty;
            (*h.domain_attr).tx_ctx_cnt = cnt + 1;
        });
        assert_eq!(over.err(), Some(ENODATA));
    }
}

#[test]
fn own_info_enough_endpoints_open() {
    // ep_cnt is what this process can open: open that many (bounded) at once.
    let infos = query(api(), |h| unsafe {
        (*h.ep_attr).type_ = sys::fi_ep_type_FI_EP_DGRAM
    })
    .unwrap();
    let want = unsafe { (*infos.0).domain_attr.as_ref().unwrap().ep_cnt }.min(16);
    let (fab, dom) = open_domain(infos.0);
    let eps: Vec<_> = (0..want).map(|_| open_ep(dom, infos.0)).collect();
    for ep in eps {
        assert_eq!(close(ep), 0);
    }
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
}

fn sockaddr(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_be_bytes(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

#[test]
fn av_sync_err_writes_every_slot() {
    for ty in [sys::fi_ep_type_FI_EP_RDM, sys::fi_ep_type_FI_EP_DGRAM] {
        let infos = query(api(), |h| unsafe { (*h.ep_attr).type_ = ty }).unwrap();
        let (fab, dom) = open_domain(infos.0);
        let av = open_av(dom);
        // A good address, then one with port 0 (fabtests' bad address is 0.0.0.0).
        let addrs = [sockaddr([127, 0, 0, 1], 4000), sockaddr([0, 0, 0, 0], 0)];
        let mut sync_err: [i32; 2] = [-1, 0];
        let n = unsafe {
            (*(*av).ops).insert.unwrap()(
                av,
                addrs.as_ptr().cast(),
                2,
                null_mut(),
                sys::FI_SYNC_ERR,
                sync_err.as_mut_ptr().cast(),
            )
        };
        assert_eq!(n, 1, "ep type {ty}");
        assert_eq!(sync_err[0], 0, "good address slot, ep type {ty}");
        assert_ne!(sync_err[1], 0, "bad address slot, ep type {ty}");
        assert_eq!(close(av), 0);
        assert_eq!(close(dom), 0);
        assert_eq!(close(fab), 0);
    }
}

#[test]
fn av_type_reported_as_asked_else_unspec() {
    let infos = query(api(), |_| {}).unwrap();
    for i in infos.iter() {
        // Both types work, so none is imposed (fi_domain(3): FI_AV_UNSPEC).
        assert_eq!(
            unsafe { (*i.domain_attr).av_type },
            sys::fi_av_type_FI_AV_UNSPEC
        );
    }
    for t in [sys::fi_av_type_FI_AV_TABLE, sys::fi_av_type_FI_AV_MAP] {
        let infos = query(api(), |h| unsafe { (*h.domain_attr).av_type = t }).unwrap();
        for i in infos.iter() {
            assert_eq!(unsafe { (*i.domain_attr).av_type }, t);
        }
    }
    // An AV opened with FI_AV_UNSPEC says which type it is (fi_av(3)).
    let infos = query(api(), |_| {}).unwrap();
    let (fab, dom) = open_domain(infos.0);
    unsafe {
        let mut attr: sys::fi_av_attr = std::mem::zeroed();
        attr.type_ = sys::fi_av_type_FI_AV_UNSPEC;
        let mut av = null_mut();
        assert_eq!(
            (*(*dom).ops).av_open.unwrap()(dom, &mut attr, &mut av, null_mut()),
            0
        );
        assert_eq!(attr.type_, sys::fi_av_type_FI_AV_TABLE);
        assert_eq!(close(av), 0);
    }
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
}

#[test]
fn mr_regattr_refuses_device_memory() {
    let infos = query(api(), |h| unsafe {
        (*h.ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM
    })
    .unwrap();
    let (fab, dom) = open_domain(infos.0);
    let mut buf = vec![0u8; 256];
    let iov = sys::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    for (iface, want) in [
        (sys::fi_hmem_iface_FI_HMEM_CUDA, ENOSYS),
        (sys::fi_hmem_iface_FI_HMEM_ROCR, ENOSYS),
        (sys::fi_hmem_iface_FI_HMEM_ZE, ENOSYS),
        (sys::fi_hmem_iface_FI_HMEM_NEURON, ENOSYS),
        (sys::fi_hmem_iface_FI_HMEM_SYSTEM, 0),
    ] {
        unsafe {
            let mut attr: sys::fi_mr_attr = std::mem::zeroed();
            attr.mr_iov = &iov;
            attr.iov_count = 1;
            attr.access = bits!(FI_REMOTE_READ | FI_REMOTE_WRITE);
            attr.requested_key = 40 + iface as u64;
            attr.iface = iface;
            let mut mr = null_mut();
            let rc = (*(*dom).mr).regattr.unwrap()(&mut (*dom).fid, &attr, 0, &mut mr);
            assert_eq!(rc, want, "iface {iface}");
            if rc == 0 {
                assert_eq!(close(mr), 0);
            } else {
                assert!(mr.is_null());
            }
        }
    }
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
}
