//! `getinfo`: what spray offers (RDM and DGRAM over UDP, one domain per usable
//! interface, with its `nic` attributes) and the full hint matching — the core
//! does none for us.

use std::ffi::{CStr, CString};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::raw::c_char;

use crate::consts::*;
use crate::iface::{self, Iface};
use crate::limits::{IOV_LIMIT, RMA_IOV_LIMIT};
use crate::{addr, assist, guard, limits, log, prov, sys};

/// Capabilities of the RDM endpoint.
pub const RDM_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_RMA
    | FI_ATOMIC
    | FI_READ
    | FI_WRITE
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_SEND
    | FI_RECV
    | FI_DIRECTED_RECV
    | FI_SOURCE
    | FI_MULTI_RECV
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM;
/// Capabilities of the DGRAM endpoint.
pub const DGRAM_CAPS: u64 = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
/// Operations that may be outstanding per queue by default (advertised `size`;
/// `FI_SPRAY_TX_SIZE` / `FI_SPRAY_RX_SIZE` change it).
pub const QUEUE_SIZE: usize = 16384;
/// Largest queue size the parameters may set.
pub const QUEUE_SIZE_MAX: usize = 1 << 20;

/// The transmit (`tx`) or receive queue size endpoints get unless the
/// application asks for less: operations posted and not completed.
pub fn queue_size(tx: bool) -> usize {
    let name = if tx { "tx_size" } else { "rx_size" };
    crate::params::int_or(name, QUEUE_SIZE as i64, 1, QUEUE_SIZE_MAX as i64) as usize
}
/// Remote CQ data bytes.
pub const CQ_DATA_SIZE: usize = 8;
/// Op flags we understand on transmit.
const TX_OP_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_INJECT_COMPLETE
    | FI_TRANSMIT_COMPLETE
    | FI_DELIVERY_COMPLETE
    | FI_MORE
    | FI_REMOTE_CQ_DATA
    | FI_MATCH_COMPLETE;
/// Orderings of one-sided operations among themselves that spray keeps when
/// asked: RAR, RAW, WAR, WAW (bits 0, 1, 3, 4) and their `RMA_` / `ATOMIC_`
/// forms (bits 32..40). The initiator holds an op back until the earlier ops
/// it must follow have completed (`spray::msg::RmaOrder`; a write completes on
/// the target's reply, after every byte landed; each form for the pairs
/// fi_endpoint(3) gives it, `rma_order`), so they hold for every size:
/// `max_order_*_size` = `max_msg_size`. Intel MPI and MPICH ask the `ATOMIC_`
/// forms (and read the sizes before sending accumulates as atomics). RAS, WAS,
/// SAR and SAW (one-sided against messages) are not kept: asked, they are
/// refused (`-FI_ENODATA`), as tcp;ofi_rxm refuses what it does not keep.
const ONE_SIDED_ORDERS: u64 =
    FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW | 0xff_0000_0000;
/// The plain order bits (fi_endpoint(3); bindgen's constants are u32).
const FI_ORDER_RAR: u64 = 1 << 0;
const FI_ORDER_RAW: u64 = 1 << 1;
const FI_ORDER_WAR: u64 = 1 << 3;
const FI_ORDER_WAW: u64 = 1 << 4;

/// The orderings an endpoint opened with these `msg_order` bits (its
/// transmit and receive attributes together) keeps for its one-sided ops.
pub fn rma_order(msg_order: u64) -> spray::msg::RmaOrder {
    // Plain bit: every pair; RMA_ form (bit): RMA ops among themselves;
    // ATOMIC_ form (bit + 4): atomics among themselves.
    let scope = |plain: u64, bit: u32| {
        let all = msg_order & plain != 0;
        spray::msg::OrderScope {
            rma: all || msg_order & 1 << bit != 0,
            atomic: all || msg_order & 1 << (bit + 4) != 0,
            cross: all,
        }
    };
    spray::msg::RmaOrder {
        raw: scope(FI_ORDER_RAW, 33),
        war: scope(FI_ORDER_WAR, 34),
        waw: scope(FI_ORDER_WAW, 35),
    }
}
/// Capabilities of the receiving side only (target caps); the rest but
/// `TX_ONLY_CAPS` go to both sides.
const RX_ONLY_CAPS: u64 =
    FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV;
/// Capabilities of the initiating side only.
const TX_ONLY_CAPS: u64 = FI_SEND | FI_READ | FI_WRITE;
/// RMA access modifiers.
const RMA_MODIFIERS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// Registration modes spray honours when the application offers them.
const MR_MODES: i32 = (sys::FI_MR_VIRT_ADDR | sys::FI_MR_PROV_KEY) as i32;
/// Op flags we understand on receive.
const RX_OP_FLAGS: u64 = FI_COMPLETION | FI_MULTI_RECV | FI_MORE;

/// One offered configuration, before it is written into an `fi_info`.
struct Offer {
    ep_type: u32,
    caps: u64,
    msg_order: u64,
    /// One-sided order bits the hints asked, echoed per side (sizes 0).
    tx_one_sided: u64,
    rx_one_sided: u64,
    max_msg_size: usize,
    inject_size: usize,
    mem_tag_format: u64,
    threading: u32,
    control_progress: u32,
    data_progress: u32,
    av_type: u32,
    mr_mode: i32,
    rma_iov_limit: usize,
    resource_mgmt: u32,
    tx_op_flags: u64,
    rx_op_flags: u64,
    /// Transmit / receive queue sizes, operations.
    tx_size: usize,
    rx_size: usize,
    /// Source and destination addresses, of one family.
    src: SocketAddr,
    dest: Option<SocketAddr>,
    iface: Iface,
    /// A domain of several rails (`iface` is the first): every interface
    /// of it. Empty: one interface.
    rails: Vec<Iface>,
    /// Job keys asked for in the hints (domain and endpoint `auth_key`),
    /// echoed in the answer so that `fi_domain` / `fi_endpoint` get them.
    domain_key: Option<Vec<u8>>,
    ep_key: Option<Vec<u8>>,
}

impl Offer {
    /// The domain name: the interface's, or the rails' joined by `+`.
    fn domain_name(&self) -> String {
        if self.rails.is_empty() {
            self.iface.name.clone()
        } else {
            iface::rails_name(&self.rails)
        }
    }
}

/// The `getinfo` callback of our provider.
pub unsafe extern "C" fn getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const sys::fi_info,
    info: *mut *mut sys::fi_info,
) -> i32 {
    guard::int(|| {
        if info.is_null() {
            return err::EINVAL;
        }
        // SAFETY: info is non-null; the core passes a pointer to its result slot.
        unsafe { *info = std::ptr::null_mut() };
        if flags & OFI_CORE_PROV_ONLY != 0 {
            // Utility providers would wrap us and be listed first: refuse.
            return err::ENODATA;
        }
        // SAFETY: node/service are NULL or NUL-terminated strings from the caller.
        let (node, service) = unsafe { (opt_str(node), opt_str(service)) };
        // SAFETY: hints is NULL or a valid fi_info in the running core's layout.
        let hints = unsafe { hints.as_ref() };
        let offers = match build_offers(version, node.as_deref(), service.as_deref(), flags, hints)
        {
            Ok(o) => o,
            Err(e) => return e,
        };
        if offers.is_empty() {
            return err::ENODATA;
        }
        let mut head: *mut sys::fi_info = std::ptr::null_mut();
        let mut tail: *mut sys::fi_info = std::ptr::null_mut();
        for o in &offers {
            // SAFETY: write_info returns a fresh fi_info we own or null.
            let i = unsafe { write_info(o) };
            if i.is_null() {
                // SAFETY: head is a list of fi_infos we allocated (or null).
                unsafe { sys::fi_freeinfo(head) };
                return err::ENOMEM;
            }
            if tail.is_null() {
                head = i;
            } else {
                // SAFETY: tail is the last fi_info we allocated.
                unsafe { (*tail).next = i };
            }
            tail = i;
        }
        // SAFETY: see above; the caller owns the list now.
        unsafe { *info = head };
        0
    })
}

/// A C string argument as an owned `String`, or `None` for NULL.
unsafe fn opt_str(p: *const c_char) -> Option<String> {
    // SAFETY: the caller promises p is NULL or NUL-terminated.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Resolve `node` to a socket address at `port`, of family `want` (`Some(true)`:
/// IPv6) or, when `None`, the first address of the default family (`FI_SPRAY_IPV6`),
/// else the first of the other.
fn resolve(node: &str, port: u16, want: Option<bool>) -> Result<SocketAddr, i32> {
    if let Ok(ip) = node
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        return match want {
            Some(v6) if v6 != ip.is_ipv6() => {
                log::info(&format!(
                    "node {node} is not of the address format asked for in the hints"
                ));
                Err(err::ENODATA)
            }
            _ => Ok(SocketAddr::new(ip, port)),
        };
    }
    let all: Vec<SocketAddr> = (node, port)
        .to_socket_addrs()
        .map_err(|_| err::ENODATA)?
        .collect();
    let pick = |v6: bool| all.iter().find(|a| a.is_ipv6() == v6).copied();
    match want {
        Some(v6) => pick(v6),
        None => {
            let v6 = iface::default_v6();
            pick(v6).or_else(|| pick(!v6))
        }
    }
    .ok_or(err::ENODATA)
}

/// The address family the hints ask for: `Ok(Some(true))` IPv6, `Ok(Some(false))`
/// IPv4, `Ok(None)` either; `Err(())` when they cannot be served (another
/// format, an unreadable address, or addresses of both families).
fn hinted_family(h: &sys::fi_info) -> Result<Option<bool>, ()> {
    let mut want = match h.addr_format {
        FI_FORMAT_UNSPEC | FI_SOCKADDR => None,
        FI_SOCKADDR_IN => Some(false),
        FI_SOCKADDR_IN6 => Some(true),
        _ => return Err(()),
    };
    for (p, len) in [(h.src_addr, h.src_addrlen), (h.dest_addr, h.dest_addrlen)] {
        if p.is_null() {
            continue;
        }
        // SAFETY: the hint addresses are NULL or buffers of the stated length.
        let a = unsafe { addr::read_sockaddr(p, len) }.ok_or(())?;
        if want.is_some_and(|v6| v6 != a.is_ipv6()) {
            log::info(&format!(
                "hints: address {a} does not match the address format or the other address"
            ));
            return Err(());
        }
        want = Some(a.is_ipv6());
    }
    Ok(want)
}

/// Everything we offer for these hints (empty when nothing matches).
///
/// One function on purpose (~195 lines): the offers in the order
/// `fi_getinfo` returns them: the family, then the interfaces and addresses
/// the hints allow, then one literal `Offer` per domain (interface or rails)
/// and endpoint type; the matching itself is in `matches` and its
/// per-attribute helpers.
fn build_offers(
    version: u32,
    node: Option<&str>,
    service: Option<&str>,
    flags: u64,
    hints: Option<&sys::fi_info>,
) -> Result<Vec<Offer>, i32> {
    // The family: what the hints ask for, else the node's, else FI_SPRAY_IPV6's.
    let mut want = match hints.map(hinted_family) {
        Some(Err(())) => return Ok(Vec::new()),
        Some(Ok(w)) => w,
        None => None,
    };
    let port = match service {
        Some(s) => s.trim().parse::<u16>().map_err(|_| err::ENODATA)?,
        None => 0,
    };
    let node_addr = node.map(|n| resolve(n, port, want)).transpose()?;
    if let Some(a) = node_addr {
        want = Some(a.is_ipv6());
    }
    let v6 = want.unwrap_or_else(iface::default_v6);
    // The interfaces (one domain each): FI_SPRAY_IFACE's, else every usable one.
    let mut cands = iface::usable(v6);
    if cands.is_empty() {
        log::info("IPv6 asked for, but no interface has an IPv6 address");
        return Ok(Vec::new());
    }
    // With FI_SPRAY_RAILS=1, a domain spanning the interfaces as rails
    // comes first; a domain name `a+b` asks for that one alone.
    let mut rails = iface::default_rails(v6);
    // A domain name in the hints selects that interface (domain = interface),
    // loopback included.
    // SAFETY: hint sub-attributes are NULL or valid; a non-NULL name is NUL-terminated.
    let wanted = hints
        .and_then(|h| unsafe { h.domain_attr.as_ref() })
        .filter(|d| !d.name.is_null());
    if let Some(d) = wanted {
        // SAFETY: checked non-NULL above.
        let name = unsafe { CStr::from_ptr(d.name) }
            .to_string_lossy()
            .into_owned();
        if name.contains('+') {
            match iface::rails_named(&name, v6) {
                Some(r) => {
                    rails = Some(r);
                    cands = Vec::new();
                }
                None => return Ok(Vec::new()),
            }
        } else {
            rails = None;
            match iface::by_name(&name, v6) {
                Some(i) => cands = vec![i],
                None => return Ok(Vec::new()),
            }
        }
    }
    // Local and remote addresses; an unspecified source IP is each interface's.
    let default_port = crate::params::int_or("port", 0, 0, 65535) as u16;
    let unspec = if v6 {
        IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
    };
    let mut src = SocketAddr::new(unspec, default_port);
    let mut dest = None;
    if flags & FI_SOURCE != 0 || node.is_none() {
        if node.is_some() || service.is_some() {
            src = node_addr.unwrap_or(SocketAddr::new(unspec, port));
        }
    } else {
        dest = node_addr;
    }
    if let Some(h) = hints {
        // SAFETY: the hint addresses are NULL or buffers of the stated length
        // (and readable: checked by hinted_family).
        unsafe {
            if let Some(a) = addr::read_sockaddr(h.src_addr, h.src_addrlen) {
                src = a;
            }
            if let Some(a) = addr::read_sockaddr(h.dest_addr, h.dest_addrlen) {
                dest = Some(a);
            }
        }
    }
    if dest.is_some_and(|d| d.is_ipv6() != src.is_ipv6()) {
        log::info("the destination and the source are of different address families");
        return Ok(Vec::new());
    }
    if !src.ip().is_unspecified() {
        // A given source address: the interface that owns it, and only it
        // (or the rails whose first it is).
        rails = rails.filter(|r| r[0].ip == src.ip());
        match iface::owning(src.ip()) {
            Some(i) if wanted.is_none() || cands.iter().any(|c| c.name == i.name) => {
                cands = vec![i]
            }
            _ if rails.is_some() => cands = Vec::new(),
            _ => return Ok(Vec::new()),
        }
    } else if let Some(d) = dest {
        // The interface the kernel would send to the destination from goes first.
        if let Some(ip) = iface::route_source(d) {
            if let Some(k) = cands.iter().position(|c| c.ip == ip) {
                let first = cands.remove(k);
                cands.insert(0, first);
            }
        }
    }

    let mut out = Vec::new();
    let sets = rails
        .into_iter()
        .map(|r| (r[0].clone(), r))
        .chain(cands.into_iter().map(|i| (i, Vec::new())));
    for (chosen, rails) in sets {
        let chosen = &chosen;
        let src = SocketAddr::new(
            if src.ip().is_unspecified() {
                chosen.ip
            } else {
                src.ip()
            },
            src.port(),
        );
        let max_dgram = if rails.is_empty() {
            iface::max_datagram(chosen)
        } else {
            iface::rails_max_datagram(&rails)
        };
        let lim = limits::for_datagram(max_dgram);
        log::info(&format!(
            "interface {} address {} mtu {} -> max datagram {} B; {} paths",
            if rails.is_empty() {
                chosen.name.clone()
            } else {
                format!("rails {}", iface::rails_name(&rails))
            },
            src,
            chosen.mtu,
            max_dgram,
            crate::io::sock::paths_per_rail(rails.len())
        ));
        for ep_type in [FI_EP_RDM, FI_EP_DGRAM] {
            let (caps, max_msg, order, tag) = if ep_type == FI_EP_RDM {
                (RDM_CAPS, lim.rdm_max_msg, FI_ORDER_SAS, u64::MAX)
            } else {
                (DGRAM_CAPS, lim.dgram_max_msg, FI_ORDER_NONE, 0)
            };
            let mut o = Offer {
                ep_type,
                caps,
                msg_order: order,
                tx_one_sided: 0,
                rx_one_sided: 0,
                max_msg_size: max_msg,
                inject_size: lim.inject_size.min(max_msg),
                mem_tag_format: tag,
                threading: FI_THREAD_SAFE,
                control_progress: FI_PROGRESS_MANUAL,
                data_progress: FI_PROGRESS_MANUAL,
                // Both AV types are served (fi_addr_t is an index either way), so
                // none is imposed unless asked: see `matches`.
                av_type: FI_AV_UNSPEC,
                mr_mode: 0,
                rma_iov_limit: if caps & FI_RMA != 0 { RMA_IOV_LIMIT } else { 0 },
                resource_mgmt: FI_RM_ENABLED,
                tx_op_flags: 0,
                rx_op_flags: 0,
                tx_size: queue_size(true),
                rx_size: queue_size(false),
                src,
                dest,
                iface: chosen.clone(),
                rails: rails.clone(),
                domain_key: None,
                ep_key: None,
            };
            if let Some(h) = hints {
                // SAFETY: hints come in the running core's layout; sub-attrs are NULL or valid.
                if !unsafe { matches(version, h, &mut o) } {
                    continue;
                }
            }
            if version < fi_version(1, 5) && o.mr_mode != FI_MR_SCALABLE {
                // Before 1.5 mr_mode is an enum, BASIC or SCALABLE (FI_MR_UNSPEC
                // asks the provider to pick); the domain's key table then uses
                // virtual addresses and provider keys (fabric/mr.rs).
                o.mr_mode = FI_MR_BASIC;
            }
            out.push(o);
        }
    }
    Ok(out)
}

/// Match `o` against the hints, adjusting what we echo back. False = no match.
/// Each attribute struct is matched by its own helper, in this order.
unsafe fn matches(version: u32, h: &sys::fi_info, o: &mut Offer) -> bool {
    if !caps_match(h.caps, o) {
        return false;
    }
    // We require no mode bits, so any hints->mode is fine.
    // SAFETY: hint sub-attributes are NULL or valid (caller contract).
    if let Some(ep) = unsafe { h.ep_attr.as_ref() } {
        // SAFETY: a hint's auth_key holds auth_key_size bytes (caller contract).
        if !unsafe { ep_attr_matches(version, ep, o) } {
            return false;
        }
    }
    // SAFETY: hint sub-attributes are NULL or valid (caller contract).
    if let Some(d) = unsafe { h.domain_attr.as_ref() } {
        // SAFETY: its name is NULL or a C string, its auth_key holds
        // auth_key_size bytes (caller contract).
        if !unsafe { domain_attr_matches(d, o) } {
            return false;
        }
    }
    // SAFETY: hint sub-attributes are NULL or valid (caller contract).
    if let Some(f) = unsafe { h.fabric_attr.as_ref() } {
        if !fabric_attr_matches(f) {
            return false;
        }
    }
    // SAFETY: hint sub-attributes are NULL or valid (caller contract).
    if let Some(tx) = unsafe { h.tx_attr.as_ref() } {
        if !tx_attr_matches(tx, o) {
            return false;
        }
    }
    // SAFETY: hint sub-attributes are NULL or valid (caller contract).
    if let Some(rx) = unsafe { h.rx_attr.as_ref() } {
        if !rx_attr_matches(rx, o) {
            return false;
        }
    }
    true
}

/// The hints' `caps`: everything asked must be ours; echo the asked primary
/// caps and add our secondary ones.
fn caps_match(caps: u64, o: &mut Offer) -> bool {
    if caps & !o.caps != 0 {
        return false;
    }
    if caps != 0 {
        o.caps = (caps & (FI_PRIMARY_CAPS | FI_CAP_MODIFIERS)) | (o.caps & FI_SECONDARY_CAPS);
        if o.caps & (FI_SEND | FI_RECV) == 0 {
            o.caps |= FI_SEND | FI_RECV;
        }
        if o.caps & (FI_RMA | FI_ATOMIC) != 0 && o.caps & RMA_MODIFIERS == 0 {
            o.caps |= RMA_MODIFIERS;
        }
    }
    true
}

/// The hints' `ep_attr`.
///
/// # Safety
/// `ep.auth_key` holds `ep.auth_key_size` bytes (or is NULL).
unsafe fn ep_attr_matches(version: u32, ep: &sys::fi_ep_attr, o: &mut Offer) -> bool {
    if ep.type_ != FI_EP_UNSPEC && ep.type_ != o.ep_type {
        return false;
    }
    if ep.max_msg_size > o.max_msg_size {
        return false;
    }
    if ep.tx_ctx_cnt > 1 || ep.rx_ctx_cnt > 1 {
        return false;
    }
    // SAFETY: a hint's auth_key holds auth_key_size bytes (caller contract).
    match unsafe { crate::auth::key_of(ep.auth_key, ep.auth_key_size) } {
        Ok(k) => o.ep_key = k,
        Err(crate::auth::BadKey) => return false,
    }
    if ep.msg_prefix_size != 0 {
        return false;
    }
    // One-sided orders hold for every op size (see ONE_SIDED_ORDERS).
    let most = ep
        .max_order_raw_size
        .max(ep.max_order_war_size)
        .max(ep.max_order_waw_size);
    if most > o.max_msg_size {
        return false;
    }
    if ep.protocol != sys::FI_PROTO_UNSPEC {
        return false;
    }
    if ep.mem_tag_format != 0 && o.caps & FI_TAGGED != 0 {
        let is_code = version >= fi_version(2, 0) && ep.mem_tag_format < FI_TAG_MAX_FORMAT;
        if is_code && ep.mem_tag_format > FI_TAG_CCL {
            return false;
        }
        // A code or any 64-bit mask: we match all 64 bits, so echo what was asked.
        o.mem_tag_format = ep.mem_tag_format;
    }
    true
}

/// The hints' `domain_attr`.
///
/// # Safety
/// `d.name` is NULL or a C string; `d.auth_key` holds `d.auth_key_size` bytes
/// (or is NULL).
unsafe fn domain_attr_matches(d: &sys::fi_domain_attr, o: &mut Offer) -> bool {
    if !name_matches(d.name, &o.domain_name()) {
        return false;
    }
    if d.threading != FI_THREAD_UNSPEC {
        // Every level is served (we are thread-safe); echo what was asked.
        o.threading = d.threading;
    }
    if ![FI_PROGRESS_UNSPEC, FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO].contains(&d.control_progress)
        || ![FI_PROGRESS_UNSPEC, FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO].contains(&d.data_progress)
    {
        return false;
    }
    // Control operations (AV, binding, enable, names) all complete inside
    // their call, so automatic control progress holds trivially.
    if d.control_progress != FI_PROGRESS_UNSPEC {
        o.control_progress = d.control_progress;
    }
    // Automatic data progress is the assist thread's work (assist.rs): it
    // steps in for such endpoints after `assist::AUTO_IDLE_NS` and wakes on
    // their sockets. With the assist switched off nothing would.
    if d.data_progress == FI_PROGRESS_AUTO && assist::idle_ns() == 0 {
        return false;
    }
    if d.data_progress != FI_PROGRESS_UNSPEC {
        o.data_progress = d.data_progress;
    }
    if d.resource_mgmt != FI_RM_UNSPEC {
        o.resource_mgmt = d.resource_mgmt;
    }
    match d.av_type {
        FI_AV_UNSPEC => {}
        FI_AV_TABLE | FI_AV_MAP => o.av_type = d.av_type,
        _ => return false,
    }
    if d.mr_mode == FI_MR_BASIC || d.mr_mode == FI_MR_SCALABLE {
        // Pre-1.5 style: echo; local buffers never need registration either way
        // (the domain's MR table follows BASIC = virtual addresses, provider keys).
        o.mr_mode = d.mr_mode;
    } else if o.caps & (FI_RMA | FI_ATOMIC) != 0 {
        // Remote keys and addresses: take the provider-key / virtual-address
        // modes when the application supports them (every MPI's first choice,
        // and no key collisions between its registrations); mode 0 otherwise.
        o.mr_mode = d.mr_mode & MR_MODES;
    }
    if d.cq_data_size > CQ_DATA_SIZE {
        return false;
    }
    if d.caps & !(FI_LOCAL_COMM | FI_REMOTE_COMM) & !o.caps != 0 {
        return false;
    }
    // One transmit and one receive context per endpoint, as many
    // endpoints as `endpoint_count` (what we advertise is what we accept).
    let eps = endpoint_count();
    if d.ep_cnt > eps || d.tx_ctx_cnt > eps || d.rx_ctx_cnt > eps {
        return false;
    }
    if d.max_ep_tx_ctx > 1 || d.max_ep_rx_ctx > 1 {
        return false;
    }
    // SAFETY: a hint's auth_key holds auth_key_size bytes (caller contract).
    match unsafe { crate::auth::key_of(d.auth_key, d.auth_key_size) } {
        Ok(k) => o.domain_key = k,
        Err(crate::auth::BadKey) => return false,
    }
    true
}

/// The hints' `fabric_attr`.
fn fabric_attr_matches(f: &sys::fi_fabric_attr) -> bool {
    if !name_matches(f.name, prov::FABRIC_NAME) || !name_matches(f.prov_name, prov::NAME) {
        return false;
    }
    true
}

/// The hints' `tx_attr`: the message order we keep (SAS on RDM), and
/// one-sided orders among themselves (see ONE_SIDED_ORDERS).
fn tx_attr_matches(tx: &sys::fi_tx_attr, o: &mut Offer) -> bool {
    let grantable = o.msg_order | ONE_SIDED_ORDERS;
    if tx.caps & !o.caps != 0
        || tx.msg_order & !grantable != 0
        || tx.comp_order & !FI_ORDER_NONE != 0
        || tx.inject_size > o.inject_size
        || tx.iov_limit > IOV_LIMIT
        || tx.size > o.tx_size
        || tx.rma_iov_limit > o.rma_iov_limit
    {
        return false;
    }
    // Asked for a smaller queue: that is the one it gets (as libfabric's
    // utility providers answer), and what fi_endpoint then enforces.
    if tx.size != 0 {
        o.tx_size = tx.size;
    }
    if tx.op_flags & !TX_OP_FLAGS != 0 {
        return false;
    }
    o.tx_op_flags = tx.op_flags;
    o.tx_one_sided = tx.msg_order & ONE_SIDED_ORDERS;
    true
}

/// The hints' `rx_attr` (orders as for `tx_attr`).
fn rx_attr_matches(rx: &sys::fi_rx_attr, o: &mut Offer) -> bool {
    let grantable = o.msg_order | ONE_SIDED_ORDERS;
    if rx.caps & !o.caps != 0
        || rx.msg_order & !grantable != 0
        || rx.comp_order & !FI_ORDER_NONE != 0
        || rx.iov_limit > IOV_LIMIT
        || rx.size > o.rx_size
        || rx.total_buffered_recv > 0
    {
        return false;
    }
    if rx.size != 0 {
        o.rx_size = rx.size;
    }
    if rx.op_flags & !RX_OP_FLAGS != 0 {
        return false;
    }
    o.rx_op_flags = rx.op_flags;
    o.rx_one_sided = rx.msg_order & ONE_SIDED_ORDERS;
    true
}

/// Most endpoints a domain advertises: each holds `FI_SPRAY_PATHS` sockets,
/// so the process's descriptor limit bounds them (kept for the application's
/// own descriptors: a quarter), and at most 1024.
fn endpoint_count() -> usize {
    let paths = crate::params::int_or("paths", crate::params::DEFAULT_PATHS, 1, 64) as u64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass.
    let fds = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        1024
    };
    (fds / 4 * 3 / paths).clamp(1, 1024) as usize
}

/// NULL hint names match anything; otherwise case-insensitive equality.
fn name_matches(p: *const c_char, ours: &str) -> bool {
    if p.is_null() {
        return true;
    }
    // SAFETY: non-null hint strings are NUL-terminated.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy();
    s.eq_ignore_ascii_case(ours)
}

/// A malloc'd copy of `s` (freed by fi_freeinfo).
fn c_dup(s: &str) -> *mut c_char {
    let Ok(c) = CString::new(s) else {
        return std::ptr::null_mut();
    };
    // SAFETY: c is a valid C string; strdup returns malloc'd memory or NULL.
    unsafe { libc::strdup(c.as_ptr()) }
}

/// `fi_domain_attr` as libfabric 2.x lays it out (fields appended after 1.17's).
#[repr(C)]
struct DomainAttr2 {
    base: sys::fi_domain_attr,
    max_ep_auth_key: usize,
    max_group_id: u32,
    max_cntr_value: u64,
    max_err_cntr_value: u64,
}

/// Allocate an `fi_info` with the core's allocator and fill it from `o`.
///
/// One function on purpose (~110 lines): one assignment per `fi_info`
/// field, attribute by attribute in libfabric's struct order.
unsafe fn write_info(o: &Offer) -> *mut sys::fi_info {
    // SAFETY: fi_dupinfo(NULL) is fi_allocinfo: a zeroed fi_info with all attrs.
    let p = unsafe { sys::fi_dupinfo(std::ptr::null()) };
    if p.is_null() {
        return p;
    }
    // SAFETY: p and its attribute structs were just allocated by the core.
    let (i, tx, rx, ep, dom, fab) = unsafe {
        let i = &mut *p;
        if i.tx_attr.is_null()
            || i.rx_attr.is_null()
            || i.ep_attr.is_null()
            || i.domain_attr.is_null()
            || i.fabric_attr.is_null()
        {
            sys::fi_freeinfo(p);
            return std::ptr::null_mut();
        }
        let (tx, rx, ep, dom, fab) = (
            &mut *i.tx_attr,
            &mut *i.rx_attr,
            &mut *i.ep_attr,
            &mut *i.domain_attr,
            &mut *i.fabric_attr,
        );
        (i, tx, rx, ep, dom, fab)
    };
    i.caps = o.caps;
    i.mode = 0;
    // A concrete format even when the hints asked for FI_SOCKADDR (fi_getinfo(3)).
    i.addr_format = addr::format_of(o.src);
    (i.src_addr, i.src_addrlen) = addr::alloc_sockaddr(o.src);
    if let Some(d) = o.dest {
        (i.dest_addr, i.dest_addrlen) = addr::alloc_sockaddr(d);
    }
    let dir_caps = o.caps & !(FI_LOCAL_COMM | FI_REMOTE_COMM);
    // Transmit caps are initiator caps, receive caps target caps (fi_getinfo(3)).
    tx.caps = dir_caps & !RX_ONLY_CAPS;
    tx.mode = 0;
    tx.op_flags = o.tx_op_flags;
    tx.msg_order = o.msg_order | o.tx_one_sided;
    tx.comp_order = FI_ORDER_NONE;
    tx.inject_size = o.inject_size;
    tx.size = o.tx_size;
    tx.iov_limit = IOV_LIMIT;
    tx.rma_iov_limit = o.rma_iov_limit;
    rx.caps = dir_caps & !TX_ONLY_CAPS;
    rx.mode = 0;
    rx.op_flags = o.rx_op_flags;
    rx.msg_order = o.msg_order | o.rx_one_sided;
    rx.comp_order = FI_ORDER_NONE;
    rx.total_buffered_recv = 0;
    rx.size = o.rx_size;
    rx.iov_limit = IOV_LIMIT;
    ep.type_ = o.ep_type;
    ep.protocol = sys::FI_PROTO_UNSPEC;
    ep.protocol_version = 1;
    ep.max_msg_size = o.max_msg_size;
    // Kept for every size when asked (ONE_SIDED_ORDERS).
    ep.max_order_raw_size = o.max_msg_size;
    ep.max_order_war_size = o.max_msg_size;
    ep.max_order_waw_size = o.max_msg_size;
    ep.msg_prefix_size = 0;
    ep.mem_tag_format = o.mem_tag_format;
    ep.tx_ctx_cnt = 1;
    ep.rx_ctx_cnt = 1;
    (ep.auth_key, ep.auth_key_size) = crate::auth::c_copy(o.ep_key.as_deref());
    (dom.auth_key, dom.auth_key_size) = crate::auth::c_copy(o.domain_key.as_deref());
    dom.name = c_dup(&o.domain_name());
    // The interface's attributes (a domain of rails: its first rail's);
    // freed (and duplicated) through its own ops.
    i.nic = crate::nic::alloc(&o.iface);
    dom.threading = o.threading;
    dom.control_progress = o.control_progress;
    dom.data_progress = o.data_progress;
    dom.resource_mgmt = o.resource_mgmt;
    dom.av_type = o.av_type;
    dom.mr_mode = o.mr_mode;
    dom.mr_key_size = 8;
    dom.cq_data_size = CQ_DATA_SIZE;
    dom.cq_cnt = 1024;
    let eps = endpoint_count();
    dom.ep_cnt = eps;
    dom.tx_ctx_cnt = eps;
    dom.rx_ctx_cnt = eps;
    dom.max_ep_tx_ctx = 1;
    dom.max_ep_rx_ctx = 1;
    dom.max_ep_stx_ctx = 0;
    dom.max_ep_srx_ctx = 0;
    dom.cntr_cnt = 1024;
    dom.mr_iov_limit = IOV_LIMIT;
    dom.caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
    dom.mode = 0;
    dom.max_err_data = 0;
    dom.mr_cnt = 1 << 20;
    // SAFETY: fi_version only reads the core's version.
    if unsafe { sys::fi_version() } >> 16 >= 2 {
        // A 2.x core allocated its larger fi_domain_attr (fi_dupinfo): fill the
        // appended fields; zero counter limits would read as "cannot count".
        // SAFETY: the struct came from the running 2.x core, so it has them.
        let d2 = unsafe { &mut *(i.domain_attr as *mut DomainAttr2) };
        // One job key per endpoint (its own, or the domain's).
        d2.max_ep_auth_key = 1;
        d2.max_group_id = 0;
        d2.max_cntr_value = u64::MAX;
        d2.max_err_cntr_value = u64::MAX;
    }
    fab.name = c_dup(prov::FABRIC_NAME);
    fab.prov_name = std::ptr::null_mut();
    fab.prov_version = crate::consts::SPRAY_PROV_VERSION;
    fab.api_version = prov::api_version();
    p
}
