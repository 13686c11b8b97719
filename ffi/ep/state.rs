//! An endpoint's state behind its lock: the engine, the I/O driver, bindings,
//! address translation, posting operations and turning completions into CQ
//! entries and counter increments.

use spray::hash::FastMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use spray::msg::{CompError, CompKind, Completion, OpError, RecvFlags, RecvOp, SendOp};
use spray::{Config, Engine, EpMode, Instant, PeerId, UserBuf};

use super::hold::{PostHold, HOLD_MAX_BYTES};
use crate::consts::*;
use crate::fabric::av::AvCore;
use crate::fabric::cntr::CntrCore;
use crate::fabric::cq::{CqCore, Entry, ErrEntry};
use crate::fabric::eq::EqCore;
use crate::fabric::mr::{MrTable, MrTarget};
use crate::io::buf::FfiBuf;
use crate::io::clock;
use crate::io::driver::{Io, Offloads};
use crate::io::sock::Sockets;
use crate::{check, log, params};

/// Rounds of `recvmmsg` per progress call (bounds the time one call takes).
const RX_ROUNDS: usize = 5;

/// A message with at most this many bytes still to come after a burst's
/// first flowlet is received to its end before anything is sent (one
/// segmented send of its sender: the rest left in the same call or right
/// after it). A longer one is acknowledged first, as its sender may wait for
/// that ack to send more (1 MiB ping-pongs were 4-8 % slower draining first).
const TAIL_BYTES: usize = 64 << 10;
/// Largest fi_addr kept in the direct-indexed translation cache.
const CACHE_MAX: u64 = 1 << 20;

/// What an endpoint was opened with.
pub struct EpSetup {
    /// `FI_EP_RDM` or `FI_EP_DGRAM`.
    pub ep_type: u32,
    /// Default op flags of sends / receives (from tx_attr / rx_attr).
    pub tx_flags: u64,
    /// See `tx_flags`.
    pub rx_flags: u64,
    /// Largest UDP payload, bytes.
    pub max_datagram: usize,
    /// Largest inject, bytes.
    pub inject_size: usize,
    /// `FI_DIRECTED_RECV` was granted: receives honour their source address
    /// (without it the address is ignored, as libfabric specifies).
    pub directed_recv: bool,
    /// The endpoint's capabilities (`fi_info.caps`): which CQs enable requires.
    pub caps: u64,
    /// Job key (see `auth::job_key`): every packet is authenticated with it.
    pub auth_key: Option<spray::config::AuthKey>,
    /// Transmit queue size (`tx_attr->size`): sends, RMA and atomics posted
    /// and not completed; past it posts return `-FI_EAGAIN`.
    pub tx_size: usize,
    /// Receive queue size (`rx_attr->size`): receives posted and not completed.
    pub rx_size: usize,
    /// One-sided orderings kept (from the asked `msg_order`, `getinfo::rma_order`).
    pub rma_order: spray::msg::RmaOrder,
}

/// Smallest datagram (bytes) for which direct placement is on by default
/// (`FI_SPRAY_RX_PLACE` unset). With 64 KiB loopback datagrams it pays
/// (fi_stream 1 MiB on `lo`: 4.65-4.71 GB/s placed against 2.96-3.14
/// through the bounce slot), with Ethernet frames it costs (two hosts, fi_stream
/// medians placed / not: MTU 1500 1 MiB 748 / 846 MB/s, 64 KiB 1003 / 1272;
/// MTU 9000 1 MiB 2397 / 2651, 64 KiB 1947 / 2123; again on 42d1426, the
/// receiver's CPU per packet placed / not, 1 MiB, medians of 5-6 alternated
/// runs: MTU 1500 679 / 451 ns, MTU 9000 2252 / 1870 and 2567 / 2489).
///
/// Why, at MTU 1500 (an in-order stream takes the chained path, no peek):
/// - The copy does not go away, it moves into the kernel. The receiver's
///   cost of it is the destination's cache misses (a window of receive
///   buffers larger than the cache), paid by the kernel's copy instead of
///   ours; and the kernel's copy into [40-byte headers | 1432-byte payload]
///   iovec pairs costs more than into one slot. Measured alone (loopback,
///   one GRO datagram of 44 segments a `recvmsg`, per packet): into a slot
///   60-77 ns then our copy into a 16 MiB ring 134-164; the iovec pairs
///   into hot memory 106-124, into the ring 204-227. At best a draw.
/// - One coalesced datagram per `recvmsg` (13 packets a call, against 84 for
///   a `recvmmsg` batch of them; a syscall costs ~400 ns here), each call
///   building 64 guesses and 129 iovecs.
/// - Per segment, `check_guess` parses its headers and `handle_placed` runs
///   the whole input path (where the copy path continues a train), and a
///   round of `place_round` packets is acknowledged (an ack per 38 packets,
///   not 255), which costs the sender too.
///
/// At MTU 9000 the kernel's side favours placement (alone: 882-911 ns a
/// packet against 1067-1164), but a coalesced datagram holds only ~6
/// segments there, so one per `recvmsg` makes 4 packets a call.
///
/// Prefetching the destination ahead of the copy (`prefetchw`, in bulk
/// before a receive or a few segments at a time) saved as much in the copy
/// as the prefetches cost; non-temporal stores were twice as slow.
const PLACE_MIN_DATAGRAM: usize = 16 << 10;

/// The engine and its driver, once the endpoint is enabled.
pub(crate) struct Running {
    pub(crate) engine: Engine<FfiBuf>,
    io: Io,
    /// Receive rendezvous data straight into receive buffers (`FI_SPRAY_RX_PLACE`).
    place: bool,
    /// The engine may have something to send or its timers may have moved
    /// since the last full pass (a post, a cancel, a new peer, a send the
    /// kernel refused for now). Cleared by a pass that sent everything.
    stale: bool,
    /// `engine.poll_timeout()` as of the last full pass.
    next_timer: Option<Instant>,
    /// Most rendezvous datagrams one receive round places (the engine's
    /// `ack_every`): a drain acknowledges between rounds (see `progress`).
    place_round: usize,
    /// A job-key mismatch was logged (see `warn_key_mismatch`).
    mac_warned: bool,
}

/// Everything an endpoint owns.
pub struct EpState {
    pub(crate) setup: EpSetup,
    /// Clock reading of the latest progress, ns (0 = none yet): doubles as the
    /// time of the latest application call for the assist thread, which saves
    /// a clock read per poll.
    pub(crate) progressed_ns: u64,
    /// Sends held back to leave with the rest of their burst (`hold.rs`).
    pub(crate) hold: PostHold,
    /// Address of socket 0 (`fi_getname`).
    pub local: SocketAddr,
    socks: Option<Sockets>,
    pub(crate) run: Option<Running>,
    /// Bound completion queues: transmit, receive.
    pub tx_cq: Option<Arc<CqCore>>,
    /// See `tx_cq`.
    pub rx_cq: Option<Arc<CqCore>>,
    /// Bound counters: sends, receives.
    pub tx_cntr: Option<Arc<CntrCore>>,
    /// See `tx_cntr`.
    pub rx_cntr: Option<Arc<CntrCore>>,
    /// Counters of RMA reads and fetching atomics (bound with `FI_READ`).
    pub read_cntr: Option<Arc<CntrCore>>,
    /// Counters of RMA writes and plain atomics (bound with `FI_WRITE`).
    pub write_cntr: Option<Arc<CntrCore>>,
    /// Counters bound for events we never raise (FI_REMOTE_READ/WRITE without
    /// FI_RMA_EVENT): kept for refcounts.
    pub other_cntrs: Vec<Arc<CntrCore>>,
    /// The domain's registrations, resolved by RMA requests from peers.
    pub mrs: Option<Arc<MrTable>>,
    /// Outstanding fetching atomics by context (their completions say FI_READ).
    pub(crate) fetch_ctx: FastMap<u64, u32>,
    /// Bound AV.
    pub av: Option<Arc<AvCore>>,
    /// Bound EQ.
    pub eq: Option<Arc<EqCore>>,
    /// FI_SELECTIVE_COMPLETION on the transmit / receive CQ.
    pub tx_selective: bool,
    /// See `tx_selective`.
    pub rx_selective: bool,
    cache_gen: u64,
    to_peer: Vec<Option<PeerId>>,
    to_fi_addr: FastMap<PeerId, u64>,
    multi_bases: FastMap<u64, usize>,
    pub(crate) inject_pool: Vec<Vec<u8>>,
    min_multi_recv: Option<usize>,
    /// The closing statistics line was written: no periodic one after it.
    stats_closed: bool,
}

/// A negative FI_E* code.
pub type Errno = isize;

impl EpState {
    /// State for an endpoint whose sockets are open but not yet enabled.
    pub fn new(setup: EpSetup, socks: Sockets) -> EpState {
        EpState {
            progressed_ns: 0,
            hold: PostHold::new(0),
            local: socks.local,
            setup,
            socks: Some(socks),
            run: None,
            tx_cq: None,
            rx_cq: None,
            tx_cntr: None,
            rx_cntr: None,
            read_cntr: None,
            write_cntr: None,
            other_cntrs: Vec::new(),
            mrs: None,
            fetch_ctx: FastMap::default(),
            av: None,
            eq: None,
            tx_selective: false,
            rx_selective: false,
            cache_gen: 0,
            to_peer: Vec::new(),
            to_fi_addr: FastMap::default(),
            multi_bases: FastMap::default(),
            inject_pool: Vec::new(),
            min_multi_recv: None,
            stats_closed: false,
        }
    }

    /// One line of counters for the log (driver and SRD core).
    pub fn summary(&self) -> String {
        match &self.run {
            Some(r) => format!(
                "endpoint {}: io {:?}; srd {:?}",
                self.local,
                r.io.stats,
                r.engine.srd_stats()
            ),
            None => format!("endpoint {}: never enabled", self.local),
        }
    }

    /// Write this endpoint's counters to the `FI_SPRAY_STATS` sink, if on.
    pub fn dump_stats(&mut self, event: &str) {
        if self.stats_closed {
            return;
        }
        self.stats_closed = event == "close";
        if let Some(r) = &self.run {
            if crate::stats::enabled() {
                let peers = r.engine.peer_stats();
                let ep = self.local.to_string();
                let (io, msg) = (&r.io.stats, r.engine.msg_stats());
                crate::stats::write(&ep, event, io, r.engine.srd_stats(), msg, &peers);
            }
        }
    }

    /// True once enabled.
    pub fn enabled(&self) -> bool {
        self.run.is_some()
    }

    /// Default op flags (FI_TRANSMIT / FI_RECV selects which).
    pub fn op_flags(&mut self, recv: bool) -> &mut u64 {
        if recv {
            &mut self.setup.rx_flags
        } else {
            &mut self.setup.tx_flags
        }
    }

    /// The receiving socket, once enabled.
    pub fn rx_fd(&self) -> Option<i32> {
        self.run.as_ref().map(|r| r.io.rx_fd())
    }

    /// When the engine next needs a timer run, ns.
    pub fn next_timer_ns(&self) -> Option<u64> {
        self.run
            .as_ref()?
            .engine
            .poll_timeout()
            .map(|t| t.as_nanos())
    }

    /// The endpoint's rails' IPs (rail 0 first; empty with one rail), before
    /// enable.
    pub fn rails(&self) -> &[std::net::IpAddr] {
        self.socks.as_ref().map_or(&[], |s| &s.rails)
    }

    /// Rebind before enable (`fi_setname`).
    pub fn set_local(&mut self, socks: Sockets) -> Result<(), Errno> {
        if self.run.is_some() {
            return Err(err::EOPBADSTATE as isize);
        }
        self.local = socks.local;
        self.socks = Some(socks);
        Ok(())
    }

    /// `FI_OPT_MIN_MULTI_RECV`.
    pub fn set_min_multi_recv(&mut self, bytes: usize) {
        self.min_multi_recv = Some(bytes);
        if let Some(r) = &mut self.run {
            r.engine.set_min_multi_recv(bytes);
        }
    }
    /// Current `FI_OPT_MIN_MULTI_RECV` (0 = the engine's default).
    pub fn min_multi_recv(&self) -> usize {
        self.min_multi_recv.unwrap_or(0)
    }

    /// `FI_ENABLE`: build the engine over the sockets.
    pub fn enable(&mut self) -> Result<(), Errno> {
        if self.run.is_some() {
            return Ok(());
        }
        // fi_endpoint(3): an endpoint that sends needs a CQ for transmit
        // completions, even with successful ones suppressed, so that failures
        // are reported; one that receives needs a receive CQ. Counters alone
        // do not do (as prov/tcp, udp, shm, rxm answer).
        let caps = self.setup.caps;
        let missing = if check::needs_tx_cq(caps) && self.tx_cq.is_none() {
            Some("transmit")
        } else if check::needs_rx_cq(caps) && self.rx_cq.is_none() {
            Some("receive")
        } else {
            None
        };
        if let Some(which) = missing {
            log::warn(&format!(
                "endpoint {}: fi_enable without a {which} CQ (caps {caps:#x})",
                self.local
            ));
            return Err(err::ENOCQ as isize);
        }
        let Some(socks) = self.socks.take() else {
            return Err(err::EOPBADSTATE as isize);
        };
        let mode = if self.setup.ep_type == FI_EP_DGRAM {
            EpMode::Dgram
        } else {
            EpMode::Rdm
        };
        let per_rail = socks.fds.len() / socks.rails.len().max(1);
        let mut cfg = config(mode, socks.local, per_rail, self.setup.max_datagram);
        cfg.rails = socks.rails.clone();
        cfg.auth_key = self.setup.auth_key.clone();
        cfg.max_tx_ops = self.setup.tx_size;
        cfg.max_rx_ops = self.setup.rx_size;
        let place_round = cfg.ack_every as usize;
        log::info(&format!(
            "endpoint {} ({:?}): {} paths{}, max datagram {} B, nonce {:#x}, tx/rx queue {}/{}, {}",
            socks.local,
            mode,
            cfg.paths,
            if cfg.rails.len() > 1 {
                format!(" per rail, rails {:?}", cfg.rails)
            } else {
                String::new()
            },
            cfg.max_datagram,
            cfg.nonce,
            cfg.max_tx_ops,
            cfg.max_rx_ops,
            if cfg.auth_key.is_some() {
                "job key set: every packet carries a MAC, no direct placement"
            } else {
                "no job key"
            }
        ));
        let mut engine = Engine::new(cfg);
        if let Some(m) = self.min_multi_recv {
            engine.set_min_multi_recv(m);
        }
        if let Some(t) = &self.mrs {
            engine.set_rma_target(Box::new(MrTarget(t.clone())));
        }
        engine.set_rma_order(self.setup.rma_order);
        let batch = params::int_or("rx_batch", 32, 1, 1024) as usize;
        let offloads = Offloads {
            gso: params::int_or("gso", 1, 0, 1) == 1,
            gro: params::int_or("gro", 1, 0, 1) == 1,
        };
        let mut io = Io::new(socks.fds, self.setup.max_datagram, batch, offloads);
        if !socks.rails.is_empty() {
            io.set_rails(per_rail);
        }
        let place_default = i64::from(self.setup.max_datagram >= PLACE_MIN_DATAGRAM);
        let place = params::int_or("rx_place", place_default, 0, 1) == 1;
        self.run = Some(Running {
            engine,
            io,
            place,
            stale: true,
            next_timer: None,
            place_round,
            mac_warned: false,
        });
        Ok(())
    }

    /// Drop cached translations when the AV removed entries.
    fn check_cache(&mut self) {
        let gen = self.av.as_ref().map_or(0, |a| a.generation());
        if gen != self.cache_gen {
            self.to_peer.clear();
            self.to_fi_addr.clear();
            self.cache_gen = gen;
        }
    }

    /// The engine peer of `fi_addr`.
    pub(crate) fn peer_of(&mut self, fi_addr: u64) -> Result<PeerId, Errno> {
        self.check_cache();
        if let Some(Some(p)) = usize::try_from(fi_addr)
            .ok()
            .and_then(|i| self.to_peer.get(i))
        {
            return Ok(*p);
        }
        let av = self.av.as_ref().ok_or(err::EINVAL as isize)?;
        let sa = av.addr_of(fi_addr).ok_or(err::EINVAL as isize)?;
        let run = self.run.as_mut().ok_or(err::EOPBADSTATE as isize)?;
        let p = run.engine.peer(sa);
        run.stale = true;
        if fi_addr < CACHE_MAX {
            let i = fi_addr as usize;
            if self.to_peer.len() <= i {
                self.to_peer.resize(i + 1, None);
            }
            self.to_peer[i] = Some(p);
        }
        Ok(p)
    }

    /// The fi_addr of engine peer `p` (FI_SOURCE), `FI_ADDR_NOTAVAIL` if not in the AV.
    pub(crate) fn fi_addr_of(&mut self, p: PeerId) -> u64 {
        if let Some(a) = self.to_fi_addr.get(&p) {
            return *a;
        }
        let Some(run) = &self.run else {
            return FI_ADDR_NOTAVAIL;
        };
        let Some(sa) = run.engine.peer_addr(p) else {
            return FI_ADDR_NOTAVAIL;
        };
        match self.av.as_ref().and_then(|av| av.fi_addr_of(sa)) {
            Some(a) => {
                self.to_fi_addr.insert(p, a);
                a
            }
            None => FI_ADDR_NOTAVAIL,
        }
    }

    /// Post a send. `iov`/`count` describe the payload; `copy` takes a private copy
    /// now (inject); `report` asks for a CQ entry.
    ///
    /// # Safety
    /// `iov` points to `count` iovecs whose memory stays valid until completion
    /// (only until return when `copy`).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn post_send(
        &mut self,
        iov: *const libc::iovec,
        count: usize,
        dest: u64,
        tag: Option<u64>,
        data: Option<u64>,
        context: u64,
        flags: u64,
        report: bool,
    ) -> Errno {
        if self.run.is_none() {
            return err::EOPBADSTATE as isize;
        }
        let peer = match self.peer_of(dest) {
            Ok(p) => p,
            Err(e) => return e,
        };
        // SAFETY: forwarded contract on iov/count.
        let Some(buf) = (unsafe { FfiBuf::from_iov(iov, count) }) else {
            return err::EINVAL as isize;
        };
        if let Err(e) = self.check_source(&buf) {
            return e;
        }
        if !self.make_room(true) {
            return err::EAGAIN as isize;
        }
        let buf = if flags & FI_INJECT != 0 {
            match self.inject_copy(buf) {
                Ok(b) => b,
                Err(e) => return e,
            }
        } else {
            buf
        };
        let report = report && (!self.tx_selective || flags & FI_COMPLETION != 0);
        let small = buf.len() <= HOLD_MAX_BYTES;
        let op = SendOp {
            peer,
            buf,
            tag,
            data,
            context,
            report,
            // Reliable endpoints complete sends at FI_TRANSMIT_COMPLETE by default:
            // once the peer acknowledged every datagram. Completing earlier (when the
            // engine merely holds a copy) lets a manual-progress application stop
            // calling us while packets still wait in the engine, and the transfer
            // stalls (fi_pingpong above 1 MiB did). Only an explicit
            // FI_INJECT_COMPLETE asks for the early completion.
            delivery_complete: flags & FI_INJECT_COMPLETE == 0,
            // No CQ entry and no counter: nothing the application can see
            // waits for the ack (an inject), so the peer may hold it for a
            // reply to carry (FI_SPRAY_ACK_LAZY_US).
            lazy: !report && self.tx_cntr.is_none(),
        };
        let Some(run) = &mut self.run else {
            return err::EOPBADSTATE as isize;
        };
        let rc = run.engine.post_send(op);
        // FI_MORE: more posts follow at once; let them leave in one batch.
        if flags & FI_MORE == 0 || rc.is_err() {
            if rc.is_ok() && small && self.hold.on_send(peer, clock::now_ns()) {
                // Continues a burst to this peer: leaves with the next flush.
                run.stale = true;
            } else {
                self.progress_after_post();
            }
        }
        op_result(rc)
    }

    /// A buffer data leaves from (send, RMA source or destination): at most
    /// `max_msg_size` bytes (`-FI_EMSGSIZE`) of memory that can exist (`-FI_EINVAL`).
    pub(crate) fn check_source(&self, buf: &FfiBuf) -> Result<(), Errno> {
        let mut max = self.run.as_ref().map_or(0, |r| r.engine.max_msg_size());
        if self.setup.ep_type == FI_EP_DGRAM {
            // What getinfo advertised (room for a MAC tag whether or not
            // this endpoint has a job key), so that a size it accepts here
            // is accepted by every endpoint of the job.
            max = max.min(crate::limits::for_datagram(self.setup.max_datagram).dgram_max_msg);
        }
        if buf.len() > max {
            return Err(err::EMSGSIZE as isize);
        }
        if !check::addressable(buf) {
            return Err(err::EINVAL as isize);
        }
        Ok(())
    }

    /// Post a receive (`src` = `FI_ADDR_UNSPEC` for any sender).
    ///
    /// # Safety
    /// As `post_send` (the memory stays valid and writable until completion).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn post_recv(
        &mut self,
        iov: *const libc::iovec,
        count: usize,
        src: u64,
        tag: Option<(u64, u64)>,
        context: u64,
        flags: u64,
    ) -> Errno {
        if self.run.is_none() {
            return err::EOPBADSTATE as isize;
        }
        let src = if src == FI_ADDR_UNSPEC || !self.setup.directed_recv {
            None
        } else {
            match self.peer_of(src) {
                Ok(p) => Some(p),
                Err(e) => return e,
            }
        };
        // SAFETY: forwarded contract on iov/count.
        let Some(buf) = (unsafe { FfiBuf::from_iov(iov, count) }) else {
            return err::EINVAL as isize;
        };
        if !check::addressable(&buf) {
            return err::EINVAL as isize;
        }
        if flags & FI_PEEK == 0 && !self.make_room(false) {
            return err::EAGAIN as isize;
        }
        let rflags = RecvFlags {
            peek: flags & FI_PEEK != 0,
            claim: flags & FI_CLAIM != 0,
            discard: flags & FI_DISCARD != 0,
            multi_recv: flags & FI_MULTI_RECV != 0 && tag.is_none(),
        };
        if rflags.multi_recv && buf.len() == 0 {
            // A buffer that holds no message would be released at once, or
            // never: either way nothing sensible can come of it.
            return err::EINVAL as isize;
        }
        if rflags.multi_recv {
            self.multi_bases.insert(context, buf.base() as usize);
        }
        let report = !self.rx_selective || flags & FI_COMPLETION != 0;
        let op = RecvOp {
            src,
            buf,
            tag,
            context,
            flags: rflags,
            report,
        };
        let Some(run) = &mut self.run else {
            return err::EOPBADSTATE as isize;
        };
        let queued = run.engine.queued_total();
        let rc = run.engine.post_recv(op);
        let sends = run.engine.queued_total() != queued;
        if rc.is_err() && rflags.multi_recv {
            self.multi_bases.remove(&context);
        }
        if sends {
            // It matched a waiting rendezvous message: its CTS leaves now.
            self.progress_after_post();
        } else {
            // Usually nothing to send: only hand over what it completed (a
            // receive matched to an unexpected eager message).
            // A receive directed at a peer starts the keepalive round that
            // probes it (`Engine::post_recv`), but with no timer armed the
            // engine's timers would not run again until something arrives.
            // With one armed, that timer's `handle_timeout` starts the
            // round: no walk of the timers on every post.
            let directed = src.is_some();
            if let Some(run) = self
                .run
                .as_mut()
                .filter(|r| directed && r.next_timer.is_none())
            {
                run.next_timer = run.engine.poll_timeout();
            }
            self.take_completions();
        }
        op_result(rc)
    }

    /// Operations the transmit (`tx`) or receive queue still takes.
    pub fn room(&self, tx: bool) -> usize {
        match (&self.run, tx) {
            (Some(r), true) => r.engine.tx_room(),
            (Some(r), false) => r.engine.rx_room(),
            (None, true) => self.setup.tx_size,
            (None, false) => self.setup.rx_size,
        }
    }

    /// Is there room in the transmit (`tx`) or receive queue for one more
    /// operation? When it is full, progress first (completions arrive with
    /// acks and data): an application that only retries its post on
    /// `-FI_EAGAIN`, without reading a CQ, still drains its queue.
    pub(crate) fn make_room(&mut self, tx: bool) -> bool {
        if self.room(tx) > 0 {
            return true;
        }
        self.progress();
        self.room(tx) > 0
    }

    /// Before the endpoint goes away: keep answering until the peers have been
    /// quiet for `FI_SPRAY_LINGER_MS` (default 10, at most 10 such periods).
    /// The last ACK we sent may have been lost; a peer then resends its last
    /// packet and waits for an ACK that a closed endpoint would never give (as
    /// TCP's TIME_WAIT). Also gives our own last packets their retransmissions.
    ///
    /// The quiet time is at least three retransmission timeouts towards the
    /// slowest peer (at most 1 s): a peer whose last packet we acknowledged
    /// resends it only after its timeout, and again after twice that if the
    /// answer is lost too. 10 ms alone let an MPI rank exit before its
    /// peer's resend under 1 % loss; the peer then waited out its unreachable
    /// timeout and failed `MPI_Finalize`.
    pub fn linger(&mut self) {
        let linger_ns = params::int_or("linger_ms", 10, 0, 10_000) as u64 * 1_000_000;
        let Some(run) = &self.run else { return };
        if linger_ns == 0 || run.io.stats.rx_packets == 0 {
            return;
        }
        let rto_ns = run
            .engine
            .peer_stats()
            .iter()
            .map(|p| p.rto_ns)
            .max()
            .unwrap_or(0);
        let quiet_ns = linger_ns.max((3 * rto_ns).min(LINGER_RTO_CAP_NS));
        let start = clock::now_ns();
        let (mut last_rx, mut seen) = (start, run.io.stats.rx_packets);
        loop {
            self.progress();
            let Some(run) = &self.run else { return };
            let now = clock::now_ns();
            if run.io.stats.rx_packets != seen {
                (last_rx, seen) = (now, run.io.stats.rx_packets);
            }
            if now - last_rx >= quiet_ns || now - start >= 10 * quiet_ns {
                return;
            }
            let mut pfd = libc::pollfd {
                fd: run.io.rx_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; sleeps at most 1 ms.
            unsafe { libc::poll(&mut pfd, 1, 1) };
        }
    }

    /// `fi_cancel`: true if an operation with `context` was found.
    pub fn cancel(&mut self, context: u64) -> bool {
        let Some(run) = &mut self.run else {
            return false;
        };
        let found = run.engine.cancel(context);
        run.stale = true;
        self.progress();
        found
    }

    /// After a post: what it queued leaves at once and what it completed (an
    /// inject, a receive matched to an unexpected message) reaches the CQ. No
    /// receive poll: between a receive completion and the reply an application
    /// posts a receive and a send, and a syscall in each is on the critical
    /// path of every ping-pong (the next CQ or counter read polls anyway).
    pub fn progress_after_post(&mut self) {
        let Some(run) = &mut self.run else { return };
        let now = clock::now();
        self.progressed_ns = now.as_nanos();
        self.hold.flushed();
        run.stale = !run.io.flush(&mut run.engine, now);
        run.next_timer = run.engine.poll_timeout();
        self.take_completions();
    }

    /// Engine completions to CQs and counters.
    fn take_completions(&mut self) {
        while let Some(c) = self.run.as_mut().and_then(|r| r.engine.poll_completion()) {
            self.complete(c);
        }
    }

    /// Receive, run timers, transmit, and hand completions to CQs and counters.
    pub fn progress(&mut self) {
        let Some(run) = &mut self.run else { return };
        let mut now = clock::now();
        self.progressed_ns = now.as_nanos();
        // Held sends leave in this call's flush (`stale` is set).
        self.hold.progressed();
        let mut input = false;
        for round in 1..=RX_ROUNDS {
            let engine = &mut run.engine;
            let n = if run.place && engine.expects_rdata() {
                run.io.recv_placed(engine, run.place_round)
            } else {
                let n = run.io.recv_at(now.as_nanos(), |at, from, bytes, seg| {
                    engine.handle_segments(at, from, bytes, seg)
                });
                engine.end_input(now);
                n
            };
            // A call that came back short found the socket empty: another
            // would only cost a syscall before what arrived is handled.
            input |= n > 0;
            // A burst's first flowlet with the end of its message near (not
            // in it): the rest is likely in the socket already (see `Rx::tail`).
            let tail = run.io.rx_tail_expected()
                && (1..=TAIL_BYTES).contains(&run.engine.rx_message_left());
            if n == 0 || !(run.io.rx_may_have_more() || tail) || round == RX_ROUNDS {
                break;
            }
            // A long drain (a sender's window of rendezvous data queued in
            // our socket): what is due by now, an ack every `ack_every`
            // packets above all, leaves before the next round. Held until the
            // socket ran dry, the ack let a window-limited sender refill the
            // pipe only after we had copied all of it, and each side idled
            // while the other worked (MPICH 1 MiB bw: the receiver drained
            // about 37 datagrams between acks, the sender idled ~90 us each time).
            // The rest of this call runs at this new reading. Not after a
            // burst's first flowlet (`Io::rx_tail_expected`): its tail is
            // handled first: one ack for the whole message, then its completion.
            now = clock::now();
            if !tail {
                run.stale = !run.io.flush(&mut run.engine, now);
            }
        }
        // The engine is sans-IO: it changes only on input, a post or a timer,
        // so an idle poll (the common case of an MPI progress loop) skips the
        // transmit poll and the timer scan.
        if input || run.stale || run.next_timer.is_some_and(|t| t <= now) {
            if run.engine.poll_timeout().is_some_and(|t| t <= now) {
                run.engine.handle_timeout(now);
            }
            run.stale = !run.io.flush(&mut run.engine, now);
            run.next_timer = run.engine.poll_timeout();
        }
        if input && !run.mac_warned {
            run.mac_warned = warn_key_mismatch(self.local, run.engine.srd_stats());
        }
        while let Some(c) = self.run.as_mut().and_then(|r| r.engine.poll_completion()) {
            self.complete(c);
        }
    }

    /// Turn one engine completion into a CQ entry / counter increment.
    fn complete(&mut self, c: Completion<FfiBuf>) {
        if !matches!(c.kind, CompKind::Send | CompKind::Recv) {
            self.complete_rma(c);
            return;
        }
        let send = c.kind == CompKind::Send;
        let mut flags = if c.tagged { FI_TAGGED } else { FI_MSG };
        flags |= if send { FI_SEND } else { FI_RECV };
        if !send && c.data.is_some() {
            flags |= FI_REMOTE_CQ_DATA;
        }
        let multi_base = self.multi_bases.get(&c.context).copied();
        if c.multi_recv_done {
            flags |= FI_MULTI_RECV;
        }
        if c.multi_recv_done || (!send && c.error == Some(CompError::Canceled)) {
            self.multi_bases.remove(&c.context);
        }
        let buf = match (&c.buf, multi_base) {
            (_, Some(base)) if !send => base + c.offset,
            (Some(b), None) if !send => b.base() as usize,
            _ => 0,
        };
        let src = match c.src {
            Some(p) if !send => self.fi_addr_of(p),
            _ => FI_ADDR_NOTAVAIL,
        };
        self.recycle(c.buf);
        let e = Entry {
            ctx: c.context,
            flags,
            len: c.len,
            buf,
            data: c.data.unwrap_or(0),
            tag: c.tag,
            src,
        };
        let (cq, cntr) = if send {
            (&self.tx_cq, &self.tx_cntr)
        } else {
            (&self.rx_cq, &self.rx_cntr)
        };
        match c.error {
            None => {
                if let Some(k) = cntr {
                    k.inc();
                }
                if let (Some(q), true) = (cq, c.report) {
                    q.push(e);
                }
            }
            Some(why) => {
                if let Some(k) = cntr {
                    if why != CompError::NoMessage {
                        k.inc_err();
                    }
                }
                let err = pos_err(why);
                if let Some(q) = cq {
                    q.push_err(ErrEntry {
                        e,
                        olen: c.olen,
                        err,
                    });
                }
            }
        }
    }
}

impl EpState {
    /// Keep an inject copy for reuse.
    pub(crate) fn recycle(&mut self, buf: Option<FfiBuf>) {
        if let Some(FfiBuf::Owned(v)) = buf {
            if self.inject_pool.len() < 256 && v.capacity() <= self.setup.inject_size {
                self.inject_pool.push(v);
            }
        }
    }

    /// A private copy of `buf` (FI_INJECT), at most `inject_size` bytes. As
    /// long as the data: a full transmit queue of small injects then holds
    /// their bytes, not `inject_size` each (16384 x 4 KiB).
    pub(crate) fn inject_copy(&mut self, buf: FfiBuf) -> Result<FfiBuf, Errno> {
        if buf.len() > self.setup.inject_size {
            return Err(err::EMSGSIZE as isize);
        }
        let mut v = self
            .inject_pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(buf.len()));
        v.clear();
        v.resize(buf.len(), 0);
        buf.read_at(0, &mut v);
        Ok(FfiBuf::Owned(v))
    }
}

/// The positive FI_E* code of a failed completion.
pub(crate) fn pos_err(why: CompError) -> i32 {
    match why {
        CompError::Truncated => err::POS_ETRUNC,
        CompError::Canceled => err::POS_ECANCELED,
        CompError::NoMessage => err::POS_ENOMSG,
        CompError::PeerUnreachable => err::POS_EHOSTUNREACH,
        CompError::RemoteAccess => err::POS_EACCES,
    }
}

pub(crate) fn op_result(rc: Result<(), OpError>) -> Errno {
    match rc {
        Ok(()) => 0,
        Err(OpError::Again) => err::EAGAIN as isize,
        Err(OpError::TooLarge) => err::EMSGSIZE as isize,
        Err(OpError::BadPeer) | Err(OpError::Invalid) => err::EINVAL as isize,
    }
}

/// Log, once per endpoint, the first packets refused for a job key that
/// differs from the sender's (one has a key and the other none, or another
/// key): the usual sign of a job whose ranks were started with different
/// `FI_SPRAY_AUTH_KEY`s. True once said.
fn warn_key_mismatch(local: SocketAddr, s: &spray::srd::SrdStats) -> bool {
    let why = if s.rx_mac_missing > 0 {
        "packets without a MAC (the sender has no job key; this endpoint has one)"
    } else if s.rx_mac_unexpected > 0 {
        "packets with a MAC (the sender has a job key; this endpoint has none)"
    } else if s.rx_bad_mac > 0 {
        "packets with a wrong MAC (another job key, or forged or altered on the way)"
    } else {
        return false;
    };
    log::warn(&format!(
        "endpoint {local}: dropping {why}; set the same FI_SPRAY_AUTH_KEY (or auth_key) on every \
         endpoint of the job. Counted in rx_mac_missing / rx_mac_unexpected / rx_bad_mac"
    ));
    true
}

/// Most quiet time `linger` waits for on account of peers' timeouts, ns.
const LINGER_RTO_CAP_NS: u64 = 1_000_000_000;

/// Engine configuration for an endpoint at `local` from the FI_SPRAY_* parameters.
fn config(mode: EpMode, local: SocketAddr, paths: usize, max_datagram: usize) -> Config {
    let mut cfg = Config::new(mode, local);
    let d = Config::new(mode, local);
    let ms = |name: &str, def: Duration| {
        Duration::from_millis(params::int_or(name, def.as_millis() as i64, 1, 86_400_000) as u64)
    };
    let us = |name: &str, def: Duration| {
        Duration::from_micros(params::int_or(name, def.as_micros() as i64, 0, 60_000_000) as u64)
    };
    cfg.paths = paths.clamp(1, 64) as u8;
    cfg.local_paths = params::int_or("local_paths", i64::from(d.local_paths), 1, 64) as u8;
    cfg.max_datagram = max_datagram;
    cfg.unreachable_timeout = ms("unreachable_timeout_ms", d.unreachable_timeout);
    // Default 20 us: long enough for a reply to carry the ACK (one packet each
    // way in a ping-pong), short enough that a sender waiting for its
    // completion barely notices. Under manual progress an application may stop
    // calling us right after a receive completes (fi_pingpong goes to its TCP
    // control channel); the assist thread (ffi/assist.rs) then sends the held
    // ACK within FI_SPRAY_ASSIST_US, so the peer's send still completes.
    // FI_SPRAY_ACK_DELAY_US=0 acknowledges every receive batch at once.
    cfg.ack_delay = us("ack_delay_us", Duration::from_micros(20));
    cfg.ack_soon = us("ack_soon_us", d.ack_soon);
    cfg.ack_lazy = us("ack_lazy_us", d.ack_lazy);
    cfg.ack_every = params::int_or("ack_every", i64::from(d.ack_every), 1, 1 << 20) as u32;
    cfg.min_rto = us("min_rto_us", d.min_rto);
    cfg.max_host_delay = us("max_host_delay_us", d.max_host_delay);
    cfg.max_rto = ms("max_rto_ms", d.max_rto);
    cfg.initial_window =
        params::int_or("initial_window", i64::from(d.initial_window), 1, 1 << 20) as u32;
    cfg.rx_credit_packets = params::int_or(
        "rx_credit_packets",
        i64::from(d.rx_credit_packets),
        2,
        1 << 15,
    ) as u32;
    cfg.rx_credit_room =
        params::int_or("rx_credit_room", i64::from(d.rx_credit_room), 1, 64) as u32;
    cfg.max_unexpected_bytes =
        params::get_size("max_unexpected_bytes").unwrap_or(d.max_unexpected_bytes);
    cfg.max_unexpected_msgs =
        params::get_size("max_unexpected_msgs").unwrap_or(d.max_unexpected_msgs);
    cfg.eager_limit = params::get_size("eager_limit").unwrap_or(d.eager_limit);
    cfg.flowlet_bytes = params::get_size("flowlet_bytes").unwrap_or(d.flowlet_bytes);
    cfg.max_peers = params::int_or("max_peers", i64::from(d.max_peers), 1, 1 << 24) as u32;
    cfg.peer_idle_timeout = ms("peer_idle_timeout_ms", d.peer_idle_timeout);
    cfg.peer_trim_after = ms("peer_trim_ms", d.peer_trim_after);
    crate::identity::fill(&mut cfg);
    cfg
}
