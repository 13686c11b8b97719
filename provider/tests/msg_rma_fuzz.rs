//! Hostile RMA input: random, structured and mutated RMA datagrams (types 7..13),
//! random SRD reports and local posts never panic, keep target state bounded,
//! and leave the layer usable.

mod msg_rma_util;

use msg_rma_util::{lock, Regions, TBuf};
use spray::config::{Config, EpMode};
use spray::dgram::{Datagrams, DgramEvent, FailReason, PeerId, SendError};
use spray::msg::atomic::{ATOMIC_OPS, ATOMIC_TYPES};
use spray::msg::{MsgLayer, RmaKind, RmaOp, MAX_RMA_INFLIGHT};
use spray::rng::Rng;
use spray::wire::msg::{
    AtomicSub, MsgType, Packet, Repr, RmaSub, ATOMIC_SUB_LEN, HEADER_LEN, RMA_SUB_LEN,
};

const RMA_TYPES: [MsgType; 8] = [
    MsgType::Write,
    MsgType::ReadReq,
    MsgType::ReadResp,
    MsgType::Atomic,
    MsgType::AtomicResp,
    MsgType::WriteDone,
    MsgType::RmaNak,
    MsgType::RmaAbort,
];

/// A datagram service that takes what it is given (sometimes refusing for room),
/// remembers recent tokens for random reports, and keeps the last payload.
struct Sink {
    rng: Rng,
    tokens: Vec<(PeerId, u64)>,
    last: Vec<u8>,
    /// Every payload sent to peer 7 (the fresh peer of the final check).
    to_fresh: Vec<Vec<u8>>,
    sent: u64,
}

impl Datagrams for Sink {
    fn max_payload(&self) -> usize {
        1400
    }
    fn can_send(&self, _peer: PeerId) -> bool {
        true
    }
    fn send(
        &mut self,
        peer: PeerId,
        token: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), SendError> {
        if len > 1400 {
            return Err(SendError::TooLarge);
        }
        if self.rng.chance(0.05) {
            return Err(SendError::WouldBlock);
        }
        self.last.clear();
        self.last.resize(len, 0);
        fill(&mut self.last);
        self.sent += 1;
        if peer == PeerId(7) {
            self.to_fresh.push(self.last.clone());
        }
        if self.tokens.len() < 256 {
            self.tokens.push((peer, token));
        } else {
            let i = self.rng.below(256) as usize;
            self.tokens[i] = (peer, token);
        }
        Ok(())
    }
}

fn random_rma(rng: &mut Rng, buf: &mut Vec<u8>) {
    buf.clear();
    let ty = RMA_TYPES[rng.below(RMA_TYPES.len() as u64) as usize];
    let total = match rng.below(4) {
        0 => rng.below(4),
        1 => rng.below(5000),
        2 => rng.below(1 << 40),
        _ => rng.next_u64() >> 2,
    };
    let key = rng.below(4);
    let addr = match rng.below(3) {
        0 => rng.below(5000),
        1 => rng.next_u64(),
        _ => u64::MAX - rng.below(10),
    };
    let body = rng.below(1300) as usize;
    let (sub_len, data_len, offset) = match ty {
        MsgType::Write => {
            let n = (body as u64).min(total) as usize;
            (RMA_SUB_LEN, n, rng.below(total - n as u64 + 1))
        }
        MsgType::ReadReq => (RMA_SUB_LEN, 0, 0),
        MsgType::ReadResp => {
            let n = (body as u64).min(total) as usize;
            (0, n, rng.below(total - n as u64 + 1))
        }
        MsgType::Atomic => (ATOMIC_SUB_LEN, rng.below(200) as usize, 0),
        MsgType::AtomicResp => (0, (total as usize).min(body), 0),
        _ => (0, 0, 0),
    };
    let total = match ty {
        MsgType::Atomic | MsgType::AtomicResp => data_len as u64,
        _ => total,
    };
    let r = Repr {
        ty,
        seq: rng.below(16) as u32,
        total,
        offset,
        tag: None,
        data: (ty == MsgType::Write && rng.chance(0.5)).then(|| rng.next_u64()),
    };
    buf.resize(HEADER_LEN + sub_len + data_len, 0);
    r.emit_into(buf);
    if ty == MsgType::Atomic {
        let sub = AtomicSub {
            key,
            addr,
            op: rng.below(21) as u8,
            dt: rng.below(11) as u8,
            flags: rng.below(4) as u8,
            count: rng.below(40) as u32,
        };
        sub.emit(&mut buf[HEADER_LEN..]);
    } else if sub_len > 0 {
        (RmaSub { key, addr }).emit(&mut buf[HEADER_LEN..]);
    }
    for b in &mut buf[HEADER_LEN + sub_len..] {
        *b = rng.next_u64() as u8;
    }
    if rng.chance(0.15) {
        let i = rng.below(buf.len() as u64) as usize;
        buf[i] ^= 1 << rng.below(8);
    }
    if rng.chance(0.05) {
        let cut = rng.below(buf.len() as u64 + 1) as usize;
        buf.truncate(cut);
    }
}

fn local_op(rng: &mut Rng, peer: PeerId, ctx: u64) -> RmaOp<TBuf> {
    let len = rng.below(3000) as usize;
    let op = ATOMIC_OPS[rng.below(ATOMIC_OPS.len() as u64) as usize];
    let dt = ATOMIC_TYPES[rng.below(ATOMIC_TYPES.len() as u64) as usize];
    let kind = match rng.below(5) {
        0 => RmaKind::Write {
            data: rng.chance(0.5).then_some(ctx),
        },
        1 => RmaKind::Read,
        2 => RmaKind::Atomic { op, dt },
        3 => RmaKind::FetchAtomic {
            op,
            dt,
            result: TBuf::Own(vec![0; 64]),
        },
        _ => RmaKind::CompareAtomic {
            op,
            dt,
            compare: TBuf::Own(vec![0; 64]),
            result: TBuf::Own(vec![0; 64]),
        },
    };
    let blen = if matches!(kind, RmaKind::Write { .. } | RmaKind::Read) {
        len
    } else {
        dt.size() * (1 + rng.below(8) as usize)
    };
    RmaOp {
        peer,
        kind,
        buf: TBuf::Own(vec![7; blen]),
        key: rng.below(4),
        addr: rng.below(5000),
        context: ctx,
        report: true,
    }
}

#[test]
fn hostile_rma_datagrams_never_panic() {
    for seed in 0..12u64 {
        let mut rng = Rng::new(seed);
        let cfg = Config::new(EpMode::Rdm, "127.0.0.1:1".parse().expect("addr"));
        let mut m: MsgLayer<TBuf> = MsgLayer::new(&cfg);
        let regions = Regions::default();
        let mem = regions.add(1, 4096, Some(seed), true, true);
        regions.add(2, 100, None, true, false);
        regions.add(3, 100, None, false, true);
        if seed % 4 != 0 {
            m.set_rma_target(Box::new(regions.clone()));
        }
        let mut sink = Sink {
            rng: Rng::new(seed ^ 0xabc),
            tokens: Vec::new(),
            last: Vec::new(),
            to_fresh: Vec::new(),
            sent: 0,
        };
        let mut buf = Vec::new();
        for i in 0..4000u64 {
            let peer = PeerId(rng.below(3) as u32);
            match rng.below(20) {
                0 => {
                    let _ = m.post_rma(local_op(&mut rng, peer, i));
                }
                1 if !sink.tokens.is_empty() => {
                    let (p, token) = sink.tokens[rng.below(sink.tokens.len() as u64) as usize];
                    let ev = if rng.chance(0.5) {
                        DgramEvent::Acked {
                            peer: p,
                            token,
                            count: 1,
                        }
                    } else {
                        let reason = [FailReason::Unreachable, FailReason::PeerRestarted]
                            [rng.below(2) as usize];
                        DgramEvent::Failed {
                            peer: p,
                            token,
                            reason,
                        }
                    };
                    m.handle_event(ev);
                }
                2 => m.handle_event(DgramEvent::PeerRestarted { peer }),
                _ => {
                    random_rma(&mut rng, &mut buf);
                    m.handle_payload(peer, &buf);
                }
            }
            m.pump(&mut sink);
            while m.poll_completion().is_some() {}
        }
        let s = m.rma_stats().clone();
        println!("seed {seed}: {s:?}, {} datagrams out", sink.sent);
        let cap = 3 * 2 * MAX_RMA_INFLIGHT as usize;
        assert!(
            s.live_writes <= cap && s.live_reads <= cap,
            "seed {seed}: {s:?}"
        );
        assert!(
            sink.sent > 0 && s.bad > 0,
            "seed {seed}: fuzz reached nothing: {s:?}"
        );
        // Still usable: a fresh peer writes 10 bytes and gets its WRITE_DONE.
        m.set_rma_target(Box::new(regions.clone()));
        let fresh = PeerId(7);
        let r = Repr {
            ty: MsgType::Write,
            seq: 99,
            total: 10,
            offset: 0,
            tag: None,
            data: Some(5),
        };
        buf.clear();
        buf.resize(HEADER_LEN + RMA_SUB_LEN + 10, 0xEE);
        r.emit_into(&mut buf);
        (RmaSub { key: 1, addr: 100 }).emit(&mut buf[HEADER_LEN..]);
        m.handle_payload(fresh, &buf);
        let c = m.poll_completion().expect("remote write completion");
        assert_eq!((c.data, c.len, c.src), (Some(5), 10, Some(fresh)));
        // A WouldBlock streak cannot hide the reply: pump a few times.
        for _ in 0..50 {
            m.pump(&mut sink);
        }
        assert!(lock(&mem)[100..110].iter().all(|&b| b == 0xEE));
        assert_eq!(
            sink.to_fresh.len(),
            1,
            "seed {seed}: one reply to the fresh peer"
        );
        let done = Repr::parse(&Packet::new_unchecked(&sink.to_fresh[0][..])).expect("parses");
        assert_eq!(
            (done.ty, done.seq, done.total),
            (MsgType::WriteDone, 99, 10)
        );
    }
}
