//! `ParseMemo::parse` gives `Repr::parse`'s result for every input: streams of
//! segments (the shortcut), and the same with random bytes changed, lengths
//! cut and offsets pushed past the end (where the shortcut must refuse or
//! fail as the full parse does).

use super::*;
use crate::rng::Rng;

/// A valid segment header of message `seq` at `offset` with `plen` payload bytes.
fn segment(
    ty: MsgType,
    seq: u32,
    total: u64,
    offset: u64,
    plen: usize,
    tag: Option<u64>,
) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN + plen];
    let mut p = Packet::new_unchecked(&mut b[..]);
    p.set_version(VERSION);
    p.set_msg_type(ty.code());
    p.set_flags(if tag.is_some() { FLAG_TAGGED } else { 0 });
    p.set_seq(seq);
    p.set_total(total);
    p.set_offset(offset);
    p.set_tag(tag.unwrap_or(0));
    b
}

#[test]
fn the_memo_parses_as_parse_does() {
    let mut shortcuts = 0;
    for seed in 1..=20u64 {
        let mut rng = Rng::new(seed);
        let mut memo = ParseMemo::default();
        for _ in 0..2000 {
            let ty = if rng.below(2) == 0 {
                MsgType::Data
            } else {
                MsgType::RData
            };
            let total = 1 + rng.below(1 << 20);
            let seq = rng.below(4) as u32;
            let tag = (rng.below(2) == 0).then(|| rng.below(3));
            let plen = 1 + rng.below(1400) as usize;
            let mut off = 0;
            // A stream of this message's segments, some of them damaged.
            for _ in 0..1 + rng.below(50) {
                let mut b = segment(ty, seq, total, off, plen, tag);
                match rng.below(10) {
                    0 => {
                        let i = rng.below(b.len() as u64) as usize;
                        b[i] ^= 1 << rng.below(8);
                    }
                    1 => b.truncate(rng.below(b.len() as u64 + 1) as usize),
                    2 => {
                        let far = total - rng.below(3);
                        Packet::new_unchecked(&mut b[..]).set_offset(far);
                    }
                    3 => Packet::new_unchecked(&mut b[..]).set_offset(u64::MAX - rng.below(2000)),
                    _ => {}
                }
                let pkt = Packet::new_unchecked(&b[..]);
                let want = Repr::parse(&pkt);
                let got = memo.parse(&pkt);
                assert_eq!(got, want, "seed {seed}: {b:02x?}");
                shortcuts += u32::from(got.is_ok() && off > 0);
                off += plen as u64;
            }
        }
    }
    assert!(
        shortcuts > 10_000,
        "the shortcut ran {shortcuts} times only"
    );
}
