//! Stable fuzzing of the SRD wire format (`wire::srd`), `arbitrary`-driven
//! from seeded bytes: `Repr::parse` never panics, accepts exactly what
//! `PROTOCOL.md` §2 calls valid (an independent validator, `forge::spec_parses`)
//! on random bytes and on structured mutations of valid packets of every
//! type (each field, lengths, flags, types, tokens, bit flips, truncation,
//! extension), and `emit(parse(x))` gives back `x`'s meaningful bytes.
//! `SPRAY_FUZZ_CASES=<n>` runs more cases; a failure prints its seed.

mod fuzz_model;

use arbitrary::Unstructured;
use fuzz_model::{below, run_cases, word};
use spray::sim::forge::{bytes_of, spec_parses, Field, Forged, Mutation, FIELDS};
use spray::wire::srd::{flags, AckRepr, HandshakeRepr, Packet, PacketType, Repr, HEADER_LEN};

const TYPES: [PacketType; 7] = [
    PacketType::Data,
    PacketType::Ack,
    PacketType::Reset,
    PacketType::Probe,
    PacketType::Hello,
    PacketType::Challenge,
    PacketType::Rails,
];

/// A valid packet of any type with every field drawn from the input.
fn valid_packet(u: &mut Unstructured) -> Vec<u8> {
    let ty = TYPES[below(u, TYPES.len() as u64) as usize];
    let body_len = below(u, 300) as usize;
    let body = bytes_of(word(u), body_len);
    let mut f = Forged::new(ty, word(u) as u16, word(u).max(1), word(u), &body);
    if ty == PacketType::Rails {
        // In a session, no ack; ACK_NOW asks for an answer.
        f.repr.flags = word(u) as u8 & flags::ACK_NOW;
        f.repr.path = word(u) as u8;
    } else if !matches!(
        ty,
        PacketType::Reset | PacketType::Hello | PacketType::Challenge
    ) {
        f.repr.flags = word(u) as u8 & (flags::ACK_NOW | flags::RETRANSMIT | flags::MORE);
        f.repr.path = word(u) as u8;
        f.repr.psn = word(u) as u32;
        // DATA: the floor is never after the PSN (`Repr::parse`).
        f.repr.psn_floor = if ty == PacketType::Data {
            f.repr.psn.wrapping_sub(word(u) as u32 >> 1)
        } else {
            word(u) as u32
        };
        if ty == PacketType::Ack || word(u) & 1 == 0 {
            f.repr.ack = Some(AckRepr {
                cum: word(u) as u32,
                recent: word(u) as u32,
                delay_us: word(u) as u16,
                credit: word(u) as u16,
                sack_base: word(u) as u32,
                sack_bits: word(u),
                repeat: false,
            });
        } else {
            f.repr.ack = None;
        }
    }
    f.to_bytes()
}

/// Everything parse must satisfy on `b`; returns whether it parsed.
fn check(b: &[u8]) -> bool {
    let parsed = Packet::new_checked(b).and_then(|p| Repr::parse(&p));
    assert_eq!(
        parsed.is_ok(),
        spec_parses(b),
        "parse {parsed:?} disagrees with PROTOCOL.md on {b:02x?}"
    );
    let Ok(r) = parsed else { return false };
    assert!(r.buffer_len() <= b.len());
    // emit(parse(x)) = x's header, the ack fields zero without ACK_PRESENT
    // ("written as 0 and ignored").
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut out).expect("emit");
    out[HEADER_LEN..].copy_from_slice(&b[HEADER_LEN..r.buffer_len()]);
    let mut want = b[..r.buffer_len()].to_vec();
    if b[2] & flags::ACK_PRESENT == 0 {
        want[32..56].fill(0);
    }
    assert_eq!(out, want, "emit(parse(x)) differs from x");
    let again = Repr::parse(&Packet::new_checked(&out[..]).expect("emitted packet"));
    assert_eq!(again, Ok(r), "parse(emit(parse(x))) != parse(x)");
    if matches!(r.ty, PacketType::Hello | PacketType::Challenge) {
        // The record follows the tag when the packet carries one (flag MAC).
        let at = r.payload_offset();
        let hs = HandshakeRepr::parse(&b[at..r.buffer_len()]);
        assert_eq!(hs.is_ok(), b[at..at + 8] != [0u8; 8]);
    }
    true
}

/// The reference field table agrees with what `Repr::emit` writes.
#[test]
fn field_table_matches_the_emitter() {
    let mut f = Forged::new(PacketType::Data, 0x1234, 0x0102_0304_0506_0708, 7, b"abc");
    f.repr.flags = flags::RETRANSMIT;
    f.repr.path = 5;
    f.repr.psn = 0x0a0b_0c0d;
    f.repr.psn_floor = 0x0a0b_0c00;
    f.repr.ack = Some(AckRepr {
        cum: 0x1112_1314,
        recent: 0x1516_1718,
        delay_us: 0x191a,
        credit: 0x1b1c,
        sack_base: 0x2122_2324,
        sack_bits: 0x3132_3334_3536_3738,
        repeat: false,
    });
    let b = f.to_bytes();
    let want = [
        2,
        1,
        5,
        5,
        0x1234,
        3,
        0x0102_0304_0506_0708,
        7,
        0x0a0b_0c0d,
        0x0a0b_0c00,
        0x1112_1314,
        0x1516_1718,
        0x191a,
        0x1b1c,
        0x2122_2324,
        0x3132_3334_3536_3738,
    ];
    for (field, v) in FIELDS.iter().zip(want) {
        assert_eq!(field.get(&b), Some(v), "{field:?}");
    }
    assert!(check(&b));
}

/// Valid packets of every type parse back to what was emitted.
#[test]
fn valid_packets_round_trip() {
    let n = run_cases("fuzz_srd_wire", 100_000, 1024, |_, data| {
        let mut u = Unstructured::new(data);
        let b = valid_packet(&mut u);
        assert!(check(&b), "a valid packet did not parse: {b:02x?}");
    });
    println!("{n} cases");
}

/// Structured mutations of valid packets: parse agrees with the spec.
#[test]
fn mutated_packets_agree_with_the_spec() {
    let (mut ok, mut total) = (0u64, 0u64);
    let mut per_field = [0u64; 16];
    let n = run_cases("fuzz_srd_wire", 100_000, 2048, |_, data| {
        let mut u = Unstructured::new(data);
        for _ in 0..8 {
            let mut b = valid_packet(&mut u);
            for _ in 0..=below(&mut u, 3) {
                let m = Mutation::from_words(word(&mut u) as u8, word(&mut u), word(&mut u));
                if let Mutation::Set(f, _) | Mutation::Add(f, _) = m {
                    per_field[FIELDS.iter().position(|&x| x == f).unwrap_or(0)] += 1;
                }
                m.apply(&mut b);
            }
            total += 1;
            ok += u64::from(check(&b));
        }
    });
    println!("{n} cases, {total} packets, {ok} still valid; Set/Add per field {per_field:?}");
    assert!(
        ok > total / 20 && ok < total,
        "mutations too weak or too strong"
    );
    assert!(per_field.iter().all(|&k| k > 0), "a field never mutated");
}

/// Arbitrary bytes, biased towards a plausible header start.
#[test]
fn random_bytes_agree_with_the_spec() {
    let mut ok = 0u64;
    let n = run_cases("fuzz_srd_wire", 100_000, 4096, |_, data| {
        let mut u = Unstructured::new(data);
        for _ in 0..16 {
            let len = below(&mut u, 140) as usize;
            let mut b = bytes_of(word(&mut u), len);
            if word(&mut u) & 1 == 0 {
                Field::Version.set(&mut b, 2);
                Field::Type.set(&mut b, 1 + below(&mut u, 7));
                Field::Flags.set(&mut b, word(&mut u) & 0x8f);
                Field::PayloadLen.set(&mut b, below(&mut u, 90));
            }
            ok += u64::from(check(&b));
        }
    });
    println!("{n} cases, {ok} parsed");
    assert!(ok > 0);
}

/// Each field set to its interesting values, on each type: the spec decides.
#[test]
fn every_field_of_every_type() {
    let values = [
        0u64,
        1,
        2,
        5,
        6,
        7,
        8,
        16,
        0x0f,
        0x80,
        0xff,
        504,
        505,
        u64::MAX,
    ];
    let mut checked = 0;
    for ty in TYPES {
        for field in FIELDS {
            for v in values {
                for plen in [0usize, 8, 16, 17] {
                    let mut b = Forged::new(ty, 9, 3, 4, &vec![1u8; plen]).to_bytes();
                    field.set(&mut b, v);
                    check(&b);
                    checked += 1;
                }
            }
        }
    }
    println!("{checked} packets");
}
