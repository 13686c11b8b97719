//! Job keys through the real library on loopback (issue 17, optional
//! authentication): two endpoints with the same `FI_SPRAY_AUTH_KEY` exchange
//! tagged messages of every protocol size (eager, rendezvous up to 4 MiB)
//! byte for byte, refuse no MAC and place nothing straight into receive
//! buffers (a payload reaches application memory only once its MAC is
//! checked); endpoints with different keys (one given as the endpoint's
//! `auth_key` attribute), or one with a key and one without, never talk:
//! the send fails as unreachable and the refused packets are counted in
//! FI_SPRAY_STATS. Altered and replayed packets are tested in the engine
//! (`provider/tests/sim_mac.rs`, `engine_mac.rs`), where an on-path
//! attacker can be placed. One test function: the scenarios set process-wide
//! environment variables, one after the other.

mod common;
use common::fab::*;
use common::stat_sum;

use std::os::raw::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
const EAVAIL: isize = -(sys::FI_EAVAIL as isize);

struct Pair {
    info: *mut sys::fi_info,
    fab: *mut sys::fid_fabric,
    dom: *mut sys::fid_domain,
    av: *mut sys::fid_av,
    ep: [*mut sys::fid_ep; 2],
    cq: [*mut sys::fid_cq; 2],
    addr: [u64; 2],
}

impl Pair {
    /// Two endpoints; endpoint i gets `keys[i]` as its `ep_attr->auth_key`
    /// (else `FI_SPRAY_AUTH_KEY`, if set).
    fn new(keys: [Option<&[u8]>; 2]) -> Pair {
        let info = getinfo(
            sys::fi_ep_type_FI_EP_RDM,
            (sys::FI_MSG | sys::FI_TAGGED) as u64,
        );
        let (fab, dom) = open_domain(info);
        let av = open_av(dom);
        let mut ep = [null_mut(); 2];
        let mut cq = [null_mut(); 2];
        for i in 0..2 {
            let mut k = keys[i].map(|k| k.to_vec());
            // SAFETY (test): ep_attr is valid; the key is unhooked again
            // before fi_freeinfo could free it.
            unsafe {
                let a = &mut *(*info).ep_attr;
                (a.auth_key, a.auth_key_size) = match &mut k {
                    Some(k) => (k.as_mut_ptr(), k.len()),
                    None => (null_mut(), 0),
                };
            }
            ep[i] = open_ep(dom, info);
            unsafe {
                let a = &mut *(*info).ep_attr;
                (a.auth_key, a.auth_key_size) = (null_mut(), 0);
            }
            cq[i] = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
            assert_eq!(bind(ep[i], av, 0), 0);
            assert_eq!(
                bind(ep[i], cq[i], (sys::FI_TRANSMIT | sys::FI_RECV) as u64),
                0
            );
            assert_eq!(control(ep[i], sys::FI_ENABLE, null_mut()), 0, "fi_enable");
        }
        let sa = [getname(ep[0]), getname(ep[1])];
        let addr = [av_insert(av, &sa[0]), av_insert(av, &sa[1])];
        Pair {
            info,
            fab,
            dom,
            av,
            ep,
            cq,
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
}

fn ctx(x: &mut u64) -> *mut c_void {
    (x as *mut u64).cast()
}

/// Poll `cq` (and progress `other`) until one completion: `Ok` with it, or
/// `Err` with the error entry's code; panics after `limit`.
fn wait_one(
    cq: *mut sys::fid_cq,
    other: *mut sys::fid_cq,
    limit: Duration,
) -> Result<sys::fi_cq_tagged_entry, i32> {
    let t = Instant::now();
    loop {
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        let n = cq_read(cq, &mut e);
        if n == 1 {
            return Ok(e[0]);
        }
        if n == EAVAIL {
            let (n, err) = cq_readerr(cq);
            assert_eq!(n, 1, "fi_cq_readerr");
            return Err(err.err);
        }
        assert_eq!(n, EAGAIN, "fi_cq_read failed");
        let _ = cq_read(other, &mut []);
        assert!(t.elapsed() < limit, "no completion within {limit:?}");
    }
}

fn trecv(p: &Pair, at: usize, buf: &mut [u8], src: u64, tag: u64, c: &mut u64) {
    let r = unsafe {
        (*(*p.ep[at]).tagged).recv.unwrap()(
            p.ep[at],
            buf.as_mut_ptr().cast(),
            buf.len(),
            null_mut(),
            src,
            tag,
            0,
            ctx(c),
        )
    };
    assert_eq!(r, 0, "fi_trecv");
}

fn tsend(p: &Pair, from: usize, to: usize, buf: &[u8], tag: u64, c: &mut u64) {
    let s = unsafe {
        (*(*p.ep[from]).tagged).send.unwrap()(
            p.ep[from],
            buf.as_ptr().cast(),
            buf.len(),
            null_mut(),
            p.addr[to],
            tag,
            ctx(c),
        )
    };
    assert_eq!(s, 0, "fi_tsend");
}

/// One checked tagged message `from` -> `to` of `size` bytes.
fn exchange(p: &Pair, from: usize, to: usize, size: usize, seed: u8) {
    let tx: Vec<u8> = (0..size)
        .map(|i| (i as u8).wrapping_mul(31) ^ (i >> 11) as u8 ^ seed)
        .collect();
    let mut rx = vec![0u8; size];
    let (mut sctx, mut rctx) = (1u64, 2u64);
    trecv(p, to, &mut rx, p.addr[from], u64::from(seed), &mut rctx);
    tsend(p, from, to, &tx, u64::from(seed), &mut sctx);
    let limit = Duration::from_secs(20);
    let e = wait_one(p.cq[to], p.cq[from], limit).expect("receive completes");
    assert_eq!((e.op_context, e.len), (ctx(&mut rctx), size));
    assert!(rx == tx, "{size}-byte message {from}->{to} corrupted");
    let e = wait_one(p.cq[from], p.cq[to], limit).expect("send completes");
    assert_eq!(e.op_context, ctx(&mut sctx));
}

/// The FI_SPRAY_STATS file of this test (the library reads the variable
/// once per process, so every scenario appends to it).
fn stats_path() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("spray-auth-{}.json", std::process::id()))
}

/// Run `f`; returns the stats lines the endpoints it closed appended.
fn with_stats(f: impl FnOnce()) -> String {
    let before = std::fs::read_to_string(stats_path()).unwrap_or_default();
    f();
    let text = std::fs::read_to_string(stats_path()).expect("FI_SPRAY_STATS file written at close");
    assert!(text.len() > before.len(), "no stats line written at close");
    text[before.len()..].to_string()
}

/// A send from 0 to 1 between endpoints that cannot agree on a key fails
/// as unreachable (FI_SPRAY_UNREACHABLE_TIMEOUT_MS is short here), and the
/// receive never completes.
fn refused(keys: [Option<&[u8]>; 2]) -> String {
    with_stats(|| {
        let p = Pair::new(keys);
        let mut rx = vec![0u8; 64];
        let (mut sctx, mut rctx) = (1u64, 2u64);
        trecv(&p, 1, &mut rx, p.addr[0], 5, &mut rctx);
        tsend(&p, 0, 1, &[7u8; 64], 5, &mut sctx);
        let r = wait_one(p.cq[0], p.cq[1], Duration::from_secs(20));
        assert_eq!(
            r.map(|e| e.op_context),
            Err(sys::FI_EHOSTUNREACH as i32),
            "{keys:?}: the send should fail as unreachable"
        );
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        assert_eq!(
            cq_read(p.cq[1], &mut e),
            EAGAIN,
            "{keys:?}: a receive completed"
        );
        p.close();
    })
}

#[test]
fn job_keys_end_to_end() {
    let _ = std::fs::remove_file(stats_path());
    std::env::set_var("FI_SPRAY_STATS", stats_path());
    std::env::set_var("FI_SPRAY_UNREACHABLE_TIMEOUT_MS", "400");
    // 1. The same key (FI_SPRAY_AUTH_KEY) on both: every size, both ways.
    std::env::set_var(
        "FI_SPRAY_AUTH_KEY",
        "a job key for ffi_auth, 32+ characters",
    );
    let text = with_stats(|| {
        let p = Pair::new([None, None]);
        for (i, size) in [8usize, 3000, 70_000, 1 << 20, 4 << 20]
            .into_iter()
            .enumerate()
        {
            exchange(&p, 0, 1, size, 2 * i as u8 + 1);
            exchange(&p, 1, 0, size, 2 * i as u8 + 2);
        }
        p.close();
    });
    let s = |k: &str| stat_sum(&text, k);
    println!(
        "same key: rx_bad_mac {}, rx_mac_missing {}, rx_mac_unexpected {}, rx_placed {}, tx_data {}",
        s("rx_bad_mac"),
        s("rx_mac_missing"),
        s("rx_mac_unexpected"),
        s("rx_placed"),
        s("tx_data")
    );
    assert_eq!(
        s("rx_bad_mac") + s("rx_mac_missing") + s("rx_mac_unexpected"),
        0
    );
    assert_eq!(s("rx_placed"), 0, "a keyed endpoint placed a datagram");
    assert!(s("tx_data") > 100, "the rendezvous data went out");
    // 2. Different keys: the variable's on endpoint 0, endpoint 1's own
    // (auth_key attribute) differs. Both refuse the other's HELLOs.
    let text = refused([None, Some(b"another job's key")]);
    let s = |k: &str| stat_sum(&text, k);
    println!("different keys: rx_bad_mac {}", s("rx_bad_mac"));
    assert!(
        s("rx_bad_mac") > 0,
        "different keys: nothing refused for its MAC"
    );
    assert_eq!(s("sessions_accepted") + s("handshakes"), 0);
    // 3. A key and none: endpoint 0 with the variable's, endpoint 1 without
    // (its attribute can only add a key, so the variable goes).
    std::env::remove_var("FI_SPRAY_AUTH_KEY");
    let text = refused([Some(b"only endpoint 0 has a key"), None]);
    let s = |k: &str| stat_sum(&text, k);
    println!(
        "key and none: rx_mac_missing {}, rx_mac_unexpected {}",
        s("rx_mac_missing"),
        s("rx_mac_unexpected")
    );
    assert!(
        s("rx_mac_unexpected") > 0,
        "the unkeyed endpoint took a tagged packet"
    );
    assert_eq!(s("sessions_accepted") + s("handshakes"), 0);
    // 4. Control: without any key the same pair talks and places
    // rendezvous data (so 1.'s rx_placed of 0 is the key's doing).
    let text = with_stats(|| {
        let p = Pair::new([None, None]);
        exchange(&p, 0, 1, 4 << 20, 9);
        p.close();
    });
    assert_eq!(stat_sum(&text, "rx_mac_unexpected"), 0);
    assert!(
        stat_sum(&text, "rx_placed") > 0,
        "control: unkeyed, nothing placed"
    );
    std::env::remove_var("FI_SPRAY_UNREACHABLE_TIMEOUT_MS");
    let _ = std::fs::remove_file(stats_path());
}
