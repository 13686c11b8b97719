//! A flood of small unexpected messages does not grow the receiver's memory
//! without limit (issue 17, finding 4: a 10 s flood of 8-byte messages took
//! RSS from 7 MB to 438–514 MB), through the real libfabric core and the real
//! driver over loopback: `fi_tinject` as fast as it is taken, for a few
//! seconds, at a peer that progresses but posts no receive. The receiver
//! holds at most the sender's share of `FI_SPRAY_MAX_UNEXPECTED_MSGS`; the
//! rest waits in the sender's transmit queue, which returns `-FI_EAGAIN`. The
//! process's RSS grows by a few MB, not hundreds. Then every message arrives,
//! once, in send order.

mod common;
use common::duo::{Duo, EAGAIN, EAVAIL};
use common::fab::*;

use std::os::raw::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

/// How long the sender floods, s (`SPRAY_FLOOD_SECS`, default 3; issue 17
/// asks for 60 s once, for the record).
fn flood() -> Duration {
    let s = std::env::var("SPRAY_FLOOD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    Duration::from_secs(s)
}
/// Most the process's RSS may grow during the flood, bytes. The bound holds
/// 1024 unexpected messages and 16384 queued injects (6 MB measured); without
/// it the receiver grew by about 260 B per message (38 MB in 3 s here).
const MAX_GROWTH: u64 = 16 << 20;
/// The sender's share of the receiver's unexpected messages (default
/// `FI_SPRAY_MAX_UNEXPECTED_MSGS` 65536 / 64) plus its transmit queue (default
/// `tx_attr->size`): the most injects taken while the receiver takes none.
const MOST_TAKEN: u64 = 1024 + 16384;

/// The process's resident set, bytes (`VmRSS` in /proc/self/status).
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kb << 10
}

fn tinject(d: &Duo, v: u64) -> isize {
    unsafe {
        (*(*d.ep[0]).tagged).inject.unwrap()(d.ep[0], (&v as *const u64).cast(), 8, d.addr[1], 7)
    }
}

fn trecv(d: &Duo, buf: &mut u64, k: usize) -> isize {
    unsafe {
        (*(*d.ep[1]).tagged).recv.unwrap()(
            d.ep[1],
            (buf as *mut u64).cast::<c_void>(),
            8,
            null_mut(),
            u64::MAX,
            7,
            0,
            (1usize << 30 | k) as *mut c_void,
        )
    }
}

/// Completions read from endpoint `i`'s CQ (progressing it); errors are fatal.
fn drain(d: &Duo, i: usize) -> usize {
    let mut e = [sys::fi_cq_tagged_entry::default(); 64];
    match cq_read(d.cq[i], &mut e) {
        n if n > 0 => n as usize,
        EAGAIN => 0,
        EAVAIL => panic!("error completion on {i}: {:?}", cq_readerr(d.cq[i]).1),
        n => panic!("fi_cq_read: {n}"),
    }
}

#[test]
fn flood_of_unexpected_messages_keeps_memory_bounded() {
    let d = Duo::new();
    // Warm up (peers known, buffers allocated) with one message.
    assert_eq!(tinject(&d, 0), 0);
    let mut first = u64::MAX;
    assert_eq!(trecv(&d, &mut first, 0), 0);
    let start = Instant::now();
    while drain(&d, 1) == 0 {
        drain(&d, 0);
        assert!(start.elapsed() < Duration::from_secs(10), "warm-up");
    }
    assert_eq!(first, 0);
    let before = rss();
    // Flood: message k carries k; the receiver is progressed now and then
    // (as its own progress or the assist thread would) but receives nothing.
    let (mut k, mut again) = (1u64, 0u64);
    let dur = flood();
    let start = Instant::now();
    while start.elapsed() < dur {
        match tinject(&d, k) {
            0 => k += 1,
            EAGAIN => {
                again += 1;
                drain(&d, 0);
                drain(&d, 1);
            }
            rc => panic!("fi_tinject {k}: {rc}"),
        }
        if k % 64 == 0 {
            drain(&d, 1);
        }
    }
    let after = rss();
    let growth = after.saturating_sub(before);
    let sent = k - 1;
    println!(
        "{:?} flood of 8-byte fi_tinject: {sent} accepted, {again} -FI_EAGAIN, RSS {} -> {} kB (+{} kB)",
        dur,
        before >> 10,
        after >> 10,
        growth >> 10
    );
    assert!(again > 0, "no -FI_EAGAIN in {dur:?} ({sent} injects taken)");
    assert!(
        sent <= MOST_TAKEN,
        "{sent} injects taken, more than the receiver's share and the queue"
    );
    assert!(
        growth <= MAX_GROWTH,
        "RSS grew by {} kB during the flood ({sent} injects taken)",
        growth >> 10
    );
    // Now receive them all, in send order: nothing was dropped.
    let n = sent as usize;
    let mut bufs = vec![u64::MAX; n];
    let (mut posted, mut got) = (0, 0);
    let start = Instant::now();
    while got < n {
        while posted < n && posted < got + 512 {
            match trecv(&d, &mut bufs[posted], posted) {
                0 => posted += 1,
                EAGAIN => break,
                rc => panic!("trecv: {rc}"),
            }
        }
        got += drain(&d, 1);
        drain(&d, 0);
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "stuck: {got}/{n} received"
        );
    }
    for (i, &v) in bufs.iter().enumerate() {
        assert_eq!(v, i as u64 + 1, "receive {i} (in send order)");
    }
    d.close();
}
