//! A peer that dies silently after acknowledging everything must not leave
//! operations waiting on it forever: a rendezvous send whose RTS was acked
//! (waiting for a CTS that never comes), an RMA read whose request was acked
//! (waiting for the data) and a receive matched to a rendezvous message whose
//! sender dies mid-data fail with `PeerUnreachable` within a few unreachable
//! timeouts, thanks to the engine's keepalives; while the peer lives, the same
//! waits last as long as they must (no false failure).

use core::time::Duration;

use spray::msg::{CompError, Completion, RecvFlags, RecvOp, RmaKind, RmaOp, SendOp};
use spray::sim::{addr, LinkSpec, Sim};
use spray::time::Instant;
use spray::{Config, Engine, EpMode, RmaAccess, RmaTarget};

type Node = Engine<Vec<u8>>;

/// Unreachable timeout of both nodes.
const UNREACHABLE: Duration = Duration::from_millis(400);

fn node(i: usize) -> Node {
    let mut c = Config::new(EpMode::Rdm, addr(i));
    c.paths = 4;
    c.nonce = 700 + i as u64;
    c.seed = 0xa11e ^ i as u64;
    c.unreachable_timeout = UNREACHABLE;
    Engine::new(c)
}

/// A target whose one region (key 5) answers reads with a fixed pattern.
struct Region;

impl RmaTarget<Vec<u8>> for Region {
    fn resolve(&self, key: u64, _addr: u64, len: usize, _access: RmaAccess) -> Option<Vec<u8>> {
        (key == 5).then(|| vec![0x42; len])
    }
}

fn sim(seed: u64) -> Sim<Node> {
    let spec = LinkSpec::ideal(Duration::from_micros(20));
    let mut s = Sim::new(seed, vec![node(0), node(1)], vec![spec; 4]);
    s.nodes[1].set_rma_target(Box::new(Region));
    s
}

/// Run until node 0 has a completion or `limit`; the completion, if any.
fn completion(s: &mut Sim<Node>, limit: Instant) -> Option<Completion<Vec<u8>>> {
    loop {
        if let Some(c) = s.nodes[0].poll_completion() {
            return Some(c);
        }
        if !s.step(limit) {
            return None;
        }
    }
}

/// Take node 1 down and step until node 0 has a completion: it must come
/// within six unreachable timeouts (`what` names the operation for the
/// failure message). Returns it and how long after the death it came.
fn completion_after_death(
    s: &mut Sim<Node>,
    seed: u64,
    what: &str,
) -> (Completion<Vec<u8>>, Duration) {
    s.down[1] = true;
    let died = s.now;
    let limit = died + UNREACHABLE * 6;
    let c = completion(s, limit).unwrap_or_else(|| {
        panic!(
            "seed {seed}: {what} still waiting {:?} after the peer died",
            limit - died
        )
    });
    (c, s.now - died)
}

fn rndv_send(s: &mut Sim<Node>) {
    let p1 = s.nodes[0].peer(addr(1));
    let op = SendOp {
        peer: p1,
        buf: vec![7u8; 1 << 20],
        tag: Some(9),
        data: None,
        context: 1,
        report: true,
        delivery_complete: false,
        lazy: false,
    };
    s.nodes[0].post_send(op).expect("post send");
}

#[test]
fn send_waiting_for_cts_fails_when_the_peer_dies_silently() {
    for seed in 1..=3 {
        let mut s = sim(seed);
        rndv_send(&mut s);
        // The RTS arrives and is acked; no receive is ever posted.
        let t = s.now + Duration::from_millis(20);
        assert!(
            completion(&mut s, t).is_none(),
            "seed {seed}: completed unmatched"
        );
        assert_eq!(s.nodes[0].srd_stats().failed, 0);
        let (c, took) = completion_after_death(&mut s, seed, "send");
        assert_eq!(
            c.error,
            Some(CompError::PeerUnreachable),
            "seed {seed}: {c:?}"
        );
        assert!(s.nodes[0].msg_stats().keepalives > 0);
        println!("seed {seed}: failed {took:?} after the peer died");
    }
}

#[test]
fn rma_read_waiting_for_data_fails_when_the_peer_dies_silently() {
    for seed in 1..=3 {
        let mut s = sim(seed);
        let p1 = s.nodes[0].peer(addr(1));
        let op = RmaOp {
            peer: p1,
            kind: RmaKind::Read,
            buf: vec![0u8; 4 << 20],
            key: 5,
            addr: 0,
            context: 2,
            report: true,
        };
        s.nodes[0].post_rma(op).expect("post read");
        // The request arrives and is acked; the target starts answering and
        // then dies with most of its answer unsent.
        let t = s.now + Duration::from_micros(150);
        assert!(
            completion(&mut s, t).is_none(),
            "seed {seed}: 4 MiB read done in 150 us"
        );
        let (c, took) = completion_after_death(&mut s, seed, "read");
        assert_eq!(
            c.error,
            Some(CompError::PeerUnreachable),
            "seed {seed}: {c:?}"
        );
        println!("seed {seed}: read failed {took:?} after the target died");
    }
}

/// The MPI rank whose link died after its own sends were acknowledged, while
/// it waited for its peer's large message: nothing of its own is in flight, so
/// only a keepalive can tell it the peer is gone (it hung forever before, and
/// `mpi-tests/rankdeath.sh -m link` found processes left on the cut-off host).
#[test]
fn receive_waiting_for_rendezvous_data_fails_when_the_sender_dies() {
    for seed in 1..=3 {
        let mut s = sim(seed);
        s.nodes[0]
            .post_recv(RecvOp {
                src: None,
                buf: vec![0u8; 4 << 20],
                tag: Some((9, 0)),
                context: 3,
                flags: RecvFlags::default(),
                report: true,
            })
            .expect("post recv");
        let p0 = s.nodes[1].peer(addr(0));
        s.nodes[1]
            .post_send(SendOp {
                peer: p0,
                buf: vec![7u8; 4 << 20],
                tag: Some(9),
                data: None,
                context: 4,
                report: true,
                delivery_complete: false,
                lazy: false,
            })
            .expect("post send");
        // RTS, CTS and the first RDATA cross; then the sender dies with most
        // of its data unsent.
        let t = s.now + Duration::from_micros(300);
        assert!(
            completion(&mut s, t).is_none(),
            "seed {seed}: 4 MiB received in 300 us"
        );
        assert!(
            s.nodes[0].msg_stats().keepalives == 0,
            "seed {seed}: keepalives before the death"
        );
        let (c, took) = completion_after_death(&mut s, seed, "receive");
        assert_eq!(
            (c.context, c.error),
            (3, Some(CompError::PeerUnreachable)),
            "seed {seed}: {c:?}"
        );
        assert!(s.nodes[0].msg_stats().keepalives > 0);
        println!("seed {seed}: receive failed {took:?} after the sender died");
    }
}

/// A receive posted with no message for it keeps waiting, and one matched to
/// a slow but live sender completes intact: the receive-side keepalives fail
/// nothing while the peer answers them.
#[test]
fn receives_on_a_live_peer_do_not_fail() {
    let mut s = sim(11);
    for ctx in [5u64, 6] {
        s.nodes[0]
            .post_recv(RecvOp {
                src: None,
                buf: vec![0u8; 1 << 20],
                tag: Some((ctx, 0)),
                context: ctx,
                flags: RecvFlags::default(),
                report: true,
            })
            .expect("post recv");
    }
    let limit = s.now + UNREACHABLE * 10;
    assert!(
        completion(&mut s, limit).is_none(),
        "a receive with no message completed"
    );
    let p0 = s.nodes[1].peer(addr(0));
    s.nodes[1]
        .post_send(SendOp {
            peer: p0,
            buf: vec![3u8; 1 << 20],
            tag: Some(6),
            data: None,
            context: 7,
            report: true,
            delivery_complete: false,
            lazy: false,
        })
        .expect("post send");
    let limit = s.now + UNREACHABLE * 4;
    let c = completion(&mut s, limit).expect("the matched receive completes");
    assert_eq!((c.context, c.error), (6, None), "{c:?}");
    assert!(c.buf.as_ref().is_some_and(|b| b.iter().all(|&x| x == 3)));
    assert_eq!(s.nodes[0].srd_stats().failed, 0);
}

#[test]
fn long_waits_on_a_live_peer_do_not_fail() {
    let mut s = sim(9);
    rndv_send(&mut s);
    // Ten unreachable timeouts with the receiver alive but never matching.
    let limit = s.now + UNREACHABLE * 10;
    assert!(
        completion(&mut s, limit).is_none(),
        "the send failed while its peer lived"
    );
    assert!(
        s.nodes[0].msg_stats().keepalives >= 10,
        "keepalives {}",
        s.nodes[0].msg_stats().keepalives
    );
    assert_eq!(s.nodes[0].srd_stats().failed, 0);
}

/// One 8-byte message from node 1 to node 0 (a session, nothing left owed).
fn hello_from_1(s: &mut Sim<Node>) {
    let p0 = s.nodes[1].peer(addr(0));
    s.nodes[0].post_recv(recv_from(None, 1)).expect("post recv");
    s.nodes[1]
        .post_send(SendOp {
            peer: p0,
            buf: vec![1u8; 8],
            tag: Some(1),
            data: None,
            context: 1,
            report: false,
            delivery_complete: false,
            lazy: false,
        })
        .expect("post send");
    let limit = s.now + Duration::from_millis(10);
    let c = completion(s, limit).expect("the first message arrives");
    assert_eq!((c.context, c.error), (1, None));
    // Its ack goes back.
    let quiet = s.now + Duration::from_millis(5);
    s.run_until(quiet, |_| false);
}

/// A receive of tag `ctx` from `src` (any peer with `None`).
fn recv_from(src: Option<spray::PeerId>, ctx: u64) -> RecvOp<Vec<u8>> {
    RecvOp {
        src,
        buf: vec![0u8; 4096],
        tag: Some((ctx, 0)),
        context: ctx,
        flags: RecvFlags::default(),
        report: true,
    }
}

/// A rank blocked in a receive from a peer that dies before sending it
/// anything (`MPI_Recv` from a rank killed, or whose host's link went away)
/// has no other operation that would fail: the receive, directed at that
/// peer, makes it probed, and fails with `PeerUnreachable`; a receive from
/// any peer stays posted (another may still send it).
#[test]
fn directed_receive_fails_when_its_peer_dies_silently() {
    for seed in 1..=3 {
        let mut s = sim(seed);
        hello_from_1(&mut s);
        let p1 = s.nodes[0].peer(addr(1));
        s.nodes[0]
            .post_recv(recv_from(Some(p1), 2))
            .expect("post recv");
        s.nodes[0].post_recv(recv_from(None, 3)).expect("post recv");
        let (c, took) = completion_after_death(&mut s, seed, "directed receive");
        assert_eq!(
            (c.context, c.error),
            (2, Some(CompError::PeerUnreachable)),
            "seed {seed}: {c:?}"
        );
        println!("seed {seed}: directed receive failed {took:?} after the peer died");
        let limit = s.now + UNREACHABLE * 4;
        assert!(
            completion(&mut s, limit).is_none(),
            "seed {seed}: the receive from any peer completed"
        );
    }
}

/// While the named peer lives, a receive directed at it waits as long as it
/// must (ten unreachable timeouts, probed all along) and then completes
/// intact; a peer never heard from is not probed at all (it may not have
/// started yet) and its receive stays posted.
#[test]
fn directed_receives_wait_on_live_or_unknown_peers() {
    let mut s = sim(5);
    hello_from_1(&mut s);
    let p1 = s.nodes[0].peer(addr(1));
    let p2 = s.nodes[0].peer(addr(2));
    s.nodes[0]
        .post_recv(recv_from(Some(p1), 2))
        .expect("post recv");
    s.nodes[0]
        .post_recv(recv_from(Some(p2), 3))
        .expect("post recv");
    let before = s.nodes[0].msg_stats().keepalives;
    let limit = s.now + UNREACHABLE * 10;
    assert!(
        completion(&mut s, limit).is_none(),
        "a directed receive completed while its peer lived or never spoke"
    );
    let probes = s.nodes[0].msg_stats().keepalives - before;
    assert!(probes >= 10, "keepalives {probes}");
    assert_eq!(s.nodes[0].srd_stats().failed, 0);
    assert_eq!(
        s.nodes[0].srd_stats().tx_hellos,
        0,
        "the unknown peer was contacted"
    );
    let p0 = s.nodes[1].peer(addr(0));
    s.nodes[1]
        .post_send(SendOp {
            peer: p0,
            buf: vec![9u8; 4096],
            tag: Some(2),
            data: None,
            context: 4,
            report: false,
            delivery_complete: false,
            lazy: false,
        })
        .expect("post send");
    let limit = s.now + UNREACHABLE;
    let c = completion(&mut s, limit).expect("the directed receive completes");
    assert_eq!((c.context, c.error), (2, None), "{c:?}");
    assert!(c.buf.as_ref().is_some_and(|b| b.iter().all(|&x| x == 9)));
}
