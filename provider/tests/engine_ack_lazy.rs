//! Lazy acks: an inject (no CQ entry, no counter) completes nothing that
//! anyone waits for, so its DATA carries LAZY and the receiver may hold the
//! ack up to `ack_lazy`, for the next message to that peer to carry it. In
//! the exchanges of a collective among 4 ranks on 2 CPUs (Intel MPI's 4 KiB
//! Alltoall and Allreduce across 4 hosts), the acks held only `ack_soon`
//! went as about 7 pure ACKs a rank per operation, each a send call on one
//! host and a receive call on another.

use core::time::Duration;

use spray::msg::{CompKind, Completion, RecvFlags, RecvOp, SendOp};
use spray::sim::{addr, LinkSpec, Sim};
use spray::time::Instant;
use spray::{Config, Engine, EpMode, PeerId};

type Node = Engine<Vec<u8>>;

/// One-way delay of each of the 4 paths.
const DELAY: Duration = Duration::from_micros(20);

/// Rounds of an all-to-all before its acks are counted: a young peer's
/// credit ramps (one packet more per packet received, up to the credit
/// budget of 64 packets, against an incast of new senders), and its acks
/// are not held lazily meanwhile: the sender's next packets wait for them.
const WARM: u64 = 40;

/// The lazy hold under test (the default).
const LAZY: Duration = Duration::from_micros(500);

fn net(n: usize, link: LinkSpec, seed: u64) -> Sim<Node> {
    let nodes = (0..n)
        .map(|i| {
            let mut c = Config::new(EpMode::Rdm, addr(i));
            c.paths = 4;
            c.nonce = 700 + i as u64;
            c.seed = seed ^ i as u64;
            c.ack_delay = Duration::from_micros(20);
            c.ack_lazy = LAZY;
            Engine::new(c)
        })
        .collect();
    Sim::new(seed, nodes, vec![link; 4])
}

/// An inject as the provider posts it: no CQ entry, completes on its acks,
/// `lazy` as the provider sets it when no counter is bound.
fn inject(e: &mut Node, to: PeerId, len: usize, fill: u8, lazy: bool) {
    e.post_send(SendOp {
        peer: to,
        buf: vec![fill; len],
        tag: Some(9),
        data: None,
        context: 0,
        report: false,
        delivery_complete: true,
        lazy,
    })
    .unwrap();
}

fn recv(e: &mut Node, from: PeerId, len: usize, context: u64) {
    e.post_recv(RecvOp {
        src: Some(from),
        buf: vec![0; len],
        tag: Some((9, 0)),
        context,
        flags: RecvFlags::default(),
        report: true,
    })
    .unwrap();
}

/// Step until node `i` has `n` receive completions in `got`, each checked
/// to hold `fill(context)` throughout.
fn until(
    sim: &mut Sim<Node>,
    i: usize,
    n: usize,
    got: &mut Vec<Completion<Vec<u8>>>,
    fill: impl Fn(u64) -> u8,
    seed: u64,
) {
    let limit = sim.now + Duration::from_secs(2);
    loop {
        while let Some(c) = sim.nodes[i].poll_completion() {
            assert!(c.error.is_none(), "seed {seed}: {c:?}");
            if c.kind == CompKind::Send {
                // An inject's (not reported to the application).
                continue;
            }
            let want = fill(c.context);
            let buf = c.buf.as_deref().unwrap_or(&[]);
            assert!(
                c.len > 0 && buf[..c.len].iter().all(|&b| b == want),
                "seed {seed}: node {i} context {} holds wrong bytes",
                c.context
            );
            got.push(c);
        }
        if got.len() >= n {
            return;
        }
        assert!(
            sim.step(limit),
            "seed {seed}: node {i} stalled with {} of {n}",
            got.len()
        );
    }
}

fn pure_acks(sim: &Sim<Node>) -> u64 {
    sim.nodes.iter().map(|n| n.srd_stats().tx_acks).sum()
}

/// Four nodes, each injecting `len` bytes to each other one, then waiting
/// for its 3 receives and `gap` of computation, `rounds` times: pure ACKs
/// in the rounds after the first `WARM`, and the median round.
fn all_to_all(lazy: bool, len: usize, rounds: u64, gap: Duration, seed: u64) -> (u64, Duration) {
    let n = 4;
    let mut sim = net(n, LinkSpec::ideal(DELAY), seed);
    let peers: Vec<Vec<PeerId>> = (0..n)
        .map(|i| (0..n).map(|j| sim.nodes[i].peer(addr(j))).collect())
        .collect();
    let fill = |from: usize, r: u64| (r as u8).wrapping_mul(4).wrapping_add(from as u8);
    let (mut before, mut times) = (0, Vec::new());
    for r in 0..rounds {
        if r == WARM {
            before = pure_acks(&sim);
        }
        let start = sim.now;
        for (i, to) in peers.iter().enumerate() {
            for (j, &p) in to.iter().enumerate().filter(|&(j, _)| j != i) {
                // The context names the sender, so the check knows its bytes.
                recv(&mut sim.nodes[i], p, len, r * 8 + j as u64);
                inject(&mut sim.nodes[i], p, len, fill(i, r), lazy);
            }
        }
        for i in 0..n {
            let mut got = Vec::new();
            until(
                &mut sim,
                i,
                n - 1,
                &mut got,
                |c| fill((c % 8) as usize, c / 8),
                seed,
            );
        }
        times.push(sim.now - start);
        let limit = sim.now + gap;
        while sim.step(limit) {}
    }
    times.sort();
    (pure_acks(&sim) - before, times[times.len() / 2])
}

/// The acks of an all-to-all of injects ride on the next round's data
/// instead of leaving as pure ACKs, and the rounds take no longer.
#[test]
fn an_all_to_all_of_injects_sends_few_pure_acks() {
    let (rounds, gap) = (65, Duration::from_micros(100));
    // 2 and 3 packets a flow a round: at least 80 before the count starts.
    for len in [2048, 4096] {
        let (lazy_acks, lazy_t) = all_to_all(true, len, rounds, gap, 11);
        let (soon_acks, soon_t) = all_to_all(false, len, rounds, gap, 11);
        println!(
            "all-to-all of 4 x {len} B injects, {} rounds 100 us apart: {lazy_acks} pure acks \
             (lazy), {soon_acks} (acked soon); median round {lazy_t:?} vs {soon_t:?}",
            rounds - WARM
        );
        // 12 flows: without lazy acks each flow's ack of each round leaves
        // on its own (the next round is 100 us away): the count can fail.
        assert!(
            soon_acks >= 12 * (rounds - WARM) / 2,
            "{soon_acks} pure acks"
        );
        // At most one flow in 20 rounds leaves its ack on its own.
        assert!(
            lazy_acks * 20 <= soon_acks,
            "{lazy_acks} pure acks in {} rounds",
            rounds - WARM
        );
        assert!(
            lazy_t <= soon_t + Duration::from_micros(5),
            "{lazy_t:?} vs {soon_t:?}"
        );
    }
}

/// When no message comes back, the lazy ack leaves on its own after the
/// lazy hold (the sender frees its copy), and not before the ack delay; a
/// send that is not lazy is acknowledged within `ack_soon`.
#[test]
fn a_lone_inject_is_acked_after_the_lazy_hold() {
    for lazy in [true, false] {
        let mut sim = net(2, LinkSpec::ideal(DELAY), 5);
        let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
        // First 100 messages (past the credit ramp), acked.
        let mut got = Vec::new();
        for c in 0..100 {
            recv(&mut sim.nodes[1], p10, 64, c);
            inject(&mut sim.nodes[0], p01, 64, c as u8, lazy);
        }
        until(&mut sim, 1, 100, &mut got, |c| c as u8, 5);
        let limit = sim.now + Duration::from_millis(5);
        while sim.step(limit) {}
        let acks = sim.nodes[1].srd_stats().tx_acks;
        recv(&mut sim.nodes[1], p10, 64, 100);
        inject(&mut sim.nodes[0], p01, 64, 100, lazy);
        until(&mut sim, 1, 101, &mut got, |c| c as u8, 5);
        let arrived = sim.now;
        // Step in 10 us slices until node 1 sends its ack.
        let mut acked: Option<Instant> = None;
        let end = arrived + Duration::from_millis(3);
        while sim.now < end && acked.is_none() {
            let limit = sim.now + Duration::from_micros(10);
            while sim.step(limit) {}
            if sim.nodes[1].srd_stats().tx_acks > acks {
                acked = Some(sim.now);
            }
        }
        let held = acked.expect("the ack never left") - arrived;
        println!("lone inject (lazy: {lazy}): acknowledged {held:?} after it arrived");
        if lazy {
            assert!(held >= Duration::from_micros(400), "{held:?}");
            assert!(held <= LAZY + Duration::from_micros(20), "{held:?}");
        } else {
            assert!(held <= Duration::from_micros(20), "{held:?}");
        }
        // Nothing outstanding, nothing resent.
        let s = sim.nodes[0].srd_stats();
        assert_eq!(s.retransmits, 0, "lazy {lazy}: {s:?}");
        assert_eq!(s.timeouts, 0, "lazy {lazy}: {s:?}");
    }
}

/// Lost lazy packets, the last of a message among them, are repaired and
/// every byte arrives; the sender's timers wait for the lazy hold, so
/// without loss no probe or copy goes out for want of an ack.
#[test]
fn lazy_injects_arrive_intact_through_loss() {
    for seed in 1..=6u64 {
        let loss = if seed <= 3 { 0.0 } else { 0.05 };
        let mut link = LinkSpec::ideal(DELAY);
        link.loss = loss;
        link.jitter = Duration::from_micros(5);
        let mut sim = net(2, link, seed);
        let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
        let rounds = 40u64;
        let mut got = Vec::new();
        for r in 0..rounds {
            // A one-way train of 3 messages, then a pause: the tail's ack
            // has no reply to ride on.
            for k in 0..3 {
                let c = r * 3 + k;
                recv(&mut sim.nodes[1], p10, 4096, c);
                inject(&mut sim.nodes[0], p01, 4096, c as u8, true);
            }
            until(
                &mut sim,
                1,
                (3 * (r + 1)) as usize,
                &mut got,
                |c| c as u8,
                seed,
            );
            let limit = sim.now + Duration::from_micros(300);
            while sim.step(limit) {}
        }
        let limit = sim.now + Duration::from_millis(20);
        while sim.step(limit) {}
        let s = sim.nodes[0].srd_stats();
        println!(
            "seed {seed}, loss {loss}: {} messages intact; sender: {} retransmits, {} tail probes, \
             {} hedges, {} timeouts, {} in flight at the end",
            got.len(),
            s.retransmits,
            s.tail_probes,
            s.tail_hedges,
            s.timeouts,
            sim.nodes[0].peer_stats().iter().map(|p| p.bytes_in_flight).sum::<u64>()
        );
        if loss == 0.0 {
            assert_eq!(s.retransmits, 0, "seed {seed}: {s:?}");
            assert_eq!(s.tail_probes, 0, "seed {seed}: {s:?}");
        } else {
            assert!(s.retransmits > 0, "seed {seed}: nothing was lost?");
        }
        assert_eq!(s.failed, 0, "seed {seed}: {s:?}");
    }
}

/// A one-way burst of `n` injects of `len` bytes posted `spacing` apart
/// (more packets than the initial window): the time until all arrived.
fn burst(lazy: bool, n: u64, len: usize, spacing: Duration, seed: u64) -> Duration {
    let mut sim = net(2, LinkSpec::ideal(DELAY), seed);
    let (p01, p10) = (sim.nodes[0].peer(addr(1)), sim.nodes[1].peer(addr(0)));
    // Session set up and the credit ramp done first (`WARM`).
    let mut got = Vec::new();
    for c in 0..100 {
        recv(&mut sim.nodes[1], p10, len, c);
        inject(&mut sim.nodes[0], p01, len, c as u8, lazy);
    }
    until(&mut sim, 1, 100, &mut got, |c| c as u8, seed);
    let limit = sim.now + Duration::from_millis(5);
    while sim.step(limit) {}
    let start = sim.now;
    for c in 100..100 + n {
        recv(&mut sim.nodes[1], p10, len, c);
        inject(&mut sim.nodes[0], p01, len, c as u8, lazy);
        let limit = sim.now + spacing;
        while sim.step(limit) {}
    }
    until(&mut sim, 1, n as usize + 100, &mut got, |c| c as u8, seed);
    sim.now - start
}

/// A sender whose burst outgrows its window waits for acks to send the
/// rest: the receiver acks lazy packets every `ack_every` as it does others
/// (a lazy flight end is no reason to wait), so the burst is not held up
/// by the lazy hold once per window.
#[test]
fn a_burst_of_injects_larger_than_the_window_is_not_held() {
    let (n, len) = (300, 1024);
    // At once (the layer above queues them: MORE), and 1 us apart (each
    // message its sender's flight end as it leaves, until the window fills).
    for spacing in [Duration::ZERO, Duration::from_micros(1)] {
        let lazy = burst(true, n, len, spacing, 3);
        let soon = burst(false, n, len, spacing, 3);
        println!(
            "{n} injects of {len} B posted {spacing:?} apart: {lazy:?} lazy, \
             {soon:?} acked soon"
        );
        assert!(
            lazy <= soon + Duration::from_micros(50),
            "{lazy:?} vs {soon:?}"
        );
    }
}
