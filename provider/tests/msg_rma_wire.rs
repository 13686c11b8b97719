//! Wire format of the RMA types (7..13) and their sub-headers: byte-level test
//! vectors, the validation rules of `PROTOCOL.md` §10, and round trips.

use spray::rng::Rng;
use spray::wire::msg::{
    AtomicSub, MsgType, Packet, Repr, RmaSub, ATOMIC_COMPARE, ATOMIC_FETCH, ATOMIC_SUB_LEN,
    HEADER_LEN, RMA_SUB_LEN,
};
use spray::wire::WireError;

fn parse(b: &[u8]) -> Result<Repr, WireError> {
    Repr::parse(&Packet::new_unchecked(b))
}

#[test]
fn write_segment_vector() {
    let r = Repr {
        ty: MsgType::Write,
        seq: 0x0102_0304,
        total: 4000,
        offset: 1376,
        tag: None,
        data: Some(0xAABB),
    };
    let mut b = vec![0u8; HEADER_LEN + RMA_SUB_LEN + 3];
    assert!(r.emit_into(&mut b));
    let sub = RmaSub {
        key: 0x1122_3344_5566_7788,
        addr: 0x1000,
    };
    assert!(sub.emit(&mut b[HEADER_LEN..]));
    b[HEADER_LEN + RMA_SUB_LEN..].copy_from_slice(&[9, 8, 7]);
    #[rustfmt::skip]
    let expect: Vec<u8> = [
        &[1u8, 7, 0x02, 0][..],                          // version, WRITE, HAS_DATA, reserved
        &[1, 2, 3, 4],                                    // op id
        &[0, 0, 0, 0, 0, 0, 0x0F, 0xA0],                  // total 4000
        &[0, 0, 0, 0, 0, 0, 0x05, 0x60],                  // offset 1376
        &[0; 8],                                          // tag (unused)
        &[0, 0, 0, 0, 0, 0, 0xAA, 0xBB],                  // cq data
        &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88], // key
        &[0, 0, 0, 0, 0, 0, 0x10, 0],                     // addr
        &[9, 8, 7],                                       // bytes
    ]
    .concat();
    assert_eq!(b, expect);
    assert_eq!(parse(&b), Ok(r));
    let (s, rest) = RmaSub::parse(&b[HEADER_LEN..]).expect("sub");
    assert_eq!((s, rest), (sub, &[9u8, 8, 7][..]));
}

#[test]
fn atomic_sub_header_vector() {
    let sub = AtomicSub {
        key: 5,
        addr: 0x20,
        op: 12,
        dt: 7,
        flags: ATOMIC_FETCH | ATOMIC_COMPARE,
        count: 2,
    };
    let mut b = [0u8; ATOMIC_SUB_LEN];
    assert!(sub.emit(&mut b));
    #[rustfmt::skip]
    let expect = [
        0, 0, 0, 0, 0, 0, 0, 5,
        0, 0, 0, 0, 0, 0, 0, 0x20,
        12, 7, 3, 0,
        0, 0, 0, 2,
    ];
    assert_eq!(b, expect);
    assert_eq!(AtomicSub::parse(&b), Ok((sub, &[][..])));
    let mut bad = b;
    bad[18] = ATOMIC_COMPARE; // compare without fetch
    assert_eq!(AtomicSub::parse(&bad), Err(WireError::Malformed));
    let mut bad = b;
    bad[18] = 0x04;
    assert_eq!(AtomicSub::parse(&bad), Err(WireError::Malformed));
    let mut bad = b;
    bad[19] = 1;
    assert_eq!(AtomicSub::parse(&bad), Err(WireError::Malformed));
    assert_eq!(AtomicSub::parse(&b[..23]), Err(WireError::Truncated));
    assert_eq!(RmaSub::parse(&b[..15]), Err(WireError::Truncated));
}

fn frame(ty: MsgType, total: u64, offset: u64, plen: usize, flags: u8) -> Vec<u8> {
    let r = Repr {
        ty,
        seq: 1,
        total,
        offset,
        tag: None,
        data: None,
    };
    let mut b = vec![0u8; HEADER_LEN + plen];
    r.emit_into(&mut b);
    b[2] = flags;
    b
}

#[test]
fn validation_rules() {
    use MsgType::*;
    let ok = |b: Vec<u8>| assert!(parse(&b).is_ok(), "{:?}", &b[..4]);
    let bad = |b: Vec<u8>| assert!(parse(&b).is_err(), "{:?}", &b[..4]);
    ok(frame(Write, 10, 0, RMA_SUB_LEN + 10, 0));
    ok(frame(Write, 0, 0, RMA_SUB_LEN, 0x02));
    bad(frame(Write, 10, 1, RMA_SUB_LEN + 10, 0)); // past total
    bad(frame(Write, 10, 0, RMA_SUB_LEN - 1, 0)); // no sub-header
    bad(frame(Write, 10, 0, RMA_SUB_LEN, 0x01)); // tagged
    ok(frame(ReadReq, 1 << 30, 0, RMA_SUB_LEN, 0));
    bad(frame(ReadReq, 10, 0, RMA_SUB_LEN + 1, 0));
    bad(frame(ReadReq, 10, 3, RMA_SUB_LEN, 0));
    bad(frame(ReadReq, 10, 0, RMA_SUB_LEN, 0x02)); // CQ data only on writes
    ok(frame(ReadResp, 100, 90, 10, 0));
    bad(frame(ReadResp, 100, 91, 10, 0));
    ok(frame(Atomic, 16, 0, ATOMIC_SUB_LEN + 16, 0));
    bad(frame(Atomic, 8, 0, ATOMIC_SUB_LEN + 16, 0));
    bad(frame(Atomic, 0, 0, ATOMIC_SUB_LEN - 1, 0));
    ok(frame(AtomicResp, 8, 0, 8, 0));
    ok(frame(AtomicResp, 0, 0, 0, 0));
    bad(frame(AtomicResp, 8, 0, 7, 0));
    ok(frame(WriteDone, 12345, 0, 0, 0));
    bad(frame(WriteDone, 12345, 0, 1, 0));
    ok(frame(RmaNak, 0, 0, 0, 0));
    bad(frame(RmaNak, 0, 1, 0, 0));
    bad(frame(RmaNak, 0, 0, 0, 0x02));
    ok(frame(RmaAbort, 0, 0, 0, 0));
    bad(frame(RmaAbort, 0, 0, 4, 0));
    let mut b = frame(RmaNak, 0, 0, 0, 0);
    b[1] = 15;
    assert_eq!(parse(&b), Err(WireError::BadType));
    for c in 7..=14u8 {
        let t = MsgType::from_code(c).expect("known");
        assert!(t.is_rma() && t.code() == c);
    }
    assert!(!MsgType::Abort.is_rma());
}

#[test]
fn rma_reprs_round_trip() {
    let mut rng = Rng::new(77);
    let types = [
        MsgType::Write,
        MsgType::ReadReq,
        MsgType::ReadResp,
        MsgType::Atomic,
        MsgType::AtomicResp,
        MsgType::WriteDone,
        MsgType::RmaNak,
        MsgType::RmaAbort,
    ];
    for _ in 0..2000 {
        let ty = types[rng.below(8) as usize];
        let n = rng.below(64) as usize;
        let (total, offset, plen) = match ty {
            MsgType::Write => {
                let t = n as u64 + rng.below(1 << 40);
                (t, rng.below(t - n as u64 + 1), RMA_SUB_LEN + n)
            }
            MsgType::ReadReq => (rng.below(1 << 50), 0, RMA_SUB_LEN),
            MsgType::ReadResp => {
                let t = n as u64 + rng.below(1000);
                (t, rng.below(t - n as u64 + 1), n)
            }
            MsgType::Atomic => (n as u64, 0, ATOMIC_SUB_LEN + n),
            MsgType::AtomicResp => (n as u64, 0, n),
            _ => (rng.below(1 << 20), 0, 0),
        };
        let r = Repr {
            ty,
            seq: rng.next_u64() as u32,
            total,
            offset,
            tag: None,
            data: (ty == MsgType::Write && rng.chance(0.5)).then(|| rng.next_u64()),
        };
        let mut b = vec![0u8; HEADER_LEN + plen];
        assert!(r.emit_into(&mut b));
        assert_eq!(parse(&b), Ok(r));
    }
}
