//! An endpoint that has met many peers (an MPI rank knows every other rank)
//! but talks to one: the SRD core's per-call work (`poll_transmit`,
//! `handle_timeout`, `poll_timeout`) must follow the peers in use, not all
//! of them. Engine A exchanges a few messages with each of `IDLE` other
//! engines, lets them go quiet, then ping-pongs with engine B; the SRD's
//! `peer_polls` counter (peers visited by `poll_transmit` and
//! `handle_timeout`) per round trip must stay small, and every peer must
//! still be served: a late message to an idle peer arrives, and one from it
//! too. Also prints the engine's CPU per round trip with 0 and `IDLE` idle
//! peers (`--nocapture`), a benchmark, not a check.

use core::net::SocketAddr;
use core::time::Duration;
use std::time::Instant as Wall;

use spray::msg::{CompKind, RecvFlags, RecvOp, SendOp};
use spray::time::Instant;
use spray::{Config, Engine, EpMode, PeerId};

const IDLE: usize = 256;

type E = Engine<Vec<u8>>;

fn engine(k: usize) -> (E, SocketAddr) {
    let addr: SocketAddr = format!("10.9.{}.{}:7000", k / 250, k % 250 + 1)
        .parse()
        .unwrap();
    let mut cfg = Config::new(EpMode::Rdm, addr);
    cfg.nonce = 100 + k as u64;
    cfg.seed = k as u64;
    (Engine::new(cfg), addr)
}

fn recv(e: &mut E, from: PeerId, r: u64) {
    let op = RecvOp {
        src: Some(from),
        buf: vec![0; 8],
        tag: Some((7, 0)),
        context: r,
        flags: RecvFlags::default(),
        report: true,
    };
    e.post_recv(op).expect("post recv");
}

fn send(e: &mut E, to: PeerId, r: u64) {
    let op = SendOp {
        peer: to,
        buf: r.to_le_bytes().to_vec(),
        tag: Some(7),
        data: None,
        context: r,
        report: true,
        delivery_complete: true,
        lazy: false,
    };
    e.post_send(op).expect("post send");
}

/// The engines and their addresses: 0 = A, 1 = B, the rest idle peers.
struct Net {
    e: Vec<E>,
    addr: Vec<SocketAddr>,
    wire: Vec<u8>,
}

impl Net {
    /// Run timers due at `now` and carry every packet to its engine until
    /// all are quiet.
    fn settle(&mut self, now: Instant) {
        let all: Vec<usize> = (0..self.e.len()).collect();
        self.settle_among(&all, now);
    }

    /// `settle` for the engines `which` (the others must have nothing to send).
    fn settle_among(&mut self, which: &[usize], now: Instant) {
        for _ in 0..100 {
            let mut moved = false;
            for &i in which {
                if self.e[i].poll_timeout().is_some_and(|t| t <= now) {
                    self.e[i].handle_timeout(now);
                }
                while let Some(t) = self.e[i].poll_transmit(now, &mut self.wire) {
                    let to = self.addr.iter().position(|a| *a == t.dst).expect("known");
                    let from = self.addr[i];
                    let len = t.len;
                    let pkt = self.wire[..len].to_vec();
                    self.e[to].handle_datagram(now, from, &pkt);
                    moved = true;
                }
            }
            if !moved {
                return;
            }
        }
        panic!("packets still moving after 100 rounds");
    }

    /// Completions of engine `i`, checked: sends and receives of `r`.
    fn expect(&mut self, i: usize, kind: CompKind, r: u64) {
        let c = self.e[i].poll_completion().expect("a completion");
        assert_eq!((c.kind, c.context), (kind, r), "engine {i}");
        assert!(c.error.is_none(), "engine {i} round {r}: {:?}", c.error);
        if kind == CompKind::Recv {
            assert_eq!(c.buf.as_deref(), Some(&r.to_le_bytes()[..]), "engine {i}");
        }
    }

    /// One message `r` from engine `i` to `j` (peer ids `pj` at i, `pi` at j):
    /// `j` receives it intact (other completions of `j` are dropped).
    fn message(&mut self, i: usize, j: usize, pi: PeerId, pj: PeerId, r: u64, now: Instant) {
        recv(&mut self.e[j], pi, r);
        send(&mut self.e[i], pj, r);
        self.settle(now);
        let mut got = false;
        while let Some(c) = self.e[j].poll_completion() {
            if c.kind == CompKind::Recv {
                assert_eq!(c.context, r, "engine {j}");
                assert!(c.error.is_none(), "engine {j}: {:?}", c.error);
                assert_eq!(c.buf.as_deref(), Some(&r.to_le_bytes()[..]), "engine {j}");
                got = true;
            }
        }
        assert!(got, "message {r} from engine {i} did not reach engine {j}");
    }
}

/// Ping-pong A <-> B after A met `idle` other peers; returns (peer polls per
/// round trip, engine CPU ns per round trip).
fn run(idle: usize, rounds: u64) -> (f64, f64) {
    let (e, addr): (Vec<E>, Vec<SocketAddr>) = (0..idle + 2).map(engine).unzip();
    let mut net = Net {
        e,
        addr,
        wire: vec![0; 65536],
    };
    let mut t = 1_000_000u64;
    let mut tick = |d: u64| {
        t += d;
        Instant::from_nanos(t)
    };
    // A meets every peer: a message each way.
    let mut at_a = Vec::new();
    for k in 1..idle + 2 {
        let (pk, pa) = (net.e[0].peer(net.addr[k]), net.e[k].peer(net.addr[0]));
        at_a.push((pk, pa));
        let now = tick(10_000);
        net.message(0, k, pa, pk, k as u64, now);
        net.message(k, 0, pk, pa, k as u64, now);
    }
    // Everyone goes quiet: delayed acks and every other timer run out.
    for _ in 0..3 {
        let now = tick(2_000_000_000);
        net.settle(now);
    }
    for e in &mut net.e {
        while e.poll_completion().is_some() {}
    }
    let (pb, pa) = at_a[0];
    let polls0 = net.e[0].srd_stats().peer_polls;
    let start = Wall::now();
    for r in 0..rounds {
        let now = tick(10_000);
        recv(&mut net.e[1], pa, r);
        recv(&mut net.e[0], pb, r);
        send(&mut net.e[0], pb, r);
        net.settle_among(&[0, 1], now);
        // B's previous send completes on the ack riding on this message.
        if r > 0 {
            net.expect(1, CompKind::Send, r - 1);
        }
        net.expect(1, CompKind::Recv, r);
        send(&mut net.e[1], pa, r);
        net.settle_among(&[0, 1], now);
        net.expect(0, CompKind::Send, r);
        net.expect(0, CompKind::Recv, r);
    }
    let ns = start.elapsed().as_nanos() as f64 / rounds as f64;
    let polls = (net.e[0].srd_stats().peer_polls - polls0) as f64 / rounds as f64;
    // The idle peers are still served: one message to the last, one back.
    if idle > 0 {
        let (pk, pa) = at_a[idle];
        let now = tick(10_000);
        net.message(0, idle + 1, pa, pk, 9_999, now);
        net.message(idle + 1, 0, pk, pa, 9_999, now);
        let now = tick(Duration::from_millis(1).as_nanos() as u64);
        net.settle(now);
    }
    (polls, ns)
}

#[test]
fn work_per_message_follows_the_peers_in_use() {
    let (p0, ns0) = run(0, 2_000);
    let (p, ns) = run(IDLE, 2_000);
    println!(
        "engine ping-pong (both engines, packets carried in memory): \
         0 idle peers {ns0:.0} ns, {p0:.1} peer polls per round trip; \
         {IDLE} idle peers {ns:.0} ns, {p:.1} peer polls per round trip"
    );
    assert!(
        p <= p0 + 2.0,
        "{p:.1} peer polls per round trip with {IDLE} idle peers ({p0:.1} with none)"
    );
}
