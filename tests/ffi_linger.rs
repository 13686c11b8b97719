//! A receiver that closes right after its last receive, whose last ACK was
//! lost: it must linger until the sender's resend arrives and answer it, so
//! the sender's send completes instead of failing as unreachable. (An MPI
//! rank that exited 10 ms after its last receive under 1 % loss failed its
//! peer's `MPI_Finalize` with "No route to host".)

mod common;
use common::fab::*;
use common::pair::{pattern, socket_fd_of, take_all, Pair, Scattered};

use std::time::{Duration, Instant};

use spray_fi::sys;

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
const EAVAIL: isize = -(sys::FI_EAVAIL as isize);

#[test]
fn a_closing_receiver_answers_the_resend_of_its_lost_last_ack() {
    // Timeouts long against the old 10 ms linger; unreachable soon enough
    // that a failure shows within the test's bound.
    std::env::set_var("FI_SPRAY_MIN_RTO_US", "30000");
    std::env::set_var("FI_SPRAY_UNREACHABLE_TIMEOUT_MS", "3000");
    // Nobody else may progress the endpoints (the ack must be stolen first).
    std::env::set_var("FI_SPRAY_ASSIST_US", "0");
    let p = Pair::new();
    let sender_fd = socket_fd_of(&getname(p.ep[0]));
    // The session first (HELLO, CHALLENGE: the sender must run to answer
    // the CHALLENGE), with both sides polled: one message.
    let mut wrx = Scattered::new(8, &[8], 0);
    let mut wtx = Scattered::new(8, &[8], 0);
    p.trecvv(&mut wrx, 6, 1);
    p.tsendv(&mut wtx, 6, 1);
    let (mut done, t) = ([false; 2], Instant::now());
    while !(done[0] && done[1]) {
        assert!(t.elapsed() < Duration::from_secs(5), "no session");
        for (i, d) in done.iter_mut().enumerate() {
            let mut e = [sys::fi_cq_tagged_entry::default(); 1];
            match cq_read(p.cq[i], &mut e) {
                1 => *d = true,
                EAGAIN => {}
                r => panic!("warm-up: fi_cq_read {r}"),
            }
        }
    }
    // Its acks too, before the sender stops looking.
    std::thread::sleep(Duration::from_millis(2));
    let _ = cq_read(p.cq[0], &mut []);
    let _ = cq_read(p.cq[1], &mut []);
    let mut rx = Scattered::new(1000, &[100], 0);
    let mut tx = Scattered::new(1000, &[100], 0);
    tx.write(&pattern(9, 1000));
    p.trecvv(&mut rx, 7, 1);
    p.tsendv(&mut tx, 7, 1);
    let mut e = [sys::fi_cq_tagged_entry::default(); 1];
    // The receiver takes the message and sends its ACK; the sender does not look.
    let t = Instant::now();
    let mut got = false;
    while t.elapsed() < Duration::from_millis(50) {
        match cq_read(p.cq[1], &mut e) {
            1 => got = true,
            EAGAIN => {}
            r => panic!("receive: fi_cq_read {r}"),
        }
    }
    assert!(got, "the receive did not complete");
    assert_eq!(rx.data(), pattern(9, 1000));
    let stolen = take_all(sender_fd);
    assert!(stolen >= 1, "no ACK reached the sender to be lost");
    // The receiver closes while the sender runs: the sender's resend, 40 ms
    // later, must still find it and be acknowledged.
    let (ep1, cq0) = (p.ep[1] as usize, p.cq[0] as usize);
    let sender = std::thread::spawn(move || {
        // The sender resends only when it runs: here 40 ms later (a busy
        // host, or a retransmission timeout of that order).
        std::thread::sleep(Duration::from_millis(40));
        let mut e = [sys::fi_cq_tagged_entry::default(); 1];
        let t = Instant::now();
        loop {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "send never completed"
            );
            match cq_read(cq0 as *mut sys::fid_cq, &mut e) {
                1 => return Ok(t.elapsed()),
                EAGAIN => std::thread::sleep(Duration::from_micros(200)),
                EAVAIL => {
                    let (_, err) = cq_readerr(cq0 as *mut sys::fid_cq);
                    return Err(err.err);
                }
                r => panic!("send: fi_cq_read {r}"),
            }
        }
    });
    std::thread::sleep(Duration::from_millis(1));
    let t = Instant::now();
    assert_eq!(close(ep1 as *mut sys::fid_ep), 0);
    let lingered = t.elapsed();
    let outcome = sender.join().expect("sender thread");
    println!("stolen {stolen}, receiver lingered {lingered:?}, send: {outcome:?}");
    assert!(
        outcome.is_ok(),
        "the send failed with error {:?} after the receiver closed (lingered {lingered:?})",
        outcome
    );
    // The rest of the pair (the closed endpoint is not closed twice).
    assert_eq!(close(p.ep[0]), 0);
    for i in 0..2 {
        assert_eq!(close(p.cq[i]), 0);
    }
    assert_eq!(close(p.av), 0);
    assert_eq!(close(p.dom), 0);
    assert_eq!(close(p.fab), 0);
    unsafe { sys::fi_freeinfo(p.info) };
}
