//! The checked traffic of `ffi_netfuzz.rs`: two spray endpoints of one domain
//! (the cdylib through the real libfabric core) send each other tagged
//! messages of mixed sizes (eager, medium, rendezvous), a window of them in
//! flight each way, into wildcard receives (any source, any tag). Every
//! message carries its own tag (direction and sequence number) and a
//! pattern derived from it, so a receive completion proves which message it
//! holds: a corrupted, duplicated, forged or lost message fails the test.

use std::collections::HashMap;
use std::os::raw::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray::rng::Rng;
use spray_fi::sys;

use crate::common::fab::{cq_read, cq_readerr, getname};
use crate::common::pair::{pattern, Pair};

const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
/// Messages in flight per direction.
const WINDOW: usize = 8;
/// Posted receives per endpoint.
const RECVS: usize = 8;
/// The largest message, bytes (also every receive buffer's size).
pub const MAX_MSG: usize = 1 << 20;
/// Message sizes, bytes: eager, medium (several datagrams), rendezvous.
const SIZES: [usize; 12] = [
    0, 1, 8, 100, 1000, 4000, 9000, 20_000, 65_536, 100_000, 300_000, MAX_MSG,
];
/// Longest wait for any progress (a completion) before the test calls it
/// a hang.
pub const HANG: Duration = Duration::from_secs(20);

/// Context value of a send (`seq` of direction `d`) or of receive slot `k`.
fn send_ctx(d: usize, seq: u64) -> u64 {
    (1 << 62) | ((d as u64) << 40) | seq
}
fn recv_ctx(k: usize) -> u64 {
    (2 << 62) | k as u64
}
/// Tag of message `seq` from endpoint `d`.
fn tag(d: usize, seq: u64) -> u64 {
    ((d as u64 + 1) << 40) | seq
}
/// Pattern seed of message `seq` from endpoint `d`.
fn seed(d: usize, seq: u64) -> u64 {
    tag(d, seq) ^ 0x6e65_7466_757a_7a00
}

/// Counts of the checked traffic.
#[derive(Default, Debug, Clone, Copy)]
pub struct Tally {
    /// Messages sent (both directions).
    pub sent: u64,
    /// Messages received intact, each once.
    pub received: u64,
    /// Payload bytes received and checked.
    pub bytes: u64,
}

/// Two endpoints exchanging checked messages.
pub struct Traffic {
    pub pair: Pair,
    rng: Rng,
    /// Per endpoint: its receive buffers (slot k).
    bufs: [Vec<Vec<u8>>; 2],
    /// Per direction d (from endpoint d): next sequence number.
    next: [u64; 2],
    /// Per direction: size of each message not yet received.
    expect: [HashMap<u64, usize>; 2],
    /// Per direction: buffers of sends not yet completed.
    sending: [HashMap<u64, Vec<u8>>; 2],
    /// Per direction: the received sequence numbers below `next` (a bitmap).
    got: [Vec<bool>; 2],
    pub tally: Tally,
    last_progress: Instant,
}

impl Traffic {
    /// Open the endpoints and post every receive.
    pub fn new(seed: u64) -> Traffic {
        let pair = Pair::new();
        let mut t = Traffic {
            pair,
            rng: Rng::new(seed),
            bufs: [
                vec![vec![0u8; MAX_MSG]; RECVS],
                vec![vec![0u8; MAX_MSG]; RECVS],
            ],
            next: [0; 2],
            expect: Default::default(),
            sending: Default::default(),
            got: Default::default(),
            tally: Tally::default(),
            last_progress: Instant::now(),
        };
        for at in 0..2 {
            for k in 0..RECVS {
                t.post(at, k);
            }
        }
        t
    }

    /// The endpoints' main ports.
    pub fn ports(&self) -> [u16; 2] {
        [0, 1].map(|i| u16::from_be(getname(self.pair.ep[i]).sin_port))
    }

    fn post(&mut self, at: usize, k: usize) {
        let ep = self.pair.ep[at];
        let buf = &mut self.bufs[at][k];
        // SAFETY (test): the buffer lives in `self` until the endpoint closes
        // and is not touched until its completion.
        let rc = unsafe {
            (*(*ep).tagged).recv.unwrap()(
                ep,
                buf.as_mut_ptr().cast(),
                buf.len(),
                null_mut(),
                u64::MAX, // FI_ADDR_UNSPEC: any source
                0,
                u64::MAX, // ignore every tag bit: any message
                recv_ctx(k) as *mut c_void,
            )
        };
        assert_eq!(rc, 0, "fi_trecv on endpoint {at}");
    }

    /// Send one more message from `d` to `1 - d`, if the window allows.
    fn send_one(&mut self, d: usize) -> bool {
        if self.expect[d].len() >= WINDOW {
            return false;
        }
        let seq = self.next[d];
        let size = SIZES[self.rng.below(SIZES.len() as u64) as usize];
        let data = pattern(seed(d, seq), size);
        let ep = self.pair.ep[d];
        // SAFETY (test): `data` is kept in `sending` until the send completes.
        let rc = unsafe {
            (*(*ep).tagged).send.unwrap()(
                ep,
                data.as_ptr().cast(),
                data.len(),
                null_mut(),
                self.pair.addr[1 - d],
                tag(d, seq),
                send_ctx(d, seq) as *mut c_void,
            )
        };
        if rc == EAGAIN {
            return false;
        }
        assert_eq!(rc, 0, "fi_tsend {seq} from endpoint {d}");
        self.next[d] += 1;
        self.got[d].push(false);
        self.expect[d].insert(seq, size);
        self.sending[d].insert(seq, data);
        self.tally.sent += 1;
        true
    }

    /// Check one completion at endpoint `at`.
    fn complete(&mut self, at: usize, e: &sys::fi_cq_tagged_entry) {
        let c = e.op_context as u64;
        match c >> 62 {
            1 => {
                let (d, seq) = (((c >> 40) & 1) as usize, c & ((1 << 40) - 1));
                assert_eq!(d, at, "send completion of endpoint {d} at {at}");
                assert!(
                    self.sending[d].remove(&seq).is_some(),
                    "send {seq} of endpoint {d} completed twice or never sent"
                );
            }
            2 => {
                let k = (c & 0xff) as usize;
                let d = 1 - at;
                let seq = e.tag & ((1 << 40) - 1);
                assert_eq!(
                    e.tag >> 40,
                    d as u64 + 1,
                    "endpoint {at} received tag {:#x}: not from its peer (forged?)",
                    e.tag
                );
                assert!(
                    (seq as usize) < self.got[d].len(),
                    "endpoint {at} received message {seq}, never sent (forged?)"
                );
                assert!(
                    !self.got[d][seq as usize],
                    "message {seq} from endpoint {d} delivered twice"
                );
                let size = self.expect[d].remove(&seq).expect("expected size");
                assert_eq!(e.len, size, "message {seq} from {d}: wrong length");
                let data = &self.bufs[at][k][..size];
                let want = pattern(seed(d, seq), size);
                if data != want.as_slice() {
                    let bad: Vec<usize> = (0..size).filter(|&i| data[i] != want[i]).collect();
                    // Where the wrong bytes came from: another offset of this
                    // message, another message (stale bytes in a reused
                    // buffer), or nowhere (hostile or zero).
                    let at0 = bad[0];
                    let win = &data[at0..(at0 + 32).min(size)];
                    let mut origin = String::from("nowhere known");
                    'find: for dd in 0..2u64 {
                        for s2 in seq.saturating_sub(80)..seq + 80 {
                            let pat = pattern(seed(dd as usize, s2), 1 << 20);
                            if let Some(o) = pat.windows(win.len()).position(|w| w == win) {
                                origin = format!("message {s2} of endpoint {dd} at offset {o}");
                                break 'find;
                            }
                        }
                    }
                    let runs: Vec<(usize, usize)> = bad.iter().fold(Vec::new(), |mut v, &i| {
                        match v.last_mut() {
                            Some((_, e)) if *e + 1 == i => *e = i,
                            _ => v.push((i, i)),
                        }
                        v
                    });
                    eprintln!(
                        "corruption: first wrong bytes {:02x?} come from {origin}; zero: {}; runs: {:?}",
                        &win[..win.len().min(16)],
                        win.iter().all(|&b| b == 0),
                        &runs[..runs.len().min(20)]
                    );
                    panic!(
                        "message {seq} from endpoint {d} ({size} B) corrupted: {} wrong bytes in [{}, {}]",
                        bad.len(),
                        bad[0],
                        bad[bad.len() - 1]
                    );
                }
                self.got[d][seq as usize] = true;
                self.tally.received += 1;
                self.tally.bytes += size as u64;
                self.post(at, k);
            }
            _ => panic!("completion with unknown context {c:#x} at endpoint {at}"),
        }
        self.last_progress = Instant::now();
    }

    /// Poll both completion queues once (this progresses the endpoints);
    /// panics on an error completion or when nothing completed for `HANG`.
    pub fn poll(&mut self) {
        for at in 0..2 {
            let mut es = [sys::fi_cq_tagged_entry::default(); 16];
            let n = cq_read(self.pair.cq[at], &mut es);
            if n > 0 {
                for e in &es[..n as usize] {
                    self.complete(at, e);
                }
            } else if n != EAGAIN {
                let (rc, err) = cq_readerr(self.pair.cq[at]);
                panic!(
                    "endpoint {at}: fi_cq_read {n}; error entry ({rc}): err {} prov_errno {} len {} tag {:#x}",
                    err.err, err.prov_errno, err.len, err.tag
                );
            }
        }
        assert!(
            self.last_progress.elapsed() < HANG,
            "hang: no completion for {HANG:?} with {:?} messages in flight",
            [self.expect[0].len(), self.expect[1].len()]
        );
    }

    /// Keep both windows full and poll once.
    pub fn step(&mut self) {
        for d in 0..2 {
            while self.send_one(d) {}
        }
        self.poll();
    }

    /// Stop sending; wait until every message and every send completed, then
    /// check that nothing else arrives for `quiet`.
    pub fn drain(&mut self, quiet: Duration) {
        while self.expect.iter().any(|m| !m.is_empty())
            || self.sending.iter().any(|m| !m.is_empty())
        {
            self.poll();
        }
        let t = Instant::now();
        let before = self.tally;
        while t.elapsed() < quiet {
            self.last_progress = Instant::now();
            self.poll();
        }
        assert_eq!(
            (self.tally.received, self.tally.sent),
            (before.received, before.sent),
            "completions after the traffic ended"
        );
        for d in 0..2 {
            assert!(self.got[d].iter().all(|&g| g), "a message was lost");
        }
        assert_eq!(self.tally.received, self.tally.sent);
    }

    /// Close the endpoints (this writes `FI_SPRAY_STATS`), then free the
    /// buffers.
    pub fn close(self) {
        self.pair.close();
    }
}
