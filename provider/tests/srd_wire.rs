//! SRD wire format: byte-level test vector, round trips, and parsing of
//! random / mutated bytes never panics.

use spray::rng::Rng;
use spray::wire::rails::RailsRepr;
use spray::wire::srd::{
    flags, AckRepr, HandshakeRepr, Packet, PacketType, Repr, CAP_RAILS, HANDSHAKE_LEN, HEADER_LEN,
    TAG_LEN,
};
use spray::wire::WireError;

fn sample() -> Repr {
    Repr {
        ty: PacketType::Data,
        flags: flags::RETRANSMIT,
        path: 5,
        src_port: 0x1234,
        src_nonce: 0x0102_0304_0506_0708,
        dst_token: 0x4142_4344_4546_4748,
        psn: 0x0a0b_0c0d,
        psn_floor: 0x0a0b_0c00,
        ack: Some(AckRepr {
            cum: 0x1112_1314,
            recent: 0x1516_1718,
            delay_us: 0x191a,
            credit: 0x1b1c,
            sack_base: 0x2122_2324,
            sack_bits: 0x3132_3334_3536_3738,
            repeat: false,
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
        0x02, 0x01, 0x05, 0x05,             // version 2, type DATA, flags ACK_PRESENT|RETRANSMIT, path
        0x12, 0x34, 0x00, 0x03,             // src_port, payload_len
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // src_nonce
        0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, // dst_token
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
        let ty = match rng.below(6) {
            0 => PacketType::Data,
            1 => PacketType::Ack,
            2 => PacketType::Reset,
            3 => PacketType::Hello,
            4 => PacketType::Challenge,
            _ => PacketType::Probe,
        };
        // Session-less packets carry no flags and no ack.
        let bare = matches!(
            ty,
            PacketType::Reset | PacketType::Hello | PacketType::Challenge
        );
        let ack = if ty == PacketType::Ack || (!bare && rng.chance(0.5)) {
            Some(AckRepr {
                cum: rng.next_u64() as u32,
                recent: rng.next_u64() as u32,
                delay_us: rng.next_u64() as u16,
                credit: rng.next_u64() as u16,
                sack_base: rng.next_u64() as u32,
                sack_bits: rng.next_u64(),
                repeat: rng.next_u64() & 1 == 1,
            })
        } else {
            None
        };
        let psn = rng.next_u64() as u32;
        let r = Repr {
            ty,
            flags: if bare {
                0
            } else {
                (rng.next_u64() as u8) & (flags::ACK_NOW | flags::RETRANSMIT | flags::MORE)
            },
            path: rng.next_u64() as u8,
            src_port: rng.next_u64() as u16,
            src_nonce: rng.next_u64().max(1),
            dst_token: match ty {
                PacketType::Hello => 0,
                _ => rng.next_u64().max(1),
            },
            psn,
            // DATA: the floor is never after the PSN (`Repr::parse`).
            psn_floor: if ty == PacketType::Data {
                psn.wrapping_sub(rng.below(1 << 31) as u32)
            } else {
                rng.next_u64() as u32
            },
            ack,
            payload_len: match ty {
                PacketType::Data => rng.below(100) as u16,
                PacketType::Hello | PacketType::Challenge => HANDSHAKE_LEN as u16,
                _ => 0,
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
    b[0] = 1; // version 1 (epochs) is not understood any more
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
    b[2] |= 0x40; // not a defined flag
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
    let mut b = buf;
    b[2] |= flags::MAC; // a tag would follow the header: 16 bytes missing
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Truncated)
    );
    // A DATA floor after its PSN (the sample: PSN 0x0a0b0c0d): one step
    // after is refused, the PSN itself and 2^31 - 1 before are taken.
    for (floor, ok) in [
        (0x0a0b_0c0eu32, false),
        (0x8a0b_0c0c, false),
        (0x0a0b_0c0d, true),
        (0x8a0b_0c0e, true),
    ] {
        let mut r = sample();
        r.psn_floor = floor;
        let mut b = [0u8; HEADER_LEN + 3];
        r.emit(&mut b).unwrap();
        let got = Repr::parse(&Packet::new_unchecked(&b[..]));
        assert_eq!(got.is_ok(), ok, "floor {floor:#x}: {got:?}");
        if !ok {
            assert_eq!(got, Err(WireError::Malformed));
        }
    }
    let mut b = buf;
    b[8..16].fill(0); // src_nonce 0
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
    let mut b = buf;
    b[1] = 8; // the first unassigned type
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::BadType)
    );
    assert!(sample().emit(&mut [0u8; 10]).is_err());
}

/// A HELLO and its CHALLENGE, byte by byte (the vectors in `PROTOCOL.md` §2),
/// and the rules that keep session-less packets small and unambiguous.
#[test]
fn handshake_vectors() {
    let hello = Repr {
        ty: PacketType::Hello,
        flags: 0,
        path: 0,
        src_port: 0x1234,
        src_nonce: 0x0102_0304_0506_0708,
        dst_token: 0,
        psn: 0,
        psn_floor: 0,
        ack: None,
        payload_len: HANDSHAKE_LEN as u16,
    };
    let mut buf = [0u8; HEADER_LEN + HANDSHAKE_LEN];
    hello.emit(&mut buf).unwrap();
    HandshakeRepr {
        value: 0x5152_5354_5556_5758,
        caps: 0,
    }
    .emit(&mut buf[HEADER_LEN..])
    .unwrap();
    #[rustfmt::skip]
    let want: [u8; HEADER_LEN + HANDSHAKE_LEN] = [
        0x02, 0x05, 0x00, 0x00,  0x12, 0x34, 0x00, 0x10, // v2, HELLO, no flags, path 0, src_port, payload 16
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // src_nonce
        0, 0, 0, 0, 0, 0, 0, 0,                          // dst_token: none yet
        0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0, // psn .. credit: 0
        0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0, // sack: 0
        0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,  // echo value
        0, 0, 0, 0, 0, 0, 0, 0,                          // caps
    ];
    assert_eq!(buf, want);
    let p = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(Repr::parse(&p).unwrap(), hello);
    let hs = HandshakeRepr::parse(p.payload()).unwrap();
    assert_eq!(hs.value, 0x5152_5354_5556_5758);
    // The CHALLENGE: echo in dst_token, the cookie in the payload.
    let mut ch = [0u8; HEADER_LEN + HANDSHAKE_LEN];
    Repr {
        ty: PacketType::Challenge,
        dst_token: 0x5152_5354_5556_5758,
        ..hello
    }
    .emit(&mut ch)
    .unwrap();
    HandshakeRepr {
        value: 0x6162_6364_6566_6768,
        caps: 0,
    }
    .emit(&mut ch[HEADER_LEN..])
    .unwrap();
    assert_eq!(ch[1], 6);
    assert_eq!(&ch[16..24], &want[HEADER_LEN..HEADER_LEN + 8]);
    assert_eq!(
        ch[HEADER_LEN..HEADER_LEN + 8],
        [0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68]
    );
    assert!(Repr::parse(&Packet::new_checked(&ch[..]).unwrap()).is_ok());
    // Rules: a HELLO names no token, a CHALLENGE and a RESET must; no flags
    // on any of them; a handshake payload is exactly 16 bytes; value != 0.
    let mut b = buf;
    b[23] = 1;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
    let mut b = ch;
    b[16..24].fill(0);
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
    let mut b = buf;
    b[2] = flags::ACK_NOW;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
    let mut b = buf;
    b[2] = flags::MAC; // allowed on a HELLO, but then its tag is missing
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Truncated)
    );
    let mut b = buf;
    b[7] = 8;
    assert_eq!(
        Repr::parse(&Packet::new_unchecked(&b[..])),
        Err(WireError::Malformed)
    );
    assert_eq!(HandshakeRepr::parse(&[0u8; 16]), Err(WireError::Malformed));
    assert_eq!(HandshakeRepr::parse(&[1u8; 15]), Err(WireError::Malformed));
}

/// A RAILS packet byte by byte (the vector in `PROTOCOL.md` §5.1), its
/// payload both ways (IPv4 mapped, IPv6 as is), and its rules: in a
/// session (a token), 2 to 8 entries of 16 bytes, flags ACK_NOW and MAC only.
#[test]
fn rails_vector_and_rules() {
    let list = RailsRepr {
        rails: vec![
            "198.18.20.1".parse().unwrap(),
            "198.18.21.1".parse().unwrap(),
        ],
    };
    let r = Repr {
        ty: PacketType::Rails,
        flags: flags::ACK_NOW,
        path: 0,
        src_port: 0x1234,
        src_nonce: 0x0102_0304_0506_0708,
        dst_token: 0x4142_4344_4546_4748,
        psn: 0,
        psn_floor: 0,
        ack: None,
        payload_len: list.buffer_len() as u16,
    };
    let mut buf = [0u8; HEADER_LEN + 32];
    r.emit(&mut buf).unwrap();
    list.emit(&mut buf[HEADER_LEN..]).unwrap();
    #[rustfmt::skip]
    let want: [u8; HEADER_LEN + 32] = [
        0x02, 0x07, 0x02, 0x00,  0x12, 0x34, 0x00, 0x20, // v2, RAILS, ACK_NOW, path 0, src_port, payload 32
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // src_nonce
        0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,  // dst_token: the session token
        0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0, // psn .. credit: 0
        0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0, // sack: 0
        0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0xff, 0xff, 198, 18, 20, 1, // rail 0 ::ffff:198.18.20.1
        0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0xff, 0xff, 198, 18, 21, 1, // rail 1 ::ffff:198.18.21.1
    ];
    assert_eq!(buf, want);
    let p = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(Repr::parse(&p).unwrap(), r);
    assert_eq!(RailsRepr::parse(p.payload()).unwrap(), list);
    // IPv6 entries stay IPv6; 8 rails is the most.
    let v6 = RailsRepr {
        rails: (1..=8u16)
            .map(|i| std::net::IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i)))
            .collect(),
    };
    let mut b = vec![0u8; v6.buffer_len()];
    v6.emit(&mut b).unwrap();
    assert_eq!(RailsRepr::parse(&b).unwrap(), v6);
    let nine = RailsRepr {
        rails: vec![v6.rails[0]; 9],
    };
    assert!(nine.emit(&mut [0u8; 144]).is_err());
    assert!(RailsRepr::parse(&[0u8; 16]).is_err());
    assert!(RailsRepr::parse(&[0u8; 144]).is_err());
    assert!(RailsRepr::parse(&[0u8; 33]).is_err());
    let bad = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = buf.to_vec();
        f(&mut b);
        Repr::parse(&Packet::new_unchecked(&b[..]))
    };
    assert_eq!(
        bad(&|b| b[16..24].fill(0)),
        Err(WireError::Malformed),
        "no token"
    );
    assert_eq!(
        bad(&|b| b[2] |= flags::MORE),
        Err(WireError::Malformed),
        "flag"
    );
    assert_eq!(
        bad(&|b| b[2] |= flags::RETRANSMIT),
        Err(WireError::Malformed)
    );
    assert_eq!(
        bad(&|b| b[2] |= flags::ACK_PRESENT),
        Err(WireError::Malformed),
        "ack"
    );
    assert_eq!(bad(&|b| b[7] = 16), Err(WireError::Malformed), "one entry");
    assert_eq!(
        bad(&|b| {
            b[7] = 48;
            b.extend_from_slice(&[0u8; 16]);
        })
        .map(|r| r.payload_len),
        Ok(48),
        "three entries"
    );
    assert_eq!(
        bad(&|b| b[7] = 31),
        Err(WireError::Malformed),
        "not whole entries"
    );
    assert_eq!(bad(&|b| b[2] = 0), Ok(Repr { flags: 0, ..r }), "an answer");
    assert_eq!(CAP_RAILS, 2);
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(0xdead);
    let mut valid = [0u8; HEADER_LEN + 16];
    sample().emit(&mut valid).unwrap();
    let mut hello = valid;
    hello[1] = 5;
    hello[2] = 0;
    hello[7] = 16;
    hello[16..24].fill(0);
    hello[HEADER_LEN] = 1;
    let mut ok = 0u32;
    for i in 0..200_000u32 {
        let mut buf = [0u8; HEADER_LEN + 16];
        let len = rng.below(buf.len() as u64 + 1) as usize;
        if i % 2 == 0 {
            for b in buf.iter_mut() {
                *b = rng.next_u64() as u8;
            }
        } else {
            buf = if i % 4 == 1 { valid } else { hello };
            for _ in 0..=rng.below(4) {
                let at = rng.below(buf.len() as u64) as usize;
                buf[at] ^= 1 << rng.below(8);
            }
        }
        if let Ok(p) = Packet::new_checked(&buf[..len]) {
            if let Ok(r) = Repr::parse(&p) {
                ok += 1;
                assert!(r.buffer_len() <= len);
                let _ = HandshakeRepr::parse(p.payload());
            }
        }
    }
    assert!(ok > 0, "mutations of a valid packet should sometimes parse");
}

/// The MAC test vector of PROTOCOL.md §2: the sample DATA packet flagged
/// MAC, sent by incarnation 0x0102030405060708 to incarnation
/// 0x1112131415161718 with job key material "spray test job key": header,
/// the 16-byte tag, then the payload. The tag is recomputed here from the
/// written recipe (BLAKE3 derive_key / keyed_hash), not from spray's code.
#[test]
fn mac_test_vector() {
    let mut r = sample();
    r.flags |= flags::MAC;
    assert_eq!(r.buffer_len(), HEADER_LEN + TAG_LEN + 3);
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut buf).unwrap();
    buf[HEADER_LEN + TAG_LEN..].copy_from_slice(b"abc");
    let (src, dst) = (0x0102_0304_0506_0708u64, 0x1112_1314_1516_1718u64);
    let material = b"spray test job key";
    // The recipe, step by step.
    let job = blake3::derive_key("spray 2026-05 srd v2 job key", material);
    let mut m = job.to_vec();
    m.extend_from_slice(&src.to_be_bytes());
    m.extend_from_slice(&dst.to_be_bytes());
    let k = blake3::derive_key("spray 2026-05 srd v2 session mac", &m);
    let mut input = buf[..HEADER_LEN].to_vec();
    input.extend_from_slice(b"abc");
    let full = blake3::keyed_hash(&k, &input);
    let tag = &full.as_bytes()[..TAG_LEN];
    assert_eq!(
        spray::srd::session_tag(material, src, dst, &buf[..HEADER_LEN], b"abc").unwrap(),
        tag
    );
    buf[HEADER_LEN..HEADER_LEN + TAG_LEN].copy_from_slice(tag);
    #[rustfmt::skip]
    let want_head: [u8; HEADER_LEN] = [
        0x02, 0x01, 0x85, 0x05,             // flags MAC|ACK_PRESENT|RETRANSMIT
        0x12, 0x34, 0x00, 0x03,             // payload_len 3: the tag is not counted
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
        0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
        0x0a, 0x0b, 0x0c, 0x0d, 0x0a, 0x0b, 0x0c, 0x00,
        0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
        0x19, 0x1a, 0x1b, 0x1c, 0x21, 0x22, 0x23, 0x24,
        0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,
    ];
    assert_eq!(&buf[..HEADER_LEN], &want_head[..]);
    let hex: String = tag.iter().map(|b| format!("{b:02x} ")).collect();
    println!("MAC vector tag: {hex}");
    // The tag as PROTOCOL.md prints it.
    let doc = include_str!("../../PROTOCOL.md");
    assert!(doc.contains(hex.trim()), "PROTOCOL.md lacks the tag {hex}");
    let p = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(p.tag(), Some(tag));
    assert_eq!(p.payload(), b"abc");
    assert_eq!(Repr::parse(&p).unwrap(), r);
    // A HELLO's tag uses the handshake key, derived from the job key alone.
    let hk = blake3::derive_key("spray 2026-05 srd v2 handshake mac", &job);
    let h = blake3::keyed_hash(&hk, &input);
    assert_eq!(
        spray::srd::handshake_tag(material, &buf[..HEADER_LEN], b"abc").unwrap(),
        h.as_bytes()[..TAG_LEN]
    );
}

/// The tags a keyed engine puts on the wire are those of the recipe: a
/// DATA packet of a live session verifies with `session_tag` for the
/// sender's and receiver's nonces.
#[test]
fn engine_tags_follow_the_recipe() {
    use spray::config::AuthKey;
    use spray::sim::check::{config, payload};
    use spray::sim::{addr, Node, SrdNode};
    use spray::time::Instant;
    let key = b"recipe";
    let cfg = |i: usize, nonce: u64| {
        let mut c = config(i, 1, nonce);
        c.auth_key = Some(AuthKey(key.to_vec()));
        c
    };
    let mut n = [SrdNode::new(&cfg(0, 0xaaaa)), SrdNode::new(&cfg(1, 0xbbbb))];
    n[0].push(addr(1), 1, payload(1, 100));
    let mut buf = vec![0u8; 4096];
    let mut checked = 0;
    let mut now = Instant::ZERO;
    for _ in 0..10 {
        for x in n.iter_mut() {
            if x.poll_timeout().is_some_and(|t| t <= now) {
                x.handle_timeout(now);
            }
        }
        for i in 0..2 {
            while let Some(t) = n[i].poll_transmit(now, &mut buf) {
                let d = buf[..t.len].to_vec();
                let p = Packet::new_checked(&d[..]).unwrap();
                let h = Repr::parse(&p).unwrap();
                assert_ne!(h.flags & flags::MAC, 0);
                let (src, dst) = if i == 0 {
                    (0xaaaa, 0xbbbb)
                } else {
                    (0xbbbb, 0xaaaa)
                };
                let want = match h.ty {
                    PacketType::Hello | PacketType::Challenge | PacketType::Reset => {
                        spray::srd::handshake_tag(key, p.header_bytes(), p.payload())
                    }
                    _ => {
                        checked += 1;
                        spray::srd::session_tag(key, src, dst, p.header_bytes(), p.payload())
                    }
                };
                assert_eq!(p.tag(), want.as_ref().map(|t| &t[..]), "{h:?}");
                n[1 - i].handle_datagram(now, addr(i), &d);
            }
        }
        now = now + core::time::Duration::from_millis(1);
    }
    assert!(checked >= 2, "a DATA and its ACK");
    assert_eq!(n[0].acked().count(), 1);
}
