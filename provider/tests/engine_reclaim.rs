//! Idle peer reclamation under the message layer: the message layer keys its
//! per-peer state (send-order sequence numbers, eager credit, directed
//! receives) by peer id; reclaiming an idle peer's SRD state, on one side or
//! both, must leave all of it valid: later messages, eager and rendezvous,
//! match in send order into receives posted before the reclamation. A third
//! host talks to both during each idle spell: the sweep runs on traffic, an
//! endpoint with nothing to do at all is never woken for it.

use core::time::Duration;

use spray::msg::{CompKind, RecvFlags, RecvOp, SendOp};
use spray::sim::{addr, LinkSpec, Sim};
use spray::{Config, Engine, EpMode};

type Node = Engine<Vec<u8>>;

fn engine(i: usize, idle: Duration) -> Node {
    let mut c = Config::new(EpMode::Rdm, addr(i));
    c.paths = 4;
    c.nonce = 500 + i as u64;
    c.peer_idle_timeout = idle;
    Engine::new(c)
}

fn body(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (seq as usize * 7 + k * 13) as u8)
        .collect()
}

#[test]
fn reclaimed_peers_keep_message_order_and_receives() {
    for (i0, i1) in [(100u64, 10_000u64), (100, 150)] {
        let mut spec = LinkSpec::ideal(Duration::from_micros(20));
        spec.bandwidth = 1_250_000_000;
        spec.loss = 0.005;
        let nodes = vec![
            engine(0, Duration::from_millis(i0)),
            engine(1, Duration::from_millis(i1)),
            engine(2, Duration::from_secs(100)),
        ];
        let mut sim = Sim::new(3, nodes, vec![spec; 4]);
        let p01 = sim.nodes[0].peer(addr(1));
        let p10 = sim.nodes[1].peer(addr(0));
        let p20 = sim.nodes[2].peer(addr(0));
        let p21 = sim.nodes[2].peer(addr(1));
        let mut seq = 0u64;
        for round in 0..4 {
            // Directed receives posted first, then the idle spell (the peer
            // is reclaimed under them), then the messages: sizes from one
            // byte to rendezvous, in both directions, tags = send order.
            let sizes = [1usize, 100, 5000, 70_000, 200_000, 8];
            let mut want = [Vec::new(), Vec::new()];
            for (to, from_peer) in [(1usize, p10), (0, p01)] {
                for (k, &len) in sizes.iter().enumerate() {
                    let s = seq + k as u64;
                    sim.nodes[to]
                        .post_recv(RecvOp {
                            src: Some(from_peer),
                            buf: vec![0u8; len],
                            tag: Some((0, u64::MAX)),
                            context: s,
                            flags: RecvFlags::default(),
                            report: true,
                        })
                        .unwrap();
                    want[to].push((s, len));
                }
            }
            let until = sim.now + Duration::from_millis(400);
            sim.run_until(until, |_| false);
            // (`run_until` stops at the last event: the clock runs on idle.)
            sim.now = sim.now.max(until);
            for (k, to) in [p20, p21].into_iter().enumerate() {
                let t = 1_000_000 + seq + k as u64;
                let m = SendOp {
                    peer: to,
                    buf: vec![1; 8],
                    tag: Some(t),
                    data: None,
                    context: t,
                    report: false,
                    delivery_complete: false,
                    lazy: false,
                };
                sim.nodes[2].post_send(m).unwrap();
            }
            let until = sim.now + Duration::from_millis(100);
            sim.run_until(until, |_| false);
            // (`run_until` stops at the last event: the clock runs on idle.)
            sim.now = sim.now.max(until);
            for (from, to_peer) in [(0usize, p01), (1, p10)] {
                for (k, &len) in sizes.iter().enumerate() {
                    let s = seq + k as u64;
                    sim.nodes[from]
                        .post_send(SendOp {
                            peer: to_peer,
                            buf: body(s, len),
                            tag: Some(s),
                            data: None,
                            context: s,
                            report: true,
                            delivery_complete: false,
                            lazy: false,
                        })
                        .unwrap();
                }
            }
            seq += sizes.len() as u64;
            let mut got = [Vec::new(), Vec::new()];
            let limit = sim.now + Duration::from_secs(2);
            while got[0].len() < 2 * sizes.len() || got[1].len() < 2 * sizes.len() {
                assert!(sim.step(limit), "round {round}: messages did not complete");
                for (i, g) in got.iter_mut().enumerate() {
                    while let Some(c) = sim.nodes[i].poll_completion() {
                        assert!(c.error.is_none(), "round {round}: {:?}", c.error);
                        g.push(c);
                    }
                }
            }
            for i in 0..2 {
                let recvs: Vec<_> = got[i].iter().filter(|c| c.kind == CompKind::Recv).collect();
                // Each receive got the message sent in the same position
                // (receive `s` matched the message tagged `s`): matching
                // followed send order across the reclamation.
                for c in &recvs {
                    let &(s, len) = want[i].iter().find(|w| w.0 == c.context).unwrap();
                    assert_eq!(c.tag, s, "round {round}: order");
                    assert_eq!(
                        c.buf.as_deref(),
                        Some(&body(s, len)[..]),
                        "round {round}: data"
                    );
                }
                assert_eq!(recvs.len(), sizes.len());
            }
        }
        let r0 = sim.nodes[0].srd_stats().peers_reclaimed;
        let r1 = sim.nodes[1].srd_stats().peers_reclaimed;
        println!("idle timeouts {i0}/{i1} ms: reclaimed {r0}/{r1}");
        assert!(r0 >= 3, "node 0 reclaimed {r0}");
        assert_eq!(r1 >= 3, i1 < 500, "node 1 reclaimed {r1}");
        for n in &sim.nodes {
            let s = n.srd_stats();
            assert_eq!(s.peer_restarts + s.failed, 0, "{s:?}");
            // One handshake per peer, none to resume a reclaimed one.
            assert_eq!(s.tx_hellos + s.sessions_accepted, s.peers, "{s:?}");
        }
    }
}
