//! SRD wire format: byte-level test vector, round trips, and parsing of
//! random / mutated bytes never panics.

use spray::rng::Rng;
use spray::wire::srd::{flags, AckRepr, Packet, PacketType, Repr, HEADER_LEN};
use spray::wire::WireError;

fn sample() -> Repr {
    Repr {
        ty: PacketType::Data,
        flags: flags::RETRANSMIT,
        path: 5,
        src_port: 0x1234,
        src_epoch: 0x0102_0304,
        dst_epoch: 0x0506_0708,
        psn: 0x0a0b_0c0d,
        psn_floor: 0x0a0b_0c00,
        ack: Some(AckRepr {
            cum: 0x1112_1314,
            recent: 0x1516_1718,
            delay_us: 0x191a,
            credit: 0x1b1c,
            sack_base: 0x2122_2324,
            sack_bits: 0x3132_3334_3536_3738,
        }),
        payload_len: 3,
    }
}

#[test]
fn test_vector() {
    let mut buf = [0u8; HEADER_LEN + 3];
    sample().emit(&mut buf).unwrap();
    buf[HEADER_LEN..].copy_from_slice(b"abc");
    #[rustfmt::skip]
    let want: [u8; HEADER_LEN] = [
        0x01, 0x01, 0x05, 0x05,             // version, type DATA, flags ACK_PRESENT|RETRANSMIT, path
        0x12, 0x34, 0x00, 0x03,             // src_port, payload_len
        0x01, 0x02, 0x03, 0x04,             // src_epoch
        0x05, 0x06, 0x07, 0x08,             // dst_epoch
        0x0a, 0x0b, 0x0c, 0x0d,             // psn
        0x0a, 0x0b, 0x0c, 0x00,             // psn_floor
        0x11, 0x12, 0x13, 0x14,             // ack_cum
        0x15, 0x16, 0x17, 0x18,             // ack_recent
        0x19, 0x1a, 0x1b, 0x1c,             // ack_delay, credit
        0x21, 0x22, 0x23, 0x24,             // sack_base
        0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, // sack_bits
    ];
    assert_eq!(&buf[..HEADER_LEN], &want[..]);
    let p = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(Repr::parse(&p).unwrap(), sample());
    assert_eq!(p.payload(), b"abc");
}

#[test]
fn round_trip_random() {
    let mut rng = Rng::new(1);
    for _ in 0..10_000 {
        let ty = match rng.below(4) {
            0 => PacketType::Data,
            1 => PacketType::Ack,
            2 => PacketType::Reset,
            _ => PacketType::Probe,
        };
        let ack = if ty == PacketType::Ack || rng.chance(0.5) {
            Some(AckRepr {
                cum: rng.next_u64() as u32,
                recent: rng.next_u64() as u32,
                delay_us: rng.next_u64() as u16,
                credit: rng.next_u64() as u16,
                sack_base: rng.next_u64() as u32,
                sack_bits: rng.next_u64(),
            })
        } else {
            None
        };
        let r = Repr {
            ty,
            flags: (rng.next_u64() as u8) & (flags::ACK_NOW | flags::RETRANSMIT),
            path: rng.next_u64() as u8,
            src_port: rng.next_u64() as u16,
            src_epoch: (rng.next_u64() as u32).max(1),
            dst_epoch: rng.next_u64() as u32,
            psn: rng.next_u64() as u32,
            psn_floor: rng.next_u64() as u32,
            ack,
            payload_len: if ty == PacketType::Data {
                rng.below(100) as u16
            } else {
                0
            },
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf).unwrap();
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), r);
    }
}

#[test]
fn rejects_bad_headers() {
    let mut buf = [0u8; HEADER_LEN + 3];
    sample().emit(&mut buf).unwrap();
    assert_eq!(
        Packet::new_checked(&buf[..HEADER_LEN + 2]).unwrap_err(),
        WireError::Truncated
    );
    assert_eq!(
        Packet::new_checked(&buf[..10]).unwrap_err(),
        WireError::Truncated
    );
    let mut b = buf;
    b[0] = 2;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::BadVersion)
    );
    let mut b = buf;
    b[1] = 0;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::BadType)
    );
    let mut b = buf;
    b[2] |= 0x80;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
    let mut b = buf;
    b[8..12].fill(0);
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
    let mut b = buf;
    b[1] = 2; // ACK with payload
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
    assert!(sample().emit(&mut [0u8; 10]).is_err());
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(0xdead);
    let mut valid = [0u8; HEADER_LEN + 16];
    sample().emit(&mut valid).unwrap();
    let mut ok = 0u32;
    for i in 0..200_000u32 {
        let mut buf = [0u8; HEADER_LEN + 16];
        let len = rng.below(buf.len() as u64 + 1) as usize;
        if i % 2 == 0 {
            for b in buf.iter_mut() {
                *b = rng.next_u64() as u8;
            }
        } else {
            buf = valid;
            for _ in 0..=rng.below(4) {
                let at = rng.below(buf.len() as u64) as usize;
                buf[at] ^= 1 << rng.below(8);
            }
        }
        if let Ok(p) = Packet::new_checked(&buf[..len]) {
            if let Ok(r) = Repr::parse(&p) {
                ok += 1;
                assert!(r.buffer_len() <= len);
                let _ = p.payload();
            }
        }
    }
    assert!(ok > 0, "mutations of a valid packet should sometimes parse");
}
