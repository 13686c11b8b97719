//! Receive: socket 0's datagrams into preallocated slots with `recvmmsg`
//! (or one `recvfrom` while the application polls), each with its kernel
//! arrival time. With `UDP_GRO` on the socket, the kernel may hand over
//! several datagrams of one sender coalesced into one (a flowlet the sender
//! sent segmented, or one the receiving device merged): they are split at
//! the segment size the kernel reports and handled one by one.
//!
//! Times handed to the engine are as close to the wire as the kernel lets us:
//! a received datagram carries its kernel arrival time (`SO_TIMESTAMPNS`).
//! Otherwise the time a datagram waited in a socket buffer while this process
//! was not running (2 busy ranks on 2 shared cores) counts as network RTT, and
//! the congestion controller takes host scheduling for a queueing network.

use std::net::SocketAddr;

use spray::Instant;

use crate::addr;
use crate::io::clock;
use crate::io::driver::IoStats;
use crate::io::tx::SOL_UDP;

/// `UDP_GRO` (linux/udp.h; not in every libc build).
const UDP_GRO: libc::c_int = 104;

/// Control-message room per slot: one `SCM_TIMESTAMPNS` (a cmsghdr and a
/// timespec, 32 bytes on 64-bit Linux) and one `UDP_GRO` (an int, 24), with slack.
const CMSG_BYTES: usize = 96;
/// Entries of a receive call after one that found little (see `Rx::last`).
const IDLE_PROBE: usize = 2;
/// A receive this soon after the previous one may probe with `recvfrom` and
/// stamp what it finds with the current time (see `Rx::recv_at`), ns.
const PROBE_FRESH_NS: u64 = 20_000;
/// Largest datagram the kernel can hand over coalesced (an IPv4 UDP payload).
pub(crate) const GRO_SLOT_BYTES: usize = 65_535;

/// Receive slots and their headers.
pub(crate) struct Rx {
    /// Bytes per slot: the largest datagram, or `GRO_SLOT_BYTES` with GRO.
    pub(crate) slot_bytes: usize,
    /// Largest datagram a peer sends, bytes: one longer (or a coalesced
    /// segment longer) is junk, dropped and counted as truncated.
    pub(crate) max_datagram: usize,
    pub(crate) batch: usize,
    pub(crate) buf: Vec<u8>,
    pub(crate) addr: Vec<addr::CAddr>,
    pub(crate) iov: Vec<libc::iovec>,
    pub(crate) hdr: Vec<libc::mmsghdr>,
    /// Control buffers for the arrival timestamps and GRO segment sizes,
    /// `CMSG_BYTES` per slot (u64 words, so every cmsghdr in them is aligned).
    cmsg: Vec<u64>,
    /// Latest time handed to the engine, ns: engine time never goes back.
    pub(crate) last_ns: u64,
    /// Datagrams the last receive call returned (a second single `recvfrom` hit
    /// in a row counts as 2). Below 2 the next call is a single `recvfrom` while
    /// the application polls (see `recv_at`), else a two-message `recvmmsg`;
    /// only after a fuller call a whole batch: each header
    /// is prepared here and copied in by the kernel, which makes a batch call
    /// that finds little dearer. Two, not one: a lone datagram then comes back
    /// with proof that the socket is empty behind it, so the caller need not
    /// spend another syscall to learn that before it handles the datagram.
    pub(crate) last: usize,
    /// The last receive filled every entry it asked for: more may be waiting.
    pub(crate) full: bool,
    /// Clock reading of the latest `recv_at`, ns.
    polled_ns: u64,
    /// The socket has `UDP_GRO` on: a slot may hold coalesced datagrams.
    pub(crate) gro: bool,
    /// The last call was a probe (`recv_probe`) that found a coalesced
    /// datagram: the caller receives once more before it transmits, so that
    /// a message's tail, already in the socket, is handled before anything
    /// is sent (one ack for the whole message, then its completion, instead
    /// of an ack, a return to the application and the tail a poll or two
    /// later).
    pub(crate) tail: bool,
}

fn zero_hdr() -> libc::mmsghdr {
    // SAFETY: an all-zero mmsghdr (null pointers, zero lengths) is a valid value.
    unsafe { std::mem::zeroed() }
}

impl Rx {
    /// `batch` slots for socket `fd`'s datagrams of at most `max_datagram`
    /// bytes; coalesced receives (`UDP_GRO`) if `gro` and the kernel has them.
    pub(crate) fn new(fd: i32, max_datagram: usize, batch: usize, gro: bool) -> Rx {
        let gro = gro && set_int(fd, SOL_UDP, UDP_GRO, 1);
        let slot_bytes = if gro {
            GRO_SLOT_BYTES
        } else {
            max_datagram.max(64)
        };
        let zero_sa = addr::CAddr::none();
        let mut rx = Rx {
            slot_bytes,
            max_datagram: max_datagram.max(64),
            batch,
            buf: vec![0; batch * slot_bytes],
            addr: vec![zero_sa; batch],
            iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                batch
            ],
            hdr: (0..batch).map(|_| zero_hdr()).collect(),
            cmsg: vec![0; batch * CMSG_BYTES / 8],
            last_ns: 0,
            last: 0,
            full: false,
            polled_ns: 0,
            gro,
            tail: false,
        };
        // Receive headers point at fixed slots: build them once.
        for i in 0..batch {
            // SAFETY: i * slot_bytes < buf.len(), so the pointer is in bounds.
            rx.iov[i].iov_base = unsafe { rx.buf.as_mut_ptr().add(i * slot_bytes) }.cast();
            rx.iov[i].iov_len = slot_bytes;
            let h = &mut rx.hdr[i].msg_hdr;
            h.msg_name = rx.addr[i].as_mut_ptr().cast();
            h.msg_iov = &mut rx.iov[i];
            h.msg_iovlen = 1;
        }
        // Failure only costs precision: unstamped datagrams get the poll time.
        set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        rx
    }

    /// The sender of slot `i`'s datagram (`None`: a family we do not speak).
    pub(crate) fn from(&self, i: usize) -> Option<SocketAddr> {
        self.addr[i].get()
    }

    /// Engine time from monotonic `ns`, never before what the engine saw last.
    pub(crate) fn engine_time(&mut self, ns: u64) -> Instant {
        self.last_ns = self.last_ns.max(ns);
        Instant::from_nanos(self.last_ns)
    }

    /// Slot `i`'s control messages as the kernel filled them: the arrival
    /// time as monotonic ns (`real_to_mono` = CLOCK_MONOTONIC -
    /// CLOCK_REALTIME, ns) and the GRO segment size, where present.
    fn control(&self, i: usize, real_to_mono: i128) -> (Option<u64>, Option<usize>) {
        let h = &self.hdr[i].msg_hdr;
        let (mut at, mut seg) = (None, None);
        if h.msg_controllen == 0 || h.msg_flags & libc::MSG_CTRUNC != 0 {
            return (at, seg);
        }
        // SAFETY: the header's control pointer and length describe our own
        // cmsg region for slot i as the kernel filled it; the CMSG macros
        // stay within msg_controllen.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(data.cast::<libc::timespec>());
                    let real = i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec);
                    at = u64::try_from(real + real_to_mono).ok();
                } else if (*c).cmsg_level == SOL_UDP && (*c).cmsg_type == UDP_GRO {
                    let g = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                    seg = usize::try_from(g).ok().filter(|&g| g > 0);
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        (at, seg)
    }

    /// Engine time of slot `i`'s arrival: its kernel stamp if it has a sane one
    /// (within the last second of `mono`: a stepped wall clock gives garbage),
    /// else `mono`; and its GRO segment size, if it holds coalesced datagrams.
    pub(crate) fn arrival(
        &mut self,
        i: usize,
        mono: u64,
        real_to_mono: i128,
        stats: &mut IoStats,
    ) -> (Instant, Option<usize>) {
        let (at, seg) = self.control(i, real_to_mono);
        let at_ns = match at {
            Some(t) if t <= mono && mono - t < 1_000_000_000 => t,
            _ => {
                stats.rx_unstamped += 1;
                mono
            }
        };
        (self.engine_time(at_ns), seg)
    }

    /// Slot `i`'s receive header ready for a receive (address, flags,
    /// control room, length; the iovecs are the caller's).
    pub(crate) fn reset_hdr(&mut self, i: usize) {
        let cmsg = self.cmsg.as_mut_ptr();
        let h = &mut self.hdr[i];
        h.msg_hdr.msg_namelen = addr::CAddr::ROOM;
        h.msg_hdr.msg_flags = 0;
        // SAFETY: i < batch, so i * CMSG_BYTES / 8 + CMSG_BYTES / 8 <= cmsg.len().
        h.msg_hdr.msg_control = unsafe { cmsg.add(i * CMSG_BYTES / 8) }.cast();
        h.msg_hdr.msg_controllen = CMSG_BYTES as _;
        h.msg_len = 0;
    }

    /// One receive call on socket `fd`; each datagram goes to
    /// `f(at, from, bytes, seg)` (coalesced ones whole, with their segment
    /// size `seg`; see `for_segments`). `at` is
    /// the kernel's receive timestamp (clamped between the engine's last time
    /// and now), or now if there is none. `now_ns` is the caller's clock
    /// reading. Returns how many datagrams arrived (0: the socket is drained
    /// for now).
    ///
    /// While an application polls (the previous call was under
    /// `PROBE_FRESH_NS` ago) and the socket was empty last time, the call is a
    /// plain `recvfrom` (`recvmsg` with GRO, for the segment size): the
    /// cheapest receive syscall, on the idle poll and on the critical path of
    /// a ping-pong alike. Its datagram is stamped `now_ns`: it arrived since
    /// the previous poll, at most that long ago.
    pub(crate) fn recv_at(
        &mut self,
        fd: i32,
        now_ns: u64,
        stats: &mut IoStats,
        mut f: impl FnMut(Instant, SocketAddr, &[u8], usize),
    ) -> usize {
        self.tail = false;
        let fresh = now_ns.saturating_sub(self.polled_ns) < PROBE_FRESH_NS;
        self.polled_ns = now_ns;
        if self.last < IDLE_PROBE && fresh {
            return self.recv_probe(fd, now_ns, stats, &mut f);
        }
        let vlen = if self.last < IDLE_PROBE {
            IDLE_PROBE.min(self.batch)
        } else {
            self.batch
        };
        for i in 0..vlen {
            self.reset_hdr(i);
        }
        // SAFETY: hdr holds `batch` headers whose name/iov/control pointers
        // refer to our own live buffers of the stated sizes.
        let r = unsafe { sys_recvmmsg(fd, self.hdr.as_mut_ptr(), vlen as libc::c_uint) };
        stats.syscalls += 1;
        self.last = r.max(0) as usize;
        self.full = r as isize == vlen as isize;
        if r <= 0 {
            return 0;
        }
        let n = r as usize;
        let mono = clock::now_ns();
        let real_to_mono = i128::from(mono) - i128::from(clock::realtime_ns());
        let mut got = 0;
        for i in 0..n {
            if self.hdr[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                stats.rx_truncated += 1;
                got += 1;
                continue;
            }
            let len = (self.hdr[i].msg_len as usize).min(self.slot_bytes);
            let Some(from) = self.from(i) else {
                got += 1;
                continue;
            };
            let (at, seg) = self.arrival(i, mono, real_to_mono, stats);
            let start = i * self.slot_bytes;
            got += for_segments(
                &self.buf[start..start + len],
                seg,
                self.max_datagram,
                stats,
                |d, g| f(at, from, d, g),
            );
        }
        stats.rx_packets += got as u64;
        got
    }

    /// One `recvfrom` (or `recvmsg`, with GRO) into slot 0 (see `recv_at`).
    /// Leaves `full` false so the caller handles what came before it polls again.
    fn recv_probe(
        &mut self,
        fd: i32,
        now_ns: u64,
        stats: &mut IoStats,
        f: &mut impl FnMut(Instant, SocketAddr, &[u8], usize),
    ) -> usize {
        let r = if self.gro {
            self.reset_hdr(0);
            // SAFETY: header 0 points at our own address, control and slot-0
            // buffers (reset above; its iovec is slot 0 whole).
            unsafe { libc::recvmsg(fd, &mut self.hdr[0].msg_hdr, libc::MSG_DONTWAIT) as isize }
        } else {
            let mut alen = addr::CAddr::ROOM;
            // SAFETY: slot 0 of buf is ours and slot_bytes long; addr[0] a
            // sockaddr_storage whose size alen states.
            unsafe {
                libc::syscall(
                    libc::SYS_recvfrom,
                    fd,
                    self.buf.as_mut_ptr(),
                    self.slot_bytes,
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    self.addr[0].as_mut_ptr(),
                    &mut alen as *mut libc::socklen_t,
                ) as isize
            }
        };
        stats.syscalls += 1;
        self.full = false;
        if r < 0 {
            self.last = 0;
            return 0;
        }
        // A second datagram in a row: a burst, batch from now on.
        self.last = if self.last == 0 { 1 } else { IDLE_PROBE };
        // MSG_TRUNC (recvfrom): r is the datagram's real length.
        let len = r as usize;
        let trunc = self.gro && self.hdr[0].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        if len > self.slot_bytes || trunc {
            stats.rx_truncated += 1;
            stats.rx_packets += 1;
            return 1;
        }
        let seg = if self.gro { self.control(0, 0).1 } else { None };
        let Some(from) = self.from(0) else {
            stats.rx_packets += 1;
            return 1;
        };
        let at = self.engine_time(now_ns);
        let got = for_segments(&self.buf[..len], seg, self.max_datagram, stats, |d, g| {
            f(at, from, d, g)
        });
        stats.rx_packets += got as u64;
        // A coalesced datagram is a burst's first flowlet, and its tail (the
        // rest of a message that did not fit one segmented send) is often
        // in the socket behind it: look before anything is sent (`tail`).
        self.tail = got > 1;
        got
    }
}

/// `f` on each datagram of `data`, coalesced ones at a segment size `seg`
/// (the last may be shorter); returns how many.
/// Datagrams (or segments) longer than `max` bytes are dropped and counted
/// as truncated, as a slot of `max` bytes would have cut them.
pub(crate) fn for_each_segment(
    data: &[u8],
    seg: Option<usize>,
    max: usize,
    stats: &mut IoStats,
    mut f: impl FnMut(&[u8]),
) -> usize {
    for_segments(data, seg, max, stats, |d, g| {
        d.chunks(g.max(1)).for_each(&mut f)
    })
}

/// `for_each_segment` with the datagrams handed over at once: `f(data, g)`
/// with the segment size `g` (`data.len()` for a datagram that is not
/// coalesced, or 0 for an empty one), if the segments are not too long.
pub(crate) fn for_segments(
    data: &[u8],
    seg: Option<usize>,
    max: usize,
    stats: &mut IoStats,
    mut f: impl FnMut(&[u8], usize),
) -> usize {
    let g = seg.filter(|&g| g < data.len()).unwrap_or(data.len());
    if g > max {
        stats.rx_truncated += 1;
        return 1;
    }
    if g == 0 {
        f(data, 0);
        return 1;
    }
    let n = data.len().div_ceil(g);
    f(data, g);
    if n > 1 {
        stats.rx_gro_datagrams += 1;
        stats.rx_gro_packets += n as u64;
    }
    n
}

/// Set an int socket option; true if the kernel took it.
fn set_int(fd: i32, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> bool {
    // SAFETY: setsockopt reads one c_int from a local.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// `recvmmsg(2)` with `MSG_DONTWAIT`, without libc's cancellation-point
/// wrapper (two calls into libpthread around every syscall: measurable on an
/// idle progress poll, which is one syscall and little else). Returns what
/// the syscall returns; errno as usual.
///
/// # Safety
/// `hdrs` points at `vlen` headers whose buffers are live and writable.
pub(crate) unsafe fn sys_recvmmsg(fd: i32, hdrs: *mut libc::mmsghdr, vlen: libc::c_uint) -> i32 {
    let null: *mut libc::timespec = std::ptr::null_mut();
    // SAFETY: forwarded contract; the kernel reads/writes only the described memory.
    unsafe { libc::syscall(libc::SYS_recvmmsg, fd, hdrs, vlen, libc::MSG_DONTWAIT, null) as i32 }
}
