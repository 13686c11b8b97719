//! The zero-copy paths of the engine over the simulated network, driven the way
//! the FFI driver drives them: packets built with `poll_transmit_with` (the
//! body read from the application buffer at each transmission) and, while a
//! rendezvous receive waits, datagrams received by header peek +
//! `place_with` + `handle_placed` (the payload written straight into the
//! receive buffer, the engine never seeing those bytes). Under loss,
//! duplication and reordering every message must arrive byte for byte, no byte
//! may land outside its receive's range, and a send buffer changed after its
//! completion must never reach the wire.

use core::cell::RefCell;
use core::net::SocketAddr;
use core::time::Duration;
use std::rc::Rc;

use spray::msg::{CompKind, Completion, RecvFlags, RecvOp, SendOp};
use spray::rng::Rng;
use spray::sim::{addr, LinkSpec, Node, Sim};
use spray::srd::Transmit;
use spray::time::Instant;
use spray::{Config, Engine, EpMode, UserBuf};

/// An application buffer the test can still see and change while the engine
/// holds it (what a C pointer is to the FFI).
#[derive(Clone, Debug)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Shared {
    fn new(v: Vec<u8>) -> Self {
        Shared(Rc::new(RefCell::new(v)))
    }
}

impl UserBuf for Shared {
    fn len(&self) -> usize {
        self.0.borrow().len()
    }
    fn read_at(&self, offset: usize, out: &mut [u8]) {
        out.copy_from_slice(&self.0.borrow()[offset..offset + out.len()]);
    }
    fn write_at(&mut self, offset: usize, data: &[u8]) {
        self.0.borrow_mut()[offset..offset + data.len()].copy_from_slice(data);
    }
}

/// An engine driven like the FFI driver drives it.
struct Placing {
    e: Engine<Shared>,
    /// Datagrams whose payload went straight into a receive buffer.
    placed: u64,
    /// Packets sent with a body read from an application buffer.
    bodies: u64,
}

impl Node for Placing {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        let head = Engine::<Shared>::PLACE_HEAD_LEN;
        if !self.e.expects_rdata() || data.len() <= head {
            self.e.handle_datagram(now, from, data);
            return;
        }
        // What the driver has after a MSG_PEEK of the headers: the headers, and
        // a slot as long as the datagram holding stale bytes after them.
        let mut slot = vec![0xA5u8; data.len()];
        slot[..head].copy_from_slice(&data[..head]);
        let mut placed = false;
        let ok = self.e.place_with(from, &slot, &mut |b: &Shared, off, n| {
            assert!(off + n <= b.len(), "placement past the buffer");
            assert!(n <= data.len() - head, "placement longer than the payload");
            // The kernel's scatter of the real receive.
            b.0.borrow_mut()[off..off + n].copy_from_slice(&data[head..head + n]);
            placed = true;
        });
        assert_eq!(ok, placed);
        if ok {
            self.placed += 1;
            self.e.handle_placed(now, from, &slot);
        } else {
            self.e.handle_datagram(now, from, data);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.e.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let mut body: Option<(Vec<u8>, usize)> = None;
        let mut t = self
            .e
            .poll_transmit_with(now, buf, &mut |b: &Shared, off, n| {
                let mut v = vec![0u8; n];
                b.read_at(off, &mut v);
                body = Some((v, n));
            })?;
        match (t.body.take(), body) {
            (Some(b), Some((bytes, n))) => {
                assert_eq!(b.len, n);
                buf[t.len..t.len + n].copy_from_slice(&bytes);
                t.len += n;
                self.bodies += 1;
            }
            (None, None) => {}
            other => panic!(
                "body reported {:?} but supplied {}",
                other.0,
                other.1.is_some()
            ),
        }
        Some(t)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.e.poll_timeout()
    }
}

fn node(i: usize) -> Placing {
    let mut c = Config::new(EpMode::Rdm, addr(i));
    c.paths = 4;
    c.epoch = 300 + i as u32;
    c.seed = 0xbeef ^ i as u64;
    c.max_datagram = 16_000;
    Placing {
        e: Engine::new(c),
        placed: 0,
        bodies: 0,
    }
}

fn net(seed: u64, loss: f64) -> Sim<Placing> {
    let mut spec = LinkSpec::ideal(Duration::from_micros(20));
    spec.jitter = Duration::from_micros(30);
    spec.bandwidth = 1_250_000_000;
    spec.loss = loss;
    spec.dup = loss / 2.0;
    Sim::new(seed, vec![node(0), node(1)], vec![spec; 4])
}

fn content(i: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(i.wrapping_mul(0x9e37_79b9) ^ len as u64);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

/// What receive buffers hold before data lands.
const FILL: u8 = 0x5C;

fn drive(
    sim: &mut Sim<Placing>,
    done: &mut [Vec<Completion<Shared>>; 2],
    want: [usize; 2],
) -> bool {
    let limit = sim.now + Duration::from_secs(60);
    loop {
        for (i, d) in done.iter_mut().enumerate() {
            while let Some(c) = sim.nodes[i].e.poll_completion() {
                d.push(c);
            }
        }
        if done[0].len() >= want[0] && done[1].len() >= want[1] {
            return true;
        }
        if !sim.step(limit) {
            return false;
        }
    }
}

/// Messages of rendezvous sizes, receives posted first or after the RTS
/// arrived, receive buffers some too small (truncation); the senders scribble
/// over each send buffer as soon as it completes.
fn run(seed: u64, loss: f64, recv_first: bool) {
    let sizes = [70_000usize, 16_001, 300_000, 1 << 20, 45_000, 2_000_000];
    // Receive room per message: some exact, some larger, two smaller (truncated).
    let room = [70_000usize, 20_000, 300_000, 600_000, 45_000, 2_000_000];
    let mut sim = net(seed, loss);
    let p1 = sim.nodes[0].e.peer(addr(1));
    let post_recvs = |sim: &mut Sim<Placing>| {
        for (i, &r) in room.iter().enumerate() {
            // Bytes past the message must keep their fill.
            let op = RecvOp {
                src: None,
                buf: Shared::new(vec![FILL; r]),
                tag: Some((i as u64, 0)),
                context: i as u64,
                flags: RecvFlags::default(),
                report: true,
            };
            sim.nodes[1].e.post_recv(op).expect("post recv");
        }
    };
    if recv_first {
        post_recvs(&mut sim);
    }
    let send_bufs: Vec<Shared> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| Shared::new(content(i as u64, n)))
        .collect();
    for (i, b) in send_bufs.iter().enumerate() {
        let op = SendOp {
            peer: p1,
            buf: b.clone(),
            tag: Some(i as u64),
            data: None,
            context: 100 + i as u64,
            report: true,
            delivery_complete: false,
        };
        sim.nodes[0].e.post_send(op).expect("post send");
    }
    let mut done = [Vec::new(), Vec::new()];
    if !recv_first {
        let until = sim.now + Duration::from_millis(5);
        while sim.now < until && sim.step(until) {}
        post_recvs(&mut sim);
    }
    let n = sizes.len();
    // Step, scribbling over every send buffer the moment its send completes:
    // a retransmission after that would carry the scribble.
    let limit = sim.now + Duration::from_secs(60);
    loop {
        while let Some(c) = sim.nodes[0].e.poll_completion() {
            assert_eq!(c.kind, CompKind::Send);
            assert!(c.error.is_none(), "seed {seed}: send error {c:?}");
            if let Some(b) = &c.buf {
                b.0.borrow_mut().fill(0xEE);
            }
            done[0].push(c);
        }
        while let Some(c) = sim.nodes[1].e.poll_completion() {
            done[1].push(c);
        }
        if done[0].len() == n && done[1].len() == n {
            break;
        }
        assert!(
            sim.step(limit),
            "seed {seed} loss {loss}: {}/{n} sends, {}/{n} receives by {:?}",
            done[0].len(),
            done[1].len(),
            sim.now
        );
    }
    // Let late duplicates arrive: nothing may land after completion.
    let _ = drive(&mut sim, &mut done, [usize::MAX, usize::MAX]);
    for c in &done[1] {
        let i = c.context as usize;
        let want = content(i as u64, sizes[i]);
        let got = c
            .buf
            .as_ref()
            .expect("receive buffer back")
            .0
            .borrow()
            .clone();
        let fit = sizes[i].min(room[i]);
        assert_eq!(c.len, fit, "seed {seed}: receive {i} length");
        if sizes[i] > room[i] {
            assert!(
                c.error.is_some(),
                "seed {seed}: receive {i} must report truncation"
            );
        } else {
            assert!(c.error.is_none(), "seed {seed}: receive {i}: {c:?}");
        }
        assert!(
            got[..fit] == want[..fit],
            "seed {seed} loss {loss}: receive {i} content differs at byte {:?}",
            got.iter().zip(&want).position(|(a, b)| a != b)
        );
        assert!(
            got[fit..].iter().all(|&x| x == FILL),
            "seed {seed}: receive {i} written past its data"
        );
    }
    let (placed, bodies) = (sim.nodes[1].placed, sim.nodes[0].bodies);
    assert!(
        bodies > 0,
        "seed {seed}: no packet was sent from an application buffer"
    );
    assert!(placed > 0, "seed {seed}: no datagram was placed directly");
    // Direct placement was the rule, not the exception (loss-free: nearly all).
    let data_pkts = sim.nodes[0].e.srd_stats().tx_data;
    println!("seed {seed} loss {loss} recv_first {recv_first}: {placed} placed, {bodies} bodies, {data_pkts} data packets");
    if loss == 0.0 {
        assert!(
            placed * 10 >= bodies * 8,
            "seed {seed}: only {placed} of {bodies} placed"
        );
    }
}

#[test]
fn zero_copy_paths_deliver_exactly_under_loss_and_reordering() {
    for seed in 1..=4u64 {
        for &loss in &[0.0, 0.03] {
            for recv_first in [true, false] {
                run(seed, loss, recv_first);
            }
        }
    }
}
