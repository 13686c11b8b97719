//! What an address vector of 16384 peers costs, through the real libfabric
//! core: `fi_av_insert` of 16384 IPv4 addresses in one call into the AV of an
//! enabled RDM endpoint (time, and the process's RSS growth per address),
//! and no per-peer protocol state before traffic: the endpoint's statistics
//! at close (`FI_SPRAY_STATS`) count no SRD peer. Prints the numbers
//! (`--nocapture`).

mod common;
use common::fab::*;

use std::ptr::null_mut;
use std::time::Instant;

use spray_fi::sys;

const N: usize = 16384;

/// Resident set size of this process, bytes.
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("resident pages");
    pages * 4096
}

#[test]
fn av_insert_16384_addresses() {
    let stats = std::env::temp_dir().join(format!("spray-ffi-scale-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&stats);
    // Before the provider initialises (`getinfo` does).
    std::env::set_var("FI_SPRAY_STATS", &stats);
    std::env::set_var("FI_SPRAY_STATS_MS", "10");
    let info = getinfo(sys::fi_ep_type_FI_EP_RDM, 0);
    let (fab, dom) = open_domain(info);
    let av = open_av(dom);
    let cq = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
    let ep = open_ep(dom, info);
    assert_eq!(bind(ep, av, 0), 0);
    assert_eq!(bind(ep, cq, (sys::FI_TRANSMIT | sys::FI_RECV) as u64), 0);
    assert_eq!(control(ep, sys::FI_ENABLE, null_mut()), 0);
    // Addresses of 198.18.0.0/15 (nothing is sent to them).
    let addrs: Vec<libc::sockaddr_in> = (0..N)
        .map(|i| libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: (7000 + (i % 8) as u16).to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([198, 18, (i / 250) as u8, (i % 250 + 1) as u8]).to_be(),
            },
            sin_zero: [0; 8],
        })
        .collect();
    let mut ids = vec![0u64; N];
    let before = rss();
    let t = Instant::now();
    let n = unsafe {
        ((*(*av).ops).insert.unwrap())(
            av,
            addrs.as_ptr().cast(),
            N,
            ids.as_mut_ptr(),
            0,
            null_mut(),
        )
    };
    let took = t.elapsed();
    let grown = rss().saturating_sub(before);
    assert_eq!(n, N as i32, "all {N} inserted");
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(id, i as u64, "fi_addr of address {i}");
    }
    let per_addr = grown as f64 / N as f64;
    println!(
        "fi_av_insert of {N} IPv4 addresses: {:.2} ms ({:.0} ns each), RSS +{} KiB ({per_addr:.0} B per address)",
        took.as_secs_f64() * 1e3,
        took.as_nanos() as f64 / N as f64,
        grown / 1024
    );
    // The AV holds an address and a map entry per peer; an SRD peer is
    // ~4.4 KB (`tests/engine_scale.rs`): none may be made here.
    assert!(
        per_addr < 512.0,
        "{per_addr:.0} bytes of RSS per inserted address"
    );
    // Counted in the statistics now (`STATS_MS`: the endpoint writes a
    // line every 10 ms): no SRD peer yet.
    let peers = || {
        let t0 = Instant::now();
        let want = std::fs::metadata(&stats).map_or(0, |m| m.len());
        while std::fs::metadata(&stats).map_or(0, |m| m.len()) <= want {
            assert!(t0.elapsed().as_secs() < 10, "no statistics line in 10 s");
            let mut e: [sys::fi_cq_tagged_entry; 4] = unsafe { std::mem::zeroed() };
            cq_read(cq, &mut e);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let text = std::fs::read_to_string(&stats).expect("the statistics");
        let last = text.lines().last().unwrap_or("").to_string();
        assert!(last.contains("\"srd\""), "no SRD statistics in {last}");
        // `"peers":` is the SRD's peer count (the per-peer list is `"peers":[`).
        common::stat_sum(&last, "peers")
    };
    assert_eq!(peers(), 0, "per-peer state made before any traffic");
    // The check sees a peer once there is traffic: one message to ourselves.
    let me = getname(ep);
    let self_id = av_insert(av, &me);
    let (mut out, mut inb) = ([7u8; 8], [0u8; 8]);
    unsafe {
        let t = &*(*ep).tagged;
        let rc = t.recv.unwrap()(
            ep,
            inb.as_mut_ptr().cast(),
            8,
            null_mut(),
            self_id,
            9,
            0,
            null_mut(),
        );
        assert_eq!(rc, 0, "fi_trecv");
        let rc = t.send.unwrap()(
            ep,
            out.as_mut_ptr().cast(),
            8,
            null_mut(),
            self_id,
            9,
            null_mut(),
        );
        assert_eq!(rc, 0, "fi_tsend");
    }
    let (t0, mut got) = (Instant::now(), 0);
    while got < 2 {
        assert!(t0.elapsed().as_secs() < 10, "no completion in 10 s");
        let mut e: [sys::fi_cq_tagged_entry; 4] = unsafe { std::mem::zeroed() };
        got += cq_read(cq, &mut e).max(0);
    }
    assert_eq!(inb, out);
    assert_eq!(peers(), 1, "one peer after one message");
    assert_eq!(close(ep), 0);
    let _ = std::fs::remove_file(&stats);
    assert_eq!(close(cq), 0);
    assert_eq!(close(av), 0);
    assert_eq!(close(dom), 0);
    assert_eq!(close(fab), 0);
    unsafe { sys::fi_freeinfo(info) };
}
