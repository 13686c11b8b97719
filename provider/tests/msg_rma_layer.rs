//! The RMA initiator alone, over a datagram sink that never blocks: the limit of
//! started ops per peer, replies that free it, and exactly-once completion
//! against duplicate or inconsistent replies.

mod msg_rma_util;

use msg_rma_util::TBuf;
use spray::config::{Config, EpMode};
use spray::dgram::{Datagrams, PeerId, SendError};
use spray::msg::{CompKind, MsgLayer, RmaKind, RmaOp, MAX_RMA_INFLIGHT};
use spray::wire::msg::{MsgType, Packet, Repr, HEADER_LEN};

#[derive(Default)]
struct Sink {
    sent: Vec<Vec<u8>>,
}

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
        let mut b = vec![0u8; len];
        fill(&mut b);
        self.sent.push(b);
        Ok(())
    }
}

fn done(id: u32, total: u64) -> Vec<u8> {
    let r = Repr {
        ty: MsgType::WriteDone,
        seq: id,
        total,
        offset: 0,
        tag: None,
        data: None,
    };
    let mut b = vec![0u8; HEADER_LEN];
    r.emit_into(&mut b);
    b
}

#[test]
fn started_ops_are_limited_and_replies_complete_once() {
    let cfg = Config::new(EpMode::Rdm, "127.0.0.1:1".parse().expect("addr"));
    let mut m: MsgLayer<TBuf> = MsgLayer::new(&cfg);
    let peer = PeerId(1);
    let n = MAX_RMA_INFLIGHT as usize + 500;
    for i in 0..n {
        let op = RmaOp {
            peer,
            kind: RmaKind::Write { data: None },
            buf: TBuf::Own(vec![i as u8; 8]),
            key: 1,
            addr: 8 * i as u64,
            context: i as u64,
            report: true,
        };
        m.post_rma(op).expect("post");
    }
    let mut sink = Sink::default();
    m.pump(&mut sink);
    assert_eq!(
        sink.sent.len(),
        MAX_RMA_INFLIGHT as usize,
        "limit not applied"
    );
    assert!(
        !m.has_pending_sends(),
        "a throttled peer must not keep pump busy"
    );
    for (i, d) in sink.sent.iter().enumerate() {
        let r = Repr::parse(&Packet::new_unchecked(&d[..])).expect("parses");
        assert_eq!((r.ty, r.seq, r.total), (MsgType::Write, i as u32, 8));
    }
    // Ten replies free ten starts.
    for id in 0..10 {
        m.handle_payload(peer, &done(id, 8));
    }
    m.pump(&mut sink);
    assert_eq!(sink.sent.len(), MAX_RMA_INFLIGHT as usize + 10);
    let mut comps = Vec::new();
    while let Some(c) = m.poll_completion() {
        comps.push(c);
    }
    assert_eq!(comps.len(), 10);
    assert!(comps
        .iter()
        .all(|c| c.kind == CompKind::Write && c.error.is_none() && c.len == 8));
    // A duplicate, a wrong total, an unknown id and a NAK after DONE: no completion.
    let stray = m.rma_stats().stray;
    m.handle_payload(peer, &done(3, 8));
    m.handle_payload(peer, &done(20, 9));
    m.handle_payload(peer, &done(1 << 30, 8));
    let mut nak = done(4, 0);
    nak[1] = 13;
    m.handle_payload(peer, &nak);
    assert!(m.poll_completion().is_none());
    assert_eq!(m.rma_stats().stray, stray + 4);
    // Op 20 is still live: its proper reply completes it once.
    m.handle_payload(peer, &done(20, 8));
    let c = m.poll_completion().expect("op 20");
    assert_eq!((c.context, c.error), (20, None));
    assert_eq!(m.rma_stats().live_ops, MAX_RMA_INFLIGHT as usize - 1);
}
