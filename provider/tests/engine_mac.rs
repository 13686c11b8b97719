//! Issue 17, optional authentication, through the whole engine (message
//! layer over the SRD core): keyed endpoints exchange RDM messages of every
//! protocol size (eager, rendezvous sent straight from the sender's buffer)
//! under loss and reordering, byte for byte; the tag of a datagram whose
//! body leaves from the application's buffer (`poll_transmit_with`) covers
//! that body; an on-path attacker flipping bits of rendezvous data, with the
//! session's tokens, gets nothing into a receive buffer; with a key no
//! datagram is placed straight into application memory.

use core::net::SocketAddr;
use core::time::Duration;

use spray::buf::UserBuf;
use spray::config::AuthKey;
use spray::msg::{CompKind, Completion, RecvFlags, RecvOp, SendOp};
use spray::rng::Rng;
use spray::sim::{addr, LinkSpec, Sim};
use spray::time::Instant;
use spray::wire::srd::{PacketType, HEADER_LEN, TAG_LEN};
use spray::{Config, Engine, EpMode};

type Node = Engine<Vec<u8>>;

fn engine(i: usize, key: Option<&[u8]>) -> Node {
    let mut c = Config::new(EpMode::Rdm, addr(i));
    c.paths = 4;
    // Jumbo datagrams: segments of 2048+ bytes leave from the sender's
    // buffer as deferred bodies (`poll_transmit_with`), the path tested here.
    c.max_datagram = 9000;
    c.nonce = 100 + i as u64;
    c.seed = 0xfeed ^ i as u64;
    c.auth_key = key.map(|k| AuthKey(k.to_vec()));
    Engine::new(c)
}

/// Bytes of message `i` of length `len` (self-describing, so misplacement shows).
fn content(i: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(i.wrapping_mul(0x9e37_79b9) ^ len as u64);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

const SIZES: &[usize] = &[0, 1, 8, 1000, 1377, 4096, 65536, 65537, 300_000, 1 << 20];

fn post_all(e: &mut [Node; 2]) {
    let p1 = e[0].peer(addr(1));
    for (i, &len) in SIZES.iter().enumerate() {
        e[1].post_recv(RecvOp {
            src: None,
            buf: vec![0u8; len + 16],
            tag: Some((7, 0)),
            context: i as u64,
            flags: RecvFlags::default(),
            report: true,
        })
        .expect("recv");
        e[0].post_send(SendOp {
            peer: p1,
            buf: content(i as u64, len),
            tag: Some(7),
            data: Some(i as u64),
            context: 1000 + i as u64,
            report: true,
            delivery_complete: i % 2 == 0,
            lazy: false,
        })
        .expect("send");
    }
}

fn check_done(done: &[Vec<Completion<Vec<u8>>>; 2], what: &str) {
    assert_eq!(done[0].len(), SIZES.len(), "{what}: sends");
    assert_eq!(done[1].len(), SIZES.len(), "{what}: receives");
    for c in &done[0] {
        assert_eq!(c.kind, CompKind::Send);
        assert!(c.error.is_none(), "{what}: {c:?}");
    }
    for c in &done[1] {
        let i = c.context as usize;
        assert!(c.error.is_none(), "{what}: {c:?}");
        assert_eq!(c.len, SIZES[i]);
        let buf = c.buf.as_ref().expect("buffer back");
        assert!(
            buf[..SIZES[i]] == content(i as u64, SIZES[i])[..],
            "{what}: message {i} ({} B) corrupted",
            SIZES[i]
        );
        assert!(buf[SIZES[i]..].iter().all(|&b| b == 0), "{what}: past {i}");
    }
}

/// Keyed engines over the simulated network (loss, duplication, jitter
/// across 4 paths): every size arrives intact, and no tag is ever refused.
#[test]
fn keyed_rdm_all_sizes_under_loss() {
    for seed in 0..3u64 {
        let mut spec = LinkSpec::ideal(Duration::from_micros(20));
        spec.jitter = Duration::from_micros(15);
        spec.bandwidth = 1_250_000_000;
        spec.loss = 0.03;
        spec.dup = 0.01;
        let key: &[u8] = b"0123456789abcdef0123456789abcdef";
        let nodes = vec![engine(0, Some(key)), engine(1, Some(key))];
        let mut sim = Sim::new(seed, nodes, vec![spec; 4]);
        let mut e = [
            core::mem::replace(&mut sim.nodes[0], engine(0, None)),
            core::mem::replace(&mut sim.nodes[1], engine(1, None)),
        ];
        post_all(&mut e);
        let [a, b] = e;
        sim.nodes = vec![a, b];
        let mut done = [Vec::new(), Vec::new()];
        let limit = Instant::from_nanos(60_000_000_000);
        while done[0].len() < SIZES.len() || done[1].len() < SIZES.len() {
            for (i, d) in done.iter_mut().enumerate() {
                while let Some(c) = sim.nodes[i].poll_completion() {
                    d.push(c);
                }
            }
            if !sim.step(limit) {
                break;
            }
        }
        check_done(&done, &format!("seed {seed}"));
        for n in &sim.nodes {
            assert!(n.keyed());
            let s = n.srd_stats();
            assert_eq!((s.rx_bad_mac, s.rx_mac_missing), (0, 0), "{s:?}");
        }
    }
}

/// Carry every datagram between two engines the way the FFI driver sends
/// them: `poll_transmit_with`, the body appended from the sender's buffer.
/// `tap` sees (sender, datagram, whether its body came from the sender's
/// buffer) and may return datagrams to inject first. Returns the datagrams
/// carried.
fn carry(e: &mut [Node; 2], now: Instant, tap: &mut Tap) -> usize {
    let mut buf = vec![0u8; 65536];
    let mut n = 0;
    for i in 0..2 {
        loop {
            let mut body: Option<(usize, usize, Vec<u8>)> = None;
            let mut rec = |b: &Vec<u8>, off: usize, len: usize| {
                let mut v = vec![0u8; len];
                b.read_at(off, &mut v);
                body = Some((off, len, v));
            };
            let Some(t) = e[i].poll_transmit_with(now, &mut buf, &mut rec) else {
                break;
            };
            let mut d = buf[..t.len].to_vec();
            let zero_copy = body.is_some();
            if let Some((_, _, v)) = body {
                d.extend_from_slice(&v);
            }
            assert_eq!(t.dst, addr(1 - i));
            for f in tap(i, &d, zero_copy) {
                e[1 - i].handle_datagram(now, addr(i), &f);
            }
            e[1 - i].handle_datagram(now, addr(i), &d);
            n += 1;
        }
    }
    n
}

/// What a test sees of each datagram `carry` moves (see there).
type Tap<'a> = dyn FnMut(usize, &[u8], bool) -> Vec<Vec<u8>> + 'a;

fn run_pair(e: &mut [Node; 2], tap: &mut Tap) -> [Vec<Completion<Vec<u8>>>; 2] {
    let mut done = [Vec::new(), Vec::new()];
    let mut now = Instant::ZERO;
    for _ in 0..200_000 {
        let moved = carry(e, now, tap);
        for (i, d) in done.iter_mut().enumerate() {
            while let Some(c) = e[i].poll_completion() {
                d.push(c);
            }
        }
        if done[0].len() == SIZES.len() && done[1].len() == SIZES.len() {
            break;
        }
        // With a key the receiver never asks for direct placement.
        for x in e.iter() {
            if x.keyed() && x.expects_rdata() {
                assert!(x.guess_rdata().is_none());
            }
        }
        if moved == 0 {
            let next = e.iter().filter_map(|x| x.poll_timeout()).min();
            now = next.unwrap_or(now + Duration::from_micros(50)).max(now);
        }
        for x in e.iter_mut() {
            if x.poll_timeout().is_some_and(|t| t <= now) {
                x.handle_timeout(now);
            }
        }
    }
    done
}

/// The zero-copy send path (bodies leave from the application's buffer,
/// as through the FFI driver) with a key: every size arrives intact, so the
/// tag of each such datagram covered its body.
#[test]
fn keyed_zero_copy_bodies_are_tagged() {
    let mut e = [engine(0, Some(b"k")), engine(1, Some(b"k"))];
    post_all(&mut e);
    let mut bodies = 0;
    let mut tap = |_: usize, _: &[u8], zero_copy: bool| {
        bodies += usize::from(zero_copy);
        Vec::new()
    };
    let done = run_pair(&mut e, &mut tap);
    check_done(&done, "zero copy");
    assert!(bodies > 10, "rendezvous data went as bodies");
    for x in &e {
        let s = x.srd_stats();
        assert_eq!((s.rx_bad_mac, s.rx_mac_missing), (0, 0), "{s:?}");
    }
}

/// An on-path attacker (it sees every datagram, so every nonce, token and
/// PSN) sends, ahead of each DATA datagram, copies with one bit flipped in
/// the payload (rendezvous data included), in the tag, or in the header:
/// the receives complete with the sent bytes, and every copy was counted.
/// Unkeyed, the same attack corrupts the messages (the test's control).
#[test]
fn on_path_bit_flips_never_reach_a_receive_buffer() {
    for keyed in [true, false] {
        let key: Option<&[u8]> = keyed.then_some(b"job");
        let mut e = [engine(0, key), engine(1, key)];
        post_all(&mut e);
        let mut rng = Rng::new(7);
        let mut flipped = 0u64;
        let mut tap = |from: usize, d: &[u8], _: bool| {
            if from != 0 || d[1] != PacketType::Data as u8 {
                return Vec::new();
            }
            let head = if keyed {
                HEADER_LEN + TAG_LEN
            } else {
                HEADER_LEN
            };
            let mut out = Vec::new();
            for (lo, hi) in [(head, d.len()), (HEADER_LEN, head), (24, 32)] {
                if hi > lo {
                    let mut x = d.to_vec();
                    let k = lo + (rng.next_u64() as usize) % (hi - lo);
                    x[k] ^= 1 << (rng.next_u64() % 8);
                    out.push(x);
                }
            }
            flipped += out.len() as u64;
            out
        };
        let done = run_pair(&mut e, &mut tap);
        if keyed {
            check_done(&done, "keyed, under attack");
            let s = e[1].srd_stats();
            // A flip that puts a DATA floor after its PSN fails parsing
            // (`rx_malformed`) before the tag is looked at.
            assert!(
                s.rx_bad_mac + s.rx_malformed >= flipped * 9 / 10,
                "{flipped} flipped: {s:?}"
            );
        } else {
            let intact = done[1].iter().all(|c| {
                let i = c.context as usize;
                c.error.is_none()
                    && c.buf
                        .as_ref()
                        .is_some_and(|b| b[..SIZES[i]] == content(i as u64, SIZES[i])[..])
            });
            assert!(
                !intact || done[1].len() < SIZES.len(),
                "control: the unkeyed engine should have been fooled"
            );
        }
    }
}

/// What a driver sees: with a key, `place_with` names no place even for
/// rendezvous data that would be placed without one.
#[test]
fn keyed_engine_places_nothing() {
    for keyed in [false, true] {
        let key: Option<&[u8]> = keyed.then_some(b"job");
        let mut e = [engine(0, key), engine(1, key)];
        post_all(&mut e);
        let mut named = 0;
        let mut checked = 0;
        let from: SocketAddr = addr(0);
        let mut tap = |_: usize, _: &[u8], _: bool| Vec::new();
        // Run until rendezvous data flows, then ask about each datagram.
        let mut now = Instant::ZERO;
        let mut buf = vec![0u8; 65536];
        for _ in 0..10_000 {
            if e[1].expects_rdata() {
                // Peek at sender 0's next datagram without handing it over.
                let mut body = Vec::new();
                let mut rec = |b: &Vec<u8>, off: usize, len: usize| {
                    body.resize(len, 0);
                    b.read_at(off, &mut body);
                };
                if let Some(t) = e[0].poll_transmit_with(now, &mut buf, &mut rec) {
                    let mut d = buf[..t.len].to_vec();
                    d.extend_from_slice(&body);
                    // Rendezvous data leaves from the sender's buffer.
                    if !body.is_empty() {
                        let said = e[1].place_with(from, &d, &mut |_, _, _| {});
                        named += usize::from(said.is_some());
                        checked += 1;
                    }
                    e[1].handle_datagram(now, from, &d);
                    continue;
                }
            }
            if carry(&mut e, now, &mut tap) == 0 {
                now = now + Duration::from_micros(50);
                for x in e.iter_mut() {
                    if x.poll_timeout().is_some_and(|t| t <= now) {
                        x.handle_timeout(now);
                    }
                }
            }
            if checked >= 5 {
                break;
            }
        }
        assert!(
            checked >= 5,
            "keyed {keyed}: saw {checked} rendezvous datagrams"
        );
        if keyed {
            assert_eq!(named, 0, "a keyed engine named a place");
        } else {
            assert!(named > 0, "control: unkeyed placement named no place");
        }
    }
}
