//! The receive path's shortcut for the segments of a coalesced datagram
//! (`Config::rx_continuation`: the next DATA packet from the same sender at
//! the same instant, with the same header but for its PSN, is not parsed,
//! admitted or acked again) changes nothing the peers can see. Two pairs of
//! engines, one with the shortcut and one without, carry the same two-way
//! traffic (eager and rendezvous messages both ways at once) over the same
//! seeded wire that drops, duplicates and reorders packets and hands each
//! side's packets over in batches at one instant (as a GRO receive does):
//! every packet either pair sends must be byte for byte the other's, and the
//! completions and delivered bytes the same. A failure prints its seed.

use core::net::SocketAddr;

use spray::msg::{CompKind, RecvFlags, RecvOp, SendOp};
use spray::sim::gro::coalesce;
use spray::time::Instant;
use spray::{Config, Engine, EpMode, PeerId};

type Node = Engine<Vec<u8>>;

/// Message sizes each side sends, in turn: eager (one packet, several, a
/// whole flowlet) and rendezvous.
const SIZES: [usize; 6] = [8, 4096, 65536, 200_000, 1 << 20, 30_000];

struct Pair {
    a: Node,
    b: Node,
    a_addr: SocketAddr,
    b_addr: SocketAddr,
    to_b: PeerId,
    to_a: PeerId,
}

fn pair(fast: bool, seed: u64) -> Pair {
    pair_at(fast, seed, ["127.0.0.1:7600", "127.0.0.1:7700"])
}

/// `pair` with its engines at `addrs` (two hosts' addresses give each peer
/// `Config::paths` paths; one host's, one).
fn pair_at(fast: bool, seed: u64, addrs: [&str; 2]) -> Pair {
    let mk = |addr: &str, nonce: u64| {
        let addr: SocketAddr = addr.parse().unwrap();
        let mut c = Config::new(EpMode::Rdm, addr);
        c.nonce = nonce;
        c.seed = seed ^ nonce;
        c.max_datagram = 1472;
        c.rx_continuation = fast;
        (Engine::new(c), addr)
    };
    let (mut a, a_addr) = mk(addrs[0], 11);
    let (mut b, b_addr) = mk(addrs[1], 12);
    let to_b = a.peer(b_addr);
    let to_a = b.peer(a_addr);
    Pair {
        a,
        b,
        a_addr,
        b_addr,
        to_b,
        to_a,
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }
}

/// Everything `e` sends now, in order.
fn drain(e: &mut Node, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 2048];
    while let Some(t) = e.poll_transmit(now, &mut buf) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

/// The wire: drop, duplicate and swap neighbours by `rng`, the same for
/// both pairs (each pair has its own generator with the same seed).
fn wire(pkts: Vec<Vec<u8>>, rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for p in pkts {
        if rng.chance(20) {
            continue;
        }
        if rng.chance(10) {
            out.push(p.clone());
        }
        out.push(p);
    }
    for i in 1..out.len() {
        if rng.chance(30) {
            out.swap(i - 1, i);
        }
    }
    out
}

/// What one side observed: every packet it sent (per step) and every
/// completion (kind, context, error, bytes).
#[derive(Default, PartialEq, Debug)]
struct Log {
    sent: Vec<Vec<Vec<u8>>>,
    done: Vec<(bool, u64, bool, Vec<u8>)>,
}

/// Run the traffic on `p`, both ways at once or (`both` false) a to b
/// only, where no data of b's carries its acks; the logs of a and b.
/// How a step's inbox goes in.
#[derive(Copy, Clone, PartialEq)]
enum Input {
    /// `handle_datagram` each.
    Single,
    /// `handle_segments` each, as one datagram, then one `end_input`, as
    /// the driver hands over what one receive call got.
    Batched,
    /// As a GRO receive coalesces them: runs of packets of one length (the
    /// last of a run may be shorter), at most 64, each run one datagram to
    /// `handle_segments`; then one `end_input`.
    Coalesced,
}

fn run(p: &mut Pair, seed: u64, both: bool, input: Input) -> (Log, Log) {
    let (mut la, mut lb) = (Log::default(), Log::default());
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let n = SIZES.len() as u64;
    for k in 0..n {
        let len = SIZES[k as usize];
        for (e, from, tag) in [(&mut p.a, p.to_b, 1u64), (&mut p.b, p.to_a, 2)] {
            if !both && tag == 1 {
                continue;
            }
            e.post_recv(RecvOp {
                src: Some(from),
                buf: vec![0u8; len],
                tag: Some((tag, 0)),
                context: k,
                flags: RecvFlags::default(),
                report: true,
            })
            .unwrap();
        }
        for (e, to, tag, fill) in [
            (&mut p.a, p.to_b, 2u64, 0xa5u8),
            (&mut p.b, p.to_a, 1, 0x3c),
        ] {
            if !both && tag == 1 {
                continue;
            }
            let buf = (0..len)
                .map(|i| (i as u8).wrapping_mul(7) ^ fill ^ k as u8)
                .collect();
            e.post_send(SendOp {
                peer: to,
                buf,
                tag: Some(tag),
                data: None,
                context: k,
                report: true,
                delivery_complete: false,
                lazy: false,
            })
            .unwrap();
        }
    }
    // Steps of 5 us; each side's packets of a step reach the other in one
    // batch at the next step's instant (a coalesced receive).
    let (mut to_a, mut to_b): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    let mut t = 1_000_000u64;
    for _ in 0..200_000 {
        t += 5_000;
        let now = Instant::from_nanos(t);
        for (e, from, inbox) in [(&mut p.a, p.b_addr, &to_a), (&mut p.b, p.a_addr, &to_b)] {
            match input {
                Input::Single => inbox.iter().for_each(|d| e.handle_datagram(now, from, d)),
                Input::Batched => inbox
                    .iter()
                    .for_each(|d| e.handle_segments(now, from, d, 0)),
                Input::Coalesced => coalesce(inbox.iter().map(|d| d.as_slice()))
                    .iter()
                    .for_each(|(d, g)| e.handle_segments(now, from, d, *g)),
            }
            e.end_input(now);
            if e.poll_timeout().is_some_and(|x| x <= now) {
                e.handle_timeout(now);
            }
        }
        let (sa, sb) = (drain(&mut p.a, now), drain(&mut p.b, now));
        la.sent.push(sa.clone());
        lb.sent.push(sb.clone());
        (to_b, to_a) = if both {
            (wire(sa, &mut rng), wire(sb, &mut rng))
        } else {
            (sa, sb)
        };
        for (e, log) in [(&mut p.a, &mut la), (&mut p.b, &mut lb)] {
            while let Some(c) = e.poll_completion() {
                let bytes = if c.kind == CompKind::Recv {
                    c.buf.clone().unwrap_or_default()
                } else {
                    Vec::new()
                };
                log.done.push((
                    c.kind == CompKind::Recv,
                    c.context,
                    c.error.is_some(),
                    bytes,
                ));
            }
        }
        let each = if both { 2 * n } else { n };
        if la.done.len() as u64 == each && lb.done.len() as u64 == each {
            break;
        }
    }
    (la, lb)
}

#[test]
fn the_shortcut_changes_no_packet_and_no_completion() {
    compare(true, Input::Single);
}

/// One way only: every ack b sends is a pure ACK, sent when its receive
/// state asks for one (`ack_every`, a gap, the ack timer), so a segment
/// the shortcut counted wrong shows in the packets.
#[test]
fn the_shortcut_changes_no_ack_of_a_one_way_stream() {
    compare(false, Input::Single);
}

/// The same with each batch handed over as the driver does it
/// (`handle_segments`, one datagram each, then `end_input`): what every input is
/// followed by (pending messages handed down, the keepalive check) runs
/// once per batch, and no peer can tell.
#[test]
fn batched_input_changes_no_packet_and_no_completion() {
    compare(true, Input::Batched);
    compare(false, Input::Batched);
}

/// And with each batch coalesced as GRO would (`handle_segments`): runs of
/// segments go through the SRD's `handle_train` and the message layer's
/// segment shortcut.
#[test]
fn coalesced_input_changes_no_packet_and_no_completion() {
    compare(true, Input::Coalesced);
    compare(false, Input::Coalesced);
}

fn compare(both: bool, input: Input) {
    let (mut used, mut trains) = (0, 0);
    for seed in 1..=6u64 {
        let mut full = pair(false, seed);
        let mut fast = pair(true, seed);
        let (fa, fb) = run(&mut full, seed, both, Input::Single);
        let (qa, qb) = run(&mut fast, seed, both, input);
        let n = if both { 2 * SIZES.len() } else { SIZES.len() };
        assert_eq!(fa.done.len(), n, "seed {seed}: a did not finish");
        assert_eq!(fb.done.len(), n, "seed {seed}: b did not finish");
        assert!(
            fa.done.iter().chain(&fb.done).all(|d| !d.2),
            "seed {seed}: an operation failed"
        );
        // Every receive holds what was sent (b sends a the 0x3c pattern, a b the 0xa5).
        for (log, fill, side) in [(&qa, 0x3cu8, "a"), (&qb, 0xa5, "b")] {
            for (recv, k, _, bytes) in &log.done {
                if *recv {
                    let len = SIZES[*k as usize];
                    let want: Vec<u8> = (0..len)
                        .map(|i| (i as u8).wrapping_mul(7) ^ fill ^ *k as u8)
                        .collect();
                    assert!(
                        *bytes == want,
                        "seed {seed}: {side} received wrong bytes for message {k}"
                    );
                }
            }
        }
        for (x, y, side) in [(&fa, &qa, "a"), (&fb, &qb, "b")] {
            assert_eq!(
                x.sent.len(),
                y.sent.len(),
                "seed {seed}: {side} ran a different number of steps"
            );
            for (i, (u, v)) in x.sent.iter().zip(&y.sent).enumerate() {
                assert!(u == v, "seed {seed}: {side}'s packets differ at step {i}");
            }
            assert!(x.done == y.done, "seed {seed}: {side}'s completions differ");
        }
        // The counters too, but for the shortcut's own.
        for (x, y, side) in [(&full.a, &fast.a, "a"), (&full.b, &fast.b, "b")] {
            let (mut u, mut v) = (x.srd_stats().clone(), y.srd_stats().clone());
            u.rx_continued = 0;
            v.rx_continued = 0;
            v.rx_train = 0;
            assert_eq!(
                format!("{u:?}"),
                format!("{v:?}"),
                "seed {seed}: {side}'s counters differ"
            );
        }
        used += fast.a.srd_stats().rx_continued + fast.b.srd_stats().rx_continued;
        trains += fast.a.srd_stats().rx_train + fast.b.srd_stats().rx_train;
        assert_eq!(
            full.a.srd_stats().rx_continued + full.b.srd_stats().rx_continued,
            0,
            "seed {seed}: the shortcut ran while off"
        );
    }
    // The shortcut must have been taken, or the comparison proves nothing.
    println!("shortcut taken for {used} packets, {trains} of them in trains");
    assert!(used > 1000, "the shortcut ran for {used} packets only");
    if input == Input::Coalesced {
        assert!(trains > 1000, "trains took {trains} packets only");
    } else {
        assert_eq!(trains, 0, "a train ran without coalesced input");
    }
}

/// Coalesced datagrams that are not a sender's flowlet: whole or partial
/// replays of earlier ones (their segments in order, reversed, or behind
/// the next real one), real bytes cut at a segment size that is not
/// theirs, real segments followed by garbage of the same size, datagrams
/// cut short, and a flowlet one of whose later segments came first. None
/// carries a forged header (without a job key only an on-path attacker can
/// make one, PROTOCOL.md §11), so whatever trains they start must deliver
/// nothing twice and nothing wrong: every message arrives once, intact,
/// and the counters show the extra segments dropped (duplicates,
/// malformed), not delivered.
#[test]
fn hostile_coalesced_datagrams_deliver_nothing_wrong() {
    for seed in 1..=12u64 {
        let mut p = pair(true, seed);
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let sizes = [65536usize, 200_000, 30_000, 1 << 20, 100_000];
        for (k, &len) in sizes.iter().enumerate() {
            p.b.post_recv(RecvOp {
                src: Some(p.to_a),
                buf: vec![0u8; len],
                tag: Some((5, 0)),
                context: k as u64,
                flags: RecvFlags::default(),
                report: true,
            })
            .unwrap();
            let buf = (0..len)
                .map(|i| (i as u8).wrapping_mul(11) ^ k as u8)
                .collect();
            p.a.post_send(SendOp {
                peer: p.to_b,
                buf,
                tag: Some(5),
                data: None,
                context: k as u64,
                report: true,
                delivery_complete: false,
                lazy: false,
            })
            .unwrap();
        }
        let mut seen: Vec<(Vec<u8>, usize)> = Vec::new();
        let mut got = Vec::new();
        let mut t = 1_000_000u64;
        for _ in 0..100_000 {
            t += 5_000;
            let now = Instant::from_nanos(t);
            let out = drain(&mut p.a, now);
            for (d, g) in coalesce(out.iter().map(|d| d.as_slice())) {
                // One of its later segments ahead of it, now and then (as a
                // resend on another path would come): its train must stop
                // there and count it a duplicate.
                let segs = d.len().div_ceil(g.max(1));
                if segs > 2 && rng.chance(200) {
                    let k = 1 + (rng.next() % (segs as u64 - 1)) as usize;
                    let one = &d[k * g..((k + 1) * g).min(d.len())];
                    p.b.handle_segments(now, p.a_addr, one, one.len());
                }
                // Something hostile first, now and then.
                if !seen.is_empty() && rng.chance(300) {
                    let (old, og) = &seen[(rng.next() % seen.len() as u64) as usize];
                    let bad: (Vec<u8>, usize) = match rng.next() % 5 {
                        0 => (old.clone(), *og),
                        1 => {
                            // Its segments reversed.
                            let segs: Vec<&[u8]> = old.chunks(*og).rev().collect();
                            (segs.concat(), *og)
                        }
                        2 => (old.clone(), 1 + (rng.next() % old.len() as u64) as usize),
                        3 => {
                            let mut v = d[..g.min(d.len())].to_vec();
                            v.extend((0..g).map(|_| rng.next() as u8));
                            (v, g)
                        }
                        _ => {
                            let cut = (rng.next() % old.len() as u64) as usize;
                            (old[..cut].to_vec(), *og)
                        }
                    };
                    p.b.handle_segments(now, p.a_addr, &bad.0, bad.1);
                }
                p.b.handle_segments(now, p.a_addr, &d, g);
                // ... or right behind the real one.
                if rng.chance(100) {
                    p.b.handle_segments(now, p.a_addr, &d, g);
                }
                seen.push((d, g));
                if seen.len() > 64 {
                    seen.remove(0);
                }
            }
            p.b.end_input(now);
            if p.b.poll_timeout().is_some_and(|x| x <= now) {
                p.b.handle_timeout(now);
            }
            for pkt in drain(&mut p.b, now) {
                p.a.handle_datagram(now, p.b_addr, &pkt);
            }
            if p.a.poll_timeout().is_some_and(|x| x <= now) {
                p.a.handle_timeout(now);
            }
            while let Some(c) = p.b.poll_completion() {
                assert!(c.error.is_none(), "seed {seed}: a receive failed");
                got.push((c.context, c.buf.unwrap_or_default()));
            }
            while p.a.poll_completion().is_some() {}
            if got.len() == sizes.len() {
                break;
            }
        }
        assert_eq!(
            got.len(),
            sizes.len(),
            "seed {seed}: not every message arrived"
        );
        for (k, bytes) in &got {
            let want: Vec<u8> = (0..sizes[*k as usize])
                .map(|i| (i as u8).wrapping_mul(11) ^ *k as u8)
                .collect();
            assert!(*bytes == want, "seed {seed}: message {k} arrived wrong");
        }
        let s = p.b.srd_stats();
        assert!(
            s.rx_duplicates + s.rx_malformed > 0,
            "seed {seed}: nothing hostile was dropped ({} dup, {} malformed)",
            s.rx_duplicates,
            s.rx_malformed
        );
        println!(
            "seed {seed}: {} duplicates, {} malformed dropped; {} packets in trains",
            s.rx_duplicates, s.rx_malformed, s.rx_train
        );
    }
}

/// A ping-pong of 4 KiB messages (3 packets each), each side's packets of
/// a step handed over coalesced: the second packet of every message takes
/// the shortcut. A reply's packets carry the same ack, fresh in the first
/// and flagged a repeat in the rest, and its first packet makes the sender
/// active again (a fair-share recount pending); either once sent every
/// packet of the message down the full path (OpenMPI 5's ping-pong of
/// 4 KiB across 2 hosts continued 32 of 6341 packets).
#[test]
fn a_ping_pong_reply_continues_after_its_first_packet() {
    // Two hosts (not one: a peer on the same host gets one path).
    let mut p = pair_at(true, 0x4b1d, ["198.18.1.2:7800", "198.18.2.2:7800"]);
    let rounds = 200u64;
    let warm = 20;
    let mut t = 1_000_000u64;
    let mut continued_from = 0;
    let (mut to_a, mut to_b): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        if r == warm {
            // After the handshake and the credit ramp.
            continued_from = p.a.srd_stats().rx_continued + p.b.srd_stats().rx_continued;
        }
        for tx in [0usize, 1] {
            let fill = r as u8 ^ tx as u8;
            let (s, d, to, back) = if tx == 0 {
                (&mut p.a, &mut p.b, p.to_b, p.to_a)
            } else {
                (&mut p.b, &mut p.a, p.to_a, p.to_b)
            };
            d.post_recv(RecvOp {
                src: Some(back),
                buf: vec![0u8; 4096],
                tag: Some((5, 0)),
                context: r,
                flags: RecvFlags::default(),
                report: true,
            })
            .unwrap();
            s.post_send(SendOp {
                peer: to,
                buf: vec![fill; 4096],
                tag: Some(5),
                data: None,
                context: r,
                report: true,
                delivery_complete: true,
                lazy: false,
            })
            .unwrap();
            // Steps of 4 us (one way across the fabric) until the receive
            // completes; each side's packets of a step reach the other
            // coalesced at the next.
            let mut got = false;
            for _ in 0..1000 {
                t += 4_000;
                let now = Instant::from_nanos(t);
                for (e, from, inbox) in [(&mut p.a, p.b_addr, &to_a), (&mut p.b, p.a_addr, &to_b)] {
                    for (dg, g) in coalesce(inbox.iter().map(|d| d.as_slice())) {
                        e.handle_segments(now, from, &dg, g);
                    }
                    e.end_input(now);
                    if e.poll_timeout().is_some_and(|x| x <= now) {
                        e.handle_timeout(now);
                    }
                }
                to_b = drain(&mut p.a, now);
                to_a = drain(&mut p.b, now);
                let d = if tx == 0 { &mut p.b } else { &mut p.a };
                while let Some(c) = d.poll_completion() {
                    assert!(c.error.is_none(), "round {r}: {c:?}");
                    if c.kind == CompKind::Recv {
                        let b = c.buf.expect("a receive buffer");
                        assert!(b.iter().all(|&x| x == fill), "round {r}: wrong bytes");
                        got = true;
                    }
                }
                if got {
                    break;
                }
            }
            assert!(got, "round {r}: the message never arrived");
        }
    }
    let continued = p.a.srd_stats().rx_continued + p.b.srd_stats().rx_continued - continued_from;
    let messages = 2 * (rounds - warm);
    println!("{continued} packets continued in {messages} messages of 3 packets");
    assert!(
        continued >= messages,
        "{continued} packets continued in {messages} messages of 3 packets"
    );
}
