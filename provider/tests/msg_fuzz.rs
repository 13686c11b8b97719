//! Hostile input to the message layer: random and mutated datagrams never panic,
//! never allocate without bound, and leave the layer usable.

mod msg_fake;

use msg_fake::{cfg, pattern, rop, sop, Cluster};
use spray::config::EpMode;
use spray::dgram::PeerId;
use spray::msg::{CompKind, RecvFlags};
use spray::rng::Rng;
use spray::wire::msg::{MsgType, Repr, HEADER_LEN};

const TYPES: [MsgType; 6] = [
    MsgType::Data,
    MsgType::Rts,
    MsgType::Cts,
    MsgType::RData,
    MsgType::Credit,
    MsgType::Abort,
];

fn random_datagram(rng: &mut Rng, buf: &mut Vec<u8>) {
    buf.clear();
    if rng.chance(0.2) {
        let len = rng.below(100) as usize;
        buf.extend((0..len).map(|_| rng.next_u64() as u8));
        return;
    }
    let ty = TYPES[rng.below(6) as usize];
    let total = match rng.below(4) {
        0 => rng.below(4),
        1 => rng.below(70_000),
        2 => rng.below(1 << 40),
        _ => rng.next_u64() >> 2,
    };
    let plen = match ty {
        MsgType::Data | MsgType::RData => rng.below(total.min(1300) + 1) as usize,
        _ => 0,
    };
    let r = Repr {
        ty,
        seq: rng.below(8) as u32,
        total,
        offset: rng.below(total - plen as u64 + 1),
        tag: rng.chance(0.5).then(|| rng.below(3)),
        data: rng.chance(0.5).then(|| rng.next_u64()),
    };
    buf.resize(HEADER_LEN + plen, 0);
    r.emit_into(buf);
    if rng.chance(0.1) {
        let i = rng.below(buf.len() as u64) as usize;
        buf[i] ^= 1 << rng.below(8);
    }
}

#[test]
fn hostile_datagrams_never_panic() {
    for mode in [EpMode::Rdm, EpMode::Dgram] {
        for seed in 0..20u64 {
            let mut rng = Rng::new(seed);
            let mut c = Cluster::new(3, cfg(mode), seed);
            let mut buf = Vec::new();
            for i in 0..3000u64 {
                match rng.below(10) {
                    0 => {
                        let mut r = rop(rng.below(5000) as usize, None, None, i);
                        r.flags = RecvFlags {
                            peek: rng.chance(0.2),
                            claim: rng.chance(0.2),
                            discard: false,
                            multi_recv: mode == EpMode::Rdm && rng.chance(0.1),
                        };
                        let _ = c.nodes[1].post_recv(r);
                    }
                    1 => {
                        let tag = Some((rng.below(3), 0));
                        let _ = c.nodes[1].post_recv(rop(rng.below(5000) as usize, tag, None, i));
                    }
                    _ => {
                        random_datagram(&mut rng, &mut buf);
                        let from = PeerId(rng.below(3) as u32);
                        c.nodes[1].handle_payload(from, &buf);
                    }
                }
                c.pump(1);
            }
            assert!(c.nodes[1].unexpected_bytes() <= 64 << 20);
            // Still usable: a fresh peer's traffic goes through.
            let _ = c.run(200_000);
            c.comps[1].clear();
            c.nodes[1].handle_event(spray::dgram::DgramEvent::PeerRestarted { peer: PeerId(2) });
            c.recv(1, rop(1000, Some((0xFFFF, 0)), Some(2), 1 << 40));
            let mut s = sop(1, pattern(9, 1000), Some(0xFFFF), 5);
            s.data = Some(1);
            c.send(2, 1, s);
            assert!(c.run(200_000), "mode {mode:?} seed {seed}");
            let r = c.take(1, CompKind::Recv);
            let r = r
                .iter()
                .find(|r| r.context == 1 << 40)
                .expect("fresh traffic received");
            assert_eq!(r.buf.as_ref().unwrap()[..], pattern(9, 1000)[..]);
        }
    }
}
