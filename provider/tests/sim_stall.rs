//! A receiver process that stops running for a while (a busy host
//! deschedules it: 0.3-0.8 s seen on the 2-CPU testbed) must not make its
//! senders time out: nothing was lost, the packets wait in its socket. The
//! retransmission timer asks a silent peer with a PROBE instead of resending
//! (`Peer::on_rto_timer`); a peer that answers without acking the flight
//! (it really lost it) still gets the RTO. `SPRAY_VERBOSE=1` prints the runs.

use core::net::SocketAddr;
use core::time::Duration;
use std::collections::VecDeque;

use spray::sim::check::{check_pair, config, payload};
use spray::sim::{addr, Link, LinkSpec, Node, Sim, SrdNode};
use spray::srd::Transmit;
use spray::time::Instant;

/// Datagrams a resumed process reads per round (the FFI's batched receive)
/// before its timers run and it transmits...
const BATCH: usize = 32;
/// ... and the time one round takes.
const ROUND: Duration = Duration::from_micros(30);

/// An `SrdNode` whose process is off the CPU during `[from, until)`: what
/// arrives meanwhile waits (as in a socket buffer); back on the CPU it reads
/// that backlog in rounds of `BATCH` with the arrival times (the kernel
/// timestamps the FFI reads), running its timers and transmitting between
/// rounds, so what it says early on (acks, grants) reflects only part of
/// the backlog. No timer runs and nothing is sent during the stall.
struct Stalling {
    inner: SrdNode,
    from: Instant,
    until: Instant,
    held: VecDeque<(Instant, SocketAddr, Vec<u8>)>,
    next_round: Instant,
}

impl Stalling {
    fn stalled(&self, now: Instant) -> bool {
        now >= self.from && now < self.until
    }

    /// One receive round of the backlog, if one is due.
    fn read_round(&mut self, now: Instant) {
        if self.held.is_empty() || now < self.next_round {
            return;
        }
        for _ in 0..BATCH {
            let Some((at, from, data)) = self.held.pop_front() else {
                break;
            };
            self.inner.handle_datagram(at, from, &data);
        }
        self.next_round = now + ROUND;
    }
}

impl Node for Stalling {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        if self.stalled(now) || !self.held.is_empty() {
            // Behind the backlog in the socket.
            self.held.push_back((now, from, data.to_vec()));
            return;
        }
        self.inner.handle_datagram(now, from, data);
    }
    fn handle_timeout(&mut self, now: Instant) {
        if self.stalled(now) {
            return;
        }
        self.read_round(now);
        if self.inner.poll_timeout().is_some_and(|t| t <= now) {
            self.inner.handle_timeout(now);
        }
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if self.stalled(now) {
            return None;
        }
        self.inner.poll_transmit(now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        let t = self.inner.poll_timeout();
        let t = match t {
            // A timer due during the stall runs when it ends.
            Some(t) if t >= self.from && t < self.until => Some(self.until),
            t => t,
        };
        if self.held.is_empty() {
            return t;
        }
        let round = self.next_round.max(self.until);
        Some(t.map_or(round, |t| t.min(round)))
    }
}

/// What a run produced.
#[derive(Debug)]
struct Outcome {
    timeouts: u64,
    stall_probes: u64,
    tail_probes: u64,
    tail_asks: u64,
    /// Copies the receiver got twice (spurious resends).
    duplicates: u64,
    fct_ms: f64,
}

/// `senders` senders of `per_sender` 1400-byte datagrams into one receiver
/// behind a 200 Mbit/s, 64 KiB bottleneck (the testbed's incast), the
/// receiver stalled for `stall` from `stall_at` after the burst starts.
/// With `down` the receiver is instead down (everything sent meanwhile is
/// lost) for that time, then back with its state: a real loss.
fn run(
    seed: u64,
    senders: usize,
    per_sender: u64,
    stall_at: Duration,
    stall: Duration,
    down: bool,
) -> Outcome {
    let rx = senders;
    let paths = 4u8;
    let nodes: Vec<Stalling> = (0..=senders)
        .map(|i| {
            let mut c = config(i, paths, 300 + i as u64);
            c.rx_credit_packets = 32;
            Stalling {
                inner: SrdNode::new(&c),
                from: Instant::ZERO,
                until: Instant::ZERO,
                held: VecDeque::new(),
                next_round: Instant::ZERO,
            }
        })
        .collect();
    let mut spec = LinkSpec::ideal(Duration::from_micros(20));
    spec.bandwidth = 125_000_000;
    spec.jitter = Duration::from_micros(5);
    let mut sim = Sim::new(seed, nodes, vec![spec; usize::from(paths)]);
    let mut b = LinkSpec::ideal(Duration::ZERO);
    b.bandwidth = 25_000_000;
    b.buffer = 65_536;
    sim.bottleneck[rx] = Some(Link::new(b));
    // Warm-up (the traffic tool's first message), then the burst.
    for s in 0..senders {
        sim.nodes[s].inner.push(addr(rx), 0, payload(0, 8));
    }
    let warm = |sim: &Sim<Stalling>| (0..senders).all(|s| sim.nodes[s].inner.acked().count() == 1);
    assert!(
        sim.run_until(Instant::from_nanos(100_000_000), warm),
        "seed {seed}: warm-up"
    );
    let start = sim.now + Duration::from_millis(2);
    sim.run_until(start, |_| false);
    let start = sim.now;
    let base: Vec<(u64, u64, u64, u64)> = (0..senders)
        .map(|s| {
            let x = sim.nodes[s].inner.srd.stats();
            (x.timeouts, x.stall_probes, x.tail_probes, x.tail_asks)
        })
        .collect();
    let dup_base = sim.nodes[rx].inner.srd.stats().rx_duplicates;
    for s in 0..senders {
        for t in 1..=per_sender {
            sim.nodes[s].inner.push(addr(rx), t, payload(t, 1400));
        }
    }
    if down {
        sim.run_until(start + stall_at, |_| false);
        sim.down[rx] = true;
        sim.run_until(start + stall_at + stall, |_| false);
        sim.down[rx] = false;
    } else {
        sim.nodes[rx].from = start + stall_at;
        sim.nodes[rx].until = start + stall_at + stall;
    }
    let done = |sim: &Sim<Stalling>| {
        (0..senders).all(|s| sim.nodes[s].inner.acked().count() as u64 == per_sender + 1)
    };
    if std::env::var("SPRAY_VERBOSE").is_ok() {
        for k in 1..=60u64 {
            sim.run_until(start + Duration::from_millis(5 * k), |_| false);
            let acked: usize = (0..senders)
                .map(|s| sim.nodes[s].inner.acked().count())
                .sum();
            eprintln!(
                "t {} ms acked {acked} backlog {} s0: {}",
                5 * k,
                sim.nodes[rx].held.len(),
                sim.nodes[0].inner.srd.debug_peer(spray::PeerId(0))
            );
        }
    }
    let finished = sim.run_until(start + Duration::from_secs(20), done);
    assert!(finished, "seed {seed}: did not finish");
    let mut o = Outcome {
        timeouts: 0,
        stall_probes: 0,
        tail_probes: 0,
        tail_asks: 0,
        duplicates: sim.nodes[rx].inner.srd.stats().rx_duplicates - dup_base,
        fct_ms: 0.0,
    };
    for (s, b) in base.iter().enumerate() {
        let x = sim.nodes[s].inner.srd.stats();
        o.timeouts += x.timeouts - b.0;
        o.stall_probes += x.stall_probes - b.1;
        o.tail_probes += x.tail_probes - b.2;
        o.tail_asks += x.tail_asks - b.3;
        let last = sim.nodes[s]
            .inner
            .events
            .iter()
            .map(|(t, _)| t.as_nanos())
            .max()
            .unwrap_or(0);
        o.fct_ms = o
            .fct_ms
            .max(last.saturating_sub(start.as_nanos()) as f64 / 1e6);
    }
    // Delivery checked on the inner nodes (exactly once, intact).
    let inner: Vec<SrdNode> = core::mem::take(&mut sim.nodes)
        .into_iter()
        .map(|n| n.inner)
        .collect();
    let check = Sim::new(seed, inner, Vec::new());
    for s in 0..senders {
        check_pair(&check, s, rx, per_sender + 1).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    if std::env::var("SPRAY_VERBOSE").is_ok() {
        eprintln!(
            "{senders} senders, stall {stall:?} at {stall_at:?} down {down} seed {seed}: {o:?}"
        );
    }
    o
}

/// Ideal time for `senders` x `per_sender` packets at 200 Mbit/s, ms.
fn ideal_ms(senders: usize, per_sender: u64) -> f64 {
    senders as f64 * per_sender as f64 * 1448.0 / 25_000_000.0 * 1e3
}

/// Fan-in (32 senders, scheduled by the receiver): a 100 ms stall, longer
/// than the fan-in RTO floor (32 ms), costs no timeout. On main: 30+ RTOs.
#[test]
fn receiver_stall_fan_in_no_rto() {
    for seed in [11u64, 12] {
        let o = run(
            seed,
            32,
            40,
            Duration::from_millis(10),
            Duration::from_millis(100),
            false,
        );
        assert_eq!(o.timeouts, 0, "seed {seed}: {o:?}");
        assert!(
            o.stall_probes > 0,
            "seed {seed}: the stall did not reach the timers: {o:?}"
        );
        // The stall is lost time, and the first round trip after it
        // overflows the bottleneck (the receiver, reading its backlog with
        // old timestamps, grants generously): ~80 ms more, the same with or
        // without stall probes (256 ms on main).
        assert!(
            o.fct_ms <= ideal_ms(32, 40) * 1.2 + 100.0 + 100.0,
            "seed {seed}: {o:?}"
        );
    }
}

/// Fan-in, a stall longer than the fan-in tail-loss-probe wait (4 ms) but
/// shorter than the RTO: every sender's tail probe fires while its packet
/// waits in the receiver's socket. Held to a packet or two, the senders ask
/// (a 48-byte PROBE) instead of resending: no copy reaches the receiver
/// twice, where a resent copy each came back as 32-64 duplicates (and
/// overflowed the bottleneck behind the backlog).
#[test]
fn receiver_stall_fan_in_tail_asks_no_copies() {
    for seed in [13u64, 14] {
        let o = run(
            seed,
            32,
            40,
            Duration::from_millis(10),
            Duration::from_millis(12),
            false,
        );
        assert_eq!(o.timeouts, 0, "seed {seed}: {o:?}");
        assert!(
            o.tail_asks >= 16,
            "seed {seed}: the stall did not reach the tail probes: {o:?}"
        );
        assert!(o.duplicates <= 2, "seed {seed}: {o:?}");
        assert!(
            o.fct_ms <= ideal_ms(32, 40) * 1.2 + 12.0 + 20.0,
            "seed {seed}: {o:?}"
        );
    }
}

/// Few senders (credit of several packets each: the 2 ms RTO floor, not the
/// fan-in one): a 40 ms stall costs no timeout either.
#[test]
fn receiver_stall_few_senders_no_rto() {
    for seed in [21u64, 22] {
        let o = run(
            seed,
            4,
            300,
            Duration::from_millis(20),
            Duration::from_millis(40),
            false,
        );
        assert_eq!(o.timeouts, 0, "seed {seed}: {o:?}");
        assert!(o.stall_probes > 0, "seed {seed}: {o:?}");
        assert!(
            o.fct_ms <= ideal_ms(4, 300) * 1.2 + 50.0,
            "seed {seed}: {o:?}"
        );
    }
}

/// A receiver that was down (everything sent meanwhile lost) answers the
/// stall probe without acking the flight: the RTO repairs it at once.
#[test]
fn receiver_down_still_repaired() {
    for seed in [31u64, 32] {
        let o = run(
            seed,
            8,
            100,
            Duration::from_millis(10),
            Duration::from_millis(60),
            true,
        );
        assert!(
            o.timeouts > 0,
            "seed {seed}: the loss was not taken for one: {o:?}"
        );
        assert!(
            o.fct_ms <= ideal_ms(8, 100) + 60.0 + 150.0,
            "seed {seed}: {o:?}"
        );
    }
}
