//! Post batching (`ffi/ep/hold.rs`), through the real libfabric core over
//! loopback: a window of small sends posted back to back leaves in a
//! segmented send or two (it took one send call each: 32 here), every
//! message arrives intact and in order; and a send held for its burst
//! leaves within the hold bound (200 us) when the application makes no
//! further call on its endpoint: with the idle assist set to 1 s here, only
//! the bound can send it.

mod common;
use common::duo::{ctx, wait_one, Duo, EAGAIN};
use common::fab::*;

use std::os::raw::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

const TAG: u64 = 0x71;
/// Messages sent one at a time before the burst.
const WARM: usize = 50;

/// Post a tagged receive of `buf` on endpoint 1.
fn trecv(d: &Duo, buf: &mut u64, k: usize) {
    let rc = unsafe {
        (*(*d.ep[1]).tagged).recv.unwrap()(
            d.ep[1],
            (buf as *mut u64).cast(),
            8,
            null_mut(),
            d.addr[0],
            TAG,
            0,
            ctx(k),
        )
    };
    assert_eq!(rc, 0, "trecv");
}

/// Post a tagged send of `v` from endpoint 0 to endpoint 1.
fn tsend(d: &Duo, v: &u64, k: usize) {
    let rc = unsafe {
        (*(*d.ep[0]).tagged).send.unwrap()(
            d.ep[0],
            (v as *const u64).cast::<c_void>(),
            8,
            null_mut(),
            d.addr[1],
            TAG,
            ctx(k),
        )
    };
    assert_eq!(rc, 0, "tsend");
}

/// The values of `"key":N` in the lines of the stats file at `path` (one
/// line per endpoint closed, in order).
fn stats(path: &str, key: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|line| {
            let at = line
                .find(&format!("\"{key}\":"))
                .unwrap_or_else(|| panic!("no {key} in {line}"));
            let rest = &line[at + key.len() + 3..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().expect("a count")
        })
        .collect()
}

/// Endpoint 0 sends `n` small messages back to back; endpoint 1 gets them
/// all, in order.
fn burst(n: usize) {
    let d = Duo::new();
    // Messages one at a time first: the handshake, paths with an RTT and a
    // rate estimate that paces nothing (a young connection's pacing would
    // batch a burst by itself).
    for r in 0..WARM {
        let (mut got, v) = (0u64, 0xAAAA_0000 + r as u64);
        trecv(&d, &mut got, r);
        tsend(&d, &v, r);
        assert!(wait_one(d.cq[1], d.cq[0]).is_ok());
        assert!(wait_one(d.cq[0], d.cq[1]).is_ok());
        assert_eq!(got, v);
    }
    let mut got = vec![0u64; n];
    for (k, b) in got.iter_mut().enumerate() {
        trecv(&d, b, WARM + k);
    }
    let vals: Vec<u64> = (0..n as u64).map(|i| 0x5E_0000 + i).collect();
    for (i, v) in vals.iter().enumerate() {
        tsend(&d, v, WARM + i);
    }
    for _ in 0..n {
        assert!(wait_one(d.cq[1], d.cq[0]).is_ok(), "a receive failed");
    }
    for _ in 0..n {
        assert!(wait_one(d.cq[0], d.cq[1]).is_ok(), "a send failed");
    }
    assert_eq!(got, vals, "contents or order");
    d.close();
}

/// Endpoint 0 posts two sends back to back (the second is held), then the
/// test only reads endpoint 1's CQ: both must arrive within `within`.
fn held_send_leaves_alone(within: Duration) {
    let d = Duo::new();
    // A round trip first (both endpoints progressed): the handshake.
    let (mut w, v) = (0u64, 0x77_u64);
    trecv(&d, &mut w, 0);
    tsend(&d, &v, 0);
    assert!(wait_one(d.cq[1], d.cq[0]).is_ok());
    assert!(wait_one(d.cq[0], d.cq[1]).is_ok());
    let (mut a, mut b) = (0u64, 0u64);
    trecv(&d, &mut a, 1);
    trecv(&d, &mut b, 2);
    let (va, vb) = (0xA1_u64, 0xB2_u64);
    tsend(&d, &va, 11);
    tsend(&d, &vb, 12);
    let t = Instant::now();
    let mut n = 0;
    while n < 2 {
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        match cq_read(d.cq[1], &mut e) {
            1 => n += 1,
            EAGAIN => {}
            rc => panic!("fi_cq_read: {rc}"),
        }
        assert!(
            t.elapsed() < within,
            "{n} of 2 messages after {:?}: a held send waited for the application",
            t.elapsed()
        );
    }
    println!("both messages in {:?}", t.elapsed());
    assert_eq!((a, b), (va, vb));
    // Now endpoint 0's completions.
    for _ in 0..2 {
        assert!(wait_one(d.cq[0], d.cq[1]).is_ok());
    }
    d.close();
}

#[test]
fn small_sends_posted_back_to_back_leave_together() {
    // Read once per process, at the first endpoint's close.
    let file = std::env::temp_dir().join(format!("spray-hold-{}.json", std::process::id()));
    std::env::set_var("FI_SPRAY_STATS", &file);
    // The widest gap (1 ms), not the default 5 us: a test thread descheduled
    // for more than the gap between two posts ends the burst there, which
    // is right, but made this count depend on the machine's load (14 of 31
    // once in CI). The gap itself is unit-tested in `ffi/ep/hold.rs`; the
    // assist's 200 us bound may still flush part of a burst, and the rest
    // is held again behind it.
    std::env::set_var("FI_SPRAY_POST_HOLD_US", "1000");
    burst(32);
    std::env::set_var("FI_SPRAY_POST_HOLD_US", "0");
    burst(32);
    std::env::remove_var("FI_SPRAY_POST_HOLD_US");
    let gso = stats(file.to_str().unwrap(), "tx_gso_packets");
    let _ = std::fs::remove_file(&file);
    assert_eq!(gso.len(), 4, "two endpoints closed per run: {gso:?}");
    // The sender's line has them (the receiver sends pure ACKs).
    let (held, unheld) = (gso[0].max(gso[1]), gso[2].max(gso[3]));
    println!("packets in segmented sends: {held} held, {unheld} with post_hold_us=0");
    // 32 sends after the first: 31 held behind it, in one or two batches.
    assert!(held >= 24, "{held} packets in segmented sends");
    assert!(unheld <= 4, "{unheld} without the hold");

    // The bound, with the idle assist too late to matter.
    std::env::set_var("FI_SPRAY_ASSIST_US", "1000000");
    held_send_leaves_alone(Duration::from_millis(50));
    std::env::remove_var("FI_SPRAY_ASSIST_US");
}
