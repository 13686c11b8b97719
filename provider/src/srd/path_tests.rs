//! Unit tests of the path set's flowlet sizing (`PathSet::on_flowlet_*`),
//! of the trimmed peer's RTT summary, and of what the set keeps so that a
//! message need not read every path (min RTT, queued paths, idle picks).

use super::*;

const US: u64 = 1_000;

fn at(us: u64) -> Instant {
    Instant::from_nanos(1_000_000_000 + us * US)
}

/// A path set whose paths all measured a 40 µs base RTT.
fn paths() -> PathSet {
    let mut s = PathSet::new(4);
    for i in 0..4 {
        s.on_rtt(i, 40 * US, true);
    }
    s
}

/// One flowlet of `n` packets on `path`, sent 1 µs apart from `t0`;
/// packet k acked at `acks[k].0` µs by an ack whose receiver held its
/// newest packet `acks[k].1` µs.
fn flowlet(s: &mut PathSet, path: u8, seq: &mut u64, t0: u64, acks: &[(u64, u64)]) {
    let first = *seq;
    // A new flowlet forgets the path's previous one (as `pick_flowlet`).
    s.paths[usize::from(path)].flow = None;
    for k in 0..acks.len() as u64 {
        s.on_flowlet_sent(path, first + k, at(t0 + k));
    }
    *seq += acks.len() as u64;
    for (k, &(t, hold)) in acks.iter().enumerate() {
        s.on_flowlet_packet_acked(path, first + k as u64, at(t), hold * US);
    }
}

/// A flowlet whose packets arrived together but were acked 200 µs apart
/// because the receiving host read them in two slices (its hold time says
/// so) did not queue on its path: the cap does not shrink. The same spread
/// with no hold (the packets arrived 200 µs apart: a queue on the path)
/// halves it.
#[test]
fn a_receiver_reading_in_slices_is_no_queue() {
    let mut s = paths();
    let mut seq = 0;
    let cap0 = s.flowlet_cap();
    flowlet(&mut s, 0, &mut seq, 0, &[(100, 0), (300, 200)]);
    assert!(s.flowlet_cap() >= cap0, "{} < {cap0}", s.flowlet_cap());
    let cap1 = s.flowlet_cap();
    flowlet(&mut s, 1, &mut seq, 400, &[(500, 0), (700, 0)]);
    assert_eq!(s.flowlet_cap(), (cap1 / 2).max(1));
}

/// Halved down to one packet, flowlets of one packet give no spread to
/// measure; each counts as tight, so the cap grows back (before, a cap of
/// one was kept for good and a fast stream went on at one path pick per
/// packet, a third of its rate).
#[test]
fn a_cap_of_one_packet_grows_back() {
    let mut s = paths();
    let mut seq = 0;
    let mut t = 0;
    for _ in 0..8 {
        flowlet(&mut s, 0, &mut seq, t, &[(t + 100, 0), (t + 400, 0)]);
        t += 500;
    }
    assert_eq!(s.flowlet_cap(), 1);
    for _ in 0..6 {
        flowlet(&mut s, 2, &mut seq, t, &[(t + 50, 0)]);
        t += 100;
    }
    assert!(s.flowlet_cap() >= 4, "cap {}", s.flowlet_cap());
}

#[test]
fn rtt_codes_round_up_and_keep_three_digits() {
    for ns in [
        1u64,
        999,
        1000,
        1001,
        14_419,
        2_047_000,
        2_048_001,
        30_000_000,
        67_000_000_000,
    ] {
        let back = rtt_decode(rtt_code(ns));
        assert!(back >= ns, "{ns} ns -> {back}");
        assert!(back <= ns + ns / 1000 + 1000, "{ns} ns -> {back}");
    }
    assert!(rtt_code(u64::MAX) & (1 << 15) == 0);
}

/// The in-flight cap check without divisions (`has_room_by_rate`) agrees
/// with its definition (`inflight < cap_pkts`) on random paths, rates and
/// windows, edges included (nothing in flight, a share below one packet,
/// rates and windows up to 2^60, where the definition's 128-bit product
/// still fits).
#[test]
fn room_by_rate_is_the_cap_without_division() {
    // Edges: a share of exactly `inflight` packets (no room), one byte
    // less, one byte more (room only above it).
    for pb in [3u64, 1416, 8958] {
        for inflight in 1..6u64 {
            let mut p = Path::new();
            p.acked = 1;
            p.acked_bytes = pb;
            p.pkt_bytes = pb;
            p.next_seq = inflight;
            // share = floor(window * 150 / 100) = inflight * pb exactly.
            let exact = inflight * pb * 2 / 3;
            for window in [exact - 1, exact, exact + 1] {
                let want = p.inflight_pkts() < p.cap_pkts(7, 7, window);
                assert_eq!(
                    p.has_room_by_rate(7, 7, window),
                    want,
                    "pb {pb} window {window}"
                );
            }
        }
    }
    let mut rng = crate::rng::Rng::new(0x0ca9);
    let small = |rng: &mut crate::rng::Rng, max: u64| rng.below(max + 1);
    for case in 0..200_000u32 {
        let mut p = Path::new();
        // A mean packet of 1..=9000 bytes (or odd sizes), over some acks.
        let acked = 1 + small(&mut rng, 5_000);
        let mean = 1 + small(&mut rng, 9_000);
        p.acked = acked;
        p.acked_bytes = acked * mean + small(&mut rng, acked - 1);
        p.pkt_bytes = (p.acked_bytes / p.acked).max(1);
        p.acked_seq = small(&mut rng, 1 << 20);
        p.next_seq = p.acked_seq + small(&mut rng, 300);
        p.loss_streak = small(&mut rng, 3) as u32;
        let big = case % 10 == 0;
        let rate = if big {
            1 + (rng.next_u64() >> 4)
        } else {
            1 + small(&mut rng, 10_000_000_000)
        };
        let total = if big {
            rate.saturating_add(rng.next_u64() >> 4)
        } else {
            rate + small(&mut rng, 40_000_000_000)
        };
        let window = if big {
            rng.next_u64() >> 4
        } else {
            small(&mut rng, 100_000_000)
        };
        let want = p.inflight_pkts() < p.cap_pkts(rate, total, window);
        assert_eq!(
            p.has_room_by_rate(rate, total, window),
            want,
            "case {case}: inflight {} mean {} rate {rate} total {total} window {window}",
            p.inflight_pkts(),
            p.pkt_bytes
        );
    }
}

/// `median_srtt` takes the (n / 2)-th smallest of the sampled, not bad
/// paths' RTTs, by insertion for small sets and by selection for larger
/// ones: both agree with a sort, ties and unsampled paths included.
#[test]
fn median_agrees_with_a_sort() {
    let mut rng = crate::rng::Rng::new(11);
    for n in [1u8, 2, 3, 4, 7, 16, 17, 40, 64] {
        for _ in 0..200 {
            let mut s = PathSet::new(n);
            let mut want = Vec::new();
            for p in &mut s.paths {
                // Few distinct values: ties; some paths unsampled or bad.
                let r = rng.next_u64();
                match r % 8 {
                    0 => {}
                    1 => {
                        p.on_rtt(10 * US, true);
                        p.health = Health::Bad;
                    }
                    _ => {
                        let rtt = (1 + (r >> 8) % 6) * 10 * US;
                        p.on_rtt(rtt, true);
                        want.push(p.srtt_ns);
                    }
                }
            }
            want.sort_unstable();
            let expect = (!want.is_empty()).then(|| want[want.len() / 2]);
            assert_eq!(s.median_srtt(), expect, "{n} paths: {want:?}");
        }
    }
}

/// `Path`'s layout (see its doc): what the picker, `has_room` and the
/// median read of every path lies in its first cache line, what loss
/// detection and the rate caps add in its second, four lines in all.
#[test]
fn path_layout_keeps_scanned_fields_together() {
    use core::mem::{align_of, offset_of, size_of};
    assert_eq!(size_of::<Path>(), 256);
    assert_eq!(align_of::<Path>(), 64);
    let first = [
        offset_of!(Path, srtt_ns),
        offset_of!(Path, next_seq),
        offset_of!(Path, acked_seq),
        offset_of!(Path, suspect_seq),
        offset_of!(Path, wrr),
        offset_of!(Path, probe_at),
        offset_of!(Path, weight),
        offset_of!(Path, loss_streak),
        offset_of!(Path, health),
        offset_of!(Path, probing),
        offset_of!(Path, probe_backoff),
    ];
    assert!(first.iter().all(|&o| o < 64), "{first:?}");
    let second = [
        offset_of!(Path, outstanding),
        offset_of!(Path, rttvar_ns),
        offset_of!(Path, rate_bps),
        offset_of!(Path, last_acked_at),
        offset_of!(Path, pkt_bytes),
    ];
    assert!(second.iter().all(|&o| (64..128).contains(&o)), "{second:?}");
}

/// The set's min RTT (kept as samples come) is the smallest of its paths'
/// through samples, a truncation, a trim and its rebuild, and a release.
#[test]
fn min_rtt_kept_matches_the_paths() {
    let scan = |s: &PathSet| {
        s.paths
            .iter()
            .map(|p| p.min_rtt_ns)
            .min()
            .filter(|&m| m != u64::MAX)
    };
    let mut rng = crate::rng::Rng::new(5);
    let mut s = PathSet::new(8);
    assert_eq!(s.min_rtt(), None);
    for _ in 0..500 {
        let r = rng.next_u64();
        s.on_rtt((r % 8) as usize, 5 * US + (r >> 8) % (500 * US), r & 1 == 0);
        assert_eq!(s.min_rtt(), scan(&s));
    }
    // The path holding the minimum goes: the set's min goes up with it.
    let best = (0..8).min_by_key(|&i| s.paths[i].min_rtt_ns).unwrap();
    s.truncate(best.max(1));
    assert_eq!(s.min_rtt(), scan(&s));
    s.add_paths(3);
    assert_eq!(s.min_rtt(), scan(&s));
    let before = s.min_rtt();
    s.compact();
    assert_eq!(s.min_rtt(), None, "no records held");
    s.ensure();
    assert!(s.min_rtt().is_some() && s.min_rtt() == scan(&s));
    // (The summary keeps RTTs to within its code's precision.)
    let (a, b) = (before.unwrap(), s.min_rtt().unwrap());
    assert!(a.abs_diff(b) <= a / 8, "{a} vs {b}");
    s.release();
    assert_eq!(s.min_rtt(), None);
}

/// Loss detection visits the paths that took `outstanding` entries, and
/// clearing empties exactly those; a set of more than 64 paths is walked whole.
#[test]
fn queued_paths_are_those_with_entries() {
    let held = |s: &PathSet| {
        (0..s.paths.len())
            .filter(|&i| s.may_hold_outstanding(i))
            .collect::<Vec<_>>()
    };
    let mut s = PathSet::new(16);
    assert_eq!(held(&s), []);
    s.push_outstanding(1, 10, 0);
    s.push_outstanding(5, 11, 0);
    s.push_outstanding(5, 12, 1);
    assert_eq!(held(&s), [1, 5]);
    s.paths[5].outstanding.clear();
    s.outstanding_drained(5);
    assert_eq!(held(&s), [1]);
    s.push_outstanding(15, 13, 0);
    s.clear_outstanding();
    assert_eq!(held(&s), []);
    assert!(s.paths.iter().all(|p| p.outstanding.is_empty()));
    let mut big = PathSet::new(70);
    big.push_outstanding(69, 1, 0);
    big.push_outstanding(3, 2, 0);
    assert_eq!(held(&big), [3, 64, 65, 66, 67, 68, 69]);
    big.clear_outstanding();
    assert!(big.paths.iter().all(|p| p.outstanding.is_empty()));
}

/// Lone packets from idle take the paths in turn, without the weighted
/// walk, and not a path much slower than the others (the walk decides
/// there, and gives it a small share).
#[test]
fn idle_picks_rotate_over_fit_paths() {
    let mut s = PathSet::new(8);
    for i in 0..8 {
        let rtt = if i == 2 { 400 * US } else { 40 * US };
        for _ in 0..8 {
            s.on_rtt(i, rtt, true);
        }
    }
    let mut count = [0u32; 8];
    for k in 0..800 {
        let (i, probe) = s.pick_flowlet(at(k), 1, 1, 1, false, 0, true);
        assert!(!probe);
        count[usize::from(i)] += 1;
    }
    assert!(count[2] <= 800 / 32, "slow path: {count:?}");
    let fast: Vec<u32> = (0..8).filter(|&i| i != 2).map(|i| count[i]).collect();
    let (lo, hi) = (*fast.iter().min().unwrap(), *fast.iter().max().unwrap());
    assert!(hi - lo <= 800 / 16, "uneven: {count:?}");
    // An unsampled path (one that has carried nothing yet) takes its turn.
    let mut s = PathSet::new(4);
    for i in 0..3 {
        s.on_rtt(i, 40 * US, true);
    }
    let mut count = [0u32; 4];
    for k in 0..40 {
        count[usize::from(s.pick_flowlet(at(k), 1, 1, 1, false, 0, true).0)] += 1;
    }
    assert_eq!(count, [10; 4]);
}
