//! What one endpoint costs per peer: engine A meets N = 1, 64, 1024 and
//! 16384 peers (a session handshake and one message each way, then quiet),
//! and this measures (a) A's heap bytes per idle peer, counted by a
//! counting global allocator in this test binary (every byte A allocated
//! for the peers: SRD and message-layer state, tables, vectors' spare
//! capacity), just after meeting them, once they are quiet (past
//! `Config::peer_trim_after`, 1 s: trimmed, checked to happen) and once
//! reclaimed (`Config::peer_idle_timeout`, checked to happen): at most 4 KiB
//! each when quiet or reclaimed, the target; (b) the engine CPU per message of an
//! 8-byte tagged ping-pong with ONE peer while N - 1 peers idle, which must
//! not grow with N (asserted: at most 2x between N = 16384 and N <= 64, a
//! scan of the idle peers on the per-packet path costs 10x and more);
//! (c) the first message to a new peer (HELLO, CHALLENGE, DATA, ACK) when
//! N peers exist. Packets are carried in memory; times are wall clock of
//! both engines (min of batches). Prints the table (`--nocapture`).
//! (It lives with the FFI package's tests, not in `provider/`, because its
//! counting allocator is `unsafe` and it reads the clock.)

use core::net::SocketAddr;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant as Wall;

use spray::msg::{CompKind, RecvFlags, RecvOp, SendOp};
use spray::time::Instant;
use spray::{Config, Engine, EpMode, PeerId};

/// Live heap bytes of the whole process (this binary runs one test).
static LIVE: AtomicI64 = AtomicI64::new(0);

struct Counting;

// SAFETY: every call is forwarded to `System` unchanged; only counts are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as i64 - l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

type E = Engine<Vec<u8>>;

/// Paths per peer, as the provider configures them by default.
const PATHS: u8 = 16;

/// Engine `k`'s address: A is 0, the active peer 1, the others 2, 3, ...
fn addr(k: usize) -> SocketAddr {
    format!("10.{}.{}.{}:7000", k / 62_500, k / 250 % 250, k % 250 + 1)
        .parse()
        .unwrap()
}

fn engine(k: usize) -> E {
    let mut cfg = Config::new(EpMode::Rdm, addr(k));
    // The provider's default (`FI_SPRAY_PATHS`, ffi/params.rs), not the
    // engine's 8: path records are most of an idle peer's memory.
    cfg.paths = PATHS;
    cfg.nonce = 100 + k as u64;
    cfg.seed = k as u64;
    Engine::new(cfg)
}

fn recv(e: &mut E, from: PeerId, buf: Vec<u8>, r: u64) {
    let op = RecvOp {
        src: Some(from),
        buf,
        tag: Some((7, 0)),
        context: r,
        flags: RecvFlags::default(),
        report: true,
    };
    e.post_recv(op).expect("post recv");
}

fn send(e: &mut E, to: PeerId, mut buf: Vec<u8>, r: u64) {
    buf.clear();
    buf.extend_from_slice(&r.to_le_bytes());
    let op = SendOp {
        peer: to,
        buf,
        tag: Some(7),
        data: None,
        context: r,
        report: true,
        delivery_complete: false,
        lazy: false,
    };
    e.post_send(op).expect("post send");
}

/// Engine A, the live other engines by address, the simulated clock.
struct Net {
    a: E,
    others: HashMap<SocketAddr, E>,
    wire: Vec<u8>,
    t: u64,
}

impl Net {
    fn tick(&mut self, ns: u64) -> Instant {
        self.t += ns;
        Instant::from_nanos(self.t)
    }

    /// Run due timers and carry packets between A and the engine at `b`
    /// until both are quiet (packets to engines gone are dropped).
    fn settle(&mut self, b: SocketAddr) {
        let now = Instant::from_nanos(self.t);
        for _ in 0..100 {
            let mut moved = false;
            for side in [0, 1] {
                let (from, from_addr, to) = if side == 0 {
                    (&mut self.a, addr(0), self.others.get_mut(&b))
                } else {
                    let Some(e) = self.others.get_mut(&b) else {
                        continue;
                    };
                    (e, b, Some(&mut self.a))
                };
                if from.poll_timeout().is_some_and(|t| t <= now) {
                    from.handle_timeout(now);
                }
                let mut to = to;
                while let Some(t) = from.poll_transmit(now, &mut self.wire) {
                    moved = true;
                    if t.dst != b && t.dst != addr(0) {
                        continue;
                    }
                    if let Some(to) = to.as_deref_mut() {
                        to.handle_datagram(now, from_addr, &self.wire[..t.len]);
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("packets still moving after 100 rounds");
    }

    /// A meets engine `k` (new): one message each way, then its acks go out.
    fn meet(&mut self, k: usize) -> (PeerId, PeerId) {
        let (b, mut e) = (addr(k), engine(k));
        let (pk, pa) = (self.a.peer(b), e.peer(addr(0)));
        self.others.insert(b, e);
        let e = self.others.get_mut(&b).expect("just inserted");
        recv(e, pa, vec![0; 8], 1);
        send(&mut self.a, pk, Vec::new(), 1);
        self.settle(b);
        recv(&mut self.a, pk, vec![0; 8], 2);
        let e = self.others.get_mut(&b).expect("just inserted");
        send(e, pa, Vec::new(), 2);
        self.settle(b);
        // Delayed acks (50 us) leave.
        self.tick(200_000);
        self.settle(b);
        let e = self.others.get_mut(&b).expect("just inserted");
        let mut got = 0;
        while let Some(c) = e.poll_completion() {
            assert!(c.error.is_none(), "peer {k}: {:?}", c.error);
            got += 1;
        }
        while let Some(c) = self.a.poll_completion() {
            assert!(c.error.is_none(), "A with peer {k}: {:?}", c.error);
            got += 1;
        }
        assert_eq!(
            got, 4,
            "peer {k}: a send and a receive completion each side"
        );
        (pk, pa)
    }

    /// One completion of `kind` for round `r` at the engine; returns its buffer.
    fn expect(e: &mut E, kind: CompKind, r: u64) -> Vec<u8> {
        let c = e.poll_completion().expect("a completion");
        assert_eq!((c.kind, c.context), (kind, r));
        assert!(c.error.is_none(), "round {r}: {:?}", c.error);
        let buf = c.buf.expect("a buffer");
        if kind == CompKind::Recv {
            assert_eq!(buf, r.to_le_bytes());
        }
        buf
    }
}

/// Results for one N.
struct Row {
    n: usize,
    idle_bytes: f64,
    /// Per idle peer once quiet past `Config::peer_trim_after` (trimmed).
    quiet_bytes: f64,
    /// Per idle peer once reclaimed (`Config::peer_idle_timeout`).
    reclaimed_bytes: f64,
    msg_ns: f64,
    hs_us: f64,
}

/// Engine CPU per message of a ping-pong between A and engine 1, ns (min of
/// batches; 10 us of simulated time per round trip).
fn ping_pong(net: &mut Net, pb: PeerId, pa: PeerId) -> f64 {
    let b = addr(1);
    let (batches, per) = if cfg!(debug_assertions) {
        (3, 200)
    } else {
        (20, 1_500)
    };
    let mut best = f64::MAX;
    let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| vec![0; 8]).collect();
    let mut pending = None;
    for batch in 0..batches {
        let start = Wall::now();
        for i in 0..per {
            let r = 1_000 + batch * per + i;
            net.tick(10_000);
            let e = net.others.get_mut(&b).expect("engine 1 lives");
            recv(e, pa, bufs.pop().unwrap_or_default(), r);
            recv(&mut net.a, pb, bufs.pop().unwrap_or_default(), r);
            send(&mut net.a, pb, bufs.pop().unwrap_or_default(), r);
            net.settle(b);
            let e = net.others.get_mut(&b).expect("engine 1 lives");
            // B's previous send completes on the ack riding on this message.
            if let Some(p) = pending.take() {
                bufs.push(Net::expect(e, CompKind::Send, p));
            }
            bufs.push(Net::expect(e, CompKind::Recv, r));
            send(e, pa, bufs.pop().unwrap_or_default(), r);
            pending = Some(r);
            net.settle(b);
            bufs.push(Net::expect(&mut net.a, CompKind::Send, r));
            bufs.push(Net::expect(&mut net.a, CompKind::Recv, r));
        }
        let ns = start.elapsed().as_nanos() as f64 / per as f64 / 2.0;
        best = best.min(ns);
    }
    // A's delayed ack completes B's last send.
    net.tick(200_000);
    net.settle(b);
    let e = net.others.get_mut(&b).expect("engine 1 lives");
    if let Some(p) = pending {
        Net::expect(e, CompKind::Send, p);
    }
    best
}

/// Measure at `n` peers; returns the row and the engines (for re-runs).
fn measure(n: usize) -> (Row, Net, PeerId, PeerId) {
    let mut net = Net {
        a: engine(0),
        others: HashMap::new(),
        wire: vec![0; 65536],
        t: 1_000_000,
    };
    // The active peer first: its first-use allocations (A's pools, queues)
    // are not per idle peer.
    let (pb, pa) = net.meet(1);
    let base = live();
    for k in 2..n + 1 {
        net.meet(k);
        // The peer's engine goes; A keeps its state for it.
        net.others.remove(&addr(k));
    }
    net.others.shrink_to_fit();
    let idle = (n - 1) as f64;
    let idle_bytes = (live() - base) as f64 / idle.max(1.0);
    let msg_ns = ping_pong(&mut net, pb, pa);
    // The first message to a new peer, `hs` times (median), at N + 1, N + 2, ...
    let mut hs: Vec<f64> = (0..21)
        .map(|j| {
            let k = n + 1 + j;
            let start = Wall::now();
            net.meet(k);
            let us = start.elapsed().as_nanos() as f64 / 1e3;
            net.others.remove(&addr(k));
            us
        })
        .collect();
    hs.sort_by(f64::total_cmp);
    // Quiet past the trim time (the active peer too): every idle peer trims.
    // (With many peers, the first met trimmed while the others were met.)
    net.tick(2_000_000_000);
    net.settle(addr(1));
    let trimmed = net.a.srd_stats().peers_trimmed;
    let quiet_bytes = (live() - base) as f64 / (idle + hs.len() as f64).max(1.0);
    assert!(
        trimmed as usize >= n - 1 + hs.len(),
        "N={n}: only {trimmed} of {} idle peers trimmed",
        n - 1 + hs.len()
    );
    // Past the idle timeout every idle peer gives its state back.
    net.tick(125_000_000_000);
    net.settle(addr(1));
    net.tick(60_000_000_000);
    net.settle(addr(1));
    let reclaimed = net.a.srd_stats().peers_reclaimed;
    assert!(
        reclaimed as usize >= n.saturating_sub(1),
        "N={n}: only {reclaimed} peers reclaimed"
    );
    // The handshake peers (N + 1 ...) were reclaimed too: count them as idle
    // peers of this measure.
    let reclaimed_bytes = (live() - base) as f64 / (idle + hs.len() as f64).max(1.0);
    let row = Row {
        n,
        idle_bytes,
        quiet_bytes,
        reclaimed_bytes,
        msg_ns,
        hs_us: hs[hs.len() / 2],
    };
    (row, net, pb, pa)
}

#[test]
fn cost_per_peer() {
    let ns: &[usize] = if cfg!(debug_assertions) {
        &[1, 64, 1024]
    } else {
        &[1, 64, 1024, 16384]
    };
    let (mut rows, mut nets) = (Vec::new(), Vec::new());
    for &n in ns {
        let (row, net, pb, pa) = measure(n);
        rows.push(row);
        nets.push((net, pb, pa));
    }
    println!(
        "{:>6} {:>16} {:>15} {:>18} {:>12} {:>14}",
        "N", "B/peer just met", "B/quiet peer", "B/reclaimed peer", "ns/message", "first msg us"
    );
    for r in &rows {
        println!(
            "{:>6} {:>16.0} {:>15.0} {:>18.0} {:>12.0} {:>14.1}",
            r.n, r.idle_bytes, r.quiet_bytes, r.reclaimed_bytes, r.msg_ns, r.hs_us
        );
    }
    // Against the better of N = 1 and 64 (a busy moment of the shared
    // machine inflates one run's batches).
    // A miss is measured again, N = 1 and the largest N back to back (a
    // scan of the idle peers misses every time: 2.7-11x).
    let mut small = rows[0].msg_ns.min(rows[1].msg_ns);
    let last = rows.len() - 1;
    let mut large = rows[last].msg_ns;
    for _ in 0..3 {
        if large < 2.0 * small {
            break;
        }
        println!("again: {large:.0} vs {small:.0} ns/message");
        let (net, pb, pa) = &mut nets[0];
        small = small.min(ping_pong(net, *pb, *pa));
        let (net, pb, pa) = &mut nets[last];
        large = large.min(ping_pong(net, *pb, *pa));
    }
    assert!(
        large < 2.0 * small,
        "ns per message grows with idle peers: {large:.0} at N={} vs {small:.0} at N<=64",
        rows[last].n
    );
    // A peer just met holds the SRD `Peer` (1672 bytes inline, of which the
    // receive window 552), its 16 `Path`s (248 bytes each on the heap, with
    // their RTT history), a slot or two of its send ring, the message
    // layer's per-peer state and the address map: ~6.7 KB, bounded here
    // against growth (with many peers the first met are quiet already).
    // Quiet for a second it trims (its path records become 8 bytes each),
    // and past the idle timeout it is reclaimed: the target, 4 KiB,
    // holds for both.
    for r in &rows[1..] {
        assert!(
            r.idle_bytes <= 7168.0,
            "N={}: {:.0} bytes per idle peer",
            r.n,
            r.idle_bytes
        );
        assert!(
            r.quiet_bytes <= 4096.0,
            "N={}: {:.0} bytes per quiet (trimmed) peer",
            r.n,
            r.quiet_bytes
        );
        assert!(
            r.reclaimed_bytes <= 4096.0,
            "N={}: {:.0} bytes per reclaimed idle peer",
            r.n,
            r.reclaimed_bytes
        );
    }
}
