//! `MsgLayer::rx_message_left`: how much of its message is still to come
//! after the latest DATA or RDATA payload handled, which a driver reads to
//! receive a short message's tail before it transmits (eager and
//! rendezvous messages alike).

mod msg_fake;

use msg_fake::{cfg, pattern, rop, sop, Cluster, Pkt};
use spray::config::EpMode;
use spray::dgram::{DgramEvent, PeerId};
use spray::wire::msg::{MsgType, Packet, Repr, HEADER_LEN};

/// Take node 0's DATA and RDATA to node 1 out of the network, in offset
/// order (everything else stays in flight).
fn data_in_order(c: &mut Cluster) -> Vec<(Pkt, u64)> {
    let offset = |p: &Pkt| {
        let r = Repr::parse(&Packet::new_checked(&p.data[..]).ok()?).ok()?;
        matches!(r.ty, MsgType::Data | MsgType::RData).then_some(r.offset)
    };
    let (data, rest): (Vec<Pkt>, Vec<Pkt>) = c
        .net
        .inflight
        .drain(..)
        .partition(|p| p.from == 0 && offset(p).is_some());
    c.net.inflight = rest;
    for p in &data {
        if let Some(n) = c.net.counts.get_mut(&(p.from, p.to)) {
            *n -= 1;
        }
    }
    let mut v: Vec<(Pkt, u64)> = data
        .into_iter()
        .map(|p| {
            let off = offset(&p).unwrap_or(0);
            (p, off)
        })
        .collect();
    v.sort_by_key(|(_, off)| *off);
    v
}

fn check(len: usize) {
    let mut c = Cluster::new(2, cfg(EpMode::Rdm), 3);
    c.recv(1, rop(len, Some((7, 0)), None, 100));
    c.send(0, 1, sop(1, pattern(3, len), Some(7), 5));
    c.pump(0);
    let mut got = 0;
    // Data is taken out of the network as it appears and handled in offset
    // order; everything else (RTS, CTS, acks) the cluster delivers.
    for _ in 0..100_000 {
        for (p, off) in data_in_order(&mut c) {
            c.nodes[1].handle_payload(PeerId(0), &p.data);
            let end = off as usize + (p.data.len() - HEADER_LEN);
            assert_eq!(c.nodes[1].rx_message_left(), len - end, "{len} B at {off}");
            got = got.max(end);
            c.net.events.push((
                0,
                DgramEvent::Acked {
                    peer: PeerId(1),
                    token: p.token,
                    count: 1,
                },
            ));
        }
        c.pump(1);
        if !c.step() {
            break;
        }
    }
    assert_eq!(got, len, "all of the {len}-byte message handled");
    assert_eq!(c.nodes[1].rx_message_left(), 0);
}

#[test]
fn bytes_left_follow_an_eager_message() {
    check(10 * 1400 + 100);
}

#[test]
fn bytes_left_follow_a_rendezvous_message() {
    check(200_000);
}
