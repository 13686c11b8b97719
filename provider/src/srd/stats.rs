//! Counters of the SRD core (`Srd::stats`).

/// Counters of everything the core did or dropped.
#[derive(Clone, Debug, Default)]
pub struct SrdStats {
    /// Packets handed out by `poll_transmit`.
    pub tx_packets: u64,
    /// Bytes handed out by `poll_transmit` (headers included).
    pub tx_bytes: u64,
    /// DATA packets sent (first transmissions and retransmissions).
    pub tx_data: u64,
    /// Pure ACK packets sent.
    pub tx_acks: u64,
    /// RESET packets sent (to packets of a session we do not hold).
    pub tx_resets: u64,
    /// HELLOs started (handshakes this side opened; resends not counted).
    pub tx_hellos: u64,
    /// CHALLENGEs sent (answers to HELLOs, stateless).
    pub tx_challenges: u64,
    /// Stateless replies (CHALLENGE, RESET) not sent: over the rate limit.
    pub stateless_dropped: u64,
    /// Handshakes this side opened that completed (a CHALLENGE echoed ours).
    pub handshakes: u64,
    /// Sessions a peer opened with us (its first packet carrying our cookie).
    pub sessions_accepted: u64,
    /// DATA retransmissions.
    pub retransmits: u64,
    /// Packets declared lost (per-path ordering, overdue, or RTO).
    pub lost: u64,
    /// Packets declared lost because 3 later ones on their path were acked.
    pub lost_by_count: u64,
    /// Packets declared lost by the per-path reorder window (RACK).
    pub lost_by_time: u64,
    /// Packets declared lost as overdue (later packets on other paths acked).
    pub lost_overdue: u64,
    /// Packets declared lost by the retransmission timer (the last resort).
    pub rto_lost: u64,
    /// Tail-loss probes sent (a resent packet, or a `tail_asks` PROBE).
    pub tail_probes: u64,
    /// Tail-loss probes sent as a PROBE asking for an immediate ack instead
    /// of a data copy (a sender held to a packet or two by a fan-in: its
    /// tail is queued far more often than lost); a confirmed loss is resent
    /// at once.
    pub tail_asks: u64,
    /// Retransmission timeouts: the timer expired and the peer, alive
    /// (heard since our last probe), had not acked the oldest packet in
    /// flight, which is resent with the bandwidth cut.
    pub timeouts: u64,
    /// Retransmission-timer expiries with the peer silent since our last
    /// probe (a receiver not running, not a loss): answered by a PROBE
    /// asking for its ack, no resend, no cut (see `Peer::on_rto_timer`).
    pub stall_probes: u64,
    /// Packets resent from a slow path's queue at a transfer's tail.
    pub tail_hedges: u64,
    /// Credit probes sent (held at 0 credit, no grant heard for a while).
    pub credit_probes: u64,
    /// The receiver's effective credit budget after its latest cut, packets
    /// (0 = never cut).
    pub budget_after_cut: u64,
    /// Cuts of the receiver's effective credit budget (repairs arriving as
    /// an overflowing buffer's do, see PROTOCOL.md "Effective budget").
    pub budget_cuts: u64,
    /// Lost-declared packets later acked (the loss was spurious).
    pub spurious_losses: u64,
    /// Retransmitted packets acked too soon for the resent copy.
    pub spurious_retransmits: u64,
    /// Retransmission timeouts undone: packets sent before them were acked after.
    pub spurious_timeouts: u64,
    /// Times new data waited for the congestion window.
    pub window_limited: u64,
    /// Packets received (any type, parsed or not).
    pub rx_packets: u64,
    /// Of those, DATA taken as the next segment of the one before
    /// (`Srd::continuation`: not parsed, admitted or acked again).
    pub rx_continued: u64,
    /// Of those, DATA taken in a train (`Srd::handle_train`: only the header
    /// compared and the receive window updated).
    pub rx_train: u64,
    /// New datagrams delivered up.
    pub rx_delivered: u64,
    /// DATA packets already received (dropped, re-acked).
    pub rx_duplicates: u64,
    /// DATA packets outside the receive window (dropped).
    pub rx_out_of_window: u64,
    /// Packets that failed to parse.
    pub rx_malformed: u64,
    /// Packets from an earlier incarnation of their sender (a retired
    /// nonce with a cookie once valid; dropped).
    pub rx_stale_src: u64,
    /// Packets from a known peer whose token is wrong (forged, or of a
    /// session that is over; dropped), and CHALLENGEs / RESETs that echo
    /// nothing of ours.
    pub rx_bad_token: u64,
    /// Packets from an address we hold no session with, whose token is not
    /// our cookie (forged, or for an incarnation of ours that is gone;
    /// dropped, no state kept; DATA / PROBE answered by a rate-limited RESET).
    pub rx_no_session: u64,
    /// Packets whose MAC tag is wrong (forged or altered on the way, or of
    /// another job, session or direction; dropped before they touch any
    /// state). Only with a job key.
    pub rx_bad_mac: u64,
    /// Packets without a MAC while we have a job key (an endpoint without
    /// the key, or a forgery; dropped).
    pub rx_mac_missing: u64,
    /// Packets with a MAC while we have no job key (an endpoint with a key
    /// we lack; dropped).
    pub rx_mac_unexpected: u64,
    /// RESETs that echoed our token (each may start a check handshake).
    pub rx_resets: u64,
    /// Sessions refused because `max_peers` peers exist.
    pub rx_peer_limit: u64,
    /// Acks acknowledging PSNs never sent (ignored).
    pub rx_bad_ack: u64,
    /// Datagrams acknowledged.
    pub acked: u64,
    /// Datagrams failed back.
    pub failed: u64,
    /// Peer restarts seen.
    pub peer_restarts: u64,
    /// Peers declared unreachable.
    pub unreachable: u64,
    /// Peers held now (each created by the application or a completed
    /// handshake; at most `Config::max_peers` from handshakes).
    pub peers: u64,
    /// Idle peers whose state was reclaimed (see `Config::peer_idle_timeout`).
    pub peers_reclaimed: u64,
    /// Quiet peers that gave back their send ring and path records (see
    /// `Config::peer_trim_after`).
    pub peers_trimmed: u64,
    /// Peers visited by `poll_transmit` and `handle_timeout`: grows with the
    /// peers in use (the `active` list), not with every peer ever met.
    pub peer_polls: u64,
    /// RAILS packets sent (our rail addresses, to peers with rails too).
    pub tx_rails: u64,
    /// HELLOs sent to check that a peer's rail address is the peer's.
    pub tx_rail_checks: u64,
    /// RAILS packets received (in a session).
    pub rx_rails: u64,
    /// RAILS received but not used (one rail here, or a peer on this host).
    pub rx_rails_ignored: u64,
    /// Peers' rails found to be theirs (their check came back): in use.
    pub rails_valid: u64,
    /// Peers' rails not used: an address we cannot or must not send to
    /// (another peer's, ours, another family), or a check answered by
    /// another incarnation.
    pub rails_refused: u64,
    /// DATA packets sent per path index.
    pub path_sent: Vec<u64>,
    /// Packets declared lost per path index.
    pub path_lost: Vec<u64>,
}

/// One path (entropy value) towards one peer, as `Srd::peer_stats` reports it.
#[derive(Clone, Debug)]
pub struct PathStats {
    /// Path index (entropy value; with rails, rail blocks follow rail 0's).
    pub path: u8,
    /// The rail it uses (0 = the main address's; always 0 with one rail).
    pub rail: u8,
    /// Health now.
    pub health: super::Health,
    /// DATA packets sent (first transmissions and retransmissions).
    pub sent_packets: u64,
    /// Payload bytes sent.
    pub sent_bytes: u64,
    /// Retransmissions sent on this path.
    pub retransmits: u64,
    /// Packets declared lost on this path.
    pub lost: u64,
    /// Packets sent once and acknowledged on this path.
    pub acked_packets: u64,
    /// Payload bytes of `acked_packets`.
    pub acked_bytes: u64,
    /// Smoothed RTT, ns (0 = no sample).
    pub srtt_ns: u64,
    /// Smallest RTT sample, ns (0 = none).
    pub min_rtt_ns: u64,
    /// Measured delivery rate, bytes/s (0 = no sample).
    pub rate_bps: u64,
}

/// Counters and state of one peer, as `Srd::peer_stats` reports it.
#[derive(Clone, Debug)]
pub struct PeerStats {
    /// The peer.
    pub peer: crate::dgram::PeerId,
    /// Its main address.
    pub addr: core::net::SocketAddr,
    /// Smoothed RTT over all paths, ns (0 = none).
    pub srtt_ns: u64,
    /// Smallest RTT of any path, ns (0 = none).
    pub min_rtt_ns: u64,
    /// Current retransmission timeout, ns.
    pub rto_ns: u64,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Pacing rate, bytes/s (0 = unpaced).
    pub pacing_rate_bps: u64,
    /// Bottleneck bandwidth estimate, bytes/s (0 = none).
    pub bandwidth_bps: u64,
    /// Bytes in flight now.
    pub bytes_in_flight: u64,
    /// Retransmissions sent (sum over paths).
    pub retransmits: u64,
    /// Packets declared lost (sum over paths).
    pub lost: u64,
    /// Retransmission-timer expiries.
    pub rtos: u64,
    /// Tail-loss probes.
    pub tail_probes: u64,
    /// Longest flowlet now, packets (see `PathSet::on_flowlet_acked`).
    pub flowlet_cap_pkts: u32,
    /// Flowlets whose acks came spread (the cap halved) / tight (it grew).
    pub flowlet_spread: u64,
    pub flowlet_tight: u64,
    /// Every path, by index.
    pub paths: Vec<PathStats>,
}

impl super::Srd {
    /// Counters and state of every peer (for on-demand statistics dumps;
    /// allocates, so not for the data path).
    pub fn peer_stats(&self) -> Vec<PeerStats> {
        use super::cc::Controller;
        self.peers
            .iter()
            .map(|p| {
                let paths: Vec<PathStats> = p
                    .paths
                    .paths
                    .iter()
                    .enumerate()
                    .map(|(i, x)| PathStats {
                        path: i as u8,
                        rail: p.rail_of_path(&self.p, i),
                        health: x.health,
                        sent_packets: x.sent,
                        sent_bytes: x.sent_bytes,
                        retransmits: x.retransmits,
                        lost: x.lost,
                        acked_packets: x.acked,
                        acked_bytes: x.acked_bytes,
                        srtt_ns: x.srtt_ns,
                        min_rtt_ns: if x.min_rtt_ns == u64::MAX {
                            0
                        } else {
                            x.min_rtt_ns
                        },
                        rate_bps: x.rate_bps,
                    })
                    .collect();
                PeerStats {
                    peer: p.id,
                    addr: p.addr,
                    srtt_ns: p.srtt_ns,
                    min_rtt_ns: p.paths.min_rtt().unwrap_or(0),
                    rto_ns: p.rto_ns(&self.p),
                    cwnd_bytes: p.cc.window(),
                    pacing_rate_bps: p.cc.pacing_rate().unwrap_or(0),
                    bandwidth_bps: p.cc.bandwidth(),
                    bytes_in_flight: p.tx.bytes_in_flight,
                    retransmits: p.paths.retired_retransmits
                        + paths.iter().map(|x| x.retransmits).sum::<u64>(),
                    lost: p.paths.retired_lost + paths.iter().map(|x| x.lost).sum::<u64>(),
                    rtos: p.paths.rtos,
                    tail_probes: p.paths.tail_probes,
                    flowlet_cap_pkts: p.paths.flowlet_cap(),
                    flowlet_spread: p.paths.flowlet_spread,
                    flowlet_tight: p.paths.flowlet_tight,
                    paths,
                }
            })
            .collect()
    }
}
