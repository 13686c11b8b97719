//! Transmit and receive queues are bounded (issue 17, "memory grows without
//! limit"), through the real libfabric core: getinfo offers `tx_attr->size` /
//! `rx_attr->size` and echoes a smaller one asked in the hints; the endpoint
//! enforces the size its info carries. Sends and injects to a peer that reads
//! nothing (not even progressing, or progressing without receives) return
//! `-FI_EAGAIN` once that many are not completed, and nothing is lost: once the
//! peer receives, every message arrives and every send completes. Posted
//! receives past `rx_attr->size` get `-FI_EAGAIN` too.
//!
//! The progress-assist thread is off here (`FI_SPRAY_ASSIST_US=0`) so that an
//! endpoint nobody calls really does nothing.

mod common;
use common::duo::{ctx, wait_one, EAGAIN, EAVAIL};
use common::fab::*;

use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};

use spray_fi::sys;

const ANY: u64 = u64::MAX;
/// Queue size of the default offer (getinfo.rs `QUEUE_SIZE`).
const DEFAULT_QUEUE: usize = 16384;

/// RDM + tagged info, with `tx` / `rx` queue sizes asked in the hints (0 = none).
fn info_sized(tx: usize, rx: usize) -> *mut sys::fi_info {
    init();
    std::env::set_var("FI_SPRAY_ASSIST_US", "0");
    unsafe {
        let hints = sys::fi_dupinfo(null());
        (*(*hints).ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
        (*hints).caps = (sys::FI_MSG | sys::FI_TAGGED) as u64;
        (*(*hints).tx_attr).size = tx;
        (*(*hints).rx_attr).size = rx;
        let name = CString::new("spray").unwrap();
        (*(*hints).fabric_attr).prov_name = libc::strdup(name.as_ptr());
        let mut info = null_mut();
        let rc = sys::fi_getinfo(sys::fi_version(), null(), null(), 0, hints, &mut info);
        sys::fi_freeinfo(hints);
        assert_eq!(rc, 0, "fi_getinfo");
        info
    }
}

/// Two endpoints of `info` with a CQ each; 0 sends to 1.
struct Two {
    info: *mut sys::fi_info,
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
        for i in 0..2 {
            ep[i] = open_ep(dom, info);
            cq[i] = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
            assert_eq!(bind(ep[i], av, 0), 0);
            let flags = (sys::FI_TRANSMIT | sys::FI_RECV) as u64;
            assert_eq!(bind(ep[i], cq[i], flags), 0);
            assert_eq!(control(ep[i], sys::FI_ENABLE, null_mut()), 0);
        }
        let addr = [
            av_insert(av, &getname(ep[0])),
            av_insert(av, &getname(ep[1])),
        ];
        Two {
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

    fn tsend(&self, buf: &u64, k: usize) -> isize {
        unsafe {
            (*(*self.ep[0]).tagged).send.unwrap()(
                self.ep[0],
                (buf as *const u64).cast(),
                8,
                null_mut(),
                self.addr[1],
                7,
                ctx(k),
            )
        }
    }

    fn tinject(&self, v: u64) -> isize {
        unsafe {
            (*(*self.ep[0]).tagged).inject.unwrap()(
                self.ep[0],
                (&v as *const u64).cast(),
                8,
                self.addr[1],
                7,
            )
        }
    }

    fn trecv(&self, i: usize, buf: &mut u64, tag: u64, k: usize) -> isize {
        unsafe {
            (*(*self.ep[i]).tagged).recv.unwrap()(
                self.ep[i],
                (buf as *mut u64).cast::<c_void>(),
                8,
                null_mut(),
                ANY,
                tag,
                0,
                ctx(k),
            )
        }
    }

    fn size_left(&self, i: usize, tx: bool) -> isize {
        unsafe {
            let ops = (*self.ep[i]).ops;
            if tx {
                (*ops).tx_size_left.unwrap()(self.ep[i])
            } else {
                (*ops).rx_size_left.unwrap()(self.ep[i])
            }
        }
    }

    /// Completions read from endpoint `i`'s CQ (progressing it), errors are fatal.
    fn drain(&self, i: usize) -> usize {
        let mut e = [sys::fi_cq_tagged_entry::default(); 64];
        match cq_read(self.cq[i], &mut e) {
            n if n > 0 => n as usize,
            EAGAIN => 0,
            EAVAIL => panic!("error completion: {:?}", cq_readerr(self.cq[i]).1),
            n => panic!("fi_cq_read: {n}"),
        }
    }
}

/// Sends of 8-byte messages (message k carries k, in `bufs[k]`) from endpoint
/// 0 while `peer_reads` says whether endpoint 1 is progressed meanwhile; stops
/// once `-FI_EAGAIN` persisted for 300 ms of retries with a CQ read before
/// each (as MPI's retry loops do), or after `cap` sends. Returns how many were
/// accepted and whether EAGAIN ended it.
fn flood(t: &Two, bufs: &[u64], inject: bool, peer_reads: bool, cap: usize) -> (usize, bool) {
    let mut k = 0;
    let mut again_since = None;
    let start = Instant::now();
    while k < cap && start.elapsed() < Duration::from_secs(20) {
        let rc = if inject {
            t.tinject(bufs[k])
        } else {
            t.tsend(&bufs[k], k)
        };
        match rc {
            0 => {
                k += 1;
                again_since = None;
            }
            EAGAIN => {
                let since = *again_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(300) {
                    return (k, true);
                }
                t.drain(0);
                if peer_reads {
                    t.drain(1);
                }
            }
            rc => panic!("send {k}: {rc}"),
        }
    }
    (k, false)
}

/// Endpoint 1 receives `n` messages (k carries k) while both progress; the
/// sender gets `sends` send completions. Nothing lost, nothing twice.
fn receive_all(t: &Two, n: usize, sends: usize) {
    let mut bufs = vec![u64::MAX; n];
    let mut posted = 0;
    let (mut got, mut done) = (0, 0);
    let start = Instant::now();
    while got < n || done < sends {
        // Keep some receives posted; the queue bounds how many.
        while posted < n && posted < got + 512 {
            match t.trecv(1, &mut bufs[posted], 7, 1 << 30 | posted) {
                0 => posted += 1,
                EAGAIN => break,
                rc => panic!("trecv: {rc}"),
            }
        }
        got += t.drain(1);
        done += t.drain(0);
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "stuck: {got}/{n} received, {done}/{sends} sends completed"
        );
    }
    for (k, &v) in bufs.iter().enumerate() {
        assert_eq!(v, k as u64, "receive {k} (in send order) got message {v}");
    }
}

/// A peer that never reads (its endpoint is not progressed at all): with the
/// default queue the sender's `fi_tsend` returns `-FI_EAGAIN` after exactly
/// `tx_attr->size` sends; `fi_tx_size_left` says 0. Then the peer receives:
/// every message arrives, every send completes, the queue empties.
#[test]
fn tsend_to_a_peer_that_never_reads_gets_eagain() {
    let info = info_sized(0, 0);
    let size = unsafe { (*(*info).tx_attr).size };
    assert_eq!(size, DEFAULT_QUEUE, "default transmit queue offered");
    let t = Two::new(info);
    let bufs: Vec<u64> = (0..4 * DEFAULT_QUEUE as u64).collect();
    let (accepted, again) = flood(&t, &bufs, false, false, bufs.len());
    println!("fi_tsend to a peer that never reads: {accepted} accepted before -FI_EAGAIN");
    assert!(again, "no -FI_EAGAIN after {accepted} sends");
    assert_eq!(accepted, size, "sends accepted before -FI_EAGAIN");
    assert_eq!(t.size_left(0, true), 0);
    receive_all(&t, accepted, accepted);
    assert_eq!(t.size_left(0, true), size as isize);
    t.close();
}

/// A peer that progresses but posts no receive: it holds its share of
/// unexpected messages (their sends complete on their acks); the rest wait at
/// the sender, filling its queue (300 asked in the hints, echoed by getinfo),
/// and `fi_tinject` returns `-FI_EAGAIN`. Nothing is lost once it receives.
#[test]
fn inject_to_a_peer_without_receives_gets_eagain() {
    let info = info_sized(300, 0);
    assert_eq!(unsafe { (*(*info).tx_attr).size }, 300, "asked size echoed");
    let t = Two::new(info);
    let bufs: Vec<u64> = (0..100_000).collect();
    let (accepted, again) = flood(&t, &bufs, true, true, bufs.len());
    println!("fi_tinject to a peer without receives: {accepted} accepted before -FI_EAGAIN");
    assert!(again, "no -FI_EAGAIN after {accepted} injects");
    // Its share of 65536 / 64 unexpected messages, then 300 waiting.
    assert_eq!(accepted, 1024 + 300, "injects accepted before -FI_EAGAIN");
    receive_all(&t, accepted, 0);
    // The waiting injects completed (silently): the queue is empty again.
    let start = Instant::now();
    while t.size_left(0, true) != 300 {
        t.drain(0);
        t.drain(1);
        assert!(start.elapsed() < Duration::from_secs(10), "queue not empty");
    }
    t.close();
}

/// Posted receives past `rx_attr->size` get `-FI_EAGAIN`; a completed (here:
/// cancelled) one makes room.
#[test]
fn receives_past_the_receive_queue_get_eagain() {
    let info = info_sized(0, 64);
    assert_eq!(unsafe { (*(*info).rx_attr).size }, 64);
    assert_eq!(unsafe { (*(*info).tx_attr).size }, DEFAULT_QUEUE);
    let t = Two::new(info);
    let mut bufs = vec![0u64; 65];
    for (k, b) in bufs.iter_mut().enumerate().take(64) {
        assert_eq!(t.trecv(1, b, 9, k), 0, "receive {k}");
    }
    assert_eq!(t.size_left(1, false), 0);
    assert_eq!(t.trecv(1, &mut bufs[64], 9, 64), EAGAIN);
    let rc = unsafe { (*(*t.ep[1]).ops).cancel.unwrap()(&mut (*t.ep[1]).fid, ctx(3)) };
    assert_eq!(rc, 0, "fi_cancel");
    let e = wait_one(t.cq[1], t.cq[0]).expect_err("cancelled");
    assert_eq!(e.err, sys::FI_ECANCELED as i32);
    assert_eq!(t.size_left(1, false), 1);
    assert_eq!(t.trecv(1, &mut bufs[64], 9, 64), 0);
    t.close();
}

/// Hints asking for more than the provider offers find nothing.
#[test]
fn hints_above_the_queue_size_match_nothing() {
    init();
    for (tx, rx) in [(DEFAULT_QUEUE + 1, 0), (0, DEFAULT_QUEUE + 1)] {
        unsafe {
            let hints = sys::fi_dupinfo(null());
            (*(*hints).ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
            (*(*hints).tx_attr).size = tx;
            (*(*hints).rx_attr).size = rx;
            let name = CString::new("spray").unwrap();
            (*(*hints).fabric_attr).prov_name = libc::strdup(name.as_ptr());
            let mut info = null_mut();
            let rc = sys::fi_getinfo(sys::fi_version(), null(), null(), 0, hints, &mut info);
            sys::fi_freeinfo(hints);
            assert_eq!(rc, -(sys::FI_ENODATA as i32), "tx {tx} rx {rx}");
        }
    }
}
