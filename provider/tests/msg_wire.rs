//! Byte-level tests of the message-layer header (`wire::msg`): vector, round trip, fuzz.

use spray::rng::Rng;
use spray::wire::msg::{MsgType, Packet, Repr, HEADER_LEN};
use spray::wire::WireError;

#[test]
fn test_vector() {
    let r = Repr {
        ty: MsgType::Data,
        seq: 0x0102_0304,
        total: 0x10,
        offset: 0x08,
        tag: Some(0xAABB_CCDD_EEFF_0011),
        data: Some(0x1122_3344_5566_7788),
    };
    let mut b = [0u8; HEADER_LEN + 8];
    assert!(r.emit_into(&mut b));
    b[HEADER_LEN..].copy_from_slice(b"payload!");
    let want: [u8; HEADER_LEN] = [
        1, 1, 0x03, 0, // version, type DATA, flags TAGGED|HAS_DATA, reserved
        1, 2, 3, 4, // seq
        0, 0, 0, 0, 0, 0, 0, 0x10, // total
        0, 0, 0, 0, 0, 0, 0, 0x08, // offset
        0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF, 0x00, 0x11, // tag
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // cq data
    ];
    assert_eq!(&b[..HEADER_LEN], &want[..]);
    let p = Packet::new_checked(&b[..]).unwrap();
    assert_eq!(Repr::parse(&p), Ok(r));
    assert_eq!(p.payload(), b"payload!");
}

#[test]
fn rejects_bad_headers() {
    let r = Repr {
        ty: MsgType::Cts,
        seq: 7,
        total: 100,
        offset: 0,
        tag: None,
        data: None,
    };
    let mut b = [0u8; HEADER_LEN];
    r.emit_into(&mut b);
    assert_eq!(Repr::parse(&Packet::new_unchecked(&b[..])), Ok(r));
    assert_eq!(
        Packet::new_checked(&b[..HEADER_LEN - 1]).err(),
        Some(WireError::Truncated)
    );
    let mut v = b;
    v[0] = 2;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&v[..])),
        Err(WireError::BadVersion)
    );
    let mut v = b;
    v[1] = 0;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&v[..])),
        Err(WireError::BadType)
    );
    let mut v = b;
    v[2] = 0x80;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&v[..])),
        Err(WireError::Malformed)
    );
    // A DATA segment that runs past the declared total is refused.
    let d = Repr {
        ty: MsgType::Data,
        seq: 1,
        total: 4,
        offset: 2,
        tag: None,
        data: None,
    };
    let mut b = [0u8; HEADER_LEN + 3];
    d.emit_into(&mut b);
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
    // Control messages carry no payload.
    let mut b = [0u8; HEADER_LEN + 1];
    r.emit_into(&mut b);
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
}

#[test]
fn round_trip_random() {
    let mut rng = Rng::new(11);
    let types = [
        MsgType::Data,
        MsgType::Rts,
        MsgType::Cts,
        MsgType::RData,
        MsgType::Credit,
    ];
    for _ in 0..20_000 {
        let ty = types[rng.below(types.len() as u64) as usize];
        let total = rng.below(1 << 40);
        let offset = match ty {
            MsgType::Data | MsgType::RData => rng.below(total + 1),
            _ => 0,
        };
        let r = Repr {
            ty,
            seq: rng.next_u64() as u32,
            total,
            offset,
            tag: rng.chance(0.5).then(|| rng.next_u64()),
            data: rng.chance(0.5).then(|| rng.next_u64()),
        };
        let mut b = [0u8; HEADER_LEN];
        assert!(r.emit_into(&mut b));
        assert_eq!(Repr::parse(&Packet::new_unchecked(&b[..])), Ok(r));
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(0xF022);
    let mut ok = 0u32;
    let mut buf = [0u8; 96];
    for i in 0..150_000u32 {
        let len = rng.below(buf.len() as u64 + 1) as usize;
        for b in buf[..len].iter_mut() {
            *b = rng.next_u64() as u8;
        }
        // Bias half the inputs toward valid version/type/flags so deeper checks run.
        if i % 2 == 0 && len >= 4 {
            buf[0] = 1;
            buf[1] = 1 + (buf[1] % 6);
            buf[2] &= 3;
            buf[3] = 0;
        }
        if let Ok(p) = Packet::new_checked(&buf[..len]) {
            if Repr::parse(&p).is_ok() {
                ok += 1;
            }
        } else {
            assert!(Repr::parse(&Packet::new_unchecked(&buf[..len])).is_err());
        }
    }
    assert!(
        ok > 0,
        "no random input parsed; the fuzz loop is not reaching the deep checks"
    );
}
