//! The engine facade the FFI driver runs: one endpoint's SRD core and message
//! layer glued together behind `handle_*` / `poll_*` calls.

use core::net::SocketAddr;

use crate::buf::UserBuf;
use crate::config::Config;
use crate::dgram::PeerId;
use crate::msg::{AtomicType, Completion, MsgLayer, OpError, RecvOp, RmaOp, SendOp};
use crate::srd::{Srd, SrdStats, Transmit};
use crate::time::Instant;

/// What a datagram received into a guessed place turned out to be (see
/// `Engine::check_guess`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum GuessCheck {
    /// The piece guessed, all of its payload in the guessed range: `handle_placed`.
    Hit,
    /// Data that has a place, but not that one (another message's, a resend,
    /// a reordered piece, a payload longer than the range): the stream is not
    /// in order now. Move its bytes back and `handle_datagram`.
    Placeable,
    /// Anything else (acks, control, another peer's packets, junk): move its
    /// bytes back and `handle_datagram`.
    Other,
}

/// One endpoint's protocol state.
pub struct Engine<B: UserBuf> {
    cfg: Config,
    srd: Srd,
    msg: MsgLayer<B>,
    /// Next keepalive round, while operations wait on peers (see `keepalive`).
    keepalive_at: Option<Instant>,
    /// A receive directed at a peer was posted with no round armed: the
    /// next `handle_timeout` (due at once) arms one. A post has no clock,
    /// and with nothing else going on no input or timer would ever arm it.
    keepalive_arm: bool,
    /// Datagrams were handled by `handle_segments` since the last
    /// `end_input`.
    input_pending: bool,
}

/// How often peers we wait on are probed when nothing else goes to them, ns:
/// a quarter of the unreachable timeout, within these bounds.
const KEEPALIVE_MIN_NS: u64 = 10_000_000;
const KEEPALIVE_MAX_NS: u64 = 1_000_000_000;

impl<B: UserBuf> Engine<B> {
    /// An engine for the endpoint described by `cfg`.
    pub fn new(cfg: Config) -> Self {
        let srd = Srd::new(&cfg);
        let mut msg = MsgLayer::new(&cfg);
        // The message layer sizes its segments from what one SRD datagram carries.
        msg.set_max_payload(crate::dgram::Datagrams::max_payload(&srd));
        Engine {
            cfg,
            srd,
            msg,
            keepalive_at: None,
            keepalive_arm: false,
            input_pending: false,
        }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Has this endpoint a job key (`Config::auth_key`): every packet it
    /// sends carries a MAC, and it accepts only packets with a valid one?
    /// Then no datagram is placed straight into an application buffer
    /// (`place_with` and `guess_rdata` say no).
    pub fn keyed(&self) -> bool {
        self.srd.keyed()
    }

    /// Largest message `post_send` accepts, in bytes.
    pub fn max_msg_size(&self) -> usize {
        self.msg.max_msg_size()
    }

    /// The peer at `addr` (main IP and port), created if new.
    pub fn peer(&mut self, addr: SocketAddr) -> PeerId {
        self.srd.peer(addr)
    }

    /// The main address of `peer`.
    pub fn peer_addr(&self, peer: PeerId) -> Option<SocketAddr> {
        self.srd.peer_addr(peer)
    }

    /// Post a send; its packets become available from `poll_transmit`.
    pub fn post_send(&mut self, op: SendOp<B>) -> Result<(), OpError> {
        self.msg.post_send(op)?;
        self.msg.pump(&mut self.srd);
        Ok(())
    }

    /// Post a one-sided operation (RMA or atomic); its packets leave through `poll_transmit`.
    pub fn post_rma(&mut self, op: RmaOp<B>) -> Result<(), OpError> {
        self.msg.post_rma(op)?;
        self.msg.pump(&mut self.srd);
        Ok(())
    }

    /// Install the resolver of remote keys for RMA requests aimed at this endpoint.
    pub fn set_rma_target(&mut self, target: Box<dyn crate::buf::RmaTarget<B>>) {
        self.msg.set_rma_target(target);
    }

    /// The orderings this endpoint's one-sided ops keep (`RmaOrder`; default none).
    pub fn set_rma_order(&mut self, order: crate::msg::RmaOrder) {
        self.msg.set_rma_order(order);
    }

    /// Largest element count of one atomic of datatype `dt` (`compare`: a compare op).
    pub fn max_atomic_count(&self, dt: AtomicType, compare: bool) -> usize {
        self.msg.max_atomic_count(dt, compare)
    }

    /// Post a receive (may complete at once from the unexpected queue).
    pub fn post_recv(&mut self, op: RecvOp<B>) -> Result<(), OpError> {
        let directed = op.src.is_some();
        self.msg.post_recv(op)?;
        self.keepalive_arm |= directed && self.keepalive_at.is_none();
        // Matching an unexpected rendezvous message may queue control traffic.
        self.msg.pump(&mut self.srd);
        Ok(())
    }

    /// Datagrams the SRD queued since creation: unchanged across a call means
    /// the call left nothing to transmit (a driver may skip its transmit poll).
    pub fn queued_total(&self) -> u64 {
        self.srd.queued_total()
    }

    /// Cancel a posted operation by context; true if one was found.
    pub fn cancel(&mut self, context: u64) -> bool {
        self.msg.cancel(context)
    }

    /// Set the minimum free space of multi-recv buffers, bytes.
    pub fn set_min_multi_recv(&mut self, bytes: usize) {
        self.msg.set_min_multi_recv(bytes);
    }

    /// A UDP datagram arrived from `from` (source IP and port).
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        self.input(now, from, data, false);
    }

    /// One datagram of a batch received at once, or a coalesced one (UDP
    /// GRO): `data` holds segments of `seg` bytes each, the last possibly
    /// shorter, every one a datagram of its own from `from`, received at
    /// `now` (`seg` = 0 or at least `data.len()`: one datagram). Each is
    /// handled as by `handle_datagram`, but what follows every input
    /// (pending messages handed to the SRD, the keepalive check) waits for
    /// `end_input`, which the driver calls once after the batch, before it
    /// transmits: per segment of a 1 MiB stream at MTU 1500 that work cost
    /// about 70 of the receiver's 1000 instructions, and nothing leaves
    /// until the batch is handled. A run of segments that continue the one
    /// before (a flowlet's packets: the same header but for the PSN, and
    /// the message header but for the offset) goes through the SRD's
    /// `handle_train` and the message layer's segment shortcut, which check
    /// each against the one before instead of parsing and admitting it anew.
    pub fn handle_segments(&mut self, now: Instant, from: SocketAddr, data: &[u8], seg: usize) {
        let seg = if seg == 0 { data.len().max(1) } else { seg };
        if data.is_empty() {
            // (Counted and dropped as malformed, as any datagram too short.)
            self.input_one(now, from, data, false);
        }
        let mut pos = 0;
        while pos < data.len() {
            let end = (pos + seg).min(data.len());
            self.input_one(now, from, &data[pos..end], false);
            pos = end;
            if pos < data.len() {
                let msg = &mut self.msg;
                pos += self
                    .srd
                    .handle_train(now, from, &data[pos..], seg, &mut |peer, payload| {
                        msg.handle_payload(peer, payload)
                    });
            }
        }
        self.input_pending = true;
    }

    /// The work `handle_segments` left for the end of its batch
    /// (nothing if no datagram came since the last call).
    pub fn end_input(&mut self, now: Instant) {
        if core::mem::take(&mut self.input_pending) {
            self.after_input();
            self.keepalive(now);
        }
    }

    /// A datagram through the SRD, then its payload to the message layer
    /// (`placed`: its bulk bytes are in their buffer already).
    fn input(&mut self, now: Instant, from: SocketAddr, data: &[u8], placed: bool) {
        self.input_one(now, from, data, placed);
        // (Covers a batch's datagrams handled before it too.)
        self.input_pending = false;
        self.after_input();
        self.keepalive(now);
    }

    /// `input` but for what follows it (`end_input`).
    fn input_one(&mut self, now: Instant, from: SocketAddr, data: &[u8], placed: bool) {
        let delivered = self.srd.handle_datagram(now, from, data);
        // Reports first: a packet that reveals a peer restart must reset that
        // peer's message state before its payload is matched.
        while let Some(ev) = self.srd.poll_event() {
            self.msg.handle_event(ev);
        }
        match delivered {
            Some((peer, payload)) if placed => self.msg.handle_payload_placed(peer, payload),
            Some((peer, payload)) => self.msg.handle_payload(peer, payload),
            None => {}
        }
    }

    /// Bytes of its message still to come after the latest DATA or RDATA
    /// payload handled: a driver that just received a burst's first flowlet
    /// may receive the rest of a short message before it transmits.
    pub fn rx_message_left(&self) -> usize {
        self.msg.rx_message_left()
    }

    /// Headers a driver must read from a datagram before `place_with` can tell
    /// where its payload goes (SRD header + message header + RMA sub-header), bytes.
    pub const PLACE_HEAD_LEN: usize =
        crate::wire::srd::HEADER_LEN + crate::wire::msg::HEADER_LEN + crate::wire::msg::RMA_SUB_LEN;

    /// Is bulk data expected into known buffers (a matched rendezvous receive, an
    /// RMA read of ours, a peer's RMA write under way)? Then a driver may peek at
    /// each datagram's first `PLACE_HEAD_LEN` bytes and ask `place_with`.
    pub fn expects_rdata(&self) -> bool {
        self.msg.expects_rdata()
    }

    /// Given a datagram from `from` whose first `PLACE_HEAD_LEN` bytes (or all,
    /// if shorter) are in `data` (which must be as long as the datagram; the rest
    /// may be garbage): if its payload belongs in an application buffer (a
    /// receive, an RMA read's destination, registered memory a peer writes),
    /// call `f(buf, offset, len)` with where (`len` may be shorter than the
    /// payload: the rest is truncated away) and return how many leading bytes
    /// of the datagram are headers. The driver then receives the datagram with
    /// those headers in `data` and the payload there, and calls `handle_placed`.
    /// Read-only.
    pub fn place_with(
        &self,
        from: SocketAddr,
        data: &[u8],
        f: &mut dyn FnMut(&B, usize, usize),
    ) -> Option<usize> {
        let (peer, payload) = self.srd.peek_data(from, data)?;
        let head = self.msg.place_target(peer, payload, f)?;
        // The SRD header and the message headers: `peek_data` only passes a
        // datagram exactly as long as its header says.
        Some(crate::wire::srd::HEADER_LEN + head)
    }

    /// Before a datagram's headers are seen: `(buffer, offset, bytes)`
    /// where the next one most likely puts its payload if it is RDATA (see
    /// `MsgLayer::guess_rdata`), and `RDATA_HEAD_LEN`, the headers before
    /// that payload. A driver may receive the next datagram as
    /// [headers | there | spill-over], then ask `place_with`: if it names
    /// exactly that range, `handle_placed`; else move the bytes back behind
    /// the headers and `handle_datagram` (the range was unwritten, so nothing
    /// is lost).
    pub fn guess_rdata(&self) -> Option<(&B, usize, usize)> {
        self.guess_rdata_nth(0)
    }

    /// Like `guess_rdata`, for the `k`-th datagram after that one, within the
    /// same message (None past its end): a driver may receive up to `k + 1`
    /// datagrams in one call, each into its guessed place, and confirm them in
    /// order with `place_with`. Once one is not what was guessed, each later
    /// one must be moved out of its guessed place before anything is handled
    /// (its bytes sit where a datagram handled earlier may belong).
    pub fn guess_rdata_nth(&self, k: usize) -> Option<(&B, usize, usize)> {
        if self.srd.keyed() {
            // No placement with a job key (see `Srd::peek_data`).
            return None;
        }
        let (_, b, at, n) = self.msg.guess_rdata_nth(k)?;
        Some((b, at, n))
    }

    /// Headers in front of an RDATA payload: SRD and message headers.
    pub const RDATA_HEAD_LEN: usize = crate::wire::srd::HEADER_LEN + crate::wire::msg::HEADER_LEN;

    /// What a datagram received into a guessed place is: `data` holds its
    /// `RDATA_HEAD_LEN` bytes of headers (and is as long as the datagram), and
    /// its payload went to the guessed range (`n` bytes at `at` of the buffer
    /// at `buf`, as `guess_rdata_nth` named it), anything past `n` bytes into
    /// the driver's slot. `Hit` only when `place_with` names exactly that
    /// buffer and offset for the *whole* payload and the payload fit in the
    /// range: a payload longer than the guess has its tail outside the
    /// buffer, and accepting it would complete the receive with those bytes
    /// never written. Read-only.
    pub fn check_guess(
        &self,
        from: SocketAddr,
        data: &[u8],
        buf: *const B,
        at: usize,
        n: usize,
    ) -> GuessCheck {
        let payload = data.len().saturating_sub(Self::RDATA_HEAD_LEN);
        let (mut named, mut hit) = (false, false);
        let said = self.place_with(from, data, &mut |b, off, k| {
            named = true;
            hit = core::ptr::eq(b, buf) && off == at && k == payload && payload <= n;
        });
        if payload > 0 && hit && said == Some(Self::RDATA_HEAD_LEN) {
            GuessCheck::Hit
        } else if named {
            GuessCheck::Placeable
        } else {
            GuessCheck::Other
        }
    }

    /// A datagram received after `place_with` said yes: `data` holds its headers
    /// (and is as long as the datagram); its payload is already in place.
    pub fn handle_placed(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        self.input(now, from, data, true);
    }

    /// Message-layer state held now: (sends, posted receives, incoming
    /// message records) (bounds checked by the fuzzing tests).
    pub fn live_counts(&self) -> (usize, usize, usize) {
        self.msg.live_counts()
    }

    /// Unexpected (unmatched) eager/medium message bytes held now.
    pub fn unexpected_bytes(&self) -> usize {
        self.msg.unexpected_bytes()
    }

    /// Message-layer counters.
    pub fn msg_stats(&self) -> &crate::msg::MsgStats {
        self.msg.stats()
    }

    /// Unexpected messages held now (unmatched, held back for send order or
    /// claimed; rendezvous requests included) and their eager bytes.
    pub fn unexpected(&self) -> (usize, usize) {
        (self.msg.unexpected_msgs(), self.msg.unexpected_bytes())
    }

    /// Run the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.srd.handle_timeout(now);
        self.input_pending = false;
        self.after_input();
        self.keepalive(now);
    }

    /// While started operations wait on peers for a reply (an RMA reply, a CTS)
    /// or receives for the rest of a message or for a message from a named
    /// peer we have a session with, probe every such peer that has
    /// nothing of ours in flight, every `unreachable_timeout / 4`: a peer that
    /// died silently then fails its probe, and with it the operations waiting
    /// on it, instead of hanging.
    fn keepalive(&mut self, now: Instant) {
        self.keepalive_arm = false;
        if self.msg.pending_initiated() == 0 && !self.msg.receiving() {
            self.keepalive_at = None;
            return;
        }
        if self.keepalive_at.is_some_and(|at| now < at) {
            // Not due: the common case (this runs after every datagram).
            return;
        }
        let every = (self.cfg.unreachable_timeout.as_nanos() as u64 / 4)
            .clamp(KEEPALIVE_MIN_NS, KEEPALIVE_MAX_NS);
        if self.keepalive_at.is_none() {
            self.keepalive_at = Some(now + core::time::Duration::from_nanos(every));
            return;
        }
        for p in self.msg.waiting_peers() {
            if self.srd.outstanding(p) == 0 {
                self.msg.push_keepalive(p);
            }
        }
        for p in self.msg.recv_waiting_peers() {
            if self.srd.has_session(p) && self.srd.outstanding(p) == 0 {
                self.msg.push_keepalive(p);
            }
        }
        self.msg.pump(&mut self.srd);
        self.keepalive_at = Some(now + core::time::Duration::from_nanos(every));
    }

    /// Pass SRD reports up and refill the SRD send queues from pending messages.
    fn after_input(&mut self) {
        while let Some(ev) = self.srd.poll_event() {
            self.msg.handle_event(ev);
        }
        self.msg.pump(&mut self.srd);
    }

    /// The next packet to send, written whole into `buf` (at least `max_datagram` bytes).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let mut t = self.poll_parts(now, buf)?;
        if let Some(body) = t.body.take() {
            let out = buf.get_mut(t.len..t.len + body.len)?;
            match self.msg.body(body.peer, body.token, body.key, body.len) {
                Some((b, off)) => b.read_at(off, out),
                None => out.fill(0),
            }
            t.len += body.len;
            // With a job key: the tag covers the body, now in `buf`.
            self.srd.seal_body(&mut buf[..t.len], &mut |_| {});
        }
        Some(t)
    }

    /// The next packet to send, without copying a large payload: the headers are
    /// written into `buf`, and if the datagram continues in an application buffer,
    /// `body(buf, offset, len)` is called with it (the bytes at `offset..offset+len`
    /// of `buf` follow the returned `len` bytes on the wire; `Transmit::body` says
    /// how many). That buffer stays valid until the engine next handles input.
    /// A body whose message is gone is written into `buf` as zeros.
    pub fn poll_transmit_with(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        body: &mut dyn FnMut(&B, usize, usize),
    ) -> Option<Transmit> {
        let mut t = self.poll_parts(now, buf)?;
        if let Some(b) = t.body {
            match self.msg.body(b.peer, b.token, b.key, b.len) {
                Some((ub, off)) => {
                    // With a job key the tag covers the body, read here from
                    // the application's buffer (the datagram leaves from it).
                    self.srd
                        .seal_body(&mut buf[..t.len], &mut |s| feed_body(ub, off, b.len, s));
                    body(ub, off, b.len)
                }
                None => {
                    buf.get_mut(t.len..t.len + b.len)?.fill(0);
                    t.len += b.len;
                    t.body = None;
                    self.srd.seal_body(&mut buf[..t.len], &mut |_| {});
                }
            }
        }
        Some(t)
    }

    fn poll_parts(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        // A driver that forgot `end_input` still sends what its input queued.
        self.end_input(now);
        if let Some(t) = self.srd.poll_transmit(now, buf) {
            return Some(t);
        }
        if self.msg.has_pending_sends() {
            self.msg.pump(&mut self.srd);
            return self.srd.poll_transmit(now, buf);
        }
        None
    }

    /// When `handle_timeout` must next run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.keepalive_arm {
            return Some(Instant::ZERO);
        }
        match (self.srd.poll_timeout(), self.keepalive_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Initiated operations (sends, RMA, atomics) not completed yet.
    pub fn pending_initiated(&self) -> usize {
        self.msg.pending_initiated()
    }

    /// Sends, RMA and atomics `post_send` / `post_rma` still take before
    /// `OpError::Again` (`Config::max_tx_ops` minus those not completed).
    pub fn tx_room(&self) -> usize {
        self.msg.tx_room()
    }

    /// Receives `post_recv` still takes before `OpError::Again`.
    pub fn rx_room(&self) -> usize {
        self.msg.rx_room()
    }

    /// The next finished operation.
    pub fn poll_completion(&mut self) -> Option<Completion<B>> {
        self.msg.poll_completion()
    }

    /// RMA counters and live RMA state sizes (both sides).
    pub fn rma_stats(&self) -> &crate::msg::RmaStats {
        self.msg.rma_stats()
    }

    /// SRD counters (packets, retransmissions, drops, per-path figures).
    pub fn srd_stats(&self) -> &SrdStats {
        self.srd.stats()
    }

    /// Per-peer and per-path counters and state (on-demand statistics).
    pub fn peer_stats(&self) -> Vec<crate::srd::PeerStats> {
        self.srd.peer_stats()
    }
}

/// Feed `len` bytes at `off` of `b` to a tag being computed, a cache-sized
/// piece at a time (`UserBuf` has no borrowed view of its bytes).
fn feed_body<B: UserBuf>(b: &B, off: usize, len: usize, s: &mut crate::srd::Sealer) {
    let mut chunk = [0u8; 4096];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(chunk.len());
        b.read_at(off + at, &mut chunk[..n]);
        s.update(&chunk[..n]);
        at += n;
    }
}

#[cfg(any(test, feature = "sim"))]
impl<B: UserBuf> crate::sim::Node for Engine<B> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        Engine::handle_datagram(self, now, from, data);
    }
    fn handle_timeout(&mut self, now: Instant) {
        Engine::handle_timeout(self, now);
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        Engine::poll_transmit(self, now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Engine::poll_timeout(self)
    }
}
