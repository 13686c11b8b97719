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
    /// RESET packets sent.
    pub tx_resets: u64,
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
    /// Tail-loss probes sent.
    pub tail_probes: u64,
    /// Retransmission-timer expiries.
    pub timeouts: u64,
    /// Lost-declared packets later acked (the loss was spurious).
    pub spurious_losses: u64,
    /// Retransmitted packets acked too soon for the resent copy.
    pub spurious_retransmits: u64,
    /// Times new data waited for the congestion window.
    pub window_limited: u64,
    /// Packets received (any type, parsed or not).
    pub rx_packets: u64,
    /// New datagrams delivered up.
    pub rx_delivered: u64,
    /// DATA packets already received (dropped, re-acked).
    pub rx_duplicates: u64,
    /// DATA packets outside the receive window (dropped).
    pub rx_out_of_window: u64,
    /// Packets that failed to parse.
    pub rx_malformed: u64,
    /// Packets from an older epoch of their sender (dropped).
    pub rx_stale_src: u64,
    /// Packets addressed to another epoch of ours (dropped, answered by RESET).
    pub rx_stale_dst: u64,
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
    /// DATA packets sent per path index.
    pub path_sent: Vec<u64>,
    /// Packets declared lost per path index.
    pub path_lost: Vec<u64>,
}
