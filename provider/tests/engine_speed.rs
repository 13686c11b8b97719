//! CPU cost of the whole engine (message layer + SRD core) on an MPI-style
//! 8-byte tagged ping-pong: two `Engine`s wired back to back in memory, each
//! round a receive post, a tagged send, the packet, the match and both
//! completions, the way the FFI drives them (post, `poll_transmit`,
//! `handle_datagram`, `poll_completion`). Prints ns per round trip (run with
//! `--release --nocapture`); asserts every message arrives once, intact and in
//! order, and that a ping-pong sends hardly any packet but the two messages
//! (acks ride on them). `timed_ping_pong_cost_*` time the same between two
//! hosts' engines as the wire and the FFI drive them (each event at its own
//! instant, sends completing on their acks), optionally from cold caches;
//! the bulk tests time a 1 MiB stream per packet.

use core::net::SocketAddr;
use std::time::Instant as Wall;

use spray::msg::{CompKind, RecvFlags, RecvOp, SendOp};
use spray::sim::gro::coalesce;
use spray::time::Instant;
use spray::{Config, Engine, EpMode, PeerId};

/// `SPRAY_SPEED_BATCH` (rounds or messages, e.g. small under valgrind), else
/// `debug` or `release` by build.
fn speed_batch(debug: u64, release: u64) -> u64 {
    std::env::var("SPRAY_SPEED_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            debug
        } else {
            release
        })
}

/// An engine on 198.18.x.2:`port` with 1472-byte datagrams (MTU 1500).
fn mtu_engine(port: u16, nonce: u64) -> (Engine<Vec<u8>>, SocketAddr) {
    // Each engine a host of its own (the port's hundreds), as across the
    // ECMP fabric: its peer gets `Config::paths` paths, not the one of a
    // peer on the same host.
    let addr: SocketAddr = format!("198.18.{}.2:{port}", port / 100 % 256)
        .parse()
        .unwrap();
    let mut cfg = Config::new(EpMode::Rdm, addr);
    cfg.nonce = nonce;
    cfg.max_datagram = 1472;
    (Engine::new(cfg), addr)
}

/// Buffers handed back by completions, reused for the next posts (the FFI
/// allocates nothing per operation either).
type Pool = Vec<Vec<u8>>;

fn recv(e: &mut Engine<Vec<u8>>, pool: &mut Pool, from: PeerId, r: u64) {
    let mut buf = pool.pop().unwrap_or_default();
    buf.clear();
    buf.resize(8, 0);
    e.post_recv(RecvOp {
        src: Some(from),
        buf,
        tag: Some((7, 0)),
        context: r,
        flags: RecvFlags::default(),
        report: true,
    })
    .unwrap();
}

fn send(e: &mut Engine<Vec<u8>>, pool: &mut Pool, to: PeerId, r: u64) {
    let mut buf = pool.pop().unwrap_or_default();
    buf.clear();
    buf.extend_from_slice(&r.to_le_bytes());
    e.post_send(SendOp {
        peer: to,
        buf,
        tag: Some(7),
        data: None,
        context: r,
        report: true,
        delivery_complete: false,
        lazy: false,
    })
    .unwrap();
}

/// Hand every packet `from` has to `to`; returns how many.
fn carry(
    from: &mut Engine<Vec<u8>>,
    from_addr: SocketAddr,
    to: &mut Engine<Vec<u8>>,
    now: Instant,
    wire: &mut [u8],
) -> u64 {
    let mut n = 0;
    while let Some(t) = from.poll_transmit(now, wire) {
        to.handle_datagram(now, from_addr, &wire[..t.len]);
        n += 1;
    }
    n
}

/// Take one completion of `kind` (the receive's data checked against `r`).
fn expect(e: &mut Engine<Vec<u8>>, pool: &mut Pool, kind: CompKind, r: u64) {
    let c = e.poll_completion().expect("a completion");
    assert_eq!(c.kind, kind);
    assert_eq!(c.context, r);
    assert!(c.error.is_none(), "round {r}: {:?}", c.error);
    if kind == CompKind::Recv {
        assert_eq!(c.buf.as_deref(), Some(&r.to_le_bytes()[..]), "round {r}");
    }
    pool.extend(c.buf);
}

#[test]
fn tagged_ping_pong_cost() {
    // One path (a peer on this host, as here), and the 16 a peer on another
    // host gets (`Config::paths`): each message picks a path among them.
    ping_pong_cost(1, 7000);
    ping_pong_cost(16, 7200);
}

/// The ping-pong of `tagged_ping_pong_cost` with `paths` paths between the
/// two engines (on ports `port` and `port + 100`).
// `is_multiple_of` is newer than the workspace's rust-version.
#[allow(clippy::manual_is_multiple_of)]
fn ping_pong_cost(paths: u8, port: u16) {
    let mk = |port: u16, nonce: u64| {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut cfg = Config::new(EpMode::Rdm, addr);
        cfg.nonce = nonce;
        cfg.local_paths = paths;
        (Engine::new(cfg), addr)
    };
    let (mut a, a_addr) = mk(port, 5);
    let (mut b, b_addr) = mk(port + 100, 6);
    let pb = a.peer(b_addr);
    let pa = b.peer(a_addr);
    let mut wire = vec![0u8; 65536];
    // Timed in batches: the minimum and median batch are robust to a busy
    // machine (another process on this core inflates some batches only).
    let batches: u64 = 10;
    let per_batch = speed_batch(500, 20_000);
    let rounds = batches * per_batch;
    let warm = per_batch;
    let mut packets = 0u64;
    let mut pool = Pool::new();
    let mut batch_ns = Vec::new();
    // The session handshake (HELLO, CHALLENGE) first: one message each way,
    // carried back and forth until both arrive; it is not the steady state.
    let hs = u64::MAX;
    recv(&mut b, &mut pool, pa, hs);
    recv(&mut a, &mut pool, pb, hs);
    send(&mut a, &mut pool, pb, hs);
    send(&mut b, &mut pool, pa, hs);
    let t0 = Instant::from_nanos(500_000);
    for _ in 0..4 {
        carry(&mut a, a_addr, &mut b, t0, &mut wire);
        carry(&mut b, b_addr, &mut a, t0, &mut wire);
    }
    for e in [&mut a, &mut b] {
        for _ in 0..2 {
            let c = e.poll_completion().expect("a handshake-round completion");
            assert!(c.error.is_none() && c.context == hs);
            pool.extend(c.buf);
        }
    }
    let mut start = Wall::now();
    for r in 0..rounds + warm {
        if r >= warm && (r - warm) % per_batch == 0 {
            if r > warm {
                batch_ns.push(start.elapsed().as_nanos() as f64 / per_batch as f64);
            }
            start = Wall::now();
        }
        if r == warm {
            packets = 0;
        }
        // A simulated 10 µs round trip: acks are never delayed past a reply.
        let now = Instant::from_nanos(1_000_000 + r * 10_000);
        recv(&mut b, &mut pool, pa, r);
        recv(&mut a, &mut pool, pb, r);
        send(&mut a, &mut pool, pb, r);
        packets += carry(&mut a, a_addr, &mut b, now, &mut wire);
        expect(&mut a, &mut pool, CompKind::Send, r);
        expect(&mut b, &mut pool, CompKind::Recv, r);
        send(&mut b, &mut pool, pa, r);
        packets += carry(&mut b, b_addr, &mut a, now, &mut wire);
        expect(&mut b, &mut pool, CompKind::Send, r);
        expect(&mut a, &mut pool, CompKind::Recv, r);
        assert!(a.poll_completion().is_none() && b.poll_completion().is_none());
    }
    batch_ns.push(start.elapsed().as_nanos() as f64 / per_batch as f64);
    batch_ns.sort_by(f64::total_cmp);
    println!(
        "engine tagged ping-pong, {paths} path(s): {rounds} rounds, {packets} packets; CPU per round trip: min {:.0} ns, median {:.0} ns (batches of {per_batch})",
        batch_ns[0],
        batch_ns[batch_ns.len() / 2]
    );
    // Besides the messages only the odd path probe (every few hundred ms of
    // simulated time) and, each way, the message credit the receiver returns
    // every half share of messages (the sender may have a share unmatched):
    // an ack of its own per round would double the packets.
    let share =
        (Config::new(EpMode::Rdm, a_addr).max_unexpected_msgs / spray::msg::CREDIT_SHARES) as u64;
    let credits = 2 * rounds / (share / 2);
    assert!(
        packets >= 2 * rounds && packets <= 2 * rounds + credits + rounds / 1000,
        "{packets} packets for {rounds} rounds: acks or probes of their own"
    );
}

/// The sender's half of one driver flush: its packets into the slots.
/// Not inlined, so that `callgrind` shows each side's engine cost on its
/// own (inclusive cost of `sender_flush` + `sender_input`, and of
/// `receiver_step`).
#[inline(never)]
fn sender_flush(a: &mut Engine<Vec<u8>>, now: Instant, slots: &mut [(Vec<u8>, usize)]) -> usize {
    let mut n = 0;
    while n < slots.len() {
        let Some(x) = a.poll_transmit(now, &mut slots[n].0) else {
            break;
        };
        slots[n].1 = x.len;
        n += 1;
    }
    n
}

/// The receiver's step: the sender's packets in (coalesced, as the driver
/// hands them over), its own (acks) out.
#[inline(never)]
fn receiver_step(
    b: &mut Engine<Vec<u8>>,
    now: Instant,
    from: SocketAddr,
    batch: &[(Vec<u8>, usize)],
    wire: &mut [u8],
    back: &mut Vec<Vec<u8>>,
) {
    for (d, seg) in batch {
        b.handle_segments(now, from, d, *seg);
    }
    b.end_input(now);
    back.clear();
    while let Some(x) = b.poll_transmit(now, wire) {
        back.push(wire[..x.len].to_vec());
    }
    if b.poll_timeout().is_some_and(|x| x <= now) {
        b.handle_timeout(now);
    }
}

/// The sender's other half: the receiver's packets (acks) in, timers.
#[inline(never)]
fn sender_input(a: &mut Engine<Vec<u8>>, now: Instant, from: SocketAddr, back: &[Vec<u8>]) {
    for p in back {
        a.handle_datagram(now, from, p);
    }
    if a.poll_timeout().is_some_and(|x| x <= now) {
        a.handle_timeout(now);
    }
}

/// A stream of 1 MiB tagged messages (rendezvous) between two engines with
/// 1472-byte datagrams, every packet carried at once (a zero-latency wire;
/// time advances 1 µs per round of flushes), the way the FFI drives the
/// engine (the receiver gets each flush's packets coalesced, as GRO hands
/// them over: `handle_segments`). Prints ns per data packet on each side (run with `--release
/// --nocapture`), or, under `valgrind --tool=callgrind` with
/// `SPRAY_SPEED_BATCH` small, instruction counts that do not depend on the
/// machine's load: the inclusive cost of `sender_flush` + `sender_input`
/// (the sender) and of `receiver_step` (the receiver), divided by the data
/// packets printed. Asserts every message arrives intact.
#[test]
fn bulk_transfer_cost_per_packet() {
    let (mut a, a_addr) = mtu_engine(7200, 7);
    let (mut b, b_addr) = mtu_engine(7300, 8);
    let pb = a.peer(b_addr);
    let pa = b.peer(a_addr);
    let msgs = speed_batch(4, 200);
    const LEN: usize = 1 << 20;
    let mut wire = vec![0u8; 65536];
    // The sender's packets of one flush (as the driver's slots).
    let mut slots: Vec<(Vec<u8>, usize)> = (0..64).map(|_| (vec![0u8; 65536], 0)).collect();
    let mut back = Vec::new();
    let (mut ta, mut tb) = (0u128, 0u128);
    let mut data = 0u64;
    let mut t = 1_000_000u64;
    let base: Vec<u8> = (0..LEN)
        .map(|i| (i as u64 * 7 + i as u64 / 251) as u8)
        .collect();
    for m in 0..msgs + 1 {
        let mut payload = base.clone();
        payload[..8].copy_from_slice(&m.to_le_bytes());
        b.post_recv(RecvOp {
            src: Some(pa),
            buf: vec![0u8; LEN],
            tag: Some((9, 0)),
            context: m,
            flags: RecvFlags::default(),
            report: true,
        })
        .unwrap();
        a.post_send(SendOp {
            peer: pb,
            buf: payload.clone(),
            tag: Some(9),
            data: None,
            context: m,
            report: true,
            delivery_complete: false,
            lazy: false,
        })
        .unwrap();
        let (mut sent_done, mut got) = (false, None);
        let mut idle = 0;
        while !(sent_done && got.is_some()) {
            t += 1_000;
            let now = Instant::from_nanos(t);
            let w = Wall::now();
            let n = sender_flush(&mut a, now, &mut slots);
            let ea = w.elapsed().as_nanos();
            let coalesced = coalesce(slots[..n].iter().map(|(p, len)| &p[..*len]));
            let w = Wall::now();
            receiver_step(&mut b, now, a_addr, &coalesced, &mut wire, &mut back);
            let eb = w.elapsed().as_nanos();
            let w = Wall::now();
            sender_input(&mut a, now, b_addr, &back);
            let ea2 = w.elapsed().as_nanos();
            if m > 0 {
                ta += ea + ea2;
                tb += eb;
                data += n as u64;
            }
            while let Some(c) = a.poll_completion() {
                assert!(c.error.is_none());
                sent_done = true;
            }
            if let Some(c) = b.poll_completion() {
                assert!(c.error.is_none(), "message {m}: {:?}", c.error);
                got = c.buf;
            }
            idle = if n == 0 && back.is_empty() {
                idle + 1
            } else {
                0
            };
            assert!(idle < 100_000, "message {m} stalled");
        }
        assert!(got.as_deref() == Some(&payload[..]), "message {m} differs");
    }
    println!(
        "bulk 1 MiB at 1472 B: sender {:.0} ns/packet, receiver {:.0} ns/packet ({data} packets after the first message)",
        ta as f64 / data.max(1) as f64,
        tb as f64 / data.max(1) as f64
    );
}

/// One side's step of a two-way transfer: the peer's packets in (its DATA
/// carrying acks of ours), timers, then its own packets out. Not inlined,
/// so that `callgrind` shows the cost of one side.
#[inline(never)]
fn two_way_step(
    e: &mut Engine<Vec<u8>>,
    now: Instant,
    from: SocketAddr,
    inbox: &[(Vec<u8>, usize)],
    slots: &mut [(Vec<u8>, usize)],
) -> usize {
    for (p, len) in inbox {
        e.handle_datagram(now, from, &p[..*len]);
    }
    if e.poll_timeout().is_some_and(|x| x <= now) {
        e.handle_timeout(now);
    }
    sender_flush(e, now, slots)
}

/// 1 MiB tagged messages both ways at once between two engines with
/// 1472-byte datagrams (an MPI Sendrecv or two-rank Alltoall): each side's
/// packets carry acks of the other's, every packet carried at once (a
/// zero-latency wire; time advances 1 µs per round). Prints ns per data
/// packet handled (sent or received) per side; under callgrind with
/// `SPRAY_SPEED_BATCH` small, the inclusive cost of `two_way_step` divided
/// by the packets printed is a load-independent count. Asserts every
/// message arrives intact.
#[test]
fn two_way_transfer_cost_per_packet() {
    let (mut a, a_addr) = mtu_engine(7400, 9);
    let (mut b, b_addr) = mtu_engine(7500, 10);
    let pb = a.peer(b_addr);
    let pa = b.peer(a_addr);
    let msgs = speed_batch(4, 100);
    const LEN: usize = 1 << 20;
    let mut out_a: Vec<(Vec<u8>, usize)> = (0..64).map(|_| (vec![0u8; 2048], 0)).collect();
    let mut out_b = out_a.clone();
    let mut nb = 0usize;
    let (mut ta, mut tb, mut packets) = (0u128, 0u128, 0u64);
    let mut t = 1_000_000u64;
    let base = |from: u8| -> Vec<u8> {
        (0..LEN)
            .map(|i| (i as u64 * 13 + i as u64 / 241) as u8 ^ from)
            .collect()
    };
    let (base_a, base_b) = (base(1), base(2));
    for m in 0..msgs + 1 {
        let (mut pa_msg, mut pb_msg) = (base_a.clone(), base_b.clone());
        pa_msg[..8].copy_from_slice(&m.to_le_bytes());
        pb_msg[..8].copy_from_slice(&(!m).to_le_bytes());
        for (e, from) in [(&mut a, pb), (&mut b, pa)] {
            e.post_recv(RecvOp {
                src: Some(from),
                buf: vec![0u8; LEN],
                tag: Some((9, 0)),
                context: m,
                flags: RecvFlags::default(),
                report: true,
            })
            .unwrap();
        }
        for (e, to, msg) in [(&mut a, pb, &pa_msg), (&mut b, pa, &pb_msg)] {
            e.post_send(SendOp {
                peer: to,
                buf: msg.clone(),
                tag: Some(9),
                data: None,
                context: m,
                report: true,
                delivery_complete: false,
                lazy: false,
            })
            .unwrap();
        }
        let (mut done_a, mut done_b) = ((false, None), (false, None));
        let mut idle = 0;
        while !(done_a.0 && done_a.1.is_some() && done_b.0 && done_b.1.is_some()) {
            t += 1_000;
            let now = Instant::from_nanos(t);
            let w = Wall::now();
            let na = two_way_step(&mut a, now, b_addr, &out_b[..nb], &mut out_a);
            let ea = w.elapsed().as_nanos();
            let handled_a = (nb + na) as u64;
            let w = Wall::now();
            let n = two_way_step(&mut b, now, a_addr, &out_a[..na], &mut out_b);
            let eb = w.elapsed().as_nanos();
            let handled_b = (na + n) as u64;
            nb = n;
            if m > 0 {
                ta += ea;
                tb += eb;
                packets += handled_a + handled_b;
            }
            for (e, done) in [(&mut a, &mut done_a), (&mut b, &mut done_b)] {
                while let Some(c) = e.poll_completion() {
                    assert!(c.error.is_none(), "message {m}: {:?}", c.error);
                    match c.kind {
                        CompKind::Send => done.0 = true,
                        _ => done.1 = c.buf,
                    }
                }
            }
            idle = if na == 0 && nb == 0 { idle + 1 } else { 0 };
            assert!(idle < 100_000, "message {m} stalled");
        }
        assert!(
            done_a.1.as_deref() == Some(&pb_msg[..]),
            "message {m} to a differs"
        );
        assert!(
            done_b.1.as_deref() == Some(&pa_msg[..]),
            "message {m} to b differs"
        );
    }
    println!(
        "two-way 1 MiB at 1472 B: {:.0} ns per packet handled (sent or received), a {:.0} b {:.0} ({packets} packets after the first message)",
        (ta + tb) as f64 / packets.max(1) as f64,
        2.0 * ta as f64 / packets.max(1) as f64,
        2.0 * tb as f64 / packets.max(1) as f64
    );
}

/// One host's turn in `timed_ping_pong_cost`: what arrived in (coalesced, as
/// GRO hands it over), timers, completions, then (the application answering
/// `answer` later) its posts and their packets out. Not inlined, so that
/// `callgrind` shows one host's cost per message.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn pp_turn(
    e: &mut Engine<Vec<u8>>,
    now: Instant,
    answer: Instant,
    from: SocketAddr,
    peer: PeerId,
    arrived: &[(Vec<u8>, usize)],
    size: usize,
    m: u64,
    pool: &mut Pool,
    wire: &mut [u8],
) -> (Vec<Vec<u8>>, u64, u64) {
    for (d, seg) in arrived {
        e.handle_segments(now, from, d, *seg);
    }
    e.end_input(now);
    if e.poll_timeout().is_some_and(|x| x <= now) {
        e.handle_timeout(now);
    }
    let (mut sends, mut recvs) = (0, 0);
    while let Some(c) = e.poll_completion() {
        assert!(c.error.is_none(), "message {m}: {:?}", c.error);
        match c.kind {
            CompKind::Send => sends += 1,
            _ => {
                let b = c.buf.as_deref().expect("a receive buffer");
                assert_eq!(b.len(), size);
                assert_eq!(&b[..8], &c.context.to_le_bytes()[..], "message {m}");
                recvs += 1;
            }
        }
        pool.extend(c.buf);
    }
    // The application's answer: the next receive, then the reply.
    let mut buf = pool.pop().unwrap_or_default();
    buf.clear();
    buf.resize(size, 0);
    e.post_recv(RecvOp {
        src: Some(peer),
        buf,
        tag: Some((7, 0)),
        context: m + 1,
        flags: RecvFlags::default(),
        report: true,
    })
    .unwrap();
    let mut buf = pool.pop().unwrap_or_default();
    buf.clear();
    buf.resize(size, 0x5a);
    buf[..8].copy_from_slice(&m.to_le_bytes());
    e.post_send(SendOp {
        peer,
        buf,
        tag: Some(7),
        data: None,
        context: m,
        report: true,
        // As the FFI posts a send: complete on its ack (FI_TRANSMIT_COMPLETE).
        delivery_complete: true,
        lazy: false,
    })
    .unwrap();
    let mut out = Vec::new();
    while let Some(t) = e.poll_transmit(answer, wire) {
        out.push(wire[..t.len].to_vec());
    }
    (out, sends, recvs)
}

/// A tagged ping-pong of `size`-byte messages between two hosts (1472-byte
/// datagrams, 16 paths) as the FFI and the wire drive it, unlike
/// `tagged_ping_pong_cost`'s one instant per round: each arrival at its own
/// time (a one-way trip of 4 us, the answer 1 us after the arrival, so that
/// caches keyed on the instant and the RTT estimates see a real ping-pong),
/// sends completing on their acks (which the replies carry), timers run
/// when due. Prints ns per message per host; under `valgrind
/// --tool=callgrind` with `SPRAY_SPEED_BATCH` small, the inclusive cost of
/// `pp_turn` per call is one host's instructions per message (receive,
/// completions, the reply's posts and packets). Asserts every message
/// arrives intact and that acks ride on the replies.
///
/// `SPRAY_SPEED_EVICT_KB=N` writes over N KiB between turns (untimed), as
/// a host's kernel does between messages: the engine then runs from cold
/// caches, as it does across real hosts (with 2048, 8 B messages took
/// 1390 ns a message instead of 740; `--cache-sim=yes --LL=1048576,16,64`
/// counts the cache lines a message touches: 105).
#[test]
fn timed_ping_pong_cost_8() {
    timed_ping_pong_cost(8, 7400);
}

/// `timed_ping_pong_cost_8` with messages of 3 datagrams.
#[test]
fn timed_ping_pong_cost_4k() {
    timed_ping_pong_cost(4096, 7600);
}

/// `timed_ping_pong_cost_8` with messages of 48 datagrams (a flowlet and a
/// few packets more).
#[test]
fn timed_ping_pong_cost_64k() {
    timed_ping_pong_cost(65536, 7800);
}

// `is_multiple_of` is newer than the workspace's rust-version.
#[allow(clippy::manual_is_multiple_of)]
fn timed_ping_pong_cost(size: usize, port: u16) {
    let (mut a, a_addr) = mtu_engine(port, 9);
    let (mut b, b_addr) = mtu_engine(port + 100, 10);
    let pb = a.peer(b_addr);
    let pa = b.peer(a_addr);
    let mut wire = vec![0u8; 65536];
    let mut pool = Pool::new();
    let rounds = speed_batch(500, 100_000);
    let warm = rounds / 10;
    const ONE_WAY_NS: u64 = 4_000;
    const ANSWER_NS: u64 = 1_000;
    // Round 0's receive and a's first message, then turns: b answers a,
    // a answers b, ...
    b.post_recv(RecvOp {
        src: Some(pa),
        buf: vec![0u8; size],
        tag: Some((7, 0)),
        context: 0,
        flags: RecvFlags::default(),
        report: true,
    })
    .unwrap();
    let mut t = 1_000_000u64;
    let (mut out, _, _) = pp_turn(
        &mut a,
        Instant::from_nanos(t),
        Instant::from_nanos(t),
        b_addr,
        pb,
        &[],
        size,
        0,
        &mut pool,
        &mut wire,
    );
    let (mut sends, mut recvs, mut packets) = (0u64, 0u64, 0u64);
    let mut ns = 0u128;
    // Timed in 10 batches: the minimum and median are robust to a busy
    // machine (it slows some batches only).
    let batch_turns = (2 * rounds / 10).max(1);
    let (mut batch_ns, mut batches) = (0u128, Vec::new());
    let evict_kb: usize = std::env::var("SPRAY_SPEED_EVICT_KB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut evict = vec![0u8; evict_kb * 1024];
    for turn in 1..2 * (rounds + warm) {
        // Turn k: b (odd k) or a (even k) takes message k - 1 and sends
        // message k.
        t += ONE_WAY_NS;
        let arrived = coalesce(out.iter().map(|p| &p[..]));
        let (e, from, peer) = if turn % 2 == 1 {
            (&mut b, a_addr, pa)
        } else {
            (&mut a, b_addr, pb)
        };
        if !evict.is_empty() {
            // Untimed: write over `evict` as the kernel's network stack
            // (and the other process on the CPU) does between a real
            // host's messages, so the turn finds the engine's state out
            // of the caches.
            for (i, b) in evict.iter_mut().enumerate() {
                *b = b.wrapping_add(i as u8);
            }
            std::hint::black_box(&evict);
        }
        let w = Wall::now();
        let (o, s, c) = pp_turn(
            e,
            Instant::from_nanos(t),
            Instant::from_nanos(t + ANSWER_NS),
            from,
            peer,
            &arrived,
            size,
            turn,
            &mut pool,
            &mut wire,
        );
        if turn >= 2 * warm {
            let e = w.elapsed().as_nanos();
            ns += e;
            batch_ns += e;
            if (turn - 2 * warm + 1) % batch_turns == 0 {
                batches.push(batch_ns as f64 / batch_turns as f64);
                batch_ns = 0;
            }
            sends += s;
            recvs += c;
            packets += o.len() as u64;
        }
        t += ANSWER_NS;
        out = o;
    }
    // Counted turns: 2 * rounds, each a message in and one out.
    let msgs = 2 * rounds;
    assert!(
        recvs == msgs && sends.abs_diff(msgs) <= 2,
        "{size} B: {recvs} receives, {sends} sends completed of {msgs}"
    );
    let per_msg = size.div_ceil(1472 - 96) as u64;
    // Besides the messages' datagrams: the receivers' eager-credit returns,
    // a datagram of their own in the reply's send call once a batch of a
    // quarter of the default 1 MiB credit gathered (`MsgLayer::flush_credit`).
    let credit_returns = msgs * size as u64 / (256 << 10);
    assert!(
        packets <= msgs * per_msg + credit_returns + msgs / 50,
        "{size} B: {packets} packets for {msgs} messages of {per_msg}: acks of their own"
    );
    batches.sort_by(f64::total_cmp);
    println!(
        "engine timed ping-pong {size} B, 16 paths: CPU per message per host: min {:.0} ns, median {:.0} ns, mean {:.0} ns ({msgs} messages, {packets} packets)",
        batches.first().copied().unwrap_or(0.0),
        batches.get(batches.len() / 2).copied().unwrap_or(0.0),
        ns as f64 / msgs as f64
    );
}
