//! Batched datagram I/O for one endpoint: `recvmmsg` on socket 0 into
//! preallocated slots, and `sendmmsg` per path socket for the packets the
//! engine hands out. No allocation and no per-packet syscall once a batch forms.
//!
//! Times handed to the engine are as close to the wire as the kernel lets us:
//! a received datagram carries its kernel arrival time (`SO_TIMESTAMPNS`), and
//! packets are built with a fresh clock reading just before their `sendmmsg`.
//! Otherwise the time a datagram waited in a socket buffer while this process
//! was not running (2 busy ranks on 2 shared cores) counts as network RTT, and
//! the congestion controller takes host scheduling for a queueing network.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use spray::{Engine, GuessCheck, Instant};

use crate::addr;
use crate::getinfo::IOV_LIMIT;
use crate::io::buf::FfiBuf;
use crate::io::clock;

/// Control-message room per receive slot: one `SCM_TIMESTAMPNS` (a cmsghdr and
/// a timespec, 32 bytes on 64-bit Linux) with slack.
const CMSG_BYTES: usize = 64;
/// Entries of a receive call after one that found little (see `Io::rx_last`).
const IDLE_PROBE: usize = 2;
/// A receive this soon after the previous one may probe with `recvfrom` and
/// stamp what it finds with the current time (see `Io::recv_at`), ns.
const PROBE_FRESH_NS: u64 = 20_000;

/// Counters of what the driver did (for logs and tests).
#[derive(Copy, Clone, Debug, Default)]
pub struct IoStats {
    /// Datagrams received.
    pub rx_packets: u64,
    /// Datagrams sent.
    pub tx_packets: u64,
    /// recvmmsg/sendmmsg calls made.
    pub syscalls: u64,
    /// Send attempts that hit EAGAIN/ENOBUFS (packet kept for the next progress).
    pub tx_blocked: u64,
    /// Packets the kernel refused for good (dropped; the engine recovers).
    pub tx_errors: u64,
    /// Received datagrams larger than a slot (dropped).
    pub rx_truncated: u64,
    /// Received datagrams without a usable kernel timestamp (given the poll time).
    pub rx_unstamped: u64,
    /// Datagrams whose payload was received straight into an application buffer.
    pub rx_placed: u64,
    /// Of those, received where `Engine::guess_rdata` said, without a peek.
    pub rx_guessed: u64,
    /// Datagrams received into a guessed place that was not theirs (moved back).
    pub rx_guess_missed: u64,
}

/// After a wrong guess, this many datagrams go through the peek path before
/// the next guess (several senders' data interleaving would miss every time).
const GUESS_COOLDOWN: u32 = 8;

/// Most guessed receives in one `recvmmsg` (each into its own place).
const GUESS_BATCH: usize = 8;

/// iovecs of one guessed receive: headers, up to `IOV_LIMIT` pieces, spill-over.
const GUESS_IOVS: usize = IOV_LIMIT + 2;

/// Where one datagram of a batch of guessed receives was expected to put its
/// payload: `n` bytes at `at` of the receive buffer `buf`, which lies in
/// `pieces[..np]` of application memory.
#[derive(Copy, Clone)]
struct Guess {
    buf: *const FfiBuf,
    at: usize,
    n: usize,
    pieces: [(*const u8, usize); IOV_LIMIT],
    np: usize,
}

const NO_GUESS: Guess = Guess {
    buf: std::ptr::null(),
    at: 0,
    n: 0,
    pieces: [(std::ptr::null(), 0); IOV_LIMIT],
    np: 0,
};

/// Most iovecs of one outgoing datagram: its headers (in a driver slot) and a
/// body in up to `IOV_LIMIT` application segments.
const TX_IOVS: usize = 1 + IOV_LIMIT;

#[derive(Copy, Clone)]
struct TxMeta {
    dst: libc::sockaddr_in,
    /// Index of the socket that sends it (see `Io::sock_of_path`).
    sock: usize,
    /// Bytes in the driver slot (headers, or the whole datagram).
    len: usize,
    /// The rest of the datagram in application memory: (address, bytes) pieces.
    body: [(*const u8, usize); IOV_LIMIT],
    /// Pieces used in `body`.
    body_n: usize,
    sent: bool,
}

const NO_BODY: [(*const u8, usize); IOV_LIMIT] = [(std::ptr::null(), 0); IOV_LIMIT];

/// One endpoint's sockets and batch buffers.
pub struct Io {
    socks: Vec<OwnedFd>,
    slot_bytes: usize,
    batch: usize,
    rx_buf: Vec<u8>,
    rx_addr: Vec<libc::sockaddr_in>,
    rx_iov: Vec<libc::iovec>,
    rx_hdr: Vec<libc::mmsghdr>,
    /// Control buffers for the arrival timestamps, `CMSG_BYTES` per slot
    /// (u64 words, so every cmsghdr in them is aligned).
    rx_cmsg: Vec<u64>,
    /// Latest time handed to the engine, ns: engine time never goes back.
    last_ns: u64,
    tx_buf: Vec<Vec<u8>>,
    tx_meta: Vec<TxMeta>,
    tx_len: usize,
    tx_addr: Vec<libc::sockaddr_in>,
    tx_iov: Vec<libc::iovec>,
    tx_hdr: Vec<libc::mmsghdr>,
    tx_pick: Vec<usize>,
    /// Per socket: the peer it is `connect`ed to. Socket 0 receives from
    /// every peer and is never connected; each other socket is connected to
    /// the first peer it sends to. Its packets to that peer leave without an
    /// address: the kernel reuses the socket's cached route instead of
    /// looking one up per packet, and a lone packet goes out with `send`.
    /// Together about 0.5 us of each ping-pong hop's ~3.5 us `sendmmsg`
    /// on loopback.
    tx_conn: Vec<Option<libc::sockaddr_in>>,
    /// Per socket: a `connect` was tried (once; a failure leaves it unconnected).
    tx_conn_tried: Vec<bool>,
    /// iovecs of one directly placed receive: headers into slot 0, payload
    /// into up to `IOV_LIMIT` application pieces.
    place_iov: [libc::iovec; TX_IOVS],
    /// Guessed receives, `GUESS_IOVS` per slot: headers in the slot, the
    /// guessed range (up to `IOV_LIMIT` pieces), the rest of the slot for
    /// whatever spills over.
    guess_iov: Vec<libc::iovec>,
    /// Per slot of a batch of guessed receives: where its payload was
    /// expected to go.
    guesses: Vec<Guess>,
    /// Datagrams left to receive through the peek path before guessing again.
    guess_cooldown: u32,
    /// Datagrams the last receive call returned (a second single `recvfrom` hit
    /// in a row counts as 2). Below 2 the next call is a single `recvfrom` while
    /// the application polls (see `recv_at`), else a two-message `recvmmsg`;
    /// only after a fuller call a whole batch: each header
    /// is prepared here and copied in by the kernel, which makes a batch call
    /// that finds little dearer. Two, not one: a lone datagram then comes back
    /// with proof that the socket is empty behind it, so the caller need not
    /// spend another syscall to learn that before it handles the datagram.
    rx_last: usize,
    /// The last receive filled every entry it asked for: more may be waiting.
    rx_full: bool,
    /// Clock reading of the latest `recv_at`, ns.
    rx_polled_ns: u64,
    /// What happened so far.
    pub stats: IoStats,
}

// SAFETY: the raw pointers inside the header arrays point only into this struct's
// own heap buffers (which never reallocate after `new`), and the body pointers of
// queued packets into application send buffers that stay valid until their
// operation completes (and `flush` copies them out before returning if a packet
// must wait); the Io moves between threads only as a whole, under the endpoint lock.
unsafe impl Send for Io {}

fn zero_hdr() -> libc::mmsghdr {
    // SAFETY: an all-zero mmsghdr (null pointers, zero lengths) is a valid value.
    unsafe { std::mem::zeroed() }
}

impl Io {
    /// A driver over `socks` (`socks[0]` receives) for datagrams of at most
    /// `max_datagram` bytes, moving up to `batch` per syscall.
    pub fn new(socks: Vec<OwnedFd>, max_datagram: usize, batch: usize) -> Io {
        let batch = batch.clamp(1, 1024);
        let slot_bytes = max_datagram.max(64);
        let nsocks = socks.len();
        let zero_sa = addr::to_c(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::UNSPECIFIED,
            0,
        ));
        let mut io = Io {
            socks,
            slot_bytes,
            batch,
            rx_buf: vec![0; batch * slot_bytes],
            rx_addr: vec![zero_sa; batch],
            rx_iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                batch
            ],
            rx_hdr: (0..batch).map(|_| zero_hdr()).collect(),
            rx_cmsg: vec![0; batch * CMSG_BYTES / 8],
            last_ns: 0,
            tx_buf: (0..batch).map(|_| vec![0; slot_bytes]).collect(),
            tx_meta: vec![
                TxMeta {
                    dst: zero_sa,
                    sock: 0,
                    len: 0,
                    body: NO_BODY,
                    body_n: 0,
                    sent: true
                };
                batch
            ],
            tx_len: 0,
            tx_addr: vec![zero_sa; batch],
            tx_iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                batch * TX_IOVS
            ],
            tx_hdr: (0..batch).map(|_| zero_hdr()).collect(),
            tx_pick: Vec::with_capacity(batch),
            tx_conn: vec![None; nsocks],
            tx_conn_tried: vec![false; nsocks],
            place_iov: [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; TX_IOVS],
            guess_iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                };
                batch.min(GUESS_BATCH) * GUESS_IOVS
            ],
            guesses: vec![NO_GUESS; batch.min(GUESS_BATCH)],
            guess_cooldown: 0,
            rx_last: 0,
            rx_full: false,
            rx_polled_ns: 0,
            stats: IoStats::default(),
        };
        // Receive headers point at fixed slots: build them once.
        for i in 0..batch {
            // SAFETY: i * slot_bytes < rx_buf.len(), so the pointer is in bounds.
            io.rx_iov[i].iov_base = unsafe { io.rx_buf.as_mut_ptr().add(i * slot_bytes) }.cast();
            io.rx_iov[i].iov_len = slot_bytes;
            let h = &mut io.rx_hdr[i].msg_hdr;
            h.msg_name = (&mut io.rx_addr[i] as *mut libc::sockaddr_in).cast();
            h.msg_iov = &mut io.rx_iov[i];
            h.msg_iovlen = 1;
        }
        let on: libc::c_int = 1;
        // SAFETY: setsockopt on our own socket with a valid int option value.
        // Failure only costs precision: unstamped datagrams get the poll time.
        unsafe {
            libc::setsockopt(
                io.socks[0].as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        io
    }

    /// Engine time from monotonic `ns`, never before what the engine saw last.
    fn engine_time(&mut self, ns: u64) -> Instant {
        self.last_ns = self.last_ns.max(ns);
        Instant::from_nanos(self.last_ns)
    }

    /// The kernel arrival time of slot `i` as monotonic ns, if it carries one.
    /// `real_to_mono` = CLOCK_MONOTONIC - CLOCK_REALTIME, ns.
    fn arrival_ns(&self, i: usize, real_to_mono: i128) -> Option<u64> {
        let h = &self.rx_hdr[i].msg_hdr;
        if h.msg_controllen == 0 || h.msg_flags & libc::MSG_CTRUNC != 0 {
            return None;
        }
        // SAFETY: the header's control pointer and length describe our own
        // rx_cmsg region for slot i as the kernel filled it; the CMSG macros
        // stay within msg_controllen.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                    let real = i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec);
                    return u64::try_from(real + real_to_mono).ok();
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        None
    }

    /// Engine time of slot `i`'s arrival: its kernel stamp if it has a sane one
    /// (within the last second of `mono`: a stepped wall clock gives garbage),
    /// else `mono`.
    fn arrival(&mut self, i: usize, mono: u64, real_to_mono: i128) -> Instant {
        let at_ns = match self.arrival_ns(i, real_to_mono) {
            Some(t) if t <= mono && mono - t < 1_000_000_000 => t,
            _ => {
                self.stats.rx_unstamped += 1;
                mono
            }
        };
        self.engine_time(at_ns)
    }

    /// The receiving socket.
    pub fn rx_fd(&self) -> RawFd {
        self.socks[0].as_raw_fd()
    }

    /// One receive call on socket 0; each datagram goes to `f(from, bytes)`.
    /// Returns how many arrived (0 means the socket is drained for now).
    pub fn recv(&mut self, mut f: impl FnMut(SocketAddr, &[u8])) -> usize {
        self.recv_at(clock::now_ns(), |_, from, bytes| f(from, bytes))
    }

    /// Did the last `recv_at` fill every entry it asked for (so the socket may
    /// hold more)? When it did not, the kernel found the queue empty behind it.
    pub fn rx_may_have_more(&self) -> bool {
        self.rx_full
    }

    /// As `recv`, and each datagram comes with its arrival time:
    /// `f(at, from, bytes)`. `at` is the kernel's receive timestamp (clamped
    /// between the engine's last time and now), or now if there is none.
    /// `now_ns` is the caller's clock reading.
    ///
    /// While an application polls (the previous call was under
    /// `PROBE_FRESH_NS` ago) and the socket was empty last time, the call is a
    /// plain `recvfrom`: the cheapest receive syscall, on the idle poll and on
    /// the critical path of a ping-pong alike. Its datagram is stamped `now_ns`:
    /// it arrived since the previous poll, at most that long ago.
    pub fn recv_at(&mut self, now_ns: u64, mut f: impl FnMut(Instant, SocketAddr, &[u8])) -> usize {
        let fresh = now_ns.saturating_sub(self.rx_polled_ns) < PROBE_FRESH_NS;
        self.rx_polled_ns = now_ns;
        if self.rx_last < IDLE_PROBE && fresh {
            return self.recv_probe(now_ns, &mut f);
        }
        let vlen = if self.rx_last < IDLE_PROBE {
            IDLE_PROBE.min(self.batch)
        } else {
            self.batch
        };
        for i in 0..vlen {
            self.reset_rx_hdr(i);
        }
        // SAFETY: rx_hdr holds `batch` headers whose name/iov pointers refer to our
        // own live buffers of the stated sizes.
        let r = unsafe {
            sys_recvmmsg(
                self.socks[0].as_raw_fd(),
                self.rx_hdr.as_mut_ptr(),
                vlen as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        self.stats.syscalls += 1;
        self.rx_last = r.max(0) as usize;
        self.rx_full = r as isize == vlen as isize;
        if r <= 0 {
            return 0;
        }
        let n = r as usize;
        let mono = clock::now_ns();
        let real_to_mono = i128::from(mono) - i128::from(clock::realtime_ns());
        for i in 0..n {
            let h = &self.rx_hdr[i];
            if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                self.stats.rx_truncated += 1;
                continue;
            }
            let len = (h.msg_len as usize).min(self.slot_bytes);
            let from = addr::from_c(&self.rx_addr[i]);
            let start = i * self.slot_bytes;
            let at = self.arrival(i, mono, real_to_mono);
            f(at, SocketAddr::V4(from), &self.rx_buf[start..start + len]);
        }
        self.stats.rx_packets += n as u64;
        n
    }

    /// One `recvfrom` into slot 0 (see `recv_at`). Leaves `rx_full` false so the
    /// caller handles what came before it polls again.
    fn recv_probe(&mut self, now_ns: u64, f: &mut impl FnMut(Instant, SocketAddr, &[u8])) -> usize {
        let mut alen = addr::SOCKADDR_IN_LEN as libc::socklen_t;
        // SAFETY: slot 0 of rx_buf is ours and slot_bytes long; rx_addr[0] a
        // sockaddr_in whose size alen states.
        let r = unsafe {
            libc::syscall(
                libc::SYS_recvfrom,
                self.socks[0].as_raw_fd(),
                self.rx_buf.as_mut_ptr(),
                self.slot_bytes,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                &mut self.rx_addr[0] as *mut libc::sockaddr_in,
                &mut alen as *mut libc::socklen_t,
            )
        };
        self.stats.syscalls += 1;
        self.rx_full = false;
        if r < 0 {
            self.rx_last = 0;
            return 0;
        }
        // A second datagram in a row: a burst, batch from now on.
        self.rx_last = if self.rx_last == 0 { 1 } else { IDLE_PROBE };
        self.stats.rx_packets += 1;
        // MSG_TRUNC: r is the datagram's real length.
        let len = r as usize;
        if len > self.slot_bytes {
            self.stats.rx_truncated += 1;
            return 1;
        }
        let from = addr::from_c(&self.rx_addr[0]);
        let at = self.engine_time(now_ns);
        f(at, SocketAddr::V4(from), &self.rx_buf[..len]);
        1
    }

    /// Receive up to `batch` datagrams one at a time, each after a peek at its
    /// headers: rendezvous data for a matched receive goes straight into the
    /// application's buffer (2 syscalls per datagram instead of a copy of up to
    /// 64 KiB), everything else through slot 0 and `handle_datagram`. Returns how
    /// many arrived (at most `max`, and at most the batch size); as after
    /// `recv_at`, `rx_may_have_more` tells whether the socket may hold more.
    /// Worth it only while `engine.expects_rdata()`.
    pub fn recv_placed(&mut self, engine: &mut Engine<FfiBuf>, max: usize) -> usize {
        let head = Engine::<FfiBuf>::PLACE_HEAD_LEN;
        let fd = self.socks[0].as_raw_fd();
        let want = max.clamp(1, self.batch);
        let mut got = 0;
        while got < want {
            if self.guess_cooldown == 0 {
                if let Some((n, drained)) = self.recv_guessed(engine, want - got) {
                    got += n;
                    if drained {
                        break;
                    }
                    continue;
                }
            } else {
                self.guess_cooldown -= 1;
            }
            // Peek: headers only, and the datagram's real length (MSG_TRUNC).
            let slot0 = self.rx_buf.as_mut_ptr();
            let mut peek_iov = libc::iovec {
                iov_base: slot0.cast(),
                iov_len: head.min(self.slot_bytes),
            };
            // SAFETY: an all-zero msghdr is valid; fields set below.
            let mut ph: libc::msghdr = unsafe { std::mem::zeroed() };
            ph.msg_name = (&mut self.rx_addr[0] as *mut libc::sockaddr_in).cast();
            ph.msg_namelen = addr::SOCKADDR_IN_LEN as libc::socklen_t;
            ph.msg_iov = &mut peek_iov;
            ph.msg_iovlen = 1;
            // SAFETY: ph points at our own address slot and the first `head`
            // bytes of slot 0.
            let r = unsafe {
                libc::recvmsg(
                    fd,
                    &mut ph,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                )
            };
            self.stats.syscalls += 1;
            if r < 0 {
                break;
            }
            let dlen = r as usize;
            let from = SocketAddr::V4(addr::from_c(&self.rx_addr[0]));
            let mut pieces = [(std::ptr::null::<u8>(), 0usize); IOV_LIMIT];
            let mut np = 0;
            let mut hdr = 0;
            // The range the engine named, and how much of it the pieces cover:
            // placing into less than the range would complete it unwritten.
            let (mut want_n, mut covered) = (0, 0);
            if dlen <= self.slot_bytes {
                if let Some(h) = engine.place_with(from, &self.rx_buf[..dlen], &mut |b, off, n| {
                    want_n = n;
                    b.raw_range(off, n, |p, k| {
                        if np < IOV_LIMIT {
                            pieces[np] = (p, k);
                            np += 1;
                            covered += k;
                        }
                    })
                }) {
                    hdr = h;
                }
            }
            let placed = hdr > 0 && hdr < dlen && covered == want_n;
            // The real receive, through slot 0's header (timestamp control included).
            self.reset_rx_hdr(0);
            if placed {
                scatter_iovs(&mut self.place_iov, slot0, hdr, &pieces[..np]);
                let h = &mut self.rx_hdr[0].msg_hdr;
                h.msg_iov = self.place_iov.as_mut_ptr();
                h.msg_iovlen = (1 + np) as _;
            }
            // SAFETY: the header points at our own address, control and slot-0
            // buffers, and (placed) at pieces of a live application receive
            // buffer that the engine just named for this very datagram (we are
            // its socket's only reader, so the datagram peeked is the one read).
            let r = unsafe { libc::recvmsg(fd, &mut self.rx_hdr[0].msg_hdr, libc::MSG_DONTWAIT) };
            self.stats.syscalls += 1;
            let h = &mut self.rx_hdr[0].msg_hdr;
            h.msg_iov = &mut self.rx_iov[0];
            h.msg_iovlen = 1;
            if r < 0 {
                break;
            }
            got += 1;
            if !placed && h.msg_flags & libc::MSG_TRUNC != 0 {
                self.stats.rx_truncated += 1;
                continue;
            }
            let mono = clock::now_ns();
            let real_to_mono = i128::from(mono) - i128::from(clock::realtime_ns());
            let at = self.arrival(0, mono, real_to_mono);
            if placed {
                self.stats.rx_placed += 1;
                engine.handle_placed(at, from, &self.rx_buf[..dlen]);
            } else {
                let len = (r as usize).min(self.slot_bytes);
                engine.handle_datagram(at, from, &self.rx_buf[..len]);
            }
        }
        self.stats.rx_packets += got as u64;
        self.rx_last = got;
        // Every way out of the loop but a full count found the socket empty.
        self.rx_full = got == want;
        got
    }

    /// Slot `i`'s receive header ready for a receive (address, flags,
    /// timestamp control, length; the iovecs are the caller's).
    fn reset_rx_hdr(&mut self, i: usize) {
        let cmsg = self.rx_cmsg.as_mut_ptr();
        let h = &mut self.rx_hdr[i];
        h.msg_hdr.msg_namelen = addr::SOCKADDR_IN_LEN as libc::socklen_t;
        h.msg_hdr.msg_flags = 0;
        // SAFETY: i < batch, so i * CMSG_BYTES / 8 + CMSG_BYTES / 8 <= rx_cmsg.len().
        h.msg_hdr.msg_control = unsafe { cmsg.add(i * CMSG_BYTES / 8) }.cast();
        h.msg_hdr.msg_controllen = CMSG_BYTES as _;
        h.msg_len = 0;
    }

    /// Receives straight into where `Engine::guess_rdata_nth` expects the
    /// next RDATA payloads (one `recvmmsg` for up to `GUESS_BATCH` datagrams
    /// of a message, where the peek path takes two syscalls each): datagram
    /// i's headers to slot i, its payload to the i-th guessed range, anything
    /// longer to the rest of slot i. `place_with` then confirms them in order.
    /// From the first datagram that is not the piece guessed for it, that one
    /// and every later one of the batch are put back together in their slots
    /// *before* any of them is handled (their bytes sit in guessed ranges
    /// where a datagram handled as received may belong), then handled as
    /// received. None: no guess (take the peek path); else (datagrams handled,
    /// whether the socket ran dry: fewer came than were asked for).
    fn recv_guessed(&mut self, engine: &mut Engine<FfiBuf>, room: usize) -> Option<(usize, bool)> {
        let head = Engine::<FfiBuf>::RDATA_HEAD_LEN;
        let want = room.min(self.guesses.len());
        let mut g = 0;
        while g < want {
            let Some((gbuf, at, n)) = engine.guess_rdata_nth(g) else {
                break;
            };
            if head + n > self.slot_bytes {
                break;
            }
            let mut guess = Guess {
                buf: gbuf,
                at,
                n,
                ..NO_GUESS
            };
            let mut covered = 0;
            gbuf.raw_range(at, n, |p, k| {
                if guess.np < IOV_LIMIT {
                    guess.pieces[guess.np] = (p, k);
                    guess.np += 1;
                    covered += k;
                }
            });
            if covered != n {
                break;
            }
            self.guesses[g] = guess;
            g += 1;
        }
        if g == 0 {
            return None;
        }
        let base = self.rx_buf.as_mut_ptr();
        for i in 0..g {
            self.reset_rx_hdr(i);
            let q = &self.guesses[i];
            // SAFETY: i < batch: slot i lies inside rx_buf.
            let slot = unsafe { base.add(i * self.slot_bytes) };
            let iovs = &mut self.guess_iov[i * GUESS_IOVS..(i + 1) * GUESS_IOVS];
            scatter_iovs(iovs, slot, head, &q.pieces[..q.np]);
            iovs[1 + q.np] = libc::iovec {
                // SAFETY: head + n <= slot_bytes (checked above): inside slot i.
                iov_base: unsafe { slot.add(head + q.n) }.cast(),
                iov_len: self.slot_bytes - head - q.n,
            };
            let h = &mut self.rx_hdr[i].msg_hdr;
            h.msg_iov = iovs.as_mut_ptr();
            h.msg_iovlen = (2 + q.np) as _;
        }
        // SAFETY: the first g headers point at our own address, control and
        // slot buffers and at pieces of live application receive buffers the
        // engine named (raw_range) and still holds: it handles no input before
        // these datagrams are dealt with.
        let r = unsafe {
            sys_recvmmsg(
                self.socks[0].as_raw_fd(),
                self.rx_hdr.as_mut_ptr(),
                g as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        self.stats.syscalls += 1;
        for i in 0..g {
            let h = &mut self.rx_hdr[i].msg_hdr;
            h.msg_iov = &mut self.rx_iov[i];
            h.msg_iovlen = 1;
        }
        if r <= 0 {
            return Some((0, true));
        }
        let r = r as usize;
        let mono = clock::now_ns();
        let real_to_mono = i128::from(mono) - i128::from(clock::realtime_ns());
        let mut broken = false;
        for i in 0..r {
            let h = &self.rx_hdr[i];
            let dlen = (h.msg_len as usize).min(self.slot_bytes);
            let trunc = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            let from = SocketAddr::V4(addr::from_c(&self.rx_addr[i]));
            let start = i * self.slot_bytes;
            if !broken && !trunc && dlen > head {
                let q = self.guesses[i];
                let seen = &self.rx_buf[start..start + dlen];
                let check = engine.check_guess(from, seen, q.buf, q.at, q.n);
                if check == GuessCheck::Hit {
                    self.stats.rx_placed += 1;
                    self.stats.rx_guessed += 1;
                    let when = self.arrival(i, mono, real_to_mono);
                    engine.handle_placed(when, from, &self.rx_buf[start..start + dlen]);
                    continue;
                }
                if check == GuessCheck::Placeable {
                    // Placeable data, but not the piece guessed (another
                    // message's, a resend, a reordered one): the stream is
                    // not in order now.
                    self.stats.rx_guess_missed += 1;
                    self.guess_cooldown = GUESS_COOLDOWN;
                }
            }
            if !broken {
                broken = true;
                for j in i..r {
                    self.take_back(j, head);
                }
            }
            if trunc {
                // Longer than a slot: dropped (what it wrote into its range
                // was moved out, and the real data overwrites it later).
                self.stats.rx_truncated += 1;
                continue;
            }
            let when = self.arrival(i, mono, real_to_mono);
            engine.handle_datagram(when, from, &self.rx_buf[start..start + dlen]);
        }
        Some((r, r < g))
    }

    /// Slot `j` of a batch of guessed receives put back together: the payload
    /// bytes that landed in its guessed range moved behind its headers (the
    /// range was unwritten before, and nothing has been handled since).
    fn take_back(&mut self, j: usize, head: usize) {
        let dlen = (self.rx_hdr[j].msg_len as usize).min(self.slot_bytes);
        let payload = dlen.saturating_sub(head);
        let q = self.guesses[j];
        // SAFETY: j < batch: slot j lies inside rx_buf.
        let slot = unsafe { self.rx_buf.as_mut_ptr().add(j * self.slot_bytes) };
        let mut done = 0;
        for &(p, k) in &q.pieces[..q.np] {
            if done == payload {
                break;
            }
            let take = k.min(payload - done);
            // SAFETY: (p, k) is a piece of the live receive buffer the engine
            // named for this guess (the kernel wrote `take` bytes of this
            // datagram there); the destination lies in slot j before
            // head + n <= slot_bytes.
            unsafe { std::ptr::copy_nonoverlapping(p, slot.add(head + done), take) };
            done += take;
        }
    }

    /// Send everything the engine has (and what an earlier flush could not send).
    /// The first batch is built at `now` (the caller's fresh reading), later
    /// ones at a new reading: packets' send times are those of their `sendmmsg`.
    /// Returns true when the engine had nothing more to send (false: the
    /// kernel refused some for now, call again).
    pub fn flush(&mut self, engine: &mut Engine<FfiBuf>, now: Instant) -> bool {
        // The caller's reading serves the first batch (the common case is one
        // batch or none: an idle poll reads the clock once); later batches,
        // after a syscall, read it afresh.
        let mut ns = now.as_nanos();
        loop {
            let now = self.engine_time(ns);
            let mut exhausted = false;
            while self.tx_len < self.batch {
                let slot = &mut self.tx_buf[self.tx_len];
                let mut body = NO_BODY;
                let mut body_n = 0;
                let mut record = |b: &FfiBuf, off: usize, len: usize| {
                    b.raw_range(off, len, |p, n| {
                        if body_n < IOV_LIMIT {
                            body[body_n] = (p, n);
                            body_n += 1;
                        }
                    });
                };
                let Some(t) = engine.poll_transmit_with(now, slot, &mut record) else {
                    exhausted = true;
                    break;
                };
                let SocketAddr::V4(dst) = t.dst else { continue };
                self.tx_meta[self.tx_len] = TxMeta {
                    dst: addr::to_c(dst),
                    sock: self.sock_of_path(t.path),
                    len: t.len.min(self.slot_bytes),
                    body,
                    body_n,
                    sent: false,
                };
                self.tx_len += 1;
            }
            if self.tx_len == 0 {
                return true;
            }
            let blocked = self.send_queued();
            if blocked {
                // Application buffers may be released once the engine handles
                // input again: packets that wait keep their own copy.
                self.own_bodies();
            }
            if blocked || exhausted {
                return !blocked;
            }
            ns = clock::now_ns();
        }
    }

    /// Copy the application-memory bodies of the packets still queued into their
    /// slots, so they no longer depend on buffers the application may reclaim.
    fn own_bodies(&mut self) {
        for i in 0..self.tx_len {
            let m = &mut self.tx_meta[i];
            for k in 0..m.body_n {
                let (p, n) = m.body[k];
                let slot = &mut self.tx_buf[i];
                let Some(dst) = slot.get_mut(m.len..m.len + n) else {
                    break;
                };
                // SAFETY: (p, n) was recorded in this flush from a live application
                // buffer (raw_range), and the engine has handled no input since, so
                // the operation owning it has not completed; dst has n bytes.
                unsafe { std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), n) };
                m.len += n;
            }
            m.body_n = 0;
        }
    }

    /// The socket that sends path `path`'s packets: path i from socket i + 1,
    /// the last path from socket 0. A bijection, so every path keeps an
    /// entropy value of its own; but a peer with one path (one on this host,
    /// `Config::local_paths`) is sent to from socket 1, which can be
    /// connected to it (socket 0 receives, see `tx_conn`).
    fn sock_of_path(&self, path: u8) -> usize {
        let n = self.socks.len();
        (usize::from(path) % n + 1) % n
    }

    /// Connect socket `sock` (not 0) to `dst` if it was never tried: see
    /// `tx_conn`. A socket bound to a wildcard address stays unconnected
    /// (connecting would fix its source address for every peer).
    fn connect_once(&mut self, sock: usize, dst: &libc::sockaddr_in) {
        if sock == 0 || self.tx_conn_tried[sock] {
            return;
        }
        self.tx_conn_tried[sock] = true;
        let fd = self.socks[sock].as_raw_fd();
        // SAFETY: an all-zero sockaddr_in is valid; getsockname fills it.
        let mut me: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = addr::SOCKADDR_IN_LEN as libc::socklen_t;
        // SAFETY: me/len are valid out-parameters of the right size.
        let rc =
            unsafe { libc::getsockname(fd, (&mut me as *mut libc::sockaddr_in).cast(), &mut len) };
        if rc != 0 || me.sin_addr.s_addr == 0 {
            return;
        }
        // SAFETY: connects our own socket to a valid sockaddr_in of the stated length.
        let rc = unsafe {
            libc::connect(
                fd,
                (dst as *const libc::sockaddr_in).cast(),
                addr::SOCKADDR_IN_LEN as libc::socklen_t,
            )
        };
        if rc == 0 {
            self.tx_conn[sock] = Some(*dst);
        }
    }

    /// Is socket `sock` connected to `dst`?
    fn connected_to(&self, sock: usize, dst: &libc::sockaddr_in) -> bool {
        self.tx_conn[sock]
            .is_some_and(|c| c.sin_addr.s_addr == dst.sin_addr.s_addr && c.sin_port == dst.sin_port)
    }

    /// Send the queued packets, one `sendmmsg` per socket (a lone packet with
    /// `send` / `sendmsg`, cheaper for one). True if some could not be sent
    /// now (they stay queued, in order, at the front).
    fn send_queued(&mut self) -> bool {
        let mut socks_left: u128 = 0;
        for m in &self.tx_meta[..self.tx_len] {
            socks_left |= 1u128 << m.sock.min(127);
        }
        while socks_left != 0 {
            let sock = socks_left.trailing_zeros() as usize;
            socks_left &= socks_left - 1;
            self.tx_pick.clear();
            for (i, m) in self.tx_meta[..self.tx_len].iter().enumerate() {
                if m.sock == sock && !m.sent {
                    self.tx_pick.push(i);
                }
            }
            if let Some(&first) = self.tx_pick.first() {
                let dst = self.tx_meta[first].dst;
                self.connect_once(sock, &dst);
            }
            for (j, &i) in self.tx_pick.iter().enumerate() {
                let m = self.tx_meta[i];
                let connected = self.connected_to(sock, &m.dst);
                self.tx_addr[j] = m.dst;
                let iov = &mut self.tx_iov[j * TX_IOVS..(j + 1) * TX_IOVS];
                iov[0] = libc::iovec {
                    iov_base: self.tx_buf[i].as_mut_ptr().cast(),
                    iov_len: m.len,
                };
                for (v, &(p, n)) in iov[1..].iter_mut().zip(&m.body[..m.body_n]) {
                    *v = libc::iovec {
                        iov_base: p as *mut libc::c_void,
                        iov_len: n,
                    };
                }
                let h = &mut self.tx_hdr[j];
                if connected {
                    h.msg_hdr.msg_name = std::ptr::null_mut();
                    h.msg_hdr.msg_namelen = 0;
                } else {
                    h.msg_hdr.msg_name = (&mut self.tx_addr[j] as *mut libc::sockaddr_in).cast();
                    h.msg_hdr.msg_namelen = addr::SOCKADDR_IN_LEN as libc::socklen_t;
                }
                h.msg_hdr.msg_iov = iov.as_mut_ptr();
                h.msg_hdr.msg_iovlen = (1 + m.body_n) as _;
                h.msg_len = 0;
            }
            let fd = self.socks[sock].as_raw_fd();
            let mut off = 0;
            // A connected socket reports an ICMP error of an earlier packet
            // (the peer's port closed) on the next send, which did not go
            // out: that send is tried once more.
            let mut refused_retry = true;
            while off < self.tx_pick.len() {
                let left = self.tx_pick.len() - off;
                // SAFETY: tx_hdr[off..pick.len()] are headers built above pointing at
                // our own live buffers and addresses.
                let r = unsafe {
                    if left == 1 {
                        sys_send_one(fd, &self.tx_hdr[off].msg_hdr)
                    } else {
                        sys_sendmmsg(fd, self.tx_hdr.as_mut_ptr().add(off), left as libc::c_uint)
                    }
                };
                self.stats.syscalls += 1;
                if r > 0 {
                    for &i in &self.tx_pick[off..off + r as usize] {
                        self.tx_meta[i].sent = true;
                    }
                    self.stats.tx_packets += r as u64;
                    off += r as usize;
                    refused_retry = true;
                    continue;
                }
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ECONNREFUSED) if refused_retry => refused_retry = false,
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                        self.stats.tx_blocked += 1;
                        break;
                    }
                    _ => {
                        // Refused for good (ICMP error, unreachable net): drop this one
                        // packet; the engine's loss recovery or unreachable logic handles it.
                        self.tx_meta[self.tx_pick[off]].sent = true;
                        self.stats.tx_errors += 1;
                        off += 1;
                    }
                }
            }
        }
        let mut w = 0;
        for i in 0..self.tx_len {
            if !self.tx_meta[i].sent {
                self.tx_meta.swap(w, i);
                self.tx_buf.swap(w, i);
                w += 1;
            }
        }
        self.tx_len = w;
        w > 0
    }
}

/// `iovs` = [the first `head` bytes at `slot`, then `pieces` of an application
/// receive buffer] (a receive that scatters headers and payload).
fn scatter_iovs(
    iovs: &mut [libc::iovec],
    slot: *mut u8,
    head: usize,
    pieces: &[(*const u8, usize)],
) {
    iovs[0] = libc::iovec {
        iov_base: slot.cast(),
        iov_len: head,
    };
    for (v, &(p, k)) in iovs[1..].iter_mut().zip(pieces) {
        // Receive buffers are writable by the libfabric contract.
        *v = libc::iovec {
            iov_base: p as *mut libc::c_void,
            iov_len: k,
        };
    }
}

/// `recvmmsg(2)` without libc's cancellation-point wrapper (two calls into
/// libpthread around every syscall: measurable on an idle progress poll, which
/// is one syscall and little else). Returns what the syscall returns; errno as
/// usual.
///
/// # Safety
/// `hdrs` points at `vlen` headers whose buffers are live and writable.
unsafe fn sys_recvmmsg(fd: i32, hdrs: *mut libc::mmsghdr, vlen: libc::c_uint, flags: i32) -> i32 {
    let null: *mut libc::timespec = std::ptr::null_mut();
    // SAFETY: forwarded contract; the kernel reads/writes only the described memory.
    unsafe { libc::syscall(libc::SYS_recvmmsg, fd, hdrs, vlen, flags, null) as i32 }
}

/// One datagram as `sendmmsg` would send `hdr` (1 on success, else -1 with
/// errno): `sendto` when it is one piece (the cheapest send syscall), else
/// `sendmsg`; without the cancellation wrapper (see `sys_recvmmsg`).
///
/// # Safety
/// `hdr` describes live buffers (and an address or none).
unsafe fn sys_send_one(fd: i32, hdr: &libc::msghdr) -> i32 {
    // SAFETY: forwarded contract; with one iovec, its base and length are
    // exactly what sendmsg would have sent.
    let r = unsafe {
        if hdr.msg_iovlen == 1 {
            let v = &*hdr.msg_iov;
            libc::syscall(
                libc::SYS_sendto,
                fd,
                v.iov_base,
                v.iov_len,
                0,
                hdr.msg_name,
                hdr.msg_namelen,
            )
        } else {
            libc::syscall(libc::SYS_sendmsg, fd, hdr as *const libc::msghdr, 0)
        }
    };
    if r < 0 {
        -1
    } else {
        1
    }
}

/// `sendmmsg(2)` without the cancellation wrapper (see `sys_recvmmsg`).
///
/// # Safety
/// `hdrs` points at `vlen` headers whose buffers are live.
unsafe fn sys_sendmmsg(fd: i32, hdrs: *mut libc::mmsghdr, vlen: libc::c_uint) -> i32 {
    // SAFETY: forwarded contract.
    unsafe { libc::syscall(libc::SYS_sendmmsg, fd, hdrs, vlen, 0) as i32 }
}
