//! Streaming bandwidth through the whole engine: a window of concurrent
//! rendezvous messages to one peer (what MPI bandwidth tests post: many
//! nonblocking large sends at once) must reach near the link rate, over a
//! plain path and over one where the receiving host holds packets (a process
//! that is not scheduled for a while, as two busy ranks on shared cores are).

use core::time::Duration;
use std::collections::VecDeque;

use spray::msg::{CompKind, Completion, RecvFlags, RecvOp, SendOp};
use spray::sim::{addr, Link, LinkSpec, Sim, PORT};
use spray::time::Instant;
use spray::{Config, Engine, EpMode};

type Node = Engine<Vec<u8>>;

/// Link rate into the receiver, bytes/s (10 Gbit/s).
const RATE: u64 = 1_250_000_000;

fn engine(i: usize) -> Node {
    let mut c = Config::new(EpMode::Rdm, addr(i));
    c.paths = 8;
    c.nonce = 100 + i as u64;
    c.seed = 0xbead ^ i as u64;
    // 256 KiB messages, sent by rendezvous (they would go eagerly by default).
    c.eager_limit = 64 << 10;
    Engine::new(c)
}

fn content(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (k as u64).wrapping_mul(31).wrapping_add(i * 7) as u8)
        .collect()
}

/// `msgs` messages of `len` bytes, all posted at once on both sides, over
/// the simulator. Returns the goodput in bytes/s.
fn stream(msgs: usize, len: usize) -> f64 {
    let one_way = Duration::from_micros(10);
    let mut edge = LinkSpec::ideal(one_way);
    edge.bandwidth = 4 * RATE;
    let mut sim = Sim::new(7, vec![engine(0), engine(1)], vec![edge; 8]);
    let mut b = LinkSpec::ideal(Duration::ZERO);
    b.bandwidth = RATE;
    b.buffer = 256 << 10;
    sim.bottleneck[1] = Some(Link::new(b));
    let p1 = sim.nodes[0].peer(addr(1));
    for i in 0..msgs {
        let op = RecvOp {
            src: None,
            buf: vec![0u8; len],
            tag: Some((9, 0)),
            context: i as u64,
            flags: RecvFlags::default(),
            report: true,
        };
        sim.nodes[1].post_recv(op).expect("post recv");
    }
    for i in 0..msgs {
        let op = SendOp {
            peer: p1,
            buf: content(i as u64, len),
            tag: Some(9),
            data: None,
            context: 1000 + i as u64,
            report: true,
            delivery_complete: false,
            lazy: false,
        };
        sim.nodes[0].post_send(op).expect("post send");
    }
    let mut done: [Vec<Completion<Vec<u8>>>; 2] = [Vec::new(), Vec::new()];
    let limit = Instant::from_nanos(10_000_000_000);
    loop {
        for (i, d) in done.iter_mut().enumerate() {
            while let Some(c) = sim.nodes[i].poll_completion() {
                d.push(c);
            }
        }
        if done[1].len() >= msgs && done[0].len() >= msgs {
            break;
        }
        assert!(
            sim.step(limit),
            "stalled: {}/{msgs} sends, {}/{msgs} recvs at {:?}: {:?}",
            done[0].len(),
            done[1].len(),
            sim.now,
            sim.nodes[0].srd_stats()
        );
    }
    for c in &done[1] {
        assert_eq!(c.kind, CompKind::Recv);
        assert!(c.error.is_none(), "{c:?}");
        let i = c.context;
        let buf = c.buf.as_ref().expect("buffer back");
        assert!(buf[..] == content(i, len)[..], "message {i} corrupted");
    }
    let secs = sim.now.as_nanos() as f64 / 1e9;
    (msgs * len) as f64 / secs
}

#[test]
fn concurrent_rendezvous_reach_link_rate() {
    let bw = stream(32, 256 << 10);
    println!(
        "SCENARIO|32 concurrent 256 KiB rendezvous sends, 10 Gbit/s|{:.0} MB/s ({:.0} % of link)|>= 80 %",
        bw / 1e6,
        100.0 * bw / RATE as f64
    );
    assert!(bw >= 0.80 * RATE as f64, "{:.0} MB/s", bw / 1e6);
}

/// Both messages' posting as in `stream`, but the two engines driven by
/// hand like the FFI driver does it on a busy host: one link of `RATE`
/// each way, the sender always running, the RECEIVER running only `on` out
/// of every `period` (its process is not scheduled the rest of the time).
/// Datagrams arriving meanwhile wait in its socket buffer and are handed
/// over with their arrival time (the kernel's receive timestamp).
/// Returns the goodput in bytes/s.
fn duty_cycled(cfg: impl Fn(&mut Config), msgs: usize, len: usize, on: u64, period: u64) -> f64 {
    let one_way_ns = 10_000u64;
    let mut nodes: Vec<Node> = (0..2)
        .map(|i| {
            let mut c = Config::new(EpMode::Rdm, addr(i));
            c.paths = 8;
            c.nonce = 100 + i as u64;
            c.seed = 0xd0c ^ i as u64;
            cfg(&mut c);
            Engine::new(c)
        })
        .collect();
    let p1 = nodes[0].peer(addr(1));
    for i in 0..msgs {
        let op = RecvOp {
            src: None,
            buf: vec![0u8; len],
            tag: Some((9, 0)),
            context: i as u64,
            flags: RecvFlags::default(),
            report: true,
        };
        nodes[1].post_recv(op).expect("post recv");
        let op = SendOp {
            peer: p1,
            buf: content(i as u64, len),
            tag: Some(9),
            data: None,
            context: 1000 + i as u64,
            report: true,
            delivery_complete: false,
            lazy: false,
        };
        nodes[0].post_send(op).expect("post send");
    }
    // Per direction: (arrival ns, source, bytes) in arrival order, and
    // when the link is free again.
    let mut wire: [VecDeque<(u64, core::net::SocketAddr, Vec<u8>)>; 2] =
        [VecDeque::new(), VecDeque::new()];
    let mut free_ns = [0u64; 2];
    let mut buf = vec![0u8; 2048];
    let mut recvd = 0usize;
    let mut sent = 0usize;
    let step_ns = 1_000u64;
    let mut t = 0u64;
    while recvd < msgs || sent < msgs {
        assert!(
            t < 2_000_000_000,
            "stalled at {recvd}/{msgs} received, {sent} sent"
        );
        for n in 0..2 {
            if n == 1 && t % period >= on {
                continue;
            }
            let now = Instant::from_nanos(t);
            while wire[n].front().is_some_and(|p| p.0 <= t) {
                if let Some((at, from, data)) = wire[n].pop_front() {
                    nodes[n].handle_datagram(Instant::from_nanos(at), from, &data);
                }
            }
            if nodes[n].poll_timeout().is_some_and(|d| d <= now) {
                nodes[n].handle_timeout(now);
            }
            while let Some(tx) = nodes[n].poll_transmit(now, &mut buf) {
                let to = 1 - n;
                let start = free_ns[to].max(t);
                free_ns[to] = start + tx.len as u64 * 1_000_000_000 / RATE;
                let from = core::net::SocketAddr::new(addr(n).ip(), PORT + u16::from(tx.path));
                wire[to].push_back((free_ns[to] + one_way_ns, from, buf[..tx.len].to_vec()));
            }
            while let Some(c) = nodes[n].poll_completion() {
                assert!(c.error.is_none(), "{c:?}");
                if c.kind == CompKind::Recv {
                    let i = c.context;
                    assert!(
                        c.buf.as_deref() == Some(&content(i, len)[..]),
                        "message {i} corrupted"
                    );
                    recvd += 1;
                } else {
                    sent += 1;
                }
            }
        }
        t += step_ns;
    }
    (msgs * len) as f64 / (t as f64 / 1e9)
}

#[test]
fn window_covers_a_descheduled_receiver() {
    // The receiver runs 300 us of every 1 ms: a window of one network BDP
    // (20 us RTT) idles the link for most of each gap (about 36 % of the
    // link rate without the host term; about 62 % with it, the rest lost
    // while its RTT samples, inflated by the holds, read as congestion).
    let (msgs, len, on, period) = (24, 256 << 10, 300_000, 1_000_000);
    let bw = duty_cycled(|_| {}, msgs, len, on, period);
    let bw_blind = duty_cycled(|c| c.max_host_delay = Duration::ZERO, msgs, len, on, period);
    println!(
        "SCENARIO|receiver scheduled 30 % of the time, 10 Gbit/s|{:.0} MB/s ({:.0} MB/s not counting host delay)|>= 55 % of link",
        bw / 1e6,
        bw_blind / 1e6
    );
    assert!(bw >= 0.55 * RATE as f64, "{:.0} MB/s", bw / 1e6);
}
