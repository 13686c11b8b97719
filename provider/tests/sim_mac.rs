//! Issue 17, optional authentication: endpoints with a job key MAC every
//! packet. A keyed mesh works under loss, duplication and reordering; an
//! on-path attacker who sees every packet (so knows every nonce and token)
//! but not the key gets nothing in: forged packets, bit flips in header,
//! tag or payload, replays within the session and into a later session are
//! dropped and counted, and the session runs on; keyed and unkeyed (or
//! differently keyed) endpoints refuse each other cleanly.

use core::time::Duration;

use spray::config::AuthKey;
use spray::dgram::{DgramEvent, FailReason};
use spray::rng::Rng;
use spray::sim::check::{config, payload, token_of};
use spray::sim::{addr, LinkSpec, Node, Sim, SrdNode};
use spray::time::Instant;
use spray::wire::srd::{flags, Packet, PacketType, Repr, HEADER_LEN, TAG_LEN};
use spray::Config;

fn keyed(i: usize, paths: u8, nonce: u64, key: &[u8]) -> Config {
    let mut c = config(i, paths, nonce);
    c.auth_key = Some(AuthKey(key.to_vec()));
    c
}

/// Every host of a 4-host mesh, all with one job key, sends 150 datagrams
/// to every other over lossy, duplicating, jittery paths: exactly once,
/// intact, nothing refused for its MAC.
#[test]
fn keyed_mesh_under_loss_duplication_and_reordering() {
    let hosts = 4usize;
    let n = 150u64;
    for seed in 0..12u64 {
        let mut spec = LinkSpec::ideal(Duration::from_micros(20));
        spec.jitter = Duration::from_micros(40);
        spec.bandwidth = 1_250_000_000;
        spec.loss = 0.02 + 0.01 * (seed % 6) as f64;
        spec.dup = 0.05;
        let nodes = (0..hosts)
            .map(|i| SrdNode::new(&keyed(i, 4, 77 * seed + i as u64 + 1, b"job 42")))
            .collect();
        let mut sim = Sim::new(seed, nodes, vec![spec; 4]);
        for a in 0..hosts {
            for b in (0..hosts).filter(|&b| b != a) {
                for t in 0..n {
                    sim.nodes[a].push(addr(b), t, payload(t, 1 + (t as usize * 131) % 1400));
                }
            }
        }
        let all = |s: &Sim<SrdNode>| {
            (0..hosts).all(|i| s.nodes[i].acked().count() as u64 == n * (hosts as u64 - 1))
        };
        assert!(
            sim.run_until(Instant::from_nanos(20_000_000_000), all),
            "seed {seed}: not all acked"
        );
        for a in 0..hosts {
            for b in (0..hosts).filter(|&b| b != a) {
                let rx = &sim.nodes[b];
                let from = rx.srd.peer_addr_id(addr(a)).expect("peer");
                let mut got: Vec<u64> = rx
                    .arrived
                    .iter()
                    .filter(|x| x.peer == from)
                    .map(|x| token_of(&x.data).expect("intact"))
                    .collect();
                got.sort_unstable();
                assert_eq!(got, (0..n).collect::<Vec<_>>(), "seed {seed}: {a}->{b}");
            }
        }
        for node in &sim.nodes {
            let s = node.srd.stats();
            assert!(node.srd.keyed());
            assert_eq!(
                (s.rx_bad_mac, s.rx_mac_missing, s.rx_mac_unexpected),
                (0, 0, 0),
                "seed {seed}: {s:?}"
            );
        }
    }
}

/// What a tap sees of each packet that crosses (sender, bytes) and the
/// packets it injects before it.
type Tap<'a> = dyn FnMut(usize, &[u8]) -> Vec<Vec<u8>> + 'a;

/// A job key or none, for one endpoint.
type Key = Option<&'static [u8]>;

/// Two SRD nodes wired back to back by hand, with a tap: every packet that
/// crosses is also handed to `tap`, which may return packets to inject
/// (to the same receiver, claiming the same source) before the original.
struct Pair {
    n: [SrdNode; 2],
    now: Instant,
    buf: Vec<u8>,
}

impl Pair {
    fn new(a: Config, b: Config) -> Pair {
        Pair {
            n: [SrdNode::new(&a), SrdNode::new(&b)],
            now: Instant::ZERO,
            buf: vec![0u8; 65536],
        }
    }

    /// One round: each node sends what it has (through the tap), then 50 us
    /// pass and the timers run. `drop` decides per packet whether the
    /// network loses the original.
    fn round(&mut self, tap: &mut Tap, drop: &mut dyn FnMut() -> bool) {
        for i in 0..2 {
            while let Some(t) = self.n[i].poll_transmit(self.now, &mut self.buf) {
                let pkt = self.buf[..t.len].to_vec();
                let from = addr(i);
                for f in tap(i, &pkt) {
                    self.n[1 - i].handle_datagram(self.now, from, &f);
                }
                if !drop() {
                    self.n[1 - i].handle_datagram(self.now, from, &pkt);
                }
            }
        }
        self.now = self.now + Duration::from_micros(50);
        for n in &mut self.n {
            if n.poll_timeout().is_some_and(|t| t <= self.now) {
                n.handle_timeout(self.now);
            }
        }
    }

    fn run(
        &mut self,
        rounds: usize,
        tap: &mut Tap,
        drop: &mut dyn FnMut() -> bool,
        done: &dyn Fn(&Pair) -> bool,
    ) -> bool {
        for _ in 0..rounds {
            self.round(tap, drop);
            if done(self) {
                return true;
            }
        }
        false
    }
}

/// What an on-path attacker without the key makes of a packet it saw:
/// single bit flips in the header, the tag and the payload; a fresh DATA
/// with the session's nonce and token and a guessed tag; the same without
/// a tag; a copy of the header with its payload replaced.
fn forgeries(pkt: &[u8], rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Ok(p) = Packet::new_checked(pkt) else {
        return out;
    };
    let Ok(h) = Repr::parse(&p) else {
        return out;
    };
    // Bit flips: one in the header (not the MAC flag: that one is a
    // "no tag" packet, forged below), one in the tag, one in the payload.
    let mut flip = |lo: usize, hi: usize| {
        if hi > lo {
            let mut x = pkt.to_vec();
            let bit = lo * 8 + (rng.next_u64() as usize) % ((hi - lo) * 8);
            if bit != 2 * 8 + 7 {
                x[bit / 8] ^= 1 << (bit % 8);
                out.push(x);
            }
        }
    };
    flip(0, HEADER_LEN);
    flip(HEADER_LEN, HEADER_LEN + TAG_LEN);
    flip(HEADER_LEN + TAG_LEN, pkt.len());
    if h.ty == PacketType::Data {
        // A fresh packet in the live session: a PSN far ahead (new to the
        // receiver), its own payload, a random tag.
        let mut f = h;
        f.psn = h.psn.wrapping_add(100);
        f.psn_floor = h.psn_floor;
        f.payload_len = 40;
        let mut x = vec![0u8; f.buffer_len()];
        f.emit(&mut x).unwrap();
        for b in &mut x[HEADER_LEN..] {
            *b = rng.next_u64() as u8;
        }
        out.push(x.clone());
        // The same packet without a MAC at all.
        f.flags &= !flags::MAC;
        let mut y = vec![0u8; f.buffer_len()];
        f.emit(&mut y).unwrap();
        y[HEADER_LEN..].copy_from_slice(&x[HEADER_LEN + TAG_LEN..]);
        out.push(y);
        // The real header and tag over another payload.
        let mut z = pkt.to_vec();
        for b in &mut z[HEADER_LEN + TAG_LEN..] {
            *b ^= 0x5a;
        }
        out.push(z);
    }
    out
}

/// An on-path attacker who sees every packet of a keyed session (both
/// ways) injects forged and altered copies of each, while the network
/// also loses 3 % and the attacker replays every packet it saw before: the
/// datagrams all arrive once and intact, every forgery is counted as a bad
/// or missing MAC, and the session never notices (no restart, no failure).
#[test]
fn on_path_forgeries_and_replays_are_dropped() {
    for seed in 1..=4u64 {
        let key = b"a job key nobody else has";
        let mut pair = Pair::new(keyed(0, 2, 11 * seed, key), keyed(1, 2, 13 * seed, key));
        let n = 200u64;
        for t in 0..n {
            pair.n[0].push(addr(1), t, payload(t, 8 + (t as usize * 37) % 1300));
            pair.n[1].push(addr(0), 1000 + t, payload(1000 + t, 100));
        }
        let mut rng = Rng::new(seed);
        let mut loss = Rng::new(seed ^ 0xabc);
        let mut seen: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut forged = [0u64; 2];
        let mut tap = |from: usize, pkt: &[u8]| {
            let mut f = forgeries(pkt, &mut rng);
            forged[1 - from] += f.len() as u64;
            // Replay one packet seen earlier in this direction.
            let old: Vec<_> = seen.iter().filter(|(s, _)| *s == from).collect();
            if !old.is_empty() {
                let k = (rng.next_u64() as usize) % old.len();
                f.push(old[k].1.clone());
            }
            seen.push((from, pkt.to_vec()));
            f
        };
        let mut drop = || loss.next_u64() % 100 < 3;
        let done =
            |p: &Pair| p.n[0].acked().count() as u64 == n && p.n[1].acked().count() as u64 == n;
        assert!(
            pair.run(20_000, &mut tap, &mut drop, &done),
            "seed {seed}: not all acked: {:?} / {:?}",
            pair.n[0].srd.stats(),
            pair.n[1].srd.stats()
        );
        for (i, node) in pair.n.iter().enumerate() {
            let base = if i == 1 { 0 } else { 1000 };
            let mut got: Vec<u64> = node
                .arrived
                .iter()
                .map(|a| {
                    token_of(&a.data).unwrap_or_else(|| panic!("seed {seed}: corrupt delivery"))
                })
                .collect();
            got.sort_unstable();
            assert_eq!(
                got,
                (base..base + n).collect::<Vec<_>>(),
                "seed {seed}: node {i}"
            );
            let s = node.srd.stats();
            assert_eq!((s.peer_restarts, s.failed), (0, 0), "seed {seed}: {s:?}");
            // Every forgery was refused for its MAC, none for anything else
            // it could pass (a forgery that flips the token or nonce is
            // refused before its MAC is looked at).
            let refused =
                s.rx_bad_mac + s.rx_mac_missing + s.rx_bad_token + s.rx_no_session + s.rx_malformed;
            assert!(
                refused >= forged[i] * 9 / 10,
                "seed {seed}: {refused} of {}: {s:?}",
                forged[i]
            );
            assert!(s.rx_bad_mac > forged[i] / 2, "seed {seed}: {s:?}");
            assert!(s.rx_mac_missing > 0, "seed {seed}: {s:?}");
            assert!(s.rx_duplicates > 0, "replays are duplicates: {s:?}");
        }
    }
}

/// Packets recorded in one session, replayed into the next session of the
/// same two addresses (the sender restarted: new nonce, same job key), are
/// refused, and nothing of them is delivered again.
#[test]
fn replays_into_a_later_session_are_refused() {
    let key = b"job";
    let mut pair = Pair::new(keyed(0, 1, 5, key), keyed(1, 1, 6, key));
    for t in 0..20u64 {
        pair.n[0].push(addr(1), t, payload(t, 64));
    }
    let mut recorded = Vec::new();
    let mut tap = |from: usize, pkt: &[u8]| {
        if from == 0 {
            recorded.push(pkt.to_vec());
        }
        Vec::new()
    };
    let done = |p: &Pair| p.n[0].acked().count() == 20;
    assert!(pair.run(2000, &mut tap, &mut || false, &done));
    // Host 0 restarts (same address, new nonce) and opens a new session.
    pair.n[0] = SrdNode::new(&keyed(0, 1, 99, key));
    for t in 100..105u64 {
        pair.n[0].push(addr(1), t, payload(t, 64));
    }
    let done = |p: &Pair| p.n[0].acked().count() == 5;
    assert!(pair.run(2000, &mut |_, _| Vec::new(), &mut || false, &done));
    let before = pair.n[1].arrived.len();
    assert_eq!(before, 25);
    let s0 = pair.n[1].srd.stats().clone();
    for r in &recorded {
        let now = pair.now;
        pair.n[1].handle_datagram(now, addr(0), r);
    }
    let s = pair.n[1].srd.stats();
    assert_eq!(pair.n[1].arrived.len(), before, "a replay was delivered");
    let refused = (s.rx_bad_mac + s.rx_bad_token + s.rx_stale_src + s.rx_no_session)
        - (s0.rx_bad_mac + s0.rx_bad_token + s0.rx_stale_src + s0.rx_no_session);
    // A replayed HELLO is answered (statelessly, as any HELLO); everything
    // else is refused.
    let hellos = recorded
        .iter()
        .filter(|r| r[1] == PacketType::Hello as u8)
        .count() as u64;
    assert_eq!(refused, recorded.len() as u64 - hellos, "{s:?}");
    assert_eq!(s.tx_challenges, s0.tx_challenges + hellos);
    assert_eq!((s.peer_restarts, s.peers), (1, 1));
}

/// Another job's key does not verify: a HELLO tagged under job B's key
/// reaching an endpoint of job A is refused as a bad MAC, and not answered.
#[test]
fn another_jobs_key_does_not_verify() {
    let mut pair = Pair::new(keyed(0, 1, 5, b"job A"), keyed(1, 1, 6, b"job A"));
    pair.n[0].push(addr(1), 1, payload(1, 64));
    let done = |p: &Pair| p.n[0].acked().count() == 1;
    assert!(pair.run(200, &mut |_, _| Vec::new(), &mut || false, &done));
    let mut other = SrdNode::new(&keyed(2, 1, 5, b"job B"));
    other.push(addr(1), 9, payload(9, 64));
    let mut buf = vec![0u8; 4096];
    let t = other.poll_transmit(Instant::ZERO, &mut buf).expect("HELLO");
    assert_eq!(buf[1], PacketType::Hello as u8);
    let s0 = pair.n[1].srd.stats().clone();
    let now = pair.now;
    pair.n[1].handle_datagram(now, addr(2), &buf[..t.len]);
    let s = pair.n[1].srd.stats();
    assert_eq!(s.rx_bad_mac, s0.rx_bad_mac + 1, "job B's HELLO");
    assert_eq!(s.tx_challenges, s0.tx_challenges, "no CHALLENGE for it");
}

/// A keyed endpoint and an unkeyed one (and two with different keys) never
/// open a session: each refuses the other's HELLO, counted as a missing,
/// unexpected or bad MAC; the sender's datagram fails as unreachable after
/// the timeout, nothing is delivered, nothing panics.
#[test]
fn key_mismatch_fails_cleanly() {
    let cases: [(Key, Key); 3] = [
        (Some(b"k1"), None),
        (None, Some(b"k1")),
        (Some(b"k1"), Some(b"k2")),
    ];
    for (ka, kb) in cases {
        let cfg = |i: usize, k: Option<&[u8]>| {
            let mut c = config(i, 1, 10 + i as u64);
            c.auth_key = k.map(|k| AuthKey(k.to_vec()));
            c.unreachable_timeout = Duration::from_millis(50);
            c
        };
        let mut pair = Pair::new(cfg(0, ka), cfg(1, kb));
        pair.n[0].push(addr(1), 1, payload(1, 64));
        pair.n[1].push(addr(0), 2, payload(2, 64));
        let done = |p: &Pair| p.n[0].failed().count() == 1 && p.n[1].failed().count() == 1;
        assert!(
            pair.run(10_000, &mut |_, _| Vec::new(), &mut || false, &done),
            "{ka:?}/{kb:?}: {:?}",
            pair.n[0].srd.stats()
        );
        for (i, node) in pair.n.iter().enumerate() {
            assert!(node.arrived.is_empty());
            let s = node.srd.stats();
            let refused = s.rx_mac_missing + s.rx_mac_unexpected + s.rx_bad_mac;
            assert!(refused > 0, "{ka:?}/{kb:?} node {i}: {s:?}");
            assert_eq!(s.peers, 1, "only the peer the application named");
            let failed = node.events.iter().any(|(_, e)| {
                matches!(
                    e,
                    DgramEvent::Failed {
                        reason: FailReason::Unreachable,
                        ..
                    }
                )
            });
            assert!(failed, "{ka:?}/{kb:?} node {i}: {:?}", node.events);
        }
        let a = &pair.n[0].srd.stats();
        let b = &pair.n[1].srd.stats();
        match (ka, kb) {
            (Some(_), None) => assert!(b.rx_mac_unexpected > 0 && a.rx_mac_missing > 0),
            (None, Some(_)) => assert!(a.rx_mac_unexpected > 0 && b.rx_mac_missing > 0),
            _ => assert!(a.rx_bad_mac > 0 && b.rx_bad_mac > 0),
        }
    }
}

/// Without a key nothing changes on the wire: no packet carries the MAC
/// flag or a tag (the header layout and test vectors of version 2 stand).
#[test]
fn unkeyed_packets_carry_no_tag() {
    let mut pair = Pair::new(config(0, 1, 5), config(1, 1, 6));
    pair.n[0].push(addr(1), 1, payload(1, 64));
    let mut all = Vec::new();
    let mut tap = |_: usize, pkt: &[u8]| {
        all.push(pkt.to_vec());
        Vec::new()
    };
    assert!(pair.run(200, &mut tap, &mut || false, &|p: &Pair| p.n[0]
        .acked()
        .count()
        == 1));
    assert!(all.len() >= 3);
    for p in &all {
        assert_eq!(p[2] & flags::MAC, 0);
        let pkt = Packet::new_checked(&p[..]).unwrap();
        assert_eq!(p.len(), HEADER_LEN + usize::from(pkt.payload_len()));
    }
}
