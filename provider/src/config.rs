//! Endpoint configuration: every tunable the engine has, with its unit.

use core::net::SocketAddr;
use core::time::Duration;

/// What kind of libfabric endpoint the engine serves.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EpMode {
    /// `FI_EP_RDM`: reliable messages of any size, tag matching, send-order matching.
    Rdm,
    /// `FI_EP_DGRAM`: the SRD layer itself, datagrams of at most one packet's payload,
    /// delivered reliably, exactly once, in any order.
    Dgram,
}

/// Key material of a job key (libfabric `auth_key`, or `FI_SPRAY_AUTH_KEY`):
/// any bytes, hashed into the 256-bit key the MACs use (`srd/auth.rs`).
/// Its `Debug` shows the length only, so a logged config never leaks it.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey(pub Vec<u8>);

impl core::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "AuthKey({} bytes)", self.0.len())
    }
}

/// Configuration of one endpoint's engine.
#[derive(Clone, Debug)]
pub struct Config {
    /// RDM or DGRAM semantics.
    pub mode: EpMode,
    /// The endpoint's own address: IP and main UDP port (the port of path 0,
    /// the one socket that receives). Peers know us by this address.
    pub local: SocketAddr,
    /// Incarnation nonce, carried in every header: an unguessable 64-bit
    /// value, new for every engine (the FFI draws it from the OS's random
    /// source). It is compared only for equality, never ordered: a restarted
    /// process on the same address is told apart by a nonce that differs
    /// (and by a completed handshake), not by a larger one. 0 is read as 1.
    pub nonce: u64,
    /// Per-endpoint secret keying the session cookies (SipHash-2-4, 128
    /// bits; mixed with `nonce`). Must be unguessable and new for every
    /// engine (the FFI draws it from the OS). The default is a fixed value
    /// for tests and the simulator only.
    pub secret: [u8; 16],
    /// Job key: with one, every packet carries a MAC keyed from it (and
    /// from both incarnations' nonces, per session and direction), and only
    /// packets with a valid MAC are accepted; without one, packets carry no
    /// MAC and packets that do are refused. Endpoints of one job share it.
    /// An empty key counts as none.
    pub auth_key: Option<AuthKey>,
    /// Most peers this endpoint keeps state for. A peer a remote handshake
    /// would add beyond it is refused (counted in `rx_peer_limit`); peers the
    /// application names itself are always added.
    pub max_peers: u32,
    /// A peer with nothing queued, in flight or owed and no traffic for this
    /// long has its per-peer state reclaimed (buffers, path and congestion
    /// history); its session (nonce, token, packet numbers) stays, so it
    /// resumes without a handshake.
    pub peer_idle_timeout: Duration,
    /// A peer with nothing queued, in flight or owed and no traffic for this
    /// long gives back its send ring and path records, keeping each path's
    /// RTT and health in 4 bytes: an idle peer then costs about 3 KB, not
    /// the ring its largest flight needed (up to 754 KB). Shorter than
    /// `peer_idle_timeout`, which also drops the congestion history.
    pub peer_trim_after: Duration,
    /// Most stateless replies (CHALLENGEs to HELLOs, RESETs to packets of no
    /// session) per second, across all sources: a forged flood cannot make
    /// this endpoint a reflector beyond it.
    pub stateless_per_sec: u32,
    /// Seed for every random choice the engine makes (path picks, jitter).
    pub seed: u64,
    /// Number of entropy values (UDP source ports, one socket each) = paths
    /// per peer, 1..=64. Each path is sent from a socket of its own; socket 0
    /// is the main one (the FFI driver sends path `i` from socket `i + 1`, the
    /// last from socket 0, so a single-path peer's sockets can be connected).
    pub paths: u8,
    /// Rails: the endpoint's IP addresses, one per NIC, rail 0 first (it
    /// must be `local`'s IP; the FFI sets it so). With two or more, the
    /// endpoint receives at every one of them on `local`'s port, sends each
    /// rail's paths from sockets bound to that rail's address (`paths`
    /// sockets per rail: path `r * paths + i` is entropy value `i` of rail
    /// `r`) and sprays a peer that has rails too over both (rail `r` with
    /// its rail `r`, `PROTOCOL.md` §5.1). Empty or one address: one rail,
    /// and nothing on the wire or in the engine changes. At most
    /// `wire::rails::MAX_RAILS`; `rails × paths` at most 64.
    pub rails: Vec<core::net::IpAddr>,
    /// Paths to peers on this host (a loopback address, or this endpoint's own
    /// IP): there is no ECMP fabric to spray over there, and cycling through
    /// many sockets costs about a microsecond per message on loopback. 1..=paths.
    pub local_paths: u8,
    /// Largest UDP payload we send, in bytes (interface MTU minus IP/UDP headers).
    pub max_datagram: usize,
    /// A peer that acknowledges nothing for this long is declared unreachable and
    /// every datagram outstanding to it fails back with an error.
    pub unreachable_timeout: Duration,
    /// Longest time the receiver holds back an acknowledgement to batch it.
    pub ack_delay: Duration,
    /// How long the receiver holds the acknowledgement of a DATA packet that
    /// ends its sender's queue (no MORE flag) when no ack is due sooner: that
    /// sender may wait on this ack to complete a send (a send completes once
    /// acknowledged) and, in an exchange, no reply carries it. Short, yet
    /// long enough for an application that answers at once (a ping-pong) to
    /// carry the ack on its reply instead of a packet of its own. At most
    /// `ack_delay`. A peer whose answers come later gets a longer hold,
    /// learned from them, up to `ack_delay` (PROTOCOL.md §3 "Answers
    /// learned"); 0 acknowledges at once.
    pub ack_soon: Duration,
    /// How long the receiver may hold the acknowledgement of DATA flagged
    /// LAZY (no completion waits on it: an inject): long enough that, in a
    /// collective's exchanges, the next message to that peer carries it,
    /// where a pure ACK costs both hosts a system call and, on a loaded
    /// host, the CPU of a rank that had work. The sender's loss timers wait
    /// this much longer for such packets, so a lost lazy tail is found this
    /// much later. At least `ack_delay`; at most half of `min_rto` (the
    /// retransmission timer must not fire on a held ack).
    pub ack_lazy: Duration,
    /// Most of the receiver-reported ack hold time (its delayed ack plus the
    /// time our packets waited in the receiving host, e.g. while its process
    /// was not scheduled) the congestion window covers on top of the network
    /// RTT. Such packets wait in the receiver's socket buffer, not the
    /// network; the bound keeps a slow receiver's buffer from overflowing.
    pub max_host_delay: Duration,
    /// Acknowledge at once after this many unacknowledged data packets.
    pub ack_every: u32,
    /// Take the segments of a coalesced datagram that continue the one
    /// before (same sender, instant, length and header but for the PSN)
    /// without parsing, admitting and acking each again (`Srd::handle_datagram`).
    /// The message layer's shortcut for the segments of one message
    /// (`MsgLayer::next_segment`) follows this switch too.
    /// Off only to compare with the full path (`engine_rx_continuation.rs`).
    pub rx_continuation: bool,
    /// Lower bound of the retransmission timer.
    pub min_rto: Duration,
    /// Upper bound of the retransmission timer after backoff (the SRD
    /// also keeps it within `unreachable_timeout` / 16).
    pub max_rto: Duration,
    /// Initial congestion window, in packets.
    pub initial_window: u32,
    /// The receiver's credit budget, packets: with several active senders, each
    /// may have this many packets divided by their number in flight beyond its
    /// cumulative ack (at least 1). Size it to the buffer in front of this
    /// receiver (the bottleneck of an incast), not to the path's BDP.
    pub rx_credit_packets: u32,
    /// Before overflow first cuts the budget (repairs that are a share of
    /// the traffic, see PROTOCOL.md "Effective budget"), it grows (an
    /// eighth per 10 ms) up to this many times `rx_credit_packets` while two
    /// or more senders wait for credit: where nothing overflows, the
    /// configured size is a guess that may hold senders back (a receiver
    /// that answers late, ranks sharing CPUs). The first cut takes it back
    /// to `rx_credit_packets` and the usual cuts. 1 = never above it.
    pub rx_credit_room: u32,
    /// Packets a sender may have in flight to a peer before the peer's first
    /// acknowledgement (and with it a receiver credit) arrives: the only
    /// traffic no receiver controls, so it bounds the first round trip of an
    /// incast. At least 1.
    pub unscheduled_packets: u32,
    /// Most bytes of unexpected (not yet matched) message data held per endpoint;
    /// past it senders are held back (nothing is dropped).
    pub max_unexpected_bytes: usize,
    /// Most unexpected (not yet matched) messages held per endpoint, counted
    /// whatever their size (a rendezvous request holds a record too); past it
    /// senders are held back (nothing is dropped). A sender's share towards
    /// one peer is this / `msg::CREDIT_SHARES`.
    pub max_unexpected_msgs: usize,
    /// Most operations this endpoint initiated and has not completed (sends,
    /// injects, RMA, atomics; libfabric's `tx_attr->size`): past it a post is
    /// refused with `OpError::Again` until some complete. At least 1.
    pub max_tx_ops: usize,
    /// Most receives posted and not completed (libfabric's `rx_attr->size`);
    /// past it a post is refused with `OpError::Again`. At least 1.
    pub max_rx_ops: usize,
    /// Messages up to this size go eagerly; larger use rendezvous (message
    /// layer), bytes. 256 KiB: between 2 hosts at MTU 1500, the RTS/CTS
    /// round trip and the CTS's handling cost a 128-256 KiB message 10-20 %
    /// of its time (Intel MPI's IMB PingPong 128 KiB 73.9 -> 62.1 us, 256
    /// KiB 129 -> 115 us; Exchange 512 KiB 852 -> 677 us), while eager data
    /// that finds no receive costs a copy more. The receiver's eager credit
    /// (`max_unexpected_bytes` / 64 a peer: 1 MiB by default) still bounds
    /// what a sender may push unasked.
    pub eager_limit: usize,
    /// New data sent on one path in a row before the next path's turn (a
    /// flowlet), bytes of datagrams (`max_datagram` each, headers included,
    /// so that 64 KiB is one segmented send); at least one packet and at
    /// most 64. A driver can then
    /// hand a flowlet to the kernel as one segmented send (UDP GSO, at most
    /// 64 KiB) and the receiving host can coalesce it (GRO); paths still take
    /// turns flowlet by flowlet. 0 = per-packet spraying.
    pub flowlet_bytes: usize,
}

impl Config {
    /// Defaults suited to a LAN / loopback, for an endpoint at `local`.
    pub fn new(mode: EpMode, local: SocketAddr) -> Self {
        Config {
            mode,
            local,
            nonce: 1,
            secret: *b"spray test key!!",
            auth_key: None,
            seed: 0x5eed,
            paths: 8,
            rails: Vec::new(),
            local_paths: 1,
            max_datagram: 1472,
            unreachable_timeout: Duration::from_secs(5),
            ack_delay: Duration::from_micros(50),
            ack_soon: Duration::from_micros(5),
            ack_lazy: Duration::from_micros(500),
            max_host_delay: Duration::from_millis(4),
            ack_every: 16,
            rx_continuation: true,
            min_rto: Duration::from_millis(2),
            max_rto: Duration::from_secs(1),
            initial_window: 64,
            rx_credit_packets: 64,
            rx_credit_room: 4,
            unscheduled_packets: 1,
            max_unexpected_bytes: 64 << 20,
            max_unexpected_msgs: 64 << 10,
            max_tx_ops: 16 << 10,
            max_rx_ops: 16 << 10,
            eager_limit: 256 << 10,
            max_peers: 1 << 16,
            peer_idle_timeout: Duration::from_secs(120),
            peer_trim_after: Duration::from_secs(1),
            stateless_per_sec: 200_000,
            flowlet_bytes: 64 << 10,
        }
    }
}
