//! One endpoint's datagram I/O: its UDP sockets, receiving (`rx.rs`),
//! direct placement into application buffers (`place.rs`) and transmitting
//! (`tx.rs`). No allocation and no per-packet syscall once a batch forms:
//! receives are `recvmmsg` batches (coalesced by the kernel with `UDP_GRO`),
//! sends `sendmmsg` batches of segmented runs (`UDP_SEGMENT`).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use spray::{Engine, Instant};

use crate::io::buf::FfiBuf;
use crate::io::clock;
use crate::io::place::Placer;
use crate::io::rx::Rx;
use crate::io::tx::{self, Tx};

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
    /// Segmented sends (UDP GSO, more than one datagram each).
    pub tx_gso_sends: u64,
    /// Datagrams that left in segmented sends.
    pub tx_gso_packets: u64,
    /// Times the kernel refused a segmented send and GSO was turned off.
    pub tx_gso_fallbacks: u64,
    /// Receives that held several datagrams coalesced (GRO).
    pub rx_gro_datagrams: u64,
    /// Datagrams that arrived coalesced.
    pub rx_gro_packets: u64,
    /// Of `rx_guessed`, segments of coalesced datagrams received straight
    /// into their places (`Placer::recv_chain`).
    pub rx_chained: u64,
}

/// One endpoint's sockets and batch buffers.
pub struct Io {
    /// One per path; `socks[0]` receives.
    socks: Vec<OwnedFd>,
    rx: Rx,
    place: Placer,
    tx: Tx,
    /// What happened so far.
    pub stats: IoStats,
}

// SAFETY: the raw pointers inside the header arrays point only into this struct's
// own heap buffers (which never reallocate after `new`), and the body pointers of
// queued packets into application send buffers that stay valid until their
// operation completes (and `flush` copies them out before returning if a packet
// must wait); the Io moves between threads only as a whole, under the endpoint lock.
unsafe impl Send for Io {}

/// What the kernel and the options let an endpoint use.
#[derive(Copy, Clone, Debug)]
pub struct Offloads {
    /// Segmented sends (UDP GSO).
    pub gso: bool,
    /// Coalesced receives (UDP GRO).
    pub gro: bool,
}

impl Io {
    /// A driver over `socks` (`socks[0]` receives) for datagrams of at most
    /// `max_datagram` bytes, receiving up to `batch` per syscall, with the
    /// offloads asked for that the kernel has.
    pub fn new(socks: Vec<OwnedFd>, max_datagram: usize, batch: usize, want: Offloads) -> Io {
        let batch = batch.clamp(1, 1024);
        let slot_bytes = max_datagram.max(64);
        let gso = want.gso && socks.iter().all(|s| tx::gso_supported(s.as_raw_fd()));
        let rx = Rx::new(socks[0].as_raw_fd(), max_datagram, batch, want.gro);
        Io {
            tx: Tx::new(socks.len(), slot_bytes, tx_batch(slot_bytes, batch), gso),
            place: Placer::new(batch),
            rx,
            socks,
            stats: IoStats::default(),
        }
    }

    /// The sockets are `per_rail` per rail (`sock::open_rails`): path
    /// `r * per_rail + i` leaves from rail `r`'s sockets.
    pub fn set_rails(&mut self, per_rail: usize) {
        self.tx.set_rails(per_rail);
    }

    /// The offloads in use.
    pub fn offloads(&self) -> Offloads {
        Offloads {
            gso: self.tx.gso(),
            gro: self.rx.gro,
        }
    }

    /// The receiving socket.
    pub fn rx_fd(&self) -> RawFd {
        self.socks[0].as_raw_fd()
    }

    /// Did the last receive call fill every entry it asked for (so the socket
    /// may hold more)? When it did not, the kernel found the queue empty behind it.
    pub fn rx_may_have_more(&self) -> bool {
        self.rx.full
    }

    /// The last receive found a burst's first flowlet: receive its tail
    /// before transmitting (see `Rx::tail`).
    pub fn rx_tail_expected(&self) -> bool {
        self.rx.tail
    }

    /// One receive call on socket 0: `f(at, from, bytes, seg)` per datagram,
    /// a coalesced one whole with its segment size (see `Rx::recv_at`). Returns how many arrived (0: drained for now).
    pub fn recv_at(
        &mut self,
        now_ns: u64,
        f: impl FnMut(Instant, SocketAddr, &[u8], usize),
    ) -> usize {
        let fd = self.socks[0].as_raw_fd();
        self.rx.recv_at(fd, now_ns, &mut self.stats, f)
    }

    /// Receive up to `max` datagrams, rendezvous data straight into the
    /// application's buffers (see `Placer::recv_placed`). Worth it only while
    /// `engine.expects_rdata()`.
    pub fn recv_placed(&mut self, engine: &mut Engine<FfiBuf>, max: usize) -> usize {
        // (Its receives are not probes: no tail expected after them.)
        self.rx.tail = false;
        let fd = self.socks[0].as_raw_fd();
        self.place
            .recv_placed(&mut self.rx, fd, engine, max, &mut self.stats)
    }

    /// Send everything the engine has (and what an earlier flush could not send),
    /// the first batch built at `now` (see `Tx::flush`). Returns true when the
    /// engine had nothing more to send (false: the kernel refused some for
    /// now, call again).
    pub fn flush(&mut self, engine: &mut Engine<FfiBuf>, now: Instant) -> bool {
        let now = self.rx.engine_time(now.as_nanos());
        let last = &mut self.rx.last_ns;
        let mut time = || {
            *last = (*last).max(clock::now_ns());
            Instant::from_nanos(*last)
        };
        self.tx
            .flush(&self.socks, engine, now, &mut time, &mut self.stats)
    }
}

/// Packets queued per flush round: `batch`, and with room for 4 whole
/// flowlets of the default 64 KiB of datagrams (the engine counts a flowlet
/// in whole datagrams, 44 at MTU 1500: 4 x 44, not 178, so that a round does
/// not end 2 packets into a flowlet), but no more than about 1 MiB of slots.
fn tx_batch(slot_bytes: usize, batch: usize) -> usize {
    let flowlets = (4 * (65_536 / slot_bytes)).min(256);
    batch.max(flowlets).min((1 << 20) / slot_bytes).max(1)
}
