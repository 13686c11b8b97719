//! The zero-copy paths of the engine over the simulated network, driven the way
//! the FFI driver drives them: packets built with `poll_transmit_with` (the
//! body read from the application buffer at each transmission) and, while a
//! rendezvous receive waits, datagrams received by header peek +
//! `place_with` + `handle_placed` (the payload written straight into the
//! receive buffer, the engine never seeing those bytes). Under loss,
//! duplication and reordering every message must arrive byte for byte, no byte
//! may land outside its receive's range, and a send buffer changed after its
//! completion must never reach the wire.

use core::net::SocketAddr;
use core::time::Duration;
use std::sync::{Arc, Mutex};

use spray::msg::{CompKind, Completion, RecvFlags, RecvOp, RmaKind, RmaOp, SendOp};
use spray::rng::Rng;
use spray::sim::{addr, LinkSpec, Node, Sim};
use spray::srd::Transmit;
use spray::time::Instant;
use spray::{Config, Engine, EpMode, GuessCheck, RmaAccess, RmaTarget, UserBuf};

/// An application buffer the test can still see and change while the engine
/// holds it (what a C pointer is to the FFI): a window `start..start+len` of
/// shared memory.
#[derive(Clone, Debug)]
struct Shared(Arc<Mutex<Vec<u8>>>, usize, usize);

impl Shared {
    fn new(v: Vec<u8>) -> Self {
        let n = v.len();
        Shared(Arc::new(Mutex::new(v)), 0, n)
    }
    fn bytes(&self) -> Vec<u8> {
        self.0.lock().expect("buffer lock")[self.1..self.1 + self.2].to_vec()
    }
    fn fill(&self, x: u8) {
        self.0.lock().expect("buffer lock")[self.1..self.1 + self.2].fill(x);
    }
}

impl UserBuf for Shared {
    fn len(&self) -> usize {
        self.2
    }
    fn read_at(&self, offset: usize, out: &mut [u8]) {
        let at = self.1 + offset;
        out.copy_from_slice(&self.0.lock().expect("buffer lock")[at..at + out.len()]);
    }
    fn write_at(&mut self, offset: usize, data: &[u8]) {
        let at = self.1 + offset;
        self.0.lock().expect("buffer lock")[at..at + data.len()].copy_from_slice(data);
    }
}

/// One registered region (key 5, addresses = offsets) of a target.
struct Region(Shared);

impl RmaTarget<Shared> for Region {
    fn resolve(&self, key: u64, addr: u64, len: usize, _a: RmaAccess) -> Option<Shared> {
        let start = usize::try_from(addr).ok()?;
        (key == 5 && start.checked_add(len)? <= self.0 .2)
            .then(|| Shared(self.0 .0.clone(), start, len))
    }
}

/// An engine driven like the FFI driver drives it.
struct Placing {
    e: Engine<Shared>,
    /// Datagrams whose payload went straight into a receive buffer.
    placed: u64,
    /// Packets sent with a body read from an application buffer.
    bodies: u64,
    /// Datagrams received into the range `guess_rdata` named (no peek).
    guessed: u64,
    /// Datagrams received into a guessed range that was not theirs.
    missed: u64,
    /// Datagrams to peek at before guessing again after a wrong guess (as
    /// the FFI driver does).
    cooldown: u32,
    /// Datagrams the driver receives in one call (1: one at a time).
    batch: usize,
    /// Arrived, waiting for the next receive call (batch > 1).
    pending: Vec<(Instant, SocketAddr, Vec<u8>)>,
    /// Datagrams received as part of a batch of guesses.
    batched: u64,
    /// Every this many datagrams arriving (0: never), one arrives with junk
    /// bytes after its payload (what an on-path attacker can append to a
    /// replay: the header's `payload_len` no longer covers the datagram).
    trailer_every: u64,
    /// Datagrams seen, for `trailer_every`.
    arrived: u64,
}

/// A receive call happens at most this long after a datagram arrives.
const BATCH_WAIT: Duration = Duration::from_micros(15);

impl Placing {
    /// The driver's guessed receive: [headers | guessed range | spill-over],
    /// the kernel writing the payload into the guessed range *before* anyone
    /// knows what the datagram is; `place_with` then confirms, or the bytes
    /// are moved back. Writing there must never clobber data (the content
    /// checks catch it). False if there was no guess.
    fn guessed_receive(&mut self, now: Instant, from: SocketAddr, data: &[u8]) -> bool {
        let Some((gp, gb, at, n)) = self
            .e
            .guess_rdata()
            .map(|(b, at, n)| (b as *const Shared, b.clone(), at, n))
        else {
            return false;
        };
        let head = Engine::<Shared>::RDATA_HEAD_LEN;
        let mut slot = vec![0xA5u8; data.len()];
        let h = head.min(data.len());
        slot[..h].copy_from_slice(&data[..h]);
        if data.len() <= head {
            self.e.handle_datagram(now, from, &slot);
            return true;
        }
        let payload = data.len() - head;
        let k = payload.min(n);
        let mut dst = gb.clone();
        dst.write_at(at, &data[head..head + k]);
        slot[head + k..].copy_from_slice(&data[head + k..]);
        let check = self.e.check_guess(from, &slot, gp, at, n);
        if check == GuessCheck::Hit {
            self.guessed += 1;
            self.placed += 1;
            self.e.handle_placed(now, from, &slot);
        } else {
            // Put it back together from where it landed.
            let mut back = vec![0u8; k];
            gb.read_at(at, &mut back);
            slot[head..head + k].copy_from_slice(&back);
            assert_eq!(
                slot, data,
                "a datagram changed on its way through the guessed range"
            );
            if check == GuessCheck::Placeable {
                self.missed += 1;
                self.cooldown = 8;
            }
            self.e.handle_datagram(now, from, &slot);
        }
        true
    }
}

impl Placing {
    /// The driver's batch of guessed receives (one `recvmmsg`): datagram i of
    /// the batch lands [headers | the place `guess_rdata_nth(i)` names |
    /// spill-over], all of them before any is looked at. They are confirmed
    /// in order; from the first that is not what was guessed on, every later
    /// one is moved back out of its guessed place *before* anything is handled
    /// (a datagram handled as received may belong exactly where a later one
    /// of the batch landed). Returns how many it took (0: no guess).
    fn batch_receive(&mut self, got: &[(Instant, SocketAddr, Vec<u8>)]) -> usize {
        let head = Engine::<Shared>::RDATA_HEAD_LEN;
        let mut guesses = Vec::new();
        while guesses.len() < got.len() {
            match self.e.guess_rdata_nth(guesses.len()) {
                Some((b, at, n)) => guesses.push((b as *const Shared, b.clone(), at, n)),
                None => break,
            }
        }
        let g = guesses.len();
        if g < 2 {
            return 0;
        }
        // The kernel's scatter of every datagram of the batch.
        let mut slots: Vec<Vec<u8>> = Vec::new();
        let mut landed = Vec::new();
        for (i, (_, _, data)) in got[..g].iter().enumerate() {
            let (_, gb, at, n) = &guesses[i];
            let mut slot = vec![0xA5u8; data.len()];
            let h = head.min(data.len());
            slot[..h].copy_from_slice(&data[..h]);
            let k = data.len().saturating_sub(head).min(*n);
            if k > 0 {
                gb.clone().write_at(*at, &data[head..head + k]);
                slot[head + k..].copy_from_slice(&data[head + k..]);
            }
            slots.push(slot);
            landed.push(k);
        }
        let mut broken = false;
        for i in 0..g {
            let (now, from, data) = &got[i];
            if !broken && data.len() > head {
                let (gp, _, at, n) = guesses[i];
                let check = self.e.check_guess(*from, &slots[i], gp, at, n);
                if check == GuessCheck::Hit {
                    self.guessed += 1;
                    self.placed += 1;
                    self.batched += 1;
                    self.e.handle_placed(*now, *from, &slots[i]);
                    continue;
                }
                if check == GuessCheck::Placeable {
                    self.missed += 1;
                    self.cooldown = 8;
                }
            }
            if !broken {
                // Move this one and every later one out of its guessed place
                // before anything is handled.
                broken = true;
                for j in (i..g).filter(|&j| landed[j] > 0) {
                    let (_, gb, at, _) = &guesses[j];
                    let mut back = vec![0u8; landed[j]];
                    gb.read_at(*at, &mut back);
                    slots[j][head..head + landed[j]].copy_from_slice(&back);
                    assert_eq!(
                        slots[j], got[j].2,
                        "a datagram changed on its way through its guessed place"
                    );
                }
            }
            self.e.handle_datagram(*now, *from, &slots[i]);
        }
        g
    }

    /// One receive call over what arrived.
    fn receive_pending(&mut self) {
        let got = core::mem::take(&mut self.pending);
        let mut i = 0;
        while i < got.len() {
            if self.e.expects_rdata() && self.cooldown == 0 {
                let took = self.batch_receive(&got[i..]);
                if took > 0 {
                    i += took;
                    continue;
                }
            }
            let (now, from, data) = &got[i];
            self.receive_one(*now, *from, data);
            i += 1;
        }
    }
}

impl Node for Placing {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        self.arrived += 1;
        let extended;
        let data = if self.trailer_every > 0 && self.arrived.is_multiple_of(self.trailer_every) {
            let mut v = data.to_vec();
            let n = 1 + (self.arrived % 61) as usize;
            v.extend((0..n).map(|k| (k as u8) ^ 0xC3));
            extended = v;
            &extended[..]
        } else {
            data
        };
        if self.batch > 1 {
            self.pending.push((now, from, data.to_vec()));
            if self.pending.len() >= self.batch {
                self.receive_pending();
            }
            return;
        }
        self.receive_one(now, from, data);
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self
            .pending
            .first()
            .is_some_and(|p| p.0 + BATCH_WAIT <= now)
        {
            self.receive_pending();
        }
        self.e.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.transmit(now, buf)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let e = self.e.poll_timeout();
        match self.pending.first() {
            Some(p) => Some(e.map_or(p.0 + BATCH_WAIT, |t| t.min(p.0 + BATCH_WAIT))),
            None => e,
        }
    }
}

impl Placing {
    fn receive_one(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        if !self.e.expects_rdata() {
            self.e.handle_datagram(now, from, data);
            return;
        }
        if self.cooldown > 0 {
            self.cooldown -= 1;
        } else if self.guessed_receive(now, from, data) {
            return;
        }
        // What the driver has after a MSG_PEEK of the headers: the headers, and
        // a slot as long as the datagram holding stale bytes after them.
        let peek = Engine::<Shared>::PLACE_HEAD_LEN.min(data.len());
        let mut slot = vec![0xA5u8; data.len()];
        slot[..peek].copy_from_slice(&data[..peek]);
        let mut target = None;
        let head = self.e.place_with(from, &slot, &mut |b: &Shared, off, n| {
            assert!(off + n <= b.len(), "placement past the buffer");
            target = Some((b.clone(), off, n));
        });
        assert_eq!(head.is_some(), target.is_some());
        if let (Some(head), Some((b, off, n))) = (head, target) {
            assert!(head <= peek, "headers longer than what was peeked");
            assert!(n <= data.len() - head, "placement longer than the payload");
            // The kernel's scatter of the real receive: headers into the slot,
            // the payload into the buffer.
            slot[..head].copy_from_slice(&data[..head]);
            let mut dst = b.clone();
            dst.write_at(off, &data[head..head + n]);
            self.placed += 1;
            self.e.handle_placed(now, from, &slot);
        } else {
            self.e.handle_datagram(now, from, data);
        }
    }

    fn transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
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
}

fn node(i: usize) -> Placing {
    let mut c = Config::new(EpMode::Rdm, addr(i));
    c.paths = 4;
    c.nonce = 300 + i as u64;
    c.seed = 0xbeef ^ i as u64;
    c.max_datagram = 16_000;
    Placing {
        e: Engine::new(c),
        placed: 0,
        bodies: 0,
        guessed: 0,
        missed: 0,
        cooldown: 0,
        batch: 1,
        pending: Vec::new(),
        batched: 0,
        trailer_every: 0,
        arrived: 0,
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

/// Step until `n` sends and `n` receives completed, scribbling over every send
/// buffer the moment its send completes (a retransmission after that would
/// carry the scribble), then let late duplicates arrive: nothing may land
/// after completion.
fn scribbling_drive(
    sim: &mut Sim<Placing>,
    done: &mut [Vec<Completion<Shared>>; 2],
    n: usize,
    seed: u64,
    loss: f64,
) {
    let limit = sim.now + Duration::from_secs(60);
    loop {
        while let Some(c) = sim.nodes[0].e.poll_completion() {
            assert_eq!(c.kind, CompKind::Send);
            assert!(c.error.is_none(), "seed {seed}: send error {c:?}");
            if let Some(b) = &c.buf {
                b.fill(0xEE);
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
    let _ = drive(sim, done, [usize::MAX, usize::MAX]);
}

/// Messages of rendezvous sizes, receives posted first or after the RTS
/// arrived, receive buffers some too small (truncation); the senders scribble
/// over each send buffer as soon as it completes.
/// Returns (guessed receives right, datagrams placed by a batch of guesses,
/// datagrams placed, datagrams sent from an application buffer).
fn run(seed: u64, loss: f64, recv_first: bool, batch: usize) -> [u64; 4] {
    run_with(seed, loss, recv_first, batch, 0)
}

fn run_with(seed: u64, loss: f64, recv_first: bool, batch: usize, trailer_every: u64) -> [u64; 4] {
    let sizes = [70_000usize, 16_001, 300_000, 1 << 20, 45_000, 2_000_000];
    // Receive room per message: some exact, some larger, two smaller (truncated).
    let room = [70_000usize, 20_000, 300_000, 600_000, 45_000, 2_000_000];
    let mut sim = net(seed, loss);
    sim.nodes[1].batch = batch;
    sim.nodes[1].trailer_every = trailer_every;
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
            lazy: false,
        };
        sim.nodes[0].e.post_send(op).expect("post send");
    }
    let mut done = [Vec::new(), Vec::new()];
    if !recv_first {
        let until = sim.now + Duration::from_millis(5);
        while sim.now < until && sim.step(until) {}
        post_recvs(&mut sim);
    }
    scribbling_drive(&mut sim, &mut done, sizes.len(), seed, loss);
    for c in &done[1] {
        let i = c.context as usize;
        let want = content(i as u64, sizes[i]);
        let got = c.buf.as_ref().expect("receive buffer back").bytes();
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
    let (guessed, missed) = (sim.nodes[1].guessed, sim.nodes[1].missed);
    let batched = sim.nodes[1].batched;
    println!(
        "seed {seed} loss {loss} batch {batch}: {guessed} guessed receives placed ({batched} in batches), {missed} missed"
    );
    // (Guesses under jitter and reordering may all miss in a run: the
    // caller counts their hits over all runs.)
    assert!(
        bodies > 0,
        "seed {seed}: no packet was sent from an application buffer"
    );
    assert!(placed > 0, "seed {seed}: no datagram was placed directly");
    let data_pkts = sim.nodes[0].e.srd_stats().tx_data;
    println!("seed {seed} loss {loss} recv_first {recv_first}: {placed} placed, {bodies} bodies, {data_pkts} data packets");
    if loss == 0.0 && trailer_every == 0 {
        // Per run a floor only: a run's share moves with the timing (over
        // 96 loss-free runs 89 % were placed, single runs 75-95 %); the
        // caller holds the sum to 80 %.
        assert!(
            placed * 10 >= bodies * 6,
            "seed {seed}: only {placed} of {bodies} placed"
        );
    }
    [guessed, batched, placed, bodies]
}

/// Also with the receiver taking 4 datagrams per receive call, each into
/// its own guessed place (`guess_rdata_nth`), as the FFI driver's batch.
#[test]
fn zero_copy_paths_deliver_exactly_under_loss_and_reordering() {
    let (mut guessed, mut batched) = (0, 0);
    let (mut placed, mut bodies) = (0, 0);
    for seed in 1..=4u64 {
        for &loss in &[0.0, 0.03] {
            for recv_first in [true, false] {
                for batch in [1, 4] {
                    let [g, b, p, n] = run(seed, loss, recv_first, batch);
                    guessed += g;
                    batched += b;
                    if loss == 0.0 {
                        placed += p;
                        bodies += n;
                    }
                }
            }
        }
    }
    // Direct placement was the rule, not the exception (loss-free: nearly all).
    assert!(
        placed * 10 >= bodies * 8,
        "only {placed} of {bodies} datagrams placed in the loss-free runs"
    );
    assert!(guessed > 100, "only {guessed} guessed receives were right");
    assert!(
        batched > 20,
        "only {batched} datagrams placed by a batch of guesses"
    );
}

/// Datagrams that arrive longer than their header says (junk after the
/// payload, as an on-path attacker can append to a replay of a packet whose
/// original was lost) must never shift placed data: the network fuzzer found
/// 1 MiB messages delivered with a segment's bytes moved by the junk's length
/// when the header length was taken from the datagram's length.
#[test]
fn trailing_bytes_never_shift_placed_data() {
    for seed in 1..=3u64 {
        for &loss in &[0.0, 0.03] {
            for batch in [1, 4] {
                run_with(seed, loss, true, batch, 7);
            }
        }
    }
}

/// Eager messages (one to five datagrams of up to 16 000 bytes) whose sends
/// complete on their acks (`delivery_complete`, the FFI's default) or once
/// handed down (FI_INJECT_COMPLETE); each send buffer is scribbled over the
/// moment its send completes. Returns the packets sent from a send buffer.
fn run_eager(seed: u64, loss: f64, delivery_complete: bool) -> u64 {
    let sizes = [2_100usize, 9_000, 16_001, 45_000, 65_536, 1_000, 30_000];
    let mut sim = net(seed, loss);
    let p1 = sim.nodes[0].e.peer(addr(1));
    for (i, &n) in sizes.iter().enumerate() {
        let op = RecvOp {
            src: None,
            buf: Shared::new(vec![FILL; n + 8]),
            tag: Some((i as u64, 0)),
            context: i as u64,
            flags: RecvFlags::default(),
            report: true,
        };
        sim.nodes[1].e.post_recv(op).expect("post recv");
    }
    for (i, &n) in sizes.iter().enumerate() {
        let op = SendOp {
            peer: p1,
            buf: Shared::new(content(i as u64, n)),
            tag: Some(i as u64),
            data: None,
            context: 100 + i as u64,
            report: true,
            delivery_complete,
            lazy: false,
        };
        sim.nodes[0].e.post_send(op).expect("post send");
    }
    let mut done = [Vec::new(), Vec::new()];
    scribbling_drive(&mut sim, &mut done, sizes.len(), seed, loss);
    for c in &done[1] {
        let i = c.context as usize;
        assert!(c.error.is_none(), "seed {seed}: receive {i}: {c:?}");
        assert_eq!(c.len, sizes[i], "seed {seed}: receive {i} length");
        let got = c.buf.as_ref().expect("receive buffer back").bytes();
        let want = content(i as u64, sizes[i]);
        assert!(
            got[..sizes[i]] == want[..],
            "seed {seed} loss {loss} delivery_complete {delivery_complete}: \
             message {i} ({} B) differs at byte {:?}",
            sizes[i],
            got.iter().zip(&want).position(|(a, b)| a != b)
        );
        assert!(got[sizes[i]..].iter().all(|&x| x == FILL));
    }
    sim.nodes[0].bodies
}

/// Eager data leaves straight from the send buffer when the send waits for its
/// acks anyway, and exactly, under loss, duplication and reordering (a resend
/// reads the buffer again); a send that completes once handed down is copied.
#[test]
fn eager_data_leaves_from_the_send_buffer_when_the_send_waits_for_acks() {
    for seed in 1..=4u64 {
        for &loss in &[0.0, 0.03] {
            let bodies = run_eager(seed, loss, true);
            assert!(
                bodies >= 10,
                "seed {seed} loss {loss}: only {bodies} eager packets sent from the send buffer"
            );
            let bodies = run_eager(seed, loss, false);
            assert_eq!(
                bodies, 0,
                "seed {seed} loss {loss}: a send completing once handed down was not copied"
            );
        }
    }
}

/// RMA writes and reads of several sizes under loss: write segments after the
/// first land straight in the target's region, read responses straight in the
/// initiator's buffer, write sources leave from the initiator's buffer.
fn run_rma(seed: u64, loss: f64) {
    let mut sim = net(seed, loss);
    let region = Shared::new(vec![0u8; 4 << 20]);
    sim.nodes[1]
        .e
        .set_rma_target(Box::new(Region(region.clone())));
    let p1 = sim.nodes[0].e.peer(addr(1));
    // (address, length) of each write; each is read back afterwards.
    let ops = [
        (0usize, 100_000usize),
        (200_000, 1 << 20),
        (1_500_000, 2_000_001),
        (3_900_000, 40_000),
    ];
    let srcs: Vec<Shared> = ops
        .iter()
        .enumerate()
        .map(|(i, &(_, n))| Shared::new(content(50 + i as u64, n)))
        .collect();
    for (i, &(at, _)) in ops.iter().enumerate() {
        let op = RmaOp {
            peer: p1,
            kind: RmaKind::Write { data: None },
            buf: srcs[i].clone(),
            key: 5,
            addr: at as u64,
            context: i as u64,
            report: true,
        };
        sim.nodes[0].e.post_rma(op).expect("post write");
    }
    let limit = sim.now + Duration::from_secs(60);
    let mut done = 0;
    while done < ops.len() {
        while let Some(c) = sim.nodes[0].e.poll_completion() {
            assert!(c.error.is_none(), "seed {seed}: write {c:?}");
            // Complete: the source is the application's again.
            if let Some(b) = &c.buf {
                b.fill(0xEE);
            }
            done += 1;
        }
        assert!(
            sim.step(limit),
            "seed {seed}: {done}/{} writes by {:?}",
            ops.len(),
            sim.now
        );
    }
    for (i, &(at, n)) in ops.iter().enumerate() {
        let want = content(50 + i as u64, n);
        let got = Shared(region.0.clone(), at, n).bytes();
        assert!(
            got == want,
            "seed {seed} loss {loss}: write {i} differs at {:?}",
            got.iter().zip(&want).position(|(a, b)| a != b)
        );
    }
    let written = sim.nodes[1].placed;
    let dsts: Vec<Shared> = ops
        .iter()
        .map(|&(_, n)| Shared::new(vec![0u8; n]))
        .collect();
    for (i, &(at, _)) in ops.iter().enumerate() {
        let op = RmaOp {
            peer: p1,
            kind: RmaKind::Read,
            buf: dsts[i].clone(),
            key: 5,
            addr: at as u64,
            context: 10 + i as u64,
            report: true,
        };
        sim.nodes[0].e.post_rma(op).expect("post read");
    }
    let mut done = 0;
    while done < ops.len() {
        while let Some(c) = sim.nodes[0].e.poll_completion() {
            assert!(c.error.is_none(), "seed {seed}: read {c:?}");
            done += 1;
        }
        assert!(
            sim.step(limit),
            "seed {seed}: {done}/{} reads by {:?}",
            ops.len(),
            sim.now
        );
    }
    for (i, &(_, n)) in ops.iter().enumerate() {
        let want = content(50 + i as u64, n);
        assert!(
            dsts[i].bytes() == want,
            "seed {seed} loss {loss}: read {i} differs"
        );
    }
    let read = sim.nodes[0].placed;
    println!("seed {seed} loss {loss}: {written} write segments and {read} read responses placed, {} bodies", sim.nodes[0].bodies);
    assert!(
        written > 0 && read > 0 && sim.nodes[0].bodies > 0,
        "seed {seed}: a zero-copy RMA path was not taken"
    );
}

#[test]
fn rma_zero_copy_paths_deliver_exactly() {
    for seed in 1..=3u64 {
        for &loss in &[0.0, 0.03] {
            run_rma(seed, loss);
        }
    }
}

/// One seeded case of the placement property: a stream of messages of random
/// sizes (eager, at and around one segment, rendezvous of a few segments)
/// into receives of random room (exact, larger, and truncating, often below
/// one segment), under a random eager limit, receive batch, loss and
/// reordering. Every byte of every completed receive must be the sent one,
/// and nothing may be written past the data. Messages go one after another,
/// so each guess builds on what the previous message left behind (a
/// truncated receive's short pieces among them).
fn run_property(seed: u64) {
    let mut r = Rng::new(seed ^ 0x51ac_e0f5);
    let eager = [0usize, 256, 512, 1024, 4096, 15_000][r.below(6) as usize];
    let loss = [0.0, 0.0, 0.02][r.below(3) as usize];
    let batch = [1usize, 2, 4, 8][r.below(4) as usize];
    let mut sim = net(seed, loss);
    for n in &mut sim.nodes {
        let mut c = n.e.config().clone();
        if eager > 0 {
            c.eager_limit = eager;
        }
        n.e = Engine::new(c);
    }
    sim.nodes[1].batch = batch;
    let p1 = sim.nodes[0].e.peer(addr(1));
    let seg = 16_000 - Engine::<Shared>::RDATA_HEAD_LEN;
    let msgs = 6 + r.below(6) as usize;
    for m in 0..msgs {
        let size = match r.below(6) {
            0 => 1 + r.below(2048) as usize,
            1 => seg - 64 + r.below(128) as usize,
            2 => 2 * seg - 8 + r.below(16) as usize,
            3 => 1 + r.below(5 * seg as u64) as usize,
            4 => 100_000,
            _ => eager.max(1) + r.below(64) as usize,
        };
        let room = match r.below(5) {
            0 => size,
            1 => size + r.below(3000) as usize,
            2 => 1 + r.below(size as u64) as usize,
            3 => (1 + r.below(4096) as usize).min(size),
            _ => 4096.min(size),
        };
        let want = content(seed * 1000 + m as u64, size);
        let rbuf = Shared::new(vec![FILL; room]);
        let recv = RecvOp {
            src: None,
            buf: rbuf.clone(),
            tag: Some((m as u64, 0)),
            context: m as u64,
            flags: RecvFlags::default(),
            report: true,
        };
        let send = SendOp {
            peer: p1,
            buf: Shared::new(want.clone()),
            tag: Some(m as u64),
            data: None,
            context: m as u64,
            report: true,
            delivery_complete: false,
            lazy: false,
        };
        let recv_first = r.below(2) == 0;
        if recv_first {
            sim.nodes[1].e.post_recv(recv).expect("post recv");
            sim.nodes[0].e.post_send(send).expect("post send");
        } else {
            sim.nodes[0].e.post_send(send).expect("post send");
            let until = sim.now + Duration::from_micros(200 + r.below(2000));
            while sim.now < until && sim.step(until) {}
            sim.nodes[1].e.post_recv(recv).expect("post recv");
        }
        let mut done = [Vec::new(), Vec::new()];
        scribbling_drive(&mut sim, &mut done, 1, seed, loss);
        let c = &done[1][0];
        let fit = size.min(room);
        let got = rbuf.bytes();
        let case = format!(
            "seed {seed} (eager {eager}, loss {loss}, batch {batch}) message {m}: {size} B into {room} B"
        );
        assert_eq!(c.len, fit, "{case}: length");
        assert_eq!(c.error.is_some(), size > room, "{case}: {c:?}");
        assert!(
            got[..fit] == want[..fit],
            "{case}: {} wrong bytes, first at {:?}",
            got[..fit].iter().zip(&want).filter(|(a, b)| a != b).count(),
            got.iter().zip(&want).position(|(a, b)| a != b)
        );
        assert!(
            got[fit..].iter().all(|&x| x == FILL),
            "{case}: written past the data"
        );
    }
}

/// The placement property over 300 seeds. A failure names its seed; rerun one
/// with `SPRAY_SEED=<n>`.
#[test]
fn placement_property_random_sizes_truncations_eager_limits() {
    let seeds: Vec<u64> = match std::env::var("SPRAY_SEED") {
        Ok(s) => vec![s.parse().expect("SPRAY_SEED is a number")],
        Err(_) => (1..=300).collect(),
    };
    for seed in seeds {
        run_property(seed);
    }
}
