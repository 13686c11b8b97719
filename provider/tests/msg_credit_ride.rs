//! Eager credit returned in batches: a batch of bytes alone waits for the
//! next datagram to its peer (one more entry of that send call) instead of
//! leaving on its own right when the message that made it due completes, up
//! to two batches; message credit, and two batches of bytes, still go at
//! once, so a one-way stream never waits for credit.

mod msg_fake;

use msg_fake::{cfg, pattern, rop, sop, Cluster, Pkt};
use spray::config::EpMode;
use spray::dgram::{DgramEvent, PeerId};
use spray::msg::CompKind;
use spray::wire::msg::{MsgType, Packet, Repr};

/// The eager limit and a batch of byte credit of `msg_fake::cfg` (initial
/// credit 4 MiB / 64 = 64 KiB, a batch a quarter of it).
const LEN: usize = 16 << 10;

fn is_credit(data: &[u8]) -> bool {
    Packet::new_checked(data)
        .ok()
        .and_then(|p| Repr::parse(&p).ok())
        .is_some_and(|r| r.ty == MsgType::Credit)
}

/// Run until quiet; the CREDITs node `from` sent meanwhile (taken out of the
/// network as they appear, counted, and delivered).
fn run_counting_credit(c: &mut Cluster, from: u32) -> usize {
    let mut n = 0;
    for _ in 0..1_000_000 {
        let (credit, rest): (Vec<Pkt>, Vec<Pkt>) = c
            .net
            .inflight
            .drain(..)
            .partition(|p| p.from == from && is_credit(&p.data));
        c.net.inflight = rest;
        for p in credit {
            n += 1;
            if let Some(k) = c.net.counts.get_mut(&(p.from, p.to)) {
                *k -= 1;
            }
            c.nodes[p.to as usize].handle_payload(PeerId(p.from), &p.data);
            c.net.events.push((
                p.from,
                DgramEvent::Acked {
                    peer: PeerId(p.to),
                    token: p.token,
                    count: 1,
                },
            ));
            c.pump(p.to as usize);
        }
        if !c.step() && c.net.inflight.is_empty() {
            break;
        }
    }
    n
}

#[test]
fn a_byte_batch_rides_with_the_next_datagram() {
    let mut c = Cluster::new(2, cfg(EpMode::Rdm), 11);
    c.recv(1, rop(LEN, Some((7, 0)), None, 1));
    c.send(0, 1, sop(1, pattern(1, LEN), Some(7), 1));
    let alone = run_counting_credit(&mut c, 1);
    assert_eq!(c.take(1, CompKind::Recv).len(), 1);
    // Before: the batch left at once, on its own.
    assert_eq!(alone, 0, "a CREDIT left on its own");
    // The answer: the credit goes first, in the same pump.
    c.recv(0, rop(LEN, Some((8, 0)), None, 2));
    c.send(1, 0, sop(0, pattern(2, LEN), Some(8), 2));
    c.pump(1);
    let first = c
        .net
        .inflight
        .iter()
        .find(|p| p.from == 1)
        .map(|p| is_credit(&p.data));
    assert_eq!(first, Some(true), "the CREDIT leads the answer");
    assert!(c.run(1_000_000));
    assert_eq!(c.take(0, CompKind::Recv).len(), 1);
}

#[test]
fn a_one_way_stream_gets_its_credit_without_answers() {
    let mut c = Cluster::new(2, cfg(EpMode::Rdm), 12);
    // 20 messages: 5 times the initial credit, none answered.
    let n = 20;
    for k in 0..n {
        c.recv(1, rop(LEN, Some((7, 0)), None, k));
        c.send(0, 1, sop(1, pattern(k, LEN), Some(7), k));
    }
    // Node 1 sends nothing but CREDITs.
    let credits = run_counting_credit(&mut c, 1);
    assert_eq!(c.take(1, CompKind::Recv).len() as u64, n);
    assert_eq!(c.take(0, CompKind::Send).len() as u64, n);
    // A CREDIT per two batches (two messages here), not per batch.
    println!("{credits} CREDITs for {n} messages of {LEN} B");
    assert!(credits as u64 <= n / 2 + 1, "{credits} CREDITs");
    assert!(credits >= 5, "{credits} CREDITs");
}
