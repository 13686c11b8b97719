//! One domain per interface: `fi_getinfo` lists a domain (RDM and DGRAM
//! `fi_info`) for every UP interface with an address of the family, loopback
//! only when nothing else is there or when asked, each with `nic` attributes
//! read from sysfs (name, MAC, MTU, speed, link state, and the PCI location
//! with `FI_SPRAY_NIC_PCI=1`); the core
//! duplicates (`fi_dupinfo`), prints (`fi_tostr`) and frees (`fi_freeinfo`)
//! them through the nic's own ops; `FI_SPRAY_IFACE` restricts and orders the
//! interfaces and a domain name in the hints selects one; each domain's
//! endpoints bind to its interface's address.
//!
//! `two_veth_nics_in_a_namespace` builds namespaces `sprw-a-<pid>` (two veth
//! NICs, MTU 1500 and 9000, 198.18.100.1/24 and 198.18.101.1/24) and
//! `sprw-b-<pid>` (their peers), runs the checks inside the first one (this
//! test binary again, under `ip netns exec`), and deletes both. It needs root
//! and `ip netns`: it fails under `CI=true` without them and skips otherwise.

mod common;

use std::ffi::{CStr, CString};
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::ptr::null_mut;

use spray_fi::sys;

/// Load spray from this build (no FI_SPRAY_IFACE: the default choice is tested).
fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::env::set_var("FI_PROVIDER_PATH", common::provider_dir());
        std::env::set_var("FI_PROVIDER", "spray");
    });
}

/// `fi_getinfo` for spray RDM with an optional domain name, node and flags.
fn getinfo(domain: Option<&str>, node: Option<&str>, flags: u64) -> Result<*mut sys::fi_info, i32> {
    init();
    unsafe {
        let hints = sys::fi_dupinfo(std::ptr::null());
        (*(*hints).ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
        (*hints).caps = (sys::FI_MSG | sys::FI_TAGGED) as u64;
        (*(*hints).fabric_attr).prov_name = libc::strdup(c"spray".as_ptr());
        if let Some(d) = domain {
            let c = CString::new(d).unwrap();
            (*(*hints).domain_attr).name = libc::strdup(c.as_ptr());
        }
        let node = node.map(|n| CString::new(n).unwrap());
        let mut info = null_mut();
        let rc = sys::fi_getinfo(
            sys::fi_version(),
            node.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
            std::ptr::null(),
            flags,
            hints,
            &mut info,
        );
        sys::fi_freeinfo(hints);
        if rc == 0 {
            Ok(info)
        } else {
            Err(rc)
        }
    }
}

/// The infos of a list.
fn each(info: *mut sys::fi_info) -> Vec<*mut sys::fi_info> {
    let mut v = Vec::new();
    let mut p = info;
    while !p.is_null() {
        v.push(p);
        p = unsafe { (*p).next };
    }
    v
}

fn cstr(p: *const std::os::raw::c_char) -> Option<String> {
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

fn domain_name(i: *mut sys::fi_info) -> String {
    unsafe { cstr((*(*i).domain_attr).name).unwrap_or_default() }
}

/// Domain names of a list, each once, in order.
fn domains(info: *mut sys::fi_info) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for i in each(info) {
        let d = domain_name(i);
        if !v.contains(&d) {
            v.push(d);
        }
    }
    v
}

fn src_ip(i: *mut sys::fi_info) -> Ipv4Addr {
    unsafe {
        assert_eq!((*i).addr_format, sys::FI_SOCKADDR_IN);
        let sa = &*((*i).src_addr as *const libc::sockaddr_in);
        Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr))
    }
}

fn sysfs(dev: &str, f: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{dev}/{f}"))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The PCI function of a net device, as the test reads sysfs: its `device`
/// or that device's parent, whichever is on the PCI bus.
fn pci_of(dev: &str) -> Option<(u16, u8, u8, u8)> {
    let d = std::fs::canonicalize(format!("/sys/class/net/{dev}/device")).ok()?;
    for c in [Some(d.clone()), d.parent().map(Path::to_path_buf)]
        .into_iter()
        .flatten()
    {
        let sub = std::fs::read_link(c.join("subsystem"));
        if sub.is_ok_and(|s| s.file_name().is_some_and(|n| n == "pci")) {
            let n = c.file_name()?.to_string_lossy().into_owned();
            let v: Vec<&str> = n.split(&[':', '.'][..]).collect();
            return Some((
                u16::from_str_radix(v[0], 16).ok()?,
                u8::from_str_radix(v[1], 16).ok()?,
                u8::from_str_radix(v[2], 16).ok()?,
                u8::from_str_radix(v[3], 16).ok()?,
            ));
        }
    }
    None
}

/// Whether this process asked spray for PCI locations.
fn pci_asked() -> bool {
    std::env::var("FI_SPRAY_NIC_PCI").as_deref() == Ok("1")
}

/// Check the nic of `i` against sysfs; returns its MTU.
fn check_nic(i: *mut sys::fi_info) -> usize {
    let dom = domain_name(i);
    unsafe {
        let nic = (*i).nic;
        assert!(!nic.is_null(), "{dom}: no nic");
        assert_eq!((*nic).fid.fclass, sys::FI_CLASS_NIC as usize);
        let d = &*(*nic).device_attr;
        let l = &*(*nic).link_attr;
        let b = &*(*nic).bus_attr;
        assert_eq!(cstr(d.name).as_deref(), Some(dom.as_str()), "device name");
        assert_eq!(cstr(l.address), sysfs(&dom, "address"), "{dom}: MAC");
        let mtu: usize = sysfs(&dom, "mtu").unwrap().parse().unwrap();
        assert_eq!(l.mtu, mtu, "{dom}: mtu");
        let speed = sysfs(&dom, "speed")
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&s| s > 0)
            .map_or(0, |s| s as usize * 1_000_000);
        assert_eq!(l.speed, speed, "{dom}: speed, bits/s");
        let want_state = match sysfs(&dom, "operstate").as_deref() {
            Some("up") => sys::fi_link_state_FI_LINK_UP,
            Some("down" | "lowerlayerdown" | "notpresent" | "dormant") => {
                sys::fi_link_state_FI_LINK_DOWN
            }
            _ => sys::fi_link_state_FI_LINK_UNKNOWN,
        };
        assert_eq!(l.state, want_state, "{dom}: link state");
        let ty = match sysfs(&dom, "type").as_deref() {
            Some("1") => Some("Ethernet"),
            Some("772") => Some("Loopback"),
            _ => None,
        };
        assert_eq!(cstr(l.network_type).as_deref(), ty, "{dom}: network type");
        // The location is given only when asked (FI_SPRAY_NIC_PCI=1): MPICH
        // aborts on a PCI nic its hwloc cannot find.
        match pci_of(&dom).filter(|_| pci_asked()) {
            Some((pd, pb, pdev, pf)) => {
                assert_eq!(b.bus_type, sys::fi_bus_type_FI_BUS_PCI, "{dom}: bus");
                let p = b.attr.pci;
                assert_eq!(
                    (p.domain_id, p.bus_id, p.device_id, p.function_id),
                    (pd, pb, pdev, pf),
                    "{dom}: PCI location"
                );
                assert!(cstr(d.vendor_id).is_some(), "{dom}: PCI vendor id");
                assert!(cstr(d.device_id).is_some(), "{dom}: PCI device id");
            }
            None => assert_eq!(b.bus_type, sys::fi_bus_type_FI_BUS_UNKNOWN, "{dom}: bus"),
        }
        l.mtu
    }
}

/// fi_dupinfo gives each copy its own nic with the same attributes; fi_tostr
/// prints it; both lists free.
fn check_dup_and_tostr(info: *mut sys::fi_info) {
    unsafe {
        let dup = sys::fi_dupinfo(info);
        assert!(!dup.is_null(), "fi_dupinfo");
        assert!(!(*dup).nic.is_null(), "duplicate has a nic");
        assert_ne!((*dup).nic, (*info).nic, "the nic is copied, not shared");
        let (a, b) = (&*(*(*info).nic).link_attr, &*(*(*dup).nic).link_attr);
        assert_eq!((a.mtu, a.speed, a.state), (b.mtu, b.speed, b.state));
        assert_eq!(cstr(a.address), cstr(b.address));
        assert_ne!(a.address, b.address, "strings are copied");
        let s = cstr(sys::fi_tostr(dup.cast(), sys::fi_type_FI_TYPE_INFO)).unwrap();
        let name = domain_name(info);
        assert!(s.contains("nic:"), "fi_tostr without nic:\n{s}");
        assert!(
            s.contains(&format!("name: {name}")),
            "fi_tostr without the name:\n{s}"
        );
        assert!(
            s.contains(&format!("mtu: {}", a.mtu)),
            "fi_tostr without the mtu:\n{s}"
        );
        // A duplicate of a duplicate, freed before its source.
        let dup2 = sys::fi_dupinfo(dup);
        sys::fi_freeinfo(dup2);
        sys::fi_freeinfo(dup);
    }
}

#[test]
fn host_interfaces_each_have_a_domain_and_a_nic() {
    // Whatever this machine has: every listed domain is a distinct interface
    // whose nic matches sysfs; loopback only when it is the only one.
    let info = getinfo(None, None, 0).expect("fi_getinfo");
    let names = domains(info);
    assert!(!names.is_empty());
    if names.len() > 1 {
        assert!(
            !names.contains(&"lo".to_string()),
            "lo listed with others: {names:?}"
        );
    }
    for i in each(info) {
        check_nic(i);
    }
    check_dup_and_tostr(info);
    unsafe { sys::fi_freeinfo(info) };
    // Asked by name, loopback is served.
    let lo = getinfo(Some("lo"), None, 0).expect("domain lo");
    assert_eq!(domains(lo), vec!["lo"]);
    assert_eq!(src_ip(lo), Ipv4Addr::LOCALHOST);
    check_nic(lo);
    unsafe { sys::fi_freeinfo(lo) };
    assert_eq!(
        getinfo(Some("no-such-nic0"), None, 0).err(),
        Some(-(sys::FI_ENODATA as i32))
    );
}

#[test]
fn pci_location_only_when_asked() {
    // This binary again with FI_SPRAY_NIC_PCI=1 (one process, so the variable
    // cannot race the other tests): the host check then wants FI_BUS_PCI and
    // the location for every interface on PCI; without it (the check above) it
    // wants FI_BUS_UNKNOWN everywhere.
    if pci_asked() {
        return;
    }
    let me = std::env::current_exe().unwrap();
    let out = Command::new(me)
        .args([
            "host_interfaces_each_have_a_domain_and_a_nic",
            "--exact",
            "--nocapture",
        ])
        .env("FI_SPRAY_NIC_PCI", "1")
        .output()
        .expect("run the test binary");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "with FI_SPRAY_NIC_PCI=1:\n{text}");
    assert!(text.contains("1 passed"), "the check did not run:\n{text}");
}

/// Namespaces deleted when dropped.
struct Netns(Vec<String>);
impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn two_veth_nics_in_a_namespace() {
    if !common::can_build_namespaces("two_veth_nics_in_a_namespace") {
        return;
    }
    let pid = std::process::id();
    let (a, b) = (format!("sprw-a-{pid}"), format!("sprw-b-{pid}"));
    for n in [&a, &b] {
        // A leftover of an earlier run with this pid.
        let _ = Command::new("ip")
            .args(["netns", "del", n])
            .stderr(std::process::Stdio::null())
            .status();
    }
    let mut guard = Netns(Vec::new());
    ip(&["netns", "add", &a]);
    guard.0.push(a.clone());
    ip(&["netns", "add", &b]);
    guard.0.push(b.clone());
    ip(&[
        "-n", &a, "link", "add", "sprw-x0", "type", "veth", "peer", "name", "sprw-y0", "netns", &b,
    ]);
    ip(&[
        "-n", &a, "link", "add", "sprw-x1", "mtu", "9000", "type", "veth", "peer", "name",
        "sprw-y1", "mtu", "9000", "netns", &b,
    ]);
    ip(&["-n", &a, "addr", "add", "198.18.100.1/24", "dev", "sprw-x0"]);
    ip(&["-n", &a, "addr", "add", "198.18.101.1/24", "dev", "sprw-x1"]);
    ip(&["-n", &b, "addr", "add", "198.18.100.2/24", "dev", "sprw-y0"]);
    ip(&["-n", &b, "addr", "add", "198.18.101.2/24", "dev", "sprw-y1"]);
    for (ns, dev) in [
        (&a, "lo"),
        (&a, "sprw-x0"),
        (&a, "sprw-x1"),
        (&b, "lo"),
        (&b, "sprw-y0"),
        (&b, "sprw-y1"),
    ] {
        ip(&["-n", ns, "link", "set", dev, "up"]);
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &a])
        .arg(&exe)
        .args([
            "--exact",
            "in_namespace_with_two_nics",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SPRW_IN_NAMESPACE", "1")
        .env_remove("FI_SPRAY_IFACE")
        .output()
        .expect("run the checks in the namespace");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "checks in namespace {a} failed:\n{text}"
    );
    assert!(text.contains("1 passed"), "the checks did not run:\n{text}");
}

/// Open fabric, domain and an enabled RDM endpoint (with a CQ and an AV) for
/// `info`, with the info's source address cleared (the domain's interface
/// decides); returns its bound IPv4 address and the objects to close.
struct Side {
    fab: *mut sys::fid_fabric,
    dom: *mut sys::fid_domain,
    ep: *mut sys::fid_ep,
    cq: *mut sys::fid_cq,
    av: *mut sys::fid_av,
}

fn open_side(info: *mut sys::fi_info) -> (Side, libc::sockaddr_in) {
    use common::fab::*;
    unsafe {
        let one = sys::fi_dupinfo(info);
        (*one).next = null_mut();
        libc::free((*one).src_addr);
        (*one).src_addr = null_mut();
        (*one).src_addrlen = 0;
        let (fab, dom) = open_domain(one);
        let av = open_av(dom);
        let cq = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
        let ep = open_ep(dom, one);
        assert_eq!(bind(ep, av, 0), 0);
        assert_eq!(bind(ep, cq, (sys::FI_TRANSMIT | sys::FI_RECV) as u64), 0);
        assert_eq!(control(ep, sys::FI_ENABLE, null_mut()), 0);
        sys::fi_freeinfo(one);
        let name = getname(ep);
        (
            Side {
                fab,
                dom,
                ep,
                cq,
                av,
            },
            name,
        )
    }
}

fn close_side(s: Side) {
    use common::fab::close;
    assert_eq!(close(s.ep), 0);
    assert_eq!(close(s.cq), 0);
    assert_eq!(close(s.av), 0);
    assert_eq!(close(s.dom), 0);
    assert_eq!(close(s.fab), 0);
}

/// Run by `two_veth_nics_in_a_namespace` inside namespace sprw-a-<pid>.
#[test]
#[ignore = "runs inside the namespace two_veth_nics_in_a_namespace builds"]
fn in_namespace_with_two_nics() {
    assert_eq!(
        std::env::var("SPRW_IN_NAMESPACE").as_deref(),
        Ok("1"),
        "run by the parent test"
    );
    let x = ["sprw-x0", "sprw-x1"];
    let ips = [
        Ipv4Addr::new(198, 18, 100, 1),
        Ipv4Addr::new(198, 18, 101, 1),
    ];
    // Default: both veth NICs, in the kernel's order, loopback left out.
    let info = getinfo(None, None, 0).expect("fi_getinfo in the namespace");
    assert_eq!(domains(info), x, "domains");
    let rdm = each(info);
    assert_eq!(rdm.len(), 2, "one RDM info per NIC");
    for (k, &i) in rdm.iter().enumerate() {
        assert_eq!(domain_name(i), x[k]);
        assert_eq!(src_ip(i), ips[k], "source address of {}", x[k]);
        let mtu = check_nic(i);
        assert_eq!(mtu, [1500, 9000][k], "{} mtu", x[k]);
        unsafe {
            assert_eq!(
                (*(*(*i).nic).link_attr).state,
                sys::fi_link_state_FI_LINK_UP
            );
            assert_eq!(
                cstr((*(*(*i).nic).link_attr).network_type).as_deref(),
                Some("Ethernet")
            );
        }
    }
    check_dup_and_tostr(info);
    // Each domain's endpoints bind to its NIC's address, even when the info
    // they are opened with carries no source address; a message crosses.
    let (s0, a0) = open_side(rdm[0]);
    let (s1, a1) = open_side(rdm[1]);
    assert_eq!(Ipv4Addr::from(u32::from_be(a0.sin_addr.s_addr)), ips[0]);
    assert_eq!(Ipv4Addr::from(u32::from_be(a1.sin_addr.s_addr)), ips[1]);
    {
        use common::fab::*;
        let to1 = av_insert(s0.av, &a1);
        let mut rx = [0u8; 8];
        let rc = unsafe {
            (*(*s1.ep).tagged).recv.unwrap()(
                s1.ep,
                rx.as_mut_ptr().cast(),
                8,
                null_mut(),
                u64::MAX,
                5,
                0,
                null_mut(),
            )
        };
        assert_eq!(rc, 0);
        let tx = 0x1234u64.to_le_bytes();
        let rc =
            unsafe { (*(*s0.ep).tagged).inject.unwrap()(s0.ep, tx.as_ptr().cast(), 8, to1, 5) };
        assert_eq!(rc, 0);
        let t0 = std::time::Instant::now();
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        let mut src = [0u64; 1];
        loop {
            let _ = cq_read(s0.cq, &mut e);
            if cq_readfrom(s1.cq, &mut e, &mut src) == 1 {
                break;
            }
            assert!(t0.elapsed().as_secs() < 10, "message between the NICs lost");
        }
        assert_eq!(
            u64::from_le_bytes(unsafe { std::ptr::read_volatile(&rx) }),
            0x1234
        );
    }
    close_side(s0);
    close_side(s1);
    unsafe { sys::fi_freeinfo(info) };
    // FI_SPRAY_IFACE restricts and orders; an unknown name is skipped.
    for (val, want) in [
        ("sprw-x1,sprw-x0", vec!["sprw-x1", "sprw-x0"]),
        ("sprw-x1", vec!["sprw-x1"]),
        ("nope0, sprw-x0", vec!["sprw-x0"]),
        ("lo", vec!["lo"]),
        ("nope0", vec!["sprw-x0", "sprw-x1"]),
    ] {
        std::env::set_var("FI_SPRAY_IFACE", val);
        let i = getinfo(None, None, 0).expect("fi_getinfo with FI_SPRAY_IFACE");
        assert_eq!(domains(i), want, "FI_SPRAY_IFACE={val}");
        unsafe { sys::fi_freeinfo(i) };
    }
    std::env::remove_var("FI_SPRAY_IFACE");
    // A domain name in the hints selects one NIC.
    let one = getinfo(Some("sprw-x1"), None, 0).expect("domain sprw-x1");
    assert_eq!(domains(one), vec!["sprw-x1"]);
    assert_eq!(src_ip(one), ips[1]);
    unsafe { sys::fi_freeinfo(one) };
    // A source address selects its NIC; a destination puts the NIC that
    // routes to it first.
    let by_src = getinfo(None, Some("198.18.101.1"), sys::FI_SOURCE).expect("node + FI_SOURCE");
    assert_eq!(domains(by_src), vec!["sprw-x1"]);
    unsafe { sys::fi_freeinfo(by_src) };
    let by_dest = getinfo(None, Some("198.18.101.2"), 0).expect("destination node");
    assert_eq!(domains(by_dest), vec!["sprw-x1", "sprw-x0"]);
    unsafe { sys::fi_freeinfo(by_dest) };
}
