//! Stable fuzzing of the message-layer wire formats (`wire::msg`: the
//! 40-byte header, the RMA and atomic sub-headers), `arbitrary`-driven from
//! seeded bytes: parsing never panics, accepts exactly what `PROTOCOL.md`
//! §9/§10 call valid (a validator written here from the document), and
//! `emit(parse(x))` gives back `x`'s meaningful bytes, on random bytes and on
//! mutations of valid headers of all 14 types.
//! `SPRAY_FUZZ_CASES=<n>` runs more cases; a failure prints its seed.

mod fuzz_model;

use arbitrary::Unstructured;
use fuzz_model::{below, run_cases, word};
use spray::sim::forge::bytes_of;
use spray::wire::msg::{
    AtomicSub, MsgType, Packet, Repr, RmaSub, ATOMIC_SUB_LEN, HEADER_LEN, RMA_SUB_LEN,
};

fn be(b: &[u8], r: core::ops::Range<usize>) -> u64 {
    b[r].iter().fold(0u64, |v, &x| (v << 8) | u64::from(x))
}

/// `PROTOCOL.md` §9 header rules and the §10 table, from the document.
fn spec_parses(b: &[u8]) -> bool {
    if b.len() < HEADER_LEN || b[0] != 1 || !(1..=14).contains(&b[1]) {
        return false;
    }
    let (ty, fl) = (b[1], b[2]);
    if fl & !0x03 != 0 || b[3] != 0 {
        return false;
    }
    let (total, offset, tag) = (be(b, 8..16), be(b, 16..24), be(b, 24..32));
    let plen = (b.len() - HEADER_LEN) as u64;
    if total > 1 << 62 || (fl & 0x01 == 0 && tag != 0) {
        return false;
    }
    if ty >= 7 && (fl & 0x01 != 0 || (ty != 7 && fl != 0)) {
        return false;
    }
    let fits = |len: u64| offset.checked_add(len).is_some_and(|e| e <= total);
    match ty {
        1 | 4 | 9 => fits(plen),
        2 | 3 | 5 | 6 | 12 | 13 | 14 => plen == 0 && offset == 0,
        7 => plen >= 16 && fits(plen - 16),
        8 => plen == 16 && offset == 0,
        10 => plen >= 24 && offset == 0 && plen - 24 == total,
        _ => offset == 0 && plen == total,
    }
}

/// Everything parse must satisfy on `b`; returns whether it parsed.
fn check(b: &[u8]) -> bool {
    let parsed = Packet::new_checked(b).and_then(|p| Repr::parse(&p));
    assert_eq!(
        parsed.is_ok(),
        spec_parses(b),
        "parse {parsed:?} disagrees with PROTOCOL.md on {b:02x?}"
    );
    let _ = RmaSub::parse(&b[b.len().min(HEADER_LEN)..]);
    let _ = AtomicSub::parse(&b[b.len().min(HEADER_LEN)..]);
    let Ok(r) = parsed else { return false };
    let mut out = b.to_vec();
    assert!(r.emit_into(&mut out));
    let mut want = b.to_vec();
    if b[2] & 0x02 == 0 {
        want[32..40].fill(0); // cq_data is not read without HAS_DATA
    }
    assert_eq!(out, want, "emit(parse(x)) differs from x");
    assert_eq!(
        Repr::parse(&Packet::new_checked(&out[..]).expect("header")),
        Ok(r)
    );
    true
}

/// A valid header of any type (the payload sized by the type's rule).
fn valid(u: &mut Unstructured) -> Vec<u8> {
    let ty = MsgType::from_code(1 + below(u, 14) as u8).expect("code");
    let rma = ty.is_rma();
    let total = match below(u, 3) {
        0 => below(u, 64),
        1 => below(u, 70_000),
        _ => word(u) >> 2,
    };
    let body = below(u, 200).min(total);
    let (offset, plen) = match ty {
        MsgType::Data | MsgType::RData | MsgType::ReadResp => (below(u, total - body + 1), body),
        MsgType::Write => (below(u, total - body + 1), body + RMA_SUB_LEN as u64),
        MsgType::ReadReq => (0, RMA_SUB_LEN as u64),
        MsgType::Atomic => (0, ATOMIC_SUB_LEN as u64 + total.min(200)),
        MsgType::AtomicResp => (0, total.min(200)),
        _ => (0, 0),
    };
    let total = match ty {
        MsgType::Atomic | MsgType::AtomicResp => total.min(200),
        _ => total,
    };
    let r = Repr {
        ty,
        seq: word(u) as u32,
        total,
        offset,
        tag: (!rma && word(u) & 1 == 0).then(|| word(u)),
        data: ((!rma || ty == MsgType::Write) && word(u) & 1 == 0).then(|| word(u)),
    };
    let mut b = bytes_of(word(u), HEADER_LEN + plen as usize);
    assert!(r.emit_into(&mut b));
    if ty == MsgType::Atomic {
        let s = AtomicSub {
            key: word(u),
            addr: word(u),
            op: below(u, 20) as u8,
            dt: below(u, 11) as u8,
            flags: [0u8, 1, 3][below(u, 3) as usize],
            count: word(u) as u32,
        };
        assert!(s.emit(&mut b[HEADER_LEN..]));
        let (p, _) = AtomicSub::parse(&b[HEADER_LEN..]).expect("atomic sub-header");
        assert_eq!(p, s);
    }
    b
}

#[test]
fn valid_headers_round_trip() {
    let n = run_cases("fuzz_msg_wire", 100_000, 1024, |_, data| {
        let mut u = Unstructured::new(data);
        let b = valid(&mut u);
        assert!(check(&b), "a valid header did not parse: {b:02x?}");
    });
    println!("{n} cases");
}

#[test]
fn mutated_headers_agree_with_the_spec() {
    let (mut ok, mut total) = (0u64, 0u64);
    let n = run_cases("fuzz_msg_wire", 100_000, 2048, |_, data| {
        let mut u = Unstructured::new(data);
        for _ in 0..8 {
            let mut b = valid(&mut u);
            for _ in 0..=below(&mut u, 2) {
                match below(&mut u, 5) {
                    // A byte of the header set to an interesting value.
                    0 | 1 => {
                        let at = below(&mut u, HEADER_LEN.min(b.len()) as u64) as usize;
                        let v = [0u8, 1, 2, 3, 0x40, 0x80, 0xff, word(&mut u) as u8]
                            [below(&mut u, 8) as usize];
                        if let Some(x) = b.get_mut(at) {
                            *x = v;
                        }
                    }
                    2 => {
                        let at = below(&mut u, b.len() as u64) as usize;
                        let bit = below(&mut u, 8);
                        if let Some(x) = b.get_mut(at) {
                            *x ^= 1 << bit;
                        }
                    }
                    3 => b.truncate(below(&mut u, b.len() as u64 + 1) as usize),
                    _ => b.extend(bytes_of(word(&mut u), below(&mut u, 40) as usize)),
                }
            }
            total += 1;
            ok += u64::from(check(&b));
        }
    });
    println!("{n} cases, {total} headers, {ok} still valid");
    assert!(
        ok > total / 20 && ok < total,
        "mutations too weak or too strong"
    );
}

#[test]
fn random_bytes_agree_with_the_spec() {
    let mut ok = 0u64;
    let n = run_cases("fuzz_msg_wire", 100_000, 4096, |_, data| {
        let mut u = Unstructured::new(data);
        for _ in 0..16 {
            let len = below(&mut u, 100) as usize;
            let mut b = bytes_of(word(&mut u), len);
            if len >= HEADER_LEN && word(&mut u) & 1 == 0 {
                b[0] = 1;
                b[1] = 1 + below(&mut u, 15) as u8;
                b[2] &= 0x03;
                b[3] = 0;
                b[8] &= 0x3f;
            }
            ok += u64::from(check(&b));
        }
    });
    println!("{n} cases, {ok} parsed");
    assert!(ok > 0);
}
