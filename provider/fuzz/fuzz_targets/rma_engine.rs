//! Fuzz target: any byte string as an RMA sub-header, and as a message-layer
//! payload (forced to one of the RMA types 7..13) fed to a message layer that has
//! a key table installed and RMA ops of its own in flight — nothing may panic.
//! Run: `cd provider && cargo +nightly fuzz run rma_engine`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spray::buf::{RmaAccess, RmaTarget};
use spray::config::{Config, EpMode};
use spray::dgram::{Datagrams, DgramEvent, FailReason, PeerId, SendError};
use spray::msg::{AtomicOp, AtomicType, MsgLayer, RmaKind, RmaOp};
use spray::wire::msg::{AtomicSub, RmaSub};

/// Key 1: 4 KiB, every access; key 2: read-only. Buffers are copies (fine for fuzzing).
struct Keys;

impl RmaTarget<Vec<u8>> for Keys {
    fn resolve(&self, key: u64, addr: u64, len: usize, access: RmaAccess) -> Option<Vec<u8>> {
        let ok = match key {
            1 => true,
            2 => access == RmaAccess::Read,
            _ => false,
        };
        (ok && addr.checked_add(len as u64)? <= 4096).then(|| vec![0x5a; len])
    }
}

struct Sink;

impl Datagrams for Sink {
    fn max_payload(&self) -> usize {
        1400
    }
    fn can_send(&self, _: PeerId) -> bool {
        true
    }
    fn send(
        &mut self,
        _: PeerId,
        _: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), SendError> {
        if len > 1400 {
            return Err(SendError::TooLarge);
        }
        let mut b = vec![0u8; len];
        fill(&mut b);
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = RmaSub::parse(data);
    let _ = AtomicSub::parse(data);
    let cfg = Config::new(EpMode::Rdm, "10.0.0.1:5000".parse().expect("literal"));
    let mut m: MsgLayer<Vec<u8>> = MsgLayer::new(&cfg);
    m.set_rma_target(Box::new(Keys));
    let peer = PeerId(1);
    let kinds = [
        RmaKind::Read,
        RmaKind::Write { data: Some(1) },
        RmaKind::FetchAtomic {
            op: AtomicOp::Sum,
            dt: AtomicType::U64,
            result: vec![0; 8],
        },
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        let buf = vec![1u8; if i == 2 { 8 } else { 3000 }];
        let op = RmaOp {
            peer,
            kind,
            buf,
            key: 1,
            addr: 0,
            context: i as u64,
            report: true,
        };
        let _ = m.post_rma(op);
    }
    m.pump(&mut Sink);
    // Every RMA type with the fuzzer's bytes as header fields and body; op ids 0..2 are live.
    for ty in 7u8..=13 {
        let mut p = data.to_vec();
        if p.len() > 1 {
            p[0] = 1;
            p[1] = ty;
        }
        m.handle_payload(peer, &p);
        m.pump(&mut Sink);
    }
    m.handle_event(DgramEvent::Failed {
        peer,
        token: 0,
        reason: FailReason::Unreachable,
    });
    m.pump(&mut Sink);
    while m.poll_completion().is_some() {}
});
