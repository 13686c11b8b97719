//! Large (rendezvous) messages between two spray endpoints over loopback, where
//! the data leaves straight from the application's send buffer (sendmmsg with
//! the buffer's own iovecs) and lands straight in the matched receive buffer
//! (header peek, then a scattered recvmsg): scattered iovecs on both sides with
//! guard bytes between the pieces, receives posted before and after the data
//! arrived, truncation, a send buffer overwritten the moment its send completes,
//! and the endpoint counters (`FI_SPRAY_STATS`) showing the direct paths were
//! taken — with `FI_SPRAY_RX_PLACE=0` (in a child process) they must not be.
//! And a receiver draining a window of such data acknowledges between receive
//! rounds, not only once the socket ran dry.

mod common;
use common::fab::*;
use common::pair::{pattern, socket_fd_of, take_all, Pair, Scattered};
use common::stat_sum;

use std::time::{Duration, Instant};

use spray_fi::sys;

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
const EAVAIL: isize = -(sys::FI_EAVAIL as isize);
/// Sizes (all rendezvous), receive room (two truncate), and iov splits.
const SIZES: [usize; 5] = [70_001, 300_000, 1 << 20, 3 * (1 << 20) + 7, 500_000];
const ROOM: [usize; 5] = [70_001, 400_000, 1 << 20, 2 * (1 << 20), 100_000];
const SEND_SPLIT: [&[usize]; 5] = [
    &[100],
    &[30, 30, 40],
    &[1, 98, 1],
    &[50, 50],
    &[10, 20, 30, 40],
];
const RECV_SPLIT: [&[usize]; 5] = [
    &[33, 33, 34],
    &[100],
    &[25, 25, 25, 25],
    &[70, 30],
    &[60, 40],
];

/// Send every message, receives posted first (`recv_first`) or after the data
/// is announced; check contents, guards, truncation; overwrite each send buffer
/// as soon as its completion is read.
fn exchange(p: &Pair, recv_first: bool) {
    let n = SIZES.len();
    let mut rx: Vec<Scattered> = (0..n)
        .map(|i| Scattered::new(ROOM[i], RECV_SPLIT[i], 0))
        .collect();
    let mut tx: Vec<Scattered> = (0..n)
        .map(|i| {
            let mut s = Scattered::new(SIZES[i], SEND_SPLIT[i], 0);
            s.write(&pattern(i as u64 + 1, SIZES[i]));
            s
        })
        .collect();
    if recv_first {
        for (i, r) in rx.iter_mut().enumerate() {
            p.trecvv(r, 100 + i as u64, i);
        }
    }
    for (i, t) in tx.iter_mut().enumerate() {
        p.tsendv(t, 100 + i as u64, i);
    }
    if !recv_first {
        // Let the requests to send arrive unmatched first.
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(20) {
            let _ = cq_read(p.cq[1], &mut []);
            let mut e = [sys::fi_cq_tagged_entry::default(); 1];
            assert_eq!(
                cq_read(p.cq[0], &mut e),
                EAGAIN,
                "a send completed unmatched"
            );
        }
        for (i, r) in rx.iter_mut().enumerate() {
            p.trecvv(r, 100 + i as u64, i);
        }
    }
    let (mut sends, mut recvs) = (0, 0);
    let t = Instant::now();
    while sends < n || recvs < n {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{sends}/{n} sends, {recvs}/{n} receives"
        );
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        match cq_read(p.cq[0], &mut e) {
            1 => {
                let i = e[0].op_context as usize;
                // The send is complete: the buffer is the application's again.
                tx[i].write(&vec![0xEE; SIZES[i]]);
                sends += 1;
            }
            EAGAIN => {}
            EAVAIL => panic!("send error {:?}", cq_readerr(p.cq[0])),
            r => panic!("fi_cq_read {r}"),
        }
        match cq_read(p.cq[1], &mut e) {
            1 => {
                let i = e[0].op_context as usize;
                assert!(
                    SIZES[i] <= ROOM[i],
                    "receive {i} should have been truncated"
                );
                assert_eq!(e[0].len, SIZES[i]);
                recvs += 1;
            }
            EAGAIN => {}
            EAVAIL => {
                let (_, err) = cq_readerr(p.cq[1]);
                let i = err.op_context as usize;
                assert!(
                    SIZES[i] > ROOM[i],
                    "receive {i}: unexpected error {}",
                    err.err
                );
                assert_eq!(err.err, sys::FI_ETRUNC as i32);
                assert_eq!(err.olen, SIZES[i] - ROOM[i]);
                recvs += 1;
            }
            r => panic!("fi_cq_read {r}"),
        }
    }
    for i in 0..n {
        let want = pattern(i as u64 + 1, SIZES[i]);
        let got = rx[i].data();
        let fit = SIZES[i].min(ROOM[i]);
        assert!(
            got[..fit] == want[..fit],
            "message {i} ({} B, recv_first {recv_first}) differs at byte {:?}",
            SIZES[i],
            got.iter().zip(&want).position(|(a, b)| a != b)
        );
        assert!(
            got[fit..].iter().all(|&b| b == 0),
            "message {i}: bytes past the data written"
        );
        assert!(
            rx[i].guards_ok(),
            "message {i}: receive guard bytes overwritten"
        );
        assert!(tx[i].guards_ok(), "message {i}: send guard bytes changed");
    }
}

/// (datagrams placed, of those guessed without a peek, DATA datagrams sent).
fn run_and_count(place: bool) -> (u64, u64, u64) {
    let path = std::env::temp_dir().join(format!("spray-zc-{}-{place}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    std::env::set_var("FI_SPRAY_STATS", &path);
    // Rendezvous from 64 KiB up (the default sends up to 256 KiB eagerly).
    std::env::set_var("FI_SPRAY_EAGER_LIMIT", "65536");
    std::env::set_var("FI_SPRAY_RX_PLACE", if place { "1" } else { "0" });
    let p = Pair::new();
    exchange(&p, true);
    exchange(&p, false);
    p.close();
    let text = std::fs::read_to_string(&path).expect("FI_SPRAY_STATS file written at close");
    let _ = std::fs::remove_file(&path);
    (
        stat_sum(&text, "rx_placed"),
        stat_sum(&text, "rx_guessed"),
        stat_sum(&text, "tx_data"),
    )
}

/// One test only per process: the stats and placement knobs are process-wide.
#[test]
fn rendezvous_data_is_sent_and_received_in_place() {
    let (placed, guessed, data) = run_and_count(true);
    println!("placed {placed} of {data} data datagrams, {guessed} of them without a peek");
    // Most data datagrams are rendezvous payload; a few (RTS, eager-sized
    // pieces, retransmissions of duplicates) go through the bounce slot.
    assert!(
        placed * 10 >= data * 7,
        "only {placed} of {data} data datagrams placed directly"
    );
    // Loopback keeps each message's pieces in order: after the first piece of
    // a message (peeked), the rest land where guessed, across the scattered
    // receive iovecs and up to a truncated receive's room.
    assert!(
        guessed * 10 >= placed * 6,
        "only {guessed} of {placed} placed datagrams received without a peek"
    );
}

/// The same exchange with direct placement off, in a child process (the knob is
/// read when an endpoint is enabled, and the libfabric core is per process).
#[test]
fn placement_off_still_delivers() {
    if std::env::var("SPRAY_ZC_CHILD").is_ok() {
        let (placed, _, data) = run_and_count(false);
        assert_eq!(placed, 0, "FI_SPRAY_RX_PLACE=0 placed {placed} datagrams");
        assert!(data > 0);
        return;
    }
    in_child("placement_off_still_delivers");
}

/// Run test `name` alone in a child process of this test binary (with
/// `SPRAY_ZC_CHILD` set), for process-wide knobs; fail if it fails.
fn in_child(name: &str) {
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("SPRAY_ZC_CHILD", "1")
        .output()
        .expect("run child");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(
        out.status.success() && text.contains("1 passed"),
        "child failed:\n{text}"
    );
}

/// Run both endpoints until one send and one receive completed.
fn finish(p: &Pair) {
    let mut e = [sys::fi_cq_tagged_entry::default(); 1];
    let (mut sent, mut got) = (false, false);
    let t = Instant::now();
    while !(sent && got) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "sent {sent} received {got}"
        );
        match cq_read(p.cq[0], &mut e) {
            1 => sent = true,
            EAGAIN => {}
            r => panic!("send: fi_cq_read {r}"),
        }
        match cq_read(p.cq[1], &mut e) {
            1 => got = true,
            EAGAIN => {}
            r => panic!("receive: fi_cq_read {r}"),
        }
    }
}

fn drain_acks_child() {
    // No assist thread: it would progress the receiver behind our back.
    std::env::set_var("FI_SPRAY_ASSIST_US", "0");
    // Rendezvous from 64 KiB up (the default sends up to 256 KiB eagerly).
    std::env::set_var("FI_SPRAY_EAGER_LIMIT", "65536");
    std::env::set_var("FI_SPRAY_RX_PLACE", "1");
    let p = Pair::new();
    let sender_fd = socket_fd_of(&getname(p.ep[0]));
    const LEN: usize = 8 << 20;
    let mut rx = Scattered::new(LEN, &[100], 0);
    let mut tx = Scattered::new(LEN, &[100], 0);
    // A first message opens the sender's window (credit, rate and RTT known).
    tx.write(&pattern(6, LEN));
    p.trecvv(&mut rx, 5, 1);
    p.tsendv(&mut tx, 5, 1);
    finish(&p);
    assert!(
        rx.data() == pattern(6, LEN),
        "first message: received bytes differ"
    );
    tx.write(&pattern(7, LEN));
    p.trecvv(&mut rx, 5, 1);
    p.tsendv(&mut tx, 5, 1);
    let mut e = [sys::fi_cq_tagged_entry::default(); 1];
    // Loopback delivers inside the sender's sendmmsg, so each call below sees
    // everything the other side sent before it: RTS out, RTS in and CTS out,
    // then the sender sends as much as its window allows (for 2 ms: pacing
    // may spread it) and stops.
    assert_eq!(cq_read(p.cq[0], &mut e), EAGAIN);
    assert_eq!(cq_read(p.cq[1], &mut e), EAGAIN);
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(2) {
        assert_eq!(cq_read(p.cq[0], &mut e), EAGAIN);
    }
    let stray = take_all(sender_fd);
    if std::env::var("DBG").is_ok() {
        let rfd = socket_fd_of(&getname(p.ep[1]));
        panic!(
            "receiver socket holds {}, sender had {stray}",
            take_all(rfd)
        );
    }
    // One receive progress drains the window from the socket: the acks due
    // while it does (one every `ack_every` = 16 datagrams) must leave during
    // the drain, not once after it.
    assert_eq!(cq_read(p.cq[1], &mut e), EAGAIN);
    let acks = take_all(sender_fd);
    println!("{acks} datagrams reached the sender during one receive drain ({stray} before)");
    assert!(
        acks >= 2,
        "one receive progress call sent {acks} ack(s) while draining a window of data"
    );
    // The acks taken above count as lost; later ones cover them.
    finish(&p);
    assert!(
        rx.data() == pattern(7, LEN),
        "second message: received bytes differ"
    );
    p.close();
}

/// A receiver draining a window of rendezvous data acknowledges as it goes, so
/// a window-limited sender refills the pipe while the receiver copies (in a
/// child process: it turns the assist thread off, a process-wide knob).
#[test]
fn a_long_drain_acknowledges_as_it_goes() {
    if std::env::var("SPRAY_ZC_CHILD").is_ok() {
        drain_acks_child();
        return;
    }
    in_child("a_long_drain_acknowledges_as_it_goes");
}
