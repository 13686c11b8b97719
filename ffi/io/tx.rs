//! Transmit: the packets the engine hands out, queued in slots and sent per
//! socket with `sendmmsg`. A run of equal-size packets to one peer on one
//! socket (a flowlet, `Config::flowlet_bytes`) leaves as one entry with
//! `UDP_SEGMENT` (UDP GSO): the kernel takes it through its stack once and
//! cuts it into datagrams as late as it can (on a device with segmentation
//! offload, such as veth or a NIC, not at all before the receiving host,
//! which may keep it whole for a `UDP_GRO` socket).
//!
//! Why not `quinn-udp`: its `Transmit` is one contiguous buffer per send
//! and one `sendmsg` per call. spray's bulk data leaves straight from the
//! application's buffers (a header in a slot, the body as the application's
//! own iovecs), which would need a copy per packet there, and the packets
//! of several paths leave in one `sendmmsg`. The GSO rules it encodes (equal
//! segment sizes but the last, at most 64 segments and 64 KiB, `EIO` without
//! checksum offload) are few; they are here.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use spray::{Engine, Instant};

use crate::addr;
use crate::io::buf::FfiBuf;
use crate::io::driver::IoStats;
use crate::limits::IOV_LIMIT;

/// Most iovecs of one outgoing datagram: its headers (in a slot) and a body
/// in up to `IOV_LIMIT` application segments.
const PKT_IOVS: usize = 1 + IOV_LIMIT;

/// Most datagrams in one segmented send (the kernel's `UDP_MAX_SEGMENTS`).
const GSO_MAX_SEGS: usize = 64;

/// Most bytes of one segmented send: what one IPv4 UDP datagram can hold,
/// with margin.
const GSO_MAX_BYTES: usize = 65_000;

/// `SOL_UDP` / `UDP_SEGMENT` (linux/udp.h; not in every libc build).
pub(crate) const SOL_UDP: libc::c_int = 17;
pub(crate) const UDP_SEGMENT: libc::c_int = 103;

/// Control-message room of one entry: one `UDP_SEGMENT` (a u16), aligned, u64 words.
const CMSG_WORDS: usize = 4;

const NO_BODY: [(*const u8, usize); IOV_LIMIT] = [(std::ptr::null(), 0); IOV_LIMIT];

/// An empty link of `Tx`'s socket chains.
const NONE: usize = usize::MAX;

#[derive(Copy, Clone)]
struct TxMeta {
    dst: SocketAddr,
    /// Index of the socket that sends it (see `sock_of_path`).
    sock: usize,
    /// Bytes in the slot (headers, or the whole datagram).
    len: usize,
    /// The rest of the datagram in application memory: (address, bytes) pieces.
    body: [(*const u8, usize); IOV_LIMIT],
    /// Pieces used in `body`.
    body_n: usize,
    /// Bytes of the whole datagram (slot part and body).
    total: usize,
    sent: bool,
}

/// Queued packets and the headers of the sends that carry them.
pub(crate) struct Tx {
    slot_bytes: usize,
    /// Most packets queued before they are sent.
    batch: usize,
    bufs: Vec<Vec<u8>>,
    meta: Vec<TxMeta>,
    /// Packets queued.
    len: usize,
    /// Per entry of one send call: destination, header, control, packets.
    ent_addr: Vec<addr::CAddr>,
    ent_hdr: Vec<libc::mmsghdr>,
    ent_cmsg: Vec<u64>,
    /// Per entry: (first index into `pick`, packets).
    ent_pkts: Vec<(usize, usize)>,
    /// iovecs of the entries, `PKT_IOVS` per packet.
    iov: Vec<libc::iovec>,
    /// The queued packets of the socket being sent, grouped by destination.
    pick: Vec<usize>,
    /// The unsent queued packets by socket (`group`): per socket the first
    /// and last of its chain (`NONE`: none), per packet the next of its
    /// socket's; the sockets in order of their first packet.
    chain_head: Vec<usize>,
    chain_tail: Vec<usize>,
    chain_next: Vec<usize>,
    sock_order: Vec<usize>,
    /// Per socket: the peer it is `connect`ed to. Socket 0 receives from
    /// every peer and is never connected; each other socket is connected to
    /// the first peer it sends to. Its packets to that peer leave without an
    /// address: the kernel reuses the socket's cached route instead of
    /// looking one up per packet, and a lone packet goes out with `send`.
    /// Together about 0.5 us of each ping-pong hop's ~3.5 us `sendmmsg`
    /// on loopback.
    conn: Vec<Option<SocketAddr>>,
    /// Per socket: a `connect` was tried (once; a failure leaves it unconnected).
    conn_tried: Vec<bool>,
    /// Most datagrams per segmented send; 1 = GSO off (the kernel or a
    /// device refused it: see `send_socket`).
    gso_segs: usize,
    /// Sockets per rail (`set_rails`; all of them with one rail).
    per_rail: usize,
}

fn zero_hdr() -> libc::mmsghdr {
    // SAFETY: an all-zero mmsghdr (null pointers, zero lengths) is a valid value.
    unsafe { std::mem::zeroed() }
}

impl Tx {
    /// Room for `batch` packets of up to `slot_bytes`, for `nsocks` sockets;
    /// segmented sends if `gso` (the sockets accept `UDP_SEGMENT`).
    pub(crate) fn new(nsocks: usize, slot_bytes: usize, batch: usize, gso: bool) -> Tx {
        let zero_sa = addr::CAddr::none();
        let none = TxMeta {
            dst: SocketAddr::from(([0, 0, 0, 0], 0)),
            sock: 0,
            len: 0,
            body: NO_BODY,
            body_n: 0,
            total: 0,
            sent: true,
        };
        Tx {
            slot_bytes,
            batch,
            bufs: (0..batch).map(|_| vec![0; slot_bytes]).collect(),
            meta: vec![none; batch],
            len: 0,
            ent_addr: vec![zero_sa; batch],
            ent_hdr: (0..batch).map(|_| zero_hdr()).collect(),
            ent_cmsg: vec![0; batch * CMSG_WORDS],
            ent_pkts: vec![(0, 0); batch],
            iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                batch * PKT_IOVS
            ],
            pick: Vec::with_capacity(batch),
            chain_head: vec![NONE; nsocks],
            chain_tail: vec![NONE; nsocks],
            chain_next: vec![NONE; batch],
            sock_order: Vec::with_capacity(nsocks),
            conn: vec![None; nsocks],
            conn_tried: vec![false; nsocks],
            gso_segs: if gso { GSO_MAX_SEGS } else { 1 },
            per_rail: nsocks,
        }
    }

    /// The sockets are `per_rail` per rail (`sock::open_rails`).
    pub(crate) fn set_rails(&mut self, per_rail: usize) {
        self.per_rail = per_rail.max(1);
    }

    /// Are segmented sends in use?
    pub(crate) fn gso(&self) -> bool {
        self.gso_segs > 1
    }

    /// Send everything the engine has (and what an earlier flush could not
    /// send). The first batch is built at `now` (the caller's fresh reading),
    /// later ones at a new reading: packets' send times are those of their
    /// syscall. Returns true when the engine had nothing more to send (false:
    /// the kernel refused some for now, call again).
    pub(crate) fn flush(
        &mut self,
        socks: &[OwnedFd],
        engine: &mut Engine<FfiBuf>,
        now: Instant,
        time: &mut dyn FnMut() -> Instant,
        stats: &mut IoStats,
    ) -> bool {
        let mut now = now;
        loop {
            let mut exhausted = false;
            while self.len < self.batch {
                let slot = &mut self.bufs[self.len];
                let mut body = NO_BODY;
                let mut body_n = 0;
                let mut body_bytes = 0;
                let mut record = |b: &FfiBuf, off: usize, len: usize| {
                    b.raw_range(off, len, |p, n| {
                        if body_n < IOV_LIMIT {
                            body[body_n] = (p, n);
                            body_n += 1;
                            body_bytes += n;
                        }
                    });
                };
                let Some(t) = engine.poll_transmit_with(now, slot, &mut record) else {
                    exhausted = true;
                    break;
                };
                let len = t.len.min(self.slot_bytes);
                self.meta[self.len] = TxMeta {
                    dst: t.dst,
                    sock: sock_of_rail_path(self.per_rail, socks.len(), t.path),
                    len,
                    body,
                    body_n,
                    total: len + body_bytes,
                    sent: false,
                };
                self.len += 1;
            }
            if self.len == 0 {
                return true;
            }
            let blocked = self.send_queued(socks, stats);
            if blocked {
                // Application buffers may be released once the engine handles
                // input again: packets that wait keep their own copy.
                self.own_bodies();
            }
            if blocked || exhausted {
                return !blocked;
            }
            now = time();
        }
    }

    /// Copy the application-memory bodies of the packets still queued into
    /// their slots, so they no longer depend on buffers the application may
    /// reclaim.
    fn own_bodies(&mut self) {
        for i in 0..self.len {
            let m = &mut self.meta[i];
            for k in 0..m.body_n {
                let (p, n) = m.body[k];
                let slot = &mut self.bufs[i];
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

    /// Connect socket `sock` (not 0) to `dst` if it was never tried: see
    /// `conn`. A socket bound to a wildcard address stays unconnected
    /// (connecting would fix its source address for every peer).
    fn connect_once(&mut self, fd: i32, sock: usize, dst: SocketAddr) {
        if sock == 0 || self.conn_tried[sock] {
            return;
        }
        self.conn_tried[sock] = true;
        let mut me = addr::CAddr::none();
        let mut len = addr::CAddr::ROOM;
        // SAFETY: me/len are a valid out-parameter and its size.
        let rc = unsafe { libc::getsockname(fd, me.as_mut_ptr(), &mut len) };
        if rc != 0 || me.get().is_none_or(|m| m.ip().is_unspecified()) {
            return;
        }
        let c = addr::CAddr::from(dst);
        // SAFETY: connects our own socket to a valid address of the stated length.
        let rc = unsafe { libc::connect(fd, c.as_ptr(), c.len) };
        if rc == 0 {
            self.conn[sock] = Some(dst);
        }
    }

    /// Is socket `sock` connected to `dst`?
    fn connected_to(&self, sock: usize, dst: SocketAddr) -> bool {
        self.conn[sock] == Some(dst)
    }

    /// Send the queued packets, socket by socket, the sockets in the order
    /// of their first queued packet. True if some could not be sent now
    /// (they stay queued, in order, at the front).
    ///
    /// In queue order, not by socket number: a message split over two paths
    /// (a flowlet of 44 packets and its tail of 3) left tail first when the
    /// tail's socket had the lower number; the receiver saw its last packets
    /// before the rest (a hole, an ack at once, the flight end's ack hold
    /// started early) while the sender was still in the call for the rest.
    fn send_queued(&mut self, socks: &[OwnedFd], stats: &mut IoStats) -> bool {
        self.group();
        for k in 0..self.sock_order.len() {
            let sock = self.sock_order[k];
            self.pick_socket(sock);
            if let Some(&first) = self.pick.first() {
                let dst = self.meta[first].dst;
                self.connect_once(socks[sock].as_raw_fd(), sock, dst);
            }
            self.send_socket(socks[sock].as_raw_fd(), sock, stats);
        }
        let mut w = 0;
        for i in 0..self.len {
            if !self.meta[i].sent {
                self.meta.swap(w, i);
                self.bufs.swap(w, i);
                w += 1;
            }
        }
        self.len = w;
        w > 0
    }

    /// Chain the unsent queued packets by socket, in queue order, and list
    /// the sockets in order of their first packet: one pass over the queue,
    /// where a walk of the whole queue per socket cost about 8 steps of a
    /// 136-byte record per packet with 8 paths (a tenth of the flush).
    fn group(&mut self) {
        for &s in &self.sock_order {
            self.chain_head[s] = NONE;
        }
        self.sock_order.clear();
        for (q, m) in self.meta[..self.len].iter().enumerate() {
            if m.sent {
                continue;
            }
            let s = m.sock;
            self.chain_next[q] = NONE;
            if self.chain_head[s] == NONE {
                self.chain_head[s] = q;
                self.sock_order.push(s);
            } else {
                self.chain_next[self.chain_tail[s]] = q;
            }
            self.chain_tail[s] = q;
        }
    }

    /// `pick` = the unsent packets of socket `sock` (its chain, see
    /// `group`), in queue order within each destination, destinations in
    /// order of first appearance (a flowlet to one peer may interleave with
    /// another peer's packets in the queue; each peer's own order is kept).
    fn pick_socket(&mut self, sock: usize) {
        self.pick.clear();
        let mut mixed = false;
        let mut q = self.chain_head[sock];
        while q != NONE {
            if let Some(&f) = self.pick.first() {
                mixed |= self.meta[f].dst != self.meta[q].dst;
            }
            self.pick.push(q);
            q = self.chain_next[q];
        }
        if mixed {
            let meta = &self.meta;
            let mut order: Vec<usize> = Vec::with_capacity(self.pick.len());
            let mut done = vec![false; self.pick.len()];
            for a in 0..self.pick.len() {
                if done[a] {
                    continue;
                }
                let d = meta[self.pick[a]].dst;
                for b in a..self.pick.len() {
                    if !done[b] && meta[self.pick[b]].dst == d {
                        done[b] = true;
                        order.push(self.pick[b]);
                    }
                }
            }
            self.pick = order;
        }
    }

    /// Send `pick` on socket `sock` (`fd`): one `sendmmsg` entry per run of
    /// equal-size packets to one destination (segmented when GSO is on), a
    /// lone entry with `sendto` / `sendmsg`. Entries the kernel refuses for
    /// now stay unsent; one refused for good is dropped (the engine's loss
    /// recovery handles it); a segmented entry refused as such (`EIO`: no
    /// checksum offload on the way; `EINVAL`: an older kernel) turns GSO off
    /// and goes again as single datagrams, so nothing is lost.
    fn send_socket(&mut self, fd: i32, sock: usize, stats: &mut IoStats) {
        let mut p = 0;
        // A connected socket reports an ICMP error of an earlier packet (the
        // peer's port closed) on the next send, which did not go out: that
        // send is tried once more.
        let mut refused_retry = true;
        while p < self.pick.len() {
            let n_ent = self.build_entries(sock, p);
            // SAFETY: ent_hdr[..n_ent] were just built, pointing at our own
            // slots, addresses, control buffers and at live application
            // buffers recorded in this flush.
            let r = unsafe {
                if n_ent == 1 {
                    sys_send_one(fd, &self.ent_hdr[0].msg_hdr)
                } else {
                    sys_sendmmsg(fd, self.ent_hdr.as_mut_ptr(), n_ent as libc::c_uint)
                }
            };
            stats.syscalls += 1;
            if r > 0 {
                for e in 0..r as usize {
                    let (a, n) = self.ent_pkts[e];
                    for &i in &self.pick[a..a + n] {
                        self.meta[i].sent = true;
                    }
                    stats.tx_packets += n as u64;
                    if n > 1 {
                        stats.tx_gso_sends += 1;
                        stats.tx_gso_packets += n as u64;
                    }
                    p = a + n;
                }
                refused_retry = true;
                continue;
            }
            let (a, n) = self.ent_pkts[0];
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::ECONNREFUSED) if refused_retry => refused_retry = false,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                    stats.tx_blocked += 1;
                    return;
                }
                Some(libc::EIO) | Some(libc::EINVAL) if n > 1 => {
                    crate::log::warn(
                        "UDP segmentation offload refused on this path: sending single datagrams",
                    );
                    self.gso_segs = 1;
                    stats.tx_gso_fallbacks += 1;
                }
                _ => {
                    // Refused for good (ICMP error, unreachable net): drop
                    // this entry's packets; the engine's loss recovery or
                    // unreachable logic handles them.
                    for &i in &self.pick[a..a + n] {
                        self.meta[i].sent = true;
                    }
                    stats.tx_errors += n as u64;
                    p = a + n;
                }
            }
        }
    }

    /// Build the `sendmmsg` entries for `pick[p..]` (as many as fit):
    /// returns how many. Entry e carries `pick[ent_pkts[e].0..][..ent_pkts[e].1]`.
    fn build_entries(&mut self, sock: usize, p: usize) -> usize {
        let mut e = 0;
        let mut iov_at = 0;
        let mut k = p;
        while k < self.pick.len() && e < self.batch {
            // (Fields, not a copy of the whole 136-byte record: this runs per
            // packet, and the copies were a tenth of the flush's own time.)
            let first_dst = self.meta[self.pick[k]].dst;
            let seg = self.meta[self.pick[k]].total;
            // The run: equal sizes to one destination, the last may be shorter.
            let mut n = 1;
            let mut bytes = seg;
            while self.gso_segs > 1 && n < self.gso_segs && k + n < self.pick.len() {
                let m = &self.meta[self.pick[k + n]];
                if m.dst != first_dst || m.total > seg || bytes + m.total > GSO_MAX_BYTES {
                    break;
                }
                n += 1;
                bytes += m.total;
                if m.total < seg {
                    break;
                }
            }
            let start = iov_at;
            for j in 0..n {
                let i = self.pick[k + j];
                let m = &self.meta[i];
                self.iov[iov_at] = libc::iovec {
                    iov_base: self.bufs[i].as_mut_ptr().cast(),
                    iov_len: m.len,
                };
                iov_at += 1;
                for &(ptr, len) in &m.body[..m.body_n] {
                    self.iov[iov_at] = libc::iovec {
                        iov_base: ptr as *mut libc::c_void,
                        iov_len: len,
                    };
                    iov_at += 1;
                }
            }
            let connected = self.connected_to(sock, first_dst);
            self.ent_addr[e] = addr::CAddr::from(first_dst);
            let h = &mut self.ent_hdr[e].msg_hdr;
            if connected {
                h.msg_name = std::ptr::null_mut();
                h.msg_namelen = 0;
            } else {
                h.msg_name = self.ent_addr[e].as_mut_ptr().cast();
                h.msg_namelen = self.ent_addr[e].len;
            }
            // SAFETY: start..iov_at lies inside iov (batch * PKT_IOVS entries,
            // at most PKT_IOVS per packet and at most batch packets).
            h.msg_iov = unsafe { self.iov.as_mut_ptr().add(start) };
            h.msg_iovlen = (iov_at - start) as _;
            if n > 1 {
                let ctl = &mut self.ent_cmsg[e * CMSG_WORDS..(e + 1) * CMSG_WORDS];
                h.msg_control = ctl.as_mut_ptr().cast();
                // SAFETY: CMSG_SPACE of a u16 (24 bytes on 64-bit Linux)
                // fits the CMSG_WORDS * 8 bytes of this entry's control room.
                h.msg_controllen = unsafe { libc::CMSG_SPACE(2) } as _;
                // SAFETY: msg_control/msg_controllen describe our own buffer,
                // large enough for one header and its u16 (checked above).
                unsafe {
                    let c = libc::CMSG_FIRSTHDR(h);
                    (*c).cmsg_level = SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    (*c).cmsg_len = libc::CMSG_LEN(2) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg as u16);
                }
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
            self.ent_hdr[e].msg_len = 0;
            self.ent_pkts[e] = (k, n);
            e += 1;
            k += n;
        }
        e
    }
}

/// The socket that sends path `path`'s packets, of `n` sockets: path i from
/// socket i + 1, the last path from socket 0. A bijection, so every path
/// keeps an entropy value of its own; but a peer with one path (one on this
/// host, `Config::local_paths`) is sent to from socket 1, which can be
/// connected to it (socket 0 receives, see `Tx::conn`).
fn sock_of_path(n: usize, path: u8) -> usize {
    // (Divisions only for a path beyond the sockets: this runs per packet.)
    let p = usize::from(path);
    let p = if p < n { p } else { p % n };
    if p + 1 < n {
        p + 1
    } else {
        0
    }
}

/// The socket of path `path` with `per_rail` sockets per rail, of `n`: rail
/// 0's paths as `sock_of_path` (its socket 0 is the receiving one), path
/// `r * per_rail + i` of a further rail from socket `r * per_rail + i`.
/// With one rail (`per_rail == n`), `sock_of_path`.
fn sock_of_rail_path(per_rail: usize, n: usize, path: u8) -> usize {
    let p = usize::from(path);
    if per_rail >= n || p < per_rail {
        return sock_of_path(per_rail.min(n), path);
    }
    p % n
}

/// Does socket `fd` accept `UDP_SEGMENT` (the kernel has UDP GSO)? Setting
/// 0 on the socket leaves per-send segment sizes free.
pub(crate) fn gso_supported(fd: i32) -> bool {
    let zero: libc::c_int = 0;
    // SAFETY: setsockopt reads one c_int from a local.
    unsafe {
        libc::setsockopt(
            fd,
            SOL_UDP,
            UDP_SEGMENT,
            (&zero as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// One entry as `sendmmsg` would send `hdr` (1 on success, else -1 with
/// errno): `sendto` when it is one piece without control data (the cheapest
/// send syscall), else `sendmsg`; without libc's cancellation-point wrapper
/// (see `driver::sys_recvmmsg`).
///
/// # Safety
/// `hdr` describes live buffers (and an address or none).
unsafe fn sys_send_one(fd: i32, hdr: &libc::msghdr) -> i32 {
    // SAFETY: forwarded contract; with one iovec and no control, its base
    // and length are exactly what sendmsg would have sent.
    let r = unsafe {
        if hdr.msg_iovlen == 1 && hdr.msg_controllen == 0 {
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

/// `sendmmsg(2)` without the cancellation wrapper.
///
/// # Safety
/// `hdrs` points at `vlen` headers whose buffers are live.
unsafe fn sys_sendmmsg(fd: i32, hdrs: *mut libc::mmsghdr, vlen: libc::c_uint) -> i32 {
    // SAFETY: forwarded contract.
    unsafe { libc::syscall(libc::SYS_sendmmsg, fd, hdrs, vlen, 0) as i32 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    /// Packets leave socket by socket in the order of each socket's first
    /// queued packet: a message's first flowlet (on a higher-numbered
    /// socket) before its tail (on a lower one), as the engine queued them.
    #[test]
    fn sockets_send_in_queue_order() -> std::io::Result<()> {
        let rx = UdpSocket::bind("127.0.0.1:0")?;
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
        let dst = rx.local_addr()?;
        let mut socks: Vec<OwnedFd> = Vec::new();
        for _ in 0..3 {
            socks.push(OwnedFd::from(UdpSocket::bind("127.0.0.1:0")?));
        }
        let mut tx = Tx::new(socks.len(), 64, 8, false);
        // The engine queued a, b (socket 2, one flowlet) then c (socket 1).
        for (i, (sock, byte)) in [(2, b'a'), (2, b'b'), (1, b'c')].into_iter().enumerate() {
            tx.bufs[i][0] = byte;
            tx.meta[i] = TxMeta {
                dst,
                sock,
                len: 1,
                body: NO_BODY,
                body_n: 0,
                total: 1,
                sent: false,
            };
        }
        tx.len = 3;
        let mut stats = IoStats::default();
        assert!(!tx.send_queued(&socks, &mut stats), "all sent");
        let mut got = Vec::new();
        let mut b = [0u8; 8];
        for _ in 0..3 {
            let n = rx.recv(&mut b)?;
            got.push(b[..n].to_vec());
        }
        assert_eq!(got, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        Ok(())
    }
}
