//! IPv6 through the real libfabric core: getinfo with `FI_SOCKADDR_IN6` (and
//! node "::1", and the generic `FI_SOCKADDR`), endpoint names and AV entries as
//! `sockaddr_in6`, checked tagged messages (small, eager, rendezvous) between
//! two endpoints on ::1, and addresses of the other family refused.
//!
//! Needs IPv6 on loopback: fails under CI=true without it, skips otherwise.

mod common;
use common::duo::{ctx, wait_one};
use common::fab::*;
use common::pair::pattern;

use std::ffi::{CStr, CString};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::ptr::{null, null_mut};

use spray_fi::sys;

const ENODATA: i32 = -(sys::FI_ENODATA as i32);
const EINVAL: i32 = -(sys::FI_EINVAL as i32);
const FI_ADDR_NOTAVAIL: u64 = u64::MAX;
const SIN6_LEN: usize = std::mem::size_of::<libc::sockaddr_in6>();

/// True when a UDP socket can be bound to [::1]; when not, fail under CI=true
/// and tell the caller to skip otherwise.
fn have_ipv6() -> bool {
    match std::net::UdpSocket::bind("[::1]:0") {
        Ok(_) => true,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("IPv6 on loopback (::1) is required under CI=true: {e}");
            }
            eprintln!("SKIP: no IPv6 on loopback (::1): {e}");
            false
        }
    }
}

/// `fi_getinfo` for spray RDM with `addr_format` in the hints, `node`/`service`
/// and `flags`: the return code and the list (NULL on error).
fn getinfo6(
    addr_format: u32,
    node: Option<&str>,
    service: Option<&str>,
    flags: u64,
) -> (i32, *mut sys::fi_info) {
    init();
    let node = node.map(|n| CString::new(n).unwrap());
    let service = service.map(|s| CString::new(s).unwrap());
    unsafe {
        let hints = sys::fi_dupinfo(null());
        (*(*hints).ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
        (*hints).caps = (sys::FI_MSG | sys::FI_TAGGED) as u64 | sys::FI_SOURCE;
        (*hints).addr_format = addr_format;
        let name = CString::new("spray").unwrap();
        (*(*hints).fabric_attr).prov_name = libc::strdup(name.as_ptr());
        let mut info = null_mut();
        let rc = sys::fi_getinfo(
            sys::fi_version(),
            node.as_ref().map_or(null(), |n| n.as_ptr()),
            service.as_ref().map_or(null(), |s| s.as_ptr()),
            flags,
            hints,
            &mut info,
        );
        sys::fi_freeinfo(hints);
        (rc, info)
    }
}

/// The IPv6 address in a C buffer of `len` bytes (asserting it is one).
fn v6_of(p: *const libc::c_void, len: usize) -> SocketAddrV6 {
    assert_eq!(len, SIN6_LEN, "address length");
    let s = unsafe { std::ptr::read_unaligned(p as *const libc::sockaddr_in6) };
    assert_eq!(i32::from(s.sin6_family), libc::AF_INET6, "address family");
    SocketAddrV6::new(
        Ipv6Addr::from(s.sin6_addr.s6_addr),
        u16::from_be(s.sin6_port),
        0,
        s.sin6_scope_id,
    )
}

fn sockaddr6(a: SocketAddrV6) -> libc::sockaddr_in6 {
    let mut s: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    s.sin6_port = a.port().to_be();
    s.sin6_addr.s6_addr = a.ip().octets();
    s
}

fn sockaddr4(port: u16) -> libc::sockaddr_in {
    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = port.to_be();
    s.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
    s
}

/// `fi_getname` of an IPv6 endpoint.
fn getname6(ep: *mut sys::fid_ep) -> SocketAddrV6 {
    let mut buf = [0u8; 128];
    let mut len = buf.len();
    let rc = unsafe {
        ((*(*ep).cm).getname.unwrap())(ep as sys::fid_t, buf.as_mut_ptr().cast(), &mut len)
    };
    assert_eq!(rc, 0, "fi_getname");
    v6_of(buf.as_ptr().cast(), len)
}

/// `fi_av_insert` of `count` packed addresses with FI_SYNC_ERR: (return value,
/// fi_addrs, per-entry statuses).
fn insert_raw(av: *mut sys::fid_av, addrs: &[u8], count: usize) -> (i32, Vec<u64>, Vec<i32>) {
    let mut fi_addr = vec![0u64; count];
    let mut status = vec![-1i32; count];
    let n = unsafe {
        ((*(*av).ops).insert.unwrap())(
            av,
            addrs.as_ptr().cast(),
            count,
            fi_addr.as_mut_ptr(),
            sys::FI_SYNC_ERR,
            status.as_mut_ptr().cast(),
        )
    };
    (n, fi_addr, status)
}

fn bytes_of<T>(v: &T) -> &[u8] {
    unsafe { std::slice::from_raw_parts((v as *const T).cast(), std::mem::size_of::<T>()) }
}

#[test]
fn getinfo_in6_with_node_loopback() {
    if !have_ipv6() {
        return;
    }
    // node "::1" as the destination: an IPv6 info, source on lo's ::1.
    let (rc, info) = getinfo6(sys::FI_SOCKADDR_IN6, Some("::1"), Some("4711"), 0);
    assert_eq!(rc, 0, "fi_getinfo(FI_SOCKADDR_IN6, ::1)");
    unsafe {
        let i = &*info;
        assert_eq!(i.addr_format, sys::FI_SOCKADDR_IN6);
        let src = v6_of(i.src_addr, i.src_addrlen);
        assert_eq!(*src.ip(), Ipv6Addr::LOCALHOST, "source on lo");
        let dest = v6_of(i.dest_addr, i.dest_addrlen);
        assert_eq!((*dest.ip(), dest.port()), (Ipv6Addr::LOCALHOST, 4711));
        sys::fi_freeinfo(info);
    }
    // With FI_SOURCE, node/service name the source.
    let (rc, info) = getinfo6(
        sys::FI_SOCKADDR_IN6,
        Some("::1"),
        Some("4712"),
        sys::FI_SOURCE,
    );
    assert_eq!(rc, 0, "fi_getinfo(FI_SOCKADDR_IN6, ::1, FI_SOURCE)");
    unsafe {
        let i = &*info;
        let src = v6_of(i.src_addr, i.src_addrlen);
        assert_eq!((*src.ip(), src.port()), (Ipv6Addr::LOCALHOST, 4712));
        assert!(i.dest_addr.is_null());
        sys::fi_freeinfo(info);
    }
    // No node: the hints' format alone selects lo's IPv6 address.
    let (rc, info) = getinfo6(sys::FI_SOCKADDR_IN6, None, None, 0);
    assert_eq!(rc, 0, "fi_getinfo(FI_SOCKADDR_IN6)");
    unsafe {
        let i = &*info;
        assert_eq!(i.addr_format, sys::FI_SOCKADDR_IN6);
        assert_eq!(*v6_of(i.src_addr, i.src_addrlen).ip(), Ipv6Addr::LOCALHOST);
        sys::fi_freeinfo(info);
    }
}

#[test]
fn getinfo_generic_sockaddr_and_mismatch() {
    if !have_ipv6() {
        return;
    }
    // FI_SOCKADDR (any family): the answer names the concrete format.
    let (rc, info) = getinfo6(sys::FI_SOCKADDR, Some("::1"), Some("4713"), 0);
    assert_eq!(rc, 0, "fi_getinfo(FI_SOCKADDR, ::1)");
    unsafe {
        assert_eq!((*info).addr_format, sys::FI_SOCKADDR_IN6);
        sys::fi_freeinfo(info);
    }
    let (rc, info) = getinfo6(sys::FI_SOCKADDR, None, None, 0);
    assert_eq!(rc, 0, "fi_getinfo(FI_SOCKADDR)");
    unsafe {
        assert_eq!((*info).addr_format, sys::FI_SOCKADDR_IN, "IPv4 by default");
        sys::fi_freeinfo(info);
    }
    // No node and no format: IPv4, as before.
    let (rc, info) = getinfo6(sys::FI_FORMAT_UNSPEC, None, None, 0);
    assert_eq!(rc, 0);
    unsafe {
        assert_eq!((*info).addr_format, sys::FI_SOCKADDR_IN);
        sys::fi_freeinfo(info);
    }
    // Mixed families: nothing matches.
    let (rc, info) = getinfo6(sys::FI_SOCKADDR_IN, Some("::1"), Some("4714"), 0);
    assert_eq!(
        (rc, info),
        (ENODATA, null_mut()),
        "FI_SOCKADDR_IN with node ::1"
    );
    let (rc, info) = getinfo6(sys::FI_SOCKADDR_IN6, Some("127.0.0.1"), Some("4714"), 0);
    assert_eq!(
        (rc, info),
        (ENODATA, null_mut()),
        "FI_SOCKADDR_IN6 with node 127.0.0.1"
    );
}

/// Domain, AV, two enabled endpoints with their CQs on ::1, each in the AV.
struct Pair6 {
    info: *mut sys::fi_info,
    fab: *mut sys::fid_fabric,
    dom: *mut sys::fid_domain,
    av: *mut sys::fid_av,
    ep: [*mut sys::fid_ep; 2],
    cq: [*mut sys::fid_cq; 2],
    name: [SocketAddrV6; 2],
    addr: [u64; 2],
}

impl Pair6 {
    fn new() -> Pair6 {
        let (rc, info) = getinfo6(sys::FI_SOCKADDR_IN6, None, None, 0);
        assert_eq!(rc, 0, "fi_getinfo(FI_SOCKADDR_IN6)");
        let (fab, dom) = open_domain(info);
        let av = open_av(dom);
        let mut ep = [null_mut(); 2];
        let mut cq = [null_mut(); 2];
        for i in 0..2 {
            ep[i] = open_ep(dom, info);
            cq[i] = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
            assert_eq!(bind(ep[i], av, 0), 0);
            assert_eq!(
                bind(ep[i], cq[i], (sys::FI_TRANSMIT | sys::FI_RECV) as u64),
                0
            );
            assert_eq!(control(ep[i], sys::FI_ENABLE, null_mut()), 0);
        }
        let name = [getname6(ep[0]), getname6(ep[1])];
        let mut addr = [0; 2];
        for i in 0..2 {
            assert_eq!(*name[i].ip(), Ipv6Addr::LOCALHOST, "endpoint {i} on ::1");
            let (n, a, st) = insert_raw(av, bytes_of(&sockaddr6(name[i])), 1);
            assert_eq!((n, st[0]), (1, 0), "fi_av_insert of {}", name[i]);
            addr[i] = a[0];
        }
        Pair6 {
            info,
            fab,
            dom,
            av,
            ep,
            cq,
            name,
            addr,
        }
    }

    fn close(self) {
        for i in 0..2 {
            assert_eq!(close(self.ep[i]), 0);
            assert_eq!(close(self.cq[i]), 0);
        }
        assert_eq!(close(self.av), 0);
        assert_eq!(close(self.dom), 0);
        assert_eq!(close(self.fab), 0);
        unsafe { sys::fi_freeinfo(self.info) };
    }

    /// One checked tagged message `from` -> `to` of `size` bytes; the receive
    /// names the sender (directed by FI_SOURCE).
    fn exchange(&self, from: usize, to: usize, size: usize, seed: u64) {
        let tx = pattern(seed, size);
        let mut rx = vec![0u8; size];
        let r = unsafe {
            (*(*self.ep[to]).tagged).recv.unwrap()(
                self.ep[to],
                rx.as_mut_ptr().cast(),
                rx.len(),
                null_mut(),
                self.addr[from],
                seed,
                0,
                ctx(2),
            )
        };
        assert_eq!(r, 0, "fi_trecv");
        let s = unsafe {
            (*(*self.ep[from]).tagged).send.unwrap()(
                self.ep[from],
                tx.as_ptr().cast(),
                tx.len(),
                null_mut(),
                self.addr[to],
                seed,
                ctx(1),
            )
        };
        assert_eq!(s, 0, "fi_tsend");
        let e = wait_one(self.cq[to], self.cq[from]).expect("receive completes");
        assert_eq!((e.op_context, e.len, e.tag), (ctx(2), size, seed));
        assert!(
            rx == tx,
            "{size}-byte message {from}->{to} corrupted (seed {seed})"
        );
        let e = wait_one(self.cq[from], self.cq[to]).expect("send completes");
        assert_eq!(e.op_context, ctx(1));
    }
}

#[test]
fn messages_over_ipv6_loopback() {
    if !have_ipv6() {
        return;
    }
    let p = Pair6::new();
    // Small, one-packet eager, multi-packet, rendezvous (lo: 64 KiB datagrams).
    let sizes = [0usize, 8, 4096, 60_000, 200_000, 1 << 20, 4 << 20];
    for (k, &size) in sizes.iter().enumerate() {
        let seed = 0x6_0000 + k as u64;
        p.exchange(0, 1, size, seed);
        p.exchange(1, 0, size, seed + 100);
    }
    p.close();
}

#[test]
fn av_lookup_straddr_and_other_family_refused() {
    if !have_ipv6() {
        return;
    }
    let p = Pair6::new();
    unsafe {
        // fi_av_lookup gives back the sockaddr_in6.
        let mut buf = [0u8; 64];
        let mut len = buf.len();
        let rc =
            ((*(*p.av).ops).lookup.unwrap())(p.av, p.addr[1], buf.as_mut_ptr().cast(), &mut len);
        assert_eq!(rc, 0, "fi_av_lookup");
        assert_eq!(v6_of(buf.as_ptr().cast(), len), p.name[1]);
        // Too small: the needed size is reported.
        let mut len = 16;
        let rc =
            ((*(*p.av).ops).lookup.unwrap())(p.av, p.addr[1], buf.as_mut_ptr().cast(), &mut len);
        assert_eq!((rc, len), (0, SIN6_LEN), "fi_av_lookup into 16 bytes");
        // fi_av_straddr.
        let s6 = sockaddr6(p.name[1]);
        let mut text = [0 as libc::c_char; 96];
        let mut tlen = text.len();
        let r = ((*(*p.av).ops).straddr.unwrap())(
            p.av,
            (&s6 as *const libc::sockaddr_in6).cast(),
            text.as_mut_ptr(),
            &mut tlen,
        );
        assert!(!r.is_null());
        let got = CStr::from_ptr(text.as_ptr()).to_string_lossy().into_owned();
        assert_eq!(got, format!("fi_sockaddr_in6://[::1]:{}", p.name[1].port()));
    }
    // An IPv4 address in the IPv6 AV: refused (FI_ADDR_NOTAVAIL, FI_EINVAL).
    // The buffer has the AV's stride (sockaddr_in6) for the one entry.
    let mut one = [0u8; SIN6_LEN];
    let four = sockaddr4(p.name[1].port());
    one[..16].copy_from_slice(bytes_of(&four));
    let (n, a, st) = insert_raw(p.av, &one, 1);
    assert_eq!(n, 0, "an IPv4 address inserted into an IPv6 AV");
    assert_eq!(a[0], FI_ADDR_NOTAVAIL);
    assert_eq!(st[0], -EINVAL, "FI_SYNC_ERR status");
    // Mixed in a batch: the IPv6 entries go in, the IPv4 one does not.
    let mut three = Vec::new();
    three.extend_from_slice(bytes_of(&sockaddr6(p.name[0])));
    three.extend_from_slice(&one);
    three.extend_from_slice(bytes_of(&sockaddr6(p.name[1])));
    let (n, a, st) = insert_raw(p.av, &three, 3);
    assert_eq!(n, 2);
    assert_eq!(st, vec![0, -EINVAL, 0]);
    assert_eq!(a[1], FI_ADDR_NOTAVAIL);
    // fi_setname to an IPv4 address on an IPv6 endpoint: refused.
    let (rc, info) = getinfo6(sys::FI_SOCKADDR_IN6, None, None, 0);
    assert_eq!(rc, 0);
    let ep = open_ep(p.dom, info);
    let mut four = sockaddr4(0);
    let rc = unsafe {
        ((*(*ep).cm).setname.unwrap())(
            ep as sys::fid_t,
            (&mut four as *mut libc::sockaddr_in).cast(),
            16,
        )
    };
    assert_eq!(rc, EINVAL, "fi_setname(IPv4) on an IPv6 endpoint");
    assert_eq!(close(ep), 0);
    unsafe { sys::fi_freeinfo(info) };
    p.close();
}

#[test]
fn ipv6_address_refused_by_ipv4_av() {
    if !have_ipv6() {
        return;
    }
    let (rc, info) = getinfo6(sys::FI_SOCKADDR_IN, None, None, 0);
    assert_eq!(rc, 0);
    let (fab, dom) = open_domain(info);
    let av = open_av(dom);
    // A sockaddr_in6 where a sockaddr_in (16 bytes) is expected: the family says no.
    let six = sockaddr6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 4715, 0, 0));
    let (n, a, st) = insert_raw(av, bytes_of(&six), 1);
    assert_eq!((n, a[0], st[0]), (0, FI_ADDR_NOTAVAIL, -EINVAL));
    // An IPv4 one is fine.
    let (n, _, st) = insert_raw(av, bytes_of(&sockaddr4(4715)), 1);
    assert_eq!((n, st[0]), (1, 0));
    assert_eq!(close(av), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}

/// libfabric's own `fi_pingpong` (RDM, tagged, data checks, every size) with
/// the data path on ::1: its `-6` covers only its control socket, so
/// `FI_SPRAY_IPV6=1` selects IPv6 for the provider; the server's log must name
/// its IPv6 address.
#[test]
fn fi_pingpong_over_ipv6_loopback() {
    if !have_ipv6() || !common::have_tool("fi_pingpong") {
        return;
    }
    let port = {
        let l = std::net::TcpListener::bind("[::1]:0").expect("bind");
        l.local_addr().expect("addr").port().to_string()
    };
    let args = [
        "-p", "spray", "-e", "rdm", "-m", "tagged", "-I", "10", "-c", "-6",
    ];
    let run = |extra: &[&str]| {
        let mut c = common::fi_cmd("timeout");
        c.env("FI_SPRAY_IPV6", "1")
            .env("FI_LOG_LEVEL", "info")
            .args(["60", "fi_pingpong"])
            .args(args)
            .args(extra);
        c
    };
    let server = run(&["-B", &port])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start server");
    // Retry the client until the server listens (10 s at most).
    let t = std::time::Instant::now();
    let client = loop {
        let out = run(&["-P", &port, "::1"]).output().expect("run client");
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success()
            || !err.contains("Connection refused")
            || t.elapsed() > std::time::Duration::from_secs(10)
        {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let srv = server.wait_with_output().expect("server exit");
    let all = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let (ctext, stext) = (all(&client), all(&srv));
    assert!(
        client.status.success() && srv.status.success(),
        "fi_pingpong over ::1 failed:\nclient {:?}\n{ctext}\nserver {:?}\n{stext}",
        client.status,
        srv.status
    );
    for (who, t) in [("client", &ctext), ("server", &stext)] {
        assert!(
            t.contains("address [::1]:"),
            "{who}'s endpoint is not on ::1:\n{t}"
        );
    }
    // Every size acknowledged: up to fi_pingpong's largest, 1 MiB.
    assert!(
        ctext
            .lines()
            .any(|l| l.starts_with("1m") && l.contains("=10")),
        "no 1 MiB row:\n{ctext}"
    );
}
