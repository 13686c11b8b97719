//! The two-engine model (s2n-quic style: operations → `Model::apply` →
//! `Model::invariants`): two full engines (SRD core + message layer) in the
//! simulator with a live session between them that carries checked
//! messages both ways, while hostile datagrams arrive: arbitrary bytes,
//! structured mutations of captured real packets, exact replays, forged
//! packets of every type (right and wrong tokens and nonces, the peer's
//! address or a stranger's), forged messages aimed at posted receives, and
//! HELLO floods from many addresses. Driven by `arbitrary` bytes, so the
//! same model is a stable property test (`fuzz_engine.rs`) and a cargo-fuzz
//! target (`provider/fuzz/fuzz_targets/engine_model.rs`).
//!
//! Checked after every operation: no panic; every completed receive holds
//! exactly the bytes of a message that was sent to it (its prefix when
//! truncated), each message at most once, from the right peer; no send
//! fails; each hostile datagram moves exactly the drop counter its
//! `forge::verdict` names; no peer beyond the real one; message state
//! bounded by the real messages outstanding. At the end, with the hostile
//! input stopped, every message arrives exactly once and nothing is left.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use core::time::Duration;
use std::collections::VecDeque;

use arbitrary::Unstructured;
use spray::msg::{CompError, CompKind, RecvFlags, RecvOp, SendOp};
use spray::sim::forge::{bytes_of, is_replay, verdict, Field, Forged, Mutation, Verdict};
use spray::sim::{addr, LinkSpec, Node, Sim, PORT};
use spray::srd::{SrdStats, Transmit};
use spray::time::Instant;
use spray::wire::msg::{MsgType, Repr as MsgRepr, HEADER_LEN as MSG_HEAD};
use spray::wire::srd::{PacketType, HEADER_LEN};
use spray::{Config, Engine, EpMode, PeerId};

use super::{below, word};

/// Operations per case at most (the input bytes usually end first).
pub const MAX_OPS: u64 = 400;

/// One case: a model set up and driven by `data`, then finished.
pub fn run(data: &[u8]) -> Tally {
    let mut u = Unstructured::new(data);
    let mut m = Model::new(&mut u);
    while !u.is_empty() && m.tally.ops < MAX_OPS {
        m.step(&mut u);
    }
    m.finish();
    m.tally
}

/// An engine that remembers the packets it sent to its peer (what a
/// sniffer between the two captures).
pub struct Tap {
    pub e: Engine<Vec<u8>>,
    pub peer: SocketAddr,
    pub sent: VecDeque<Vec<u8>>,
}

/// Captured packets kept per node.
const CAPTURE: usize = 256;

impl Node for Tap {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        self.e.handle_datagram(now, from, data);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.e.handle_timeout(now);
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let t = self.e.poll_transmit(now, buf)?;
        if t.dst != self.peer {
            return Some(t);
        }
        if self.sent.len() == CAPTURE {
            self.sent.pop_front();
        }
        self.sent.push_back(buf[..t.len].to_vec());
        Some(t)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.e.poll_timeout()
    }
}

/// A message of the live session.
struct Msg {
    from: usize,
    len: usize,
    /// Receive completed (exactly once).
    received: bool,
    /// Send completed.
    sent: bool,
}

/// Largest message, bytes (rendezvous beyond the eager limit).
const MAX_LEN: usize = 200_000;

/// The bytes of message `id`.
pub fn pattern(id: u64, len: usize) -> Vec<u8> {
    bytes_of(id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x55, len)
}

/// Counters a hostile datagram may move.
fn drops(s: &SrdStats) -> [u64; 3] {
    [
        // A tag an endpoint without a job key does not expect is refused
        // as malformed (`sim::forge::verdict`), counted on its own.
        s.rx_malformed + s.rx_mac_unexpected,
        s.rx_bad_token + s.rx_no_session,
        s.tx_challenges + s.stateless_dropped,
    ]
}

/// Totals of one case, for the test's report.
#[derive(Default, Debug, Clone)]
pub struct Tally {
    pub ops: u64,
    pub messages: u64,
    pub bytes: u64,
    pub hostile: u64,
    pub malformed: u64,
    pub forged: u64,
    pub hellos: u64,
    pub replays: u64,
    /// In-session mutations not injected (only an on-path attacker, who
    /// knows the token, can make them; the optional MAC is for those).
    pub on_path_skipped: u64,
}

/// The model: two engines, the messages between them, what was injected.
pub struct Model {
    pub sim: Sim<Tap>,
    msgs: Vec<Msg>,
    /// Per node: message ids sent to it, in send order (its receive stream).
    to: [Vec<usize>; 2],
    /// Per node: receives posted (exact mode: the stream index they take).
    posted: [usize; 2],
    /// Wildcard mode: every receive takes any tag from any source.
    wild: bool,
    /// Per node: receive contexts → buffer length.
    recv_len: [Vec<usize>; 2],
    peer: [Option<PeerId>; 2],
    nonce: [u64; 2],
    max_payload: usize,
    pub tally: Tally,
}

impl Model {
    /// A model whose settings (links, eager limit, mode) come from `u`.
    pub fn new(u: &mut Unstructured) -> Model {
        let paths = 1 + below(u, 4) as u8;
        let spec = LinkSpec {
            delay: Duration::from_micros(5 + below(u, 100)),
            jitter: Duration::from_micros(below(u, 50)),
            bandwidth: 0,
            buffer: 0,
            loss: [0.0, 0.0, 0.01, 0.05][below(u, 4) as usize],
            dup: [0.0, 0.01][below(u, 2) as usize],
            corrupt: 0.0,
        };
        let eager = [512usize, 4096, 64 << 10][below(u, 3) as usize];
        let nonce = [1 + word(u) % 1000, 2000 + word(u) % 1000];
        let nodes = (0..2)
            .map(|i| {
                let mut c = Config::new(EpMode::Rdm, addr(i));
                c.nonce = nonce[i];
                c.paths = paths;
                c.local_paths = paths;
                c.eager_limit = eager;
                c.max_unexpected_bytes = 4 << 20;
                c.seed = word(u);
                Tap {
                    e: Engine::new(c),
                    peer: addr(1 - i),
                    sent: VecDeque::new(),
                }
            })
            .collect();
        let sim = Sim::new(word(u), nodes, vec![spec; usize::from(paths)]);
        let max_payload = sim.nodes[0].e.config().max_datagram - HEADER_LEN;
        Model {
            sim,
            msgs: Vec::new(),
            to: [Vec::new(), Vec::new()],
            posted: [0, 0],
            wild: below(u, 3) == 0,
            recv_len: [Vec::new(), Vec::new()],
            peer: [None, None],
            nonce,
            max_payload,
            tally: Tally::default(),
        }
    }

    fn peer_of(&mut self, i: usize) -> PeerId {
        *self.peer[i].get_or_insert_with(|| self.sim.nodes[i].e.peer(addr(1 - i)))
    }

    /// Post a send of `len` bytes from node `from`.
    fn send(&mut self, from: usize, len: usize) {
        let id = self.msgs.len();
        let to = 1 - from;
        let k = self.to[to].len();
        let peer = self.peer_of(from);
        let op = SendOp {
            peer,
            buf: pattern(id as u64, len),
            tag: Some(if self.wild { id as u64 } else { k as u64 }),
            data: Some(id as u64),
            context: id as u64,
            report: true,
            delivery_complete: len.is_multiple_of(3),
            lazy: len.is_multiple_of(5),
        };
        match self.sim.nodes[from].e.post_send(op) {
            Ok(()) => {}
            // Backpressure: the application would retry later.
            Err(spray::msg::OpError::Again) => return,
            Err(e) => panic!("post_send: {e:?}"),
        }
        self.msgs.push(Msg {
            from,
            len,
            received: false,
            sent: false,
        });
        self.to[to].push(id);
        self.tally.messages += 1;
        self.tally.bytes += len as u64;
    }

    /// Post the next receive at node `at` (`short`: a buffer shorter than
    /// the message, if it is known).
    fn recv(&mut self, at: usize, short: u64) {
        let k = self.posted[at];
        let (tag, len) = if self.wild {
            ((0, u64::MAX), MAX_LEN)
        } else {
            let len = match self.to[at].get(k) {
                Some(&id) => {
                    let n = self.msgs[id].len;
                    if short.is_multiple_of(8) {
                        (short >> 3) as usize % (n + 1)
                    } else {
                        n
                    }
                }
                None => MAX_LEN,
            };
            ((k as u64, 0), len)
        };
        let src = if self.wild {
            None
        } else {
            Some(self.peer_of(at))
        };
        let op = RecvOp {
            src,
            buf: vec![0xEE; len],
            tag: Some(tag),
            context: k as u64,
            flags: RecvFlags::default(),
            report: true,
        };
        self.sim.nodes[at].e.post_recv(op).expect("post_recv");
        self.recv_len[at].push(len);
        self.posted[at] += 1;
    }

    /// Run the network for `ns`.
    fn run(&mut self, ns: u64) {
        let until = self.sim.now + Duration::from_nanos(ns);
        self.sim.run_until(until, |_| false);
    }

    /// A source address: the peer's IP (on one of its path ports) or a
    /// stranger's, from `w`.
    fn source(&self, to: usize, w: u64) -> (SocketAddr, bool) {
        if w.is_multiple_of(3) {
            let ip = IpAddr::V4(Ipv4Addr::new(10, 9, (w >> 8) as u8, (w >> 16) as u8));
            (SocketAddr::new(ip, (w >> 24) as u16), false)
        } else {
            let p = addr(1 - to);
            (SocketAddr::new(p.ip(), PORT + (w >> 4) as u16 % 8), true)
        }
    }

    /// What only the session knows, from the packets the nodes sent each
    /// other: the tokens of DATA, ACK and PROBE packets, the echo values of
    /// HELLOs and the cookies of CHALLENGEs.
    fn session_tokens(&self) -> Vec<u64> {
        let mut t = Vec::new();
        for n in &self.sim.nodes {
            for p in &n.sent {
                match Field::Type.get(p).unwrap_or(0) {
                    1 | 2 | 4 => t.push(Field::DstToken.get(p).unwrap_or(0)),
                    5 | 6 => t.push(
                        p.get(HEADER_LEN..HEADER_LEN + 8)
                            .map_or(0, |v| v.iter().fold(0u64, |x, &b| (x << 8) | u64::from(b))),
                    ),
                    _ => {}
                }
            }
        }
        t.retain(|&x| x != 0);
        t.sort_unstable();
        t.dedup();
        t
    }

    /// The tokens of the session's DATA, ACK and PROBE packets.
    fn data_tokens(&self) -> Vec<u64> {
        let n = &self.sim.nodes[0].sent;
        n.iter()
            .filter(|p| matches!(Field::Type.get(p), Some(1 | 2 | 4)))
            .filter_map(|p| Field::DstToken.get(p))
            .collect()
    }

    /// Deliver hostile datagram `b` to node `to` from `from`; checks that it
    /// moves exactly the counter its verdict names. `orig`: the real packet
    /// it was made from, if any (an in-session mutation of it that is not a
    /// replay is left out: only an on-path attacker can make one).
    fn inject(
        &mut self,
        to: usize,
        from: SocketAddr,
        peer_ip: bool,
        b: &[u8],
        orig: Option<&[u8]>,
    ) {
        let tokens = self.session_tokens();
        let v = verdict(
            b,
            peer_ip,
            PORT,
            self.nonce[1 - to],
            &tokens,
            self.max_payload,
        );
        if v == Verdict::InSession {
            match orig {
                Some(o) if is_replay(b, o) => self.tally.replays += 1,
                _ => {
                    self.tally.on_path_skipped += 1;
                    return;
                }
            }
        }
        let now = self.sim.now;
        let before = drops(self.sim.nodes[to].e.srd_stats());
        self.sim.nodes[to].handle_datagram(now, from, b);
        let after = drops(self.sim.nodes[to].e.srd_stats());
        let moved = [
            after[0] - before[0],
            after[1] - before[1],
            after[2] - before[2],
        ];
        // A replay may be a duplicate, a late CHALLENGE, ...: only never
        // malformed and never a HELLO.
        let want = match v {
            Verdict::Malformed => [1, 0, 0],
            Verdict::Forged => [0, 1, 0],
            Verdict::Hello => [0, 0, 1],
            Verdict::InSession => [0, moved[1], 0],
        };
        assert_eq!(
            moved, want,
            "{v:?} datagram to node {to} from {from} moved (malformed, forged, hello) by {moved:?}: {} B {:02x?}",
            b.len(),
            &b[..b.len().min(96)]
        );
        self.tally.hostile += 1;
        match v {
            Verdict::Malformed => self.tally.malformed += 1,
            Verdict::Forged => self.tally.forged += 1,
            Verdict::Hello => self.tally.hellos += 1,
            Verdict::InSession => {}
        }
    }

    /// A captured packet of the node that is not `to` (what `to` receives).
    fn captured(&self, to: usize, pick: u64) -> Option<Vec<u8>> {
        let s = &self.sim.nodes[1 - to].sent;
        (!s.is_empty()).then(|| s[(pick % s.len() as u64) as usize].clone())
    }

    /// The newest DATA packet carrying an ack that node `to` received
    /// from (was sent by) the other node.
    fn newest_data_with_ack(&self, to: usize) -> Option<Vec<u8>> {
        self.sim.nodes[1 - to]
            .sent
            .iter()
            .rev()
            .find(|p| {
                Field::Type.get(p) == Some(1) && Field::Flags.get(p).is_some_and(|f| f & 1 != 0)
            })
            .cloned()
    }

    /// A forged message-layer datagram aimed at node `to`'s receives.
    fn forged_message(&self, to: usize, w: u64) -> Vec<u8> {
        let rts = w & 1 == 1;
        let k = self.posted[to] as u64;
        let body = if rts {
            Vec::new()
        } else {
            vec![0xF0; (w >> 8) as usize % 600]
        };
        let m = MsgRepr {
            ty: if rts { MsgType::Rts } else { MsgType::Data },
            seq: (w >> 20) as u32 % 4,
            total: if rts { 100_000 } else { body.len() as u64 },
            offset: 0,
            tag: Some(if w & 2 == 0 {
                k.saturating_sub(1)
            } else {
                w >> 32
            }),
            data: Some(u64::MAX),
        };
        let mut b = vec![0u8; MSG_HEAD + body.len()];
        assert!(m.emit_into(&mut b));
        b[MSG_HEAD..].copy_from_slice(&body);
        b
    }

    /// One operation from the input.
    pub fn step(&mut self, u: &mut Unstructured) {
        self.tally.ops += 1;
        let to = below(u, 2) as usize;
        match below(u, 16) {
            0..=2 => {
                let len = match below(u, 6) {
                    0 => below(u, 8) as usize,
                    1 => below(u, 1500) as usize,
                    2 => 1350 + below(u, 100) as usize,
                    3 => below(u, 16_384) as usize,
                    4 => below(u, 70_000) as usize,
                    _ => below(u, MAX_LEN as u64 + 1) as usize,
                };
                self.send(to, len);
            }
            3 | 4 => {
                let short = word(u);
                self.recv(to, short);
            }
            5..=7 => {
                let ns = 1_000 + below(u, 3_000_000);
                self.run(ns);
            }
            8 => {
                let len = below(u, 1600) as usize;
                let b = bytes_of(word(u), len);
                let (from, ip) = self.source(to, word(u));
                self.inject(to, from, ip, &b, None);
            }
            9..=11 => {
                let pick = word(u);
                let Some(orig) = self.captured(to, pick) else {
                    return;
                };
                let mut b = orig.clone();
                for _ in 0..=below(u, 3) {
                    Mutation::from_words(word(u) as u8, word(u), word(u)).apply(&mut b);
                }
                let (from, ip) = self.source(to, word(u));
                self.inject(to, from, ip, &b, Some(&orig));
            }
            12 if word(u) & 1 == 0 => {
                let pick = word(u);
                let Some(orig) = self.captured(to, pick) else {
                    return;
                };
                let (from, ip) = self.source(to, 1 + 3 * below(u, 1 << 20));
                self.inject(to, from, ip, &orig.clone(), Some(&orig));
            }
            12 => {
                // The newest real DATA with an ack, made malformed (its
                // floor after its PSN) and claiming more acknowledged than
                // it did: dropped at parsing, before the ack is read.
                // Applied (as before the floor rule moved into
                // `Repr::parse`), the sender took lost datagrams for
                // delivered and their messages never arrived.
                let Some(orig) = self.newest_data_with_ack(to) else {
                    return;
                };
                let mut b = orig.clone();
                let psn = Field::Psn.get(&b).unwrap_or(0);
                Field::PsnFloor.set(&mut b, psn.wrapping_add(1 + below(u, 4)) & 0xffff_ffff);
                let claim = Field::AckCum
                    .get(&b)
                    .unwrap_or(0)
                    .wrapping_add(1 + below(u, 64));
                Field::AckCum.set(&mut b, claim & 0xffff_ffff);
                Field::AckRecent.set(&mut b, claim.wrapping_sub(1) & 0xffff_ffff);
                Field::SackBase.set(&mut b, claim & 0xffff_ffff);
                let (from, ip) = self.source(to, 1 + 3 * below(u, 1 << 20));
                self.inject(to, from, ip, &b, Some(&orig));
            }
            13 => {
                // A forged packet of any type: the real peer's nonce or not,
                // the session's token or not (both right: on-path, skipped).
                let ty = [
                    PacketType::Data,
                    PacketType::Ack,
                    PacketType::Reset,
                    PacketType::Probe,
                    PacketType::Hello,
                    PacketType::Challenge,
                    PacketType::Rails,
                ][below(u, 7) as usize];
                let tokens = self.data_tokens();
                let nonce = if word(u) & 1 == 0 {
                    self.nonce[1 - to]
                } else {
                    word(u).max(1)
                };
                let token = match (word(u) % 3, tokens.first()) {
                    (0, Some(&t)) => t,
                    (1, _) => 0,
                    _ => word(u),
                };
                let w = word(u);
                let payload = if ty == PacketType::Data && w.is_multiple_of(2) {
                    self.forged_message(to, w)
                } else {
                    bytes_of(w, (w >> 40) as usize % 200)
                };
                let mut f = Forged::new(ty, PORT, nonce, token, &payload);
                f.repr.psn = word(u) as u32;
                f.repr.psn_floor = f.repr.psn.wrapping_sub(below(u, 3) as u32);
                let (from, ip) = self.source(to, word(u));
                self.inject(to, from, ip, &f.to_bytes(), None);
            }
            14 => {
                // HELLOs from many addresses (a handshake flood).
                for k in 0..=below(u, 16) {
                    let (from, ip) = self.source(to, word(u) ^ k);
                    let f =
                        Forged::new(PacketType::Hello, from.port(), word(u).max(1), word(u), &[]);
                    self.inject(to, from, ip, &f.to_bytes(), None);
                }
            }
            _ => {
                let ns = below(u, 200_000_000);
                self.run(ns);
            }
        }
        self.invariants();
    }

    /// Check completions and state bounds now.
    pub fn invariants(&mut self) {
        for i in 0..2 {
            while let Some(c) = self.sim.nodes[i].e.poll_completion() {
                match c.kind {
                    CompKind::Send => {
                        let m = &mut self.msgs[c.context as usize];
                        assert_eq!((m.from, c.error), (i, None), "send {} failed", c.context);
                        assert!(!m.sent, "send {} completed twice", c.context);
                        m.sent = true;
                    }
                    CompKind::Recv => self.check_recv(i, &c),
                    k => panic!("node {i}: unexpected completion {k:?}"),
                }
            }
            let e = &self.sim.nodes[i].e;
            let s = e.srd_stats();
            assert!(
                s.peers <= 1,
                "node {i}: {} peers (a forgery made one)",
                s.peers
            );
            let (_, _, ins) = e.live_counts();
            let open: Vec<usize> = self.to[i]
                .iter()
                .copied()
                .filter(|&id| !self.msgs[id].received)
                .collect();
            assert!(
                ins <= open.len(),
                "node {i}: {ins} incoming records for {} real messages outstanding",
                open.len()
            );
            let bytes: usize = open.iter().map(|&id| self.msgs[id].len).sum();
            assert!(
                e.unexpected_bytes() <= bytes,
                "node {i}: unexpected bytes beyond real ones"
            );
        }
    }

    fn check_recv(&mut self, i: usize, c: &spray::msg::Completion<Vec<u8>>) {
        let id = c.data.unwrap_or(u64::MAX) as usize;
        assert!(
            id < self.msgs.len() && self.to[i].contains(&id),
            "node {i}: a receive completed with a message never sent to it: {c:?}"
        );
        let m = &mut self.msgs[id];
        assert!(!m.received, "message {id} received twice");
        m.received = true;
        assert_eq!(c.src, self.peer[i].or(c.src), "message {id}: wrong source");
        let buf = c.buf.as_ref().expect("receive buffer");
        let placed = m.len.min(buf.len());
        let want_err = (m.len > buf.len()).then_some(CompError::Truncated);
        assert_eq!(
            (c.len, c.error),
            (placed, want_err),
            "message {id} of {} B",
            m.len
        );
        assert!(
            buf[..placed] == pattern(id as u64, m.len)[..placed],
            "message {id}: wrong bytes delivered"
        );
        if !self.wild {
            assert_eq!(self.to[i].get(c.context as usize), Some(&id), "SAS order");
        }
    }

    /// Stop the hostile input, post what is missing, and require every
    /// message delivered exactly once and nothing left over.
    pub fn finish(&mut self) {
        for i in 0..2 {
            while self.posted[i] < self.to[i].len() {
                self.recv(i, 1);
            }
        }
        // At most 60 s of simulated time.
        for _ in 0..600 {
            if self.done() {
                break;
            }
            self.run(100_000_000);
            self.invariants();
        }
        let missing: Vec<usize> = (0..self.msgs.len())
            .filter(|&id| !self.msgs[id].received || !self.msgs[id].sent)
            .collect();
        assert!(
            missing.is_empty(),
            "messages not delivered or not completed: {missing:?}"
        );
        for i in 0..2 {
            let e = &self.sim.nodes[i].e;
            // Receives posted beyond the messages (wild mode) stay posted.
            let extra = self.posted[i] - self.to[i].len();
            assert_eq!(e.live_counts(), (0, extra, 0), "node {i}: state left over");
            assert_eq!(e.unexpected_bytes(), 0);
        }
    }

    fn done(&self) -> bool {
        self.msgs.iter().all(|m| m.received && m.sent)
    }
}
