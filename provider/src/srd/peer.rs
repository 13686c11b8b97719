//! One peer: its session (nonce, tokens), send and receive state, paths,
//! congestion controller and timers, plus the session resets (peer restart,
//! unreachable).

use core::net::SocketAddr;
use std::collections::VecDeque;

use super::cc::Cc;
use super::path::{PathSet, INITIAL_RTT};
use super::pool::Pool;
use super::recovery::Recovery;
use super::rx::Rx;
use super::timer::{Timer, TimerTable};
use super::tx::{SlotState, Tx};
use super::SrdStats;
use crate::dgram::{DgramEvent, FailReason, PeerId};
use crate::time::Instant;

/// Shortest bandwidth sample, ns (see `Peer::bw_sample`).
const BW_SAMPLE_MIN_NS: u64 = 1_000_000;
/// Longest span a bandwidth sample waits for (a queue-long RTT), ns.
const BW_SAMPLE_MAX_NS: u64 = 8_000_000;

/// Tunables copied out of `Config`, in the units the core computes with.
#[derive(Clone, Debug)]
pub struct Params {
    /// Our incarnation nonce (never 0).
    pub nonce: u64,
    /// Our main UDP port (header `src_port`).
    pub port: u16,
    /// Paths per peer (per rail, with rails).
    pub paths: u8,
    /// Our rails' IPs, rail 0 (`local_ip`) first; empty with one rail
    /// (`rails.rs`).
    pub rail_ips: Vec<core::net::IpAddr>,
    /// Paths per peer on this host (see `Config::local_paths`).
    pub local_paths: u8,
    /// Our IP address (which peers are on this host).
    pub local_ip: core::net::IpAddr,
    /// Largest payload, bytes.
    pub max_payload: usize,
    /// Delayed-ack time, ns.
    pub ack_delay_ns: u64,
    /// Ack hold after a DATA packet without MORE, ns (`Config::ack_soon`).
    pub ack_soon_ns: u64,
    /// Ack hold after LAZY DATA, ns (`Config::ack_lazy`).
    pub ack_lazy_ns: u64,
    /// Most receiver hold time the congestion window covers, ns.
    pub max_host_delay_ns: u64,
    /// Ack after this many data packets.
    pub ack_every: u32,
    /// RTO bounds, ns.
    pub min_rto_ns: u64,
    /// RTO upper bound, ns.
    pub max_rto_ns: u64,
    /// Unreachable timeout, ns.
    pub unreachable_ns: u64,
    /// Initial window, packets.
    pub initial_window: u32,
    /// The receiver's credit budget shared among its active senders, packets.
    pub credit_budget: u32,
    /// How many times `credit_budget` the budget may grow to before any
    /// loss (`Config::rx_credit_room`).
    pub credit_room: u32,
    /// Packets in flight before the first credit arrives.
    pub unscheduled: u32,
    /// Seed for per-peer random choices.
    pub seed: u64,
    /// New data packets per path in a row (see `Config::flowlet_bytes`).
    pub flowlet: u32,
    /// Where a packet's payload starts, bytes: the header, and the tag
    /// with a job key.
    pub head: usize,
    /// `flags::MAC` with a job key (every packet carries a tag), else 0.
    pub mac_flag: u8,
    /// `Config::rx_continuation`.
    pub rx_continuation: bool,
}

/// Shared state a peer's methods need from the endpoint.
pub struct Ctx<'a> {
    /// Tunables.
    pub p: &'a Params,
    /// Reports for the layer above.
    pub events: &'a mut VecDeque<DgramEvent>,
    /// Payload buffers.
    pub pool: &'a mut Pool,
    /// Counters.
    pub stats: &'a mut SrdStats,
    /// Credit (packets beyond the cumulative ack) granted to each sender now.
    pub credit: u16,
    /// Set when the receiver's fair share must be recomputed at once.
    pub recount: &'a mut bool,
}

/// Most packets of the initial window that the congestion window keeps as
/// its floor (`Peer::new`): a first flight of up to this many packets (and
/// `MIN_WINDOW_BYTES`) is never window-limited later either.
const MIN_WINDOW_FLIGHT: u32 = 64;

/// Most bytes of that floor: 64 packets at MTU 1500 (90 KB); at MTU 9000 and
/// on loopback the ack-batching floor (36 packets) is larger and stays.
const MIN_WINDOW_BYTES: u64 = 128 << 10;

/// Everything we know about one remote endpoint.
pub struct Peer {
    /// Our id for it.
    pub id: PeerId,
    /// Its main address.
    pub addr: SocketAddr,
    /// Its incarnation nonce in our session (0 = no session yet).
    pub remote_nonce: u64,
    /// The session token we put in `dst_token` (valid when `remote_nonce` is).
    pub token: u64,
    /// Our own cookie for its incarnation: accepted as a token besides
    /// `token` (the two differ when both sides started a handshake).
    pub own_cookie: u64,
    /// Nonces of its earlier incarnations (most recent first): their late
    /// packets are dropped, even with a cookie that was once valid.
    pub retired_nonces: [u64; super::session::RETIRED],
    /// The session's MAC keys (with a job key, once a session is up).
    pub(crate) keys: Option<Box<super::auth::PeerKeys>>,
    /// Its rails, when both sides have several (`rails.rs`); `None` otherwise.
    pub(crate) rails: Option<Box<super::rails::PeerRails>>,
    /// Our handshake under way (HELLO sent, CHALLENGE awaited).
    pub(crate) hs: Option<super::session::Pending>,
    /// A HELLO must go out.
    pub hs_due: bool,
    /// When a RESET last made us check the session (rate limit).
    pub last_verify: Option<Instant>,
    /// Holds no state worth reclaiming (new, or reclaimed, and unused since).
    pub reclaimed: bool,
    /// Gave its send ring and path records back (`Peer::trim`), unused since.
    pub trimmed: bool,
    /// When a packet last came from it or went to it.
    pub last_active: Instant,
    /// Send state.
    pub tx: Tx,
    /// Receive state.
    pub rx: Rx,
    /// Paths towards it.
    pub paths: PathSet,
    /// Congestion controller (`cc/`).
    pub cc: Cc,
    /// Timers.
    pub timers: TimerTable,
    /// The RTO, tail-probe and unreachable timers lag the state: DATA left
    /// since `update_timers` last ran. `send_data` leaves them to the end of
    /// the peer's burst (`Srd::poll_transmit`; `Srd::handle_timeout` and
    /// `next_deadline` catch up before reading them): recomputing them for
    /// every packet of a 48-packet flowlet was 3 % of the engine's work.
    pub timers_stale: bool,
    /// Loss recovery: tail probes, stall probes, the retransmission timer,
    /// hedging (`recovery.rs`).
    pub recovery: Recovery,
    /// Smoothed RTT over all paths, ns (0 = none).
    pub srtt_ns: u64,
    /// RTT variation over all paths, ns.
    pub rttvar_ns: u64,
    /// When the latest new DATA packet arrived from this peer.
    pub rx_last_data: Option<Instant>,
    /// When the latest DATA packet left.
    pub last_data_sent: Instant,
    /// That packet was flagged LAZY: its ack may come `ack_lazy_ns` late.
    pub last_data_lazy: bool,
    /// The layer above holds more for this peer than our queue took
    /// (`Datagrams::set_backlog`): DATA carries MORE even when our queue
    /// runs dry.
    pub backlog: bool,
    /// Pacing tokens, bytes (may go negative by one packet).
    pub pacing_tokens: i64,
    /// The last `flowlet_packets` result and the pacing rate it was for
    /// (rate, packets): it changes with the rate, on acks, and was a
    /// division per packet sent.
    pub flowlet_memo: (u64, u32),
    /// When the tokens were last refilled.
    pub pacing_at: Instant,
    /// The first flight, bytes (the window's floor): what the pacing
    /// bucket holds where the rate sends it quickly (see `paced_until`).
    pub pacing_burst: u64,
    /// When a packet of ours was last declared lost (not a probe).
    pub lost_at: Instant,
    /// Sender: a credit probe (PROBE with MORE) must go out: we hold data,
    /// nothing is in flight and the receiver's grant is 0.
    pub credit_probe_due: bool,
    /// Sender: credit probes sent since the last nonzero grant (back-off).
    pub credit_probes: u32,
    /// Sender: when the receiver's latest credit arrived.
    pub credit_heard_at: Instant,
    /// Receiver: the sender's latest DATA (or PROBE) said it has more to send.
    pub rx_more: bool,
    /// Receiver: when `rx_more` was last confirmed.
    pub rx_more_at: Instant,
    /// Receiver: since when this sender waits for a grant (scheduling order).
    pub rx_wait_since: Instant,
    /// Receiver: this sender's grant is one packet above the fair share
    /// (it holds a share of the budget's remainder, see `share_remainder`).
    pub rx_credit_extra: bool,
    /// Receiver, scheduled mode: this sender holds one of the budget's slots.
    pub rx_admitted: bool,
    /// Receiver: on `Srd::senders` (the credit decisions' peers).
    pub rx_listed: bool,
    /// Receiver: when the admitted sender was admitted or last delivered.
    pub rx_admit_at: Instant,
    /// Receiver: packets received from it since it was admitted.
    pub rx_admit_used: u32,
    /// Start of the current bandwidth sample (`ZERO` = none: the next ack
    /// starts one), see `Peer::bw_sample`.
    pub bw_from: Instant,
    /// `tx.delivered` at `bw_from`, bytes.
    pub bw_from_delivered: u64,
    /// The packet being handled is an ACK answering a PROBE of ours (flag
    /// ACK_NOW on an ACK): it reflects everything the peer had received.
    pub ack_answers_probe: bool,
    /// The number that ACK echoes: the latest PROBE the peer had read when it
    /// answered (0 = unknown: a peer that does not echo).
    pub answer_no: u32,
    /// Number of the latest PROBE we sent (0 = none yet).
    pub probe_no: u32,
    /// Receiver: number of the latest PROBE read from this peer, echoed by
    /// the ACK answering it.
    pub rx_probe_no: u32,
    /// Receiver: a PROBE arrived; the pure ACK answering it carries ACK_NOW.
    pub probe_to_answer: bool,
    /// Receiver: arrival of the latest flight end (DATA without MORE) that
    /// came while nothing of ours was in flight to this peer and that no
    /// DATA of ours has answered yet (`ZERO` = none), see `reply_hold`.
    pub rx_reply_from: Instant,
    /// Receiver: how long after such a flight end our answer (DATA, which
    /// carries the ack) lately left, smoothed, ns (0 = no answers lately).
    pub rx_reply_ns: u64,
    /// Sender: the latest ack found nothing of ours queued or unacknowledged
    /// and no probe's answer awaited, and it settled the recovery state
    /// (see `on_ack`'s shortcut).
    pub ack_settled: bool,
}

impl Peer {
    /// A new peer at `addr`.
    pub fn new(id: PeerId, addr: SocketAddr, p: &Params) -> Self {
        let mss = p.max_payload as u64;
        // Enough for ack batching, and never below the first flight (up to
        // `MIN_WINDOW_FLIGHT` packets and `MIN_WINDOW_BYTES`): a message of
        // that size (64 KiB at MTU 1500) must not wait for an ack halfway.
        // In a ping-pong of such messages the median path RTT carries each
        // burst's own sending and processing time (its first packets are
        // acked after its last), the controller took that for queueing and
        // shrank the window to one min-RTT BDP, below the message: Intel
        // MPI's PingPong of 64 KiB across 2 hosts was window-limited on
        // every message on one side.
        let flight =
            (u64::from(p.initial_window.min(MIN_WINDOW_FLIGHT)) * mss).min(MIN_WINDOW_BYTES);
        let min_window = ((2 * u64::from(p.ack_every) + 4) * mss).max(flight);
        Peer {
            id,
            addr,
            remote_nonce: 0,
            token: 0,
            own_cookie: 0,
            retired_nonces: [0; super::session::RETIRED],
            keys: None,
            rails: None,
            hs: None,
            hs_due: false,
            last_verify: None,
            reclaimed: true,
            trimmed: false,
            last_active: Instant::ZERO,
            tx: Tx::new(p.unscheduled),
            rx: Rx::new(),
            paths: PathSet::new(if addr.ip().is_loopback() || addr.ip() == p.local_ip {
                p.local_paths
            } else {
                p.paths
            }),
            cc: Cc::new(
                u64::from(p.initial_window) * mss,
                min_window,
                p.ack_delay_ns,
                p.max_host_delay_ns,
            ),
            timers: TimerTable::default(),
            timers_stale: false,
            recovery: Recovery::new(
                crate::rng::Rng::new(p.seed ^ (u64::from(id.0) << 32)).below(25),
            ),
            srtt_ns: 0,
            rttvar_ns: 0,
            rx_last_data: None,
            last_data_sent: Instant::ZERO,
            last_data_lazy: false,
            backlog: false,
            pacing_tokens: 0,
            flowlet_memo: (0, 1),
            pacing_at: Instant::ZERO,
            pacing_burst: flight,
            lost_at: Instant::ZERO,
            credit_probe_due: false,
            credit_probes: 0,
            credit_heard_at: Instant::ZERO,
            rx_more: false,
            rx_more_at: Instant::ZERO,
            rx_wait_since: Instant::ZERO,
            rx_credit_extra: false,
            rx_admitted: false,
            rx_listed: false,
            rx_admit_at: Instant::ZERO,
            rx_admit_used: 0,
            bw_from: Instant::ZERO,
            bw_from_delivered: 0,
            ack_answers_probe: false,
            answer_no: 0,
            probe_no: 0,
            rx_probe_no: 0,
            probe_to_answer: false,
            rx_reply_from: Instant::ZERO,
            rx_reply_ns: 0,
            ack_settled: false,
        }
    }

    /// The bandwidth sample this ack closes, if any: (bytes, ns). A sample
    /// spans at least `BW_SAMPLE_MIN_NS` and the peer's RTT (at most
    /// `BW_SAMPLE_MAX_NS`), starting at an ack. Per-ack samples over the
    /// time since the packet's send-time delivery mark are inflated several
    /// times when acks come in bursts (a receiver batching its receives on
    /// a busy host, a fast path's short RTT spanning a burst of a slow
    /// path's acks): 880 Mbit/s measured on a 400 Mbit/s fabric, and a
    /// window that overflowed every link's buffer.
    pub fn bw_sample(&mut self, now: Instant) -> Option<(u64, u64)> {
        if self.bw_from == Instant::ZERO {
            self.bw_from = now;
            self.bw_from_delivered = self.tx.delivered;
            return None;
        }
        let span = self.srtt_ns.clamp(BW_SAMPLE_MIN_NS, BW_SAMPLE_MAX_NS);
        let el = now.saturating_since(self.bw_from).as_nanos() as u64;
        if el < span {
            return None;
        }
        let bytes = self.tx.delivered - self.bw_from_delivered;
        self.bw_from = now;
        self.bw_from_delivered = self.tx.delivered;
        Some((bytes, el))
    }

    /// Is the receiver holding us to a packet or two (it shares its credit
    /// budget among many senders, or schedules them)? Then its queue is
    /// what our RTT is made of, and our estimate may be stale (taken while
    /// we waited or before the incast began): a spurious probe or RTO would
    /// add a copy to that very queue. And the others keep the bottleneck
    /// busy while we wait longer, so the timers get floors.
    pub fn fan_in_limited(&self) -> bool {
        self.tx.credit_heard && self.tx.credit.is_some_and(|c| c <= 2)
    }

    /// Does the ACK being handled answer our PROBE number `no` (or a later
    /// one)? An answer to an earlier probe may have left the peer before
    /// `no` arrived (before the packets `no` asks about, too). A peer that
    /// does not echo (0) is taken at its word (any answer counts).
    pub fn answers(&self, no: u32) -> bool {
        self.ack_answers_probe
            && (self.answer_no == 0 || no != 0 && self.answer_no.wrapping_sub(no) as i32 >= 0)
    }

    /// The number for the next PROBE (never 0).
    pub fn next_probe_no(&mut self) -> u32 {
        self.probe_no = self.probe_no.wrapping_add(1).max(1);
        self.probe_no
    }

    /// Typical RTT of this peer, ns (a default before any sample).
    pub fn rtt_ns(&self) -> u64 {
        if self.srtt_ns == 0 {
            INITIAL_RTT.as_nanos() as u64
        } else {
            self.srtt_ns
        }
    }

    /// Fold an RTT sample into the peer-wide estimate.
    pub fn on_rtt(&mut self, s: u64) {
        if self.srtt_ns == 0 {
            self.srtt_ns = s;
            self.rttvar_ns = s / 2;
        } else if s > self.srtt_ns + 4 * self.rttvar_ns {
            // A jump past the timers' margin (a queue built up, e.g. an
            // incast where each sender gets one sample per round trip):
            // follow it in a few samples, not ~16, or the tail-loss probe
            // and RTO fire spuriously and their copies feed the queue.
            let err = s - self.srtt_ns;
            self.rttvar_ns = (self.rttvar_ns + err) / 2;
            self.srtt_ns = (self.srtt_ns + s) / 2;
        } else {
            self.rttvar_ns = (3 * self.rttvar_ns + self.srtt_ns.abs_diff(s)) / 4;
            self.srtt_ns = (7 * self.srtt_ns + s) / 8;
        }
    }

    /// Fail every queued and outstanding datagram with `reason`. PSNs go on
    /// from where they were; the next DATA packet's `psn_floor` tells the
    /// receiver to stop waiting for the failed ones.
    pub fn fail_all(&mut self, ctx: &mut Ctx<'_>, reason: FailReason) {
        let mut psn = self.tx.una;
        while psn != self.tx.next_psn {
            let slot = self.tx.slot_mut(psn);
            if slot.state != SlotState::Free {
                slot.state = SlotState::Free;
                let buf = core::mem::take(&mut slot.buf);
                ctx.events.push_back(DgramEvent::Failed {
                    peer: self.id,
                    token: slot.token,
                    reason,
                });
                ctx.pool.give(buf);
                ctx.stats.failed += 1;
            }
            psn = psn.wrapping_add(1);
        }
        self.tx.una = self.tx.next_psn;
        self.tx.next_send = self.tx.next_psn;
        self.tx.retx.clear();
        self.tx.bytes_in_flight = 0;
        self.tx.pkts_in_flight = 0;
        self.recovery.rto_backoff = 0;
        self.paths.reset_ordering();
        self.timers.stop(Timer::Rto);
        self.timers.stop(Timer::Tlp);
        self.timers.stop(Timer::Loss);
        self.timers.stop(Timer::Unreachable);
        self.timers.stop(Timer::Pacing);
        self.timers.stop(Timer::Credit);
        self.credit_probe_due = false;
        self.recovery.stall_probe_due = false;
        self.recovery.stall_probe_at = None;
        self.recovery.stall_probe_path = None;
        self.recovery.tail_ask_due = false;
        self.recovery.tail_ask = None;
    }

    /// The peer restarted as incarnation `nonce` (a live peer completed a
    /// handshake with it): fail what we sent to the old incarnation, forget
    /// what we received from it, and retire the old nonce.
    ///
    /// Receive side: the new incarnation numbers from PSN 0, so the window
    /// restarts at 0. Send side: our PSNs go ON from where they were (not
    /// back to 0). The new incarnation refuses the old session's packets
    /// (their token), so none of them can be in its window; continuing,
    /// with `psn_floor` = the new `una`, would skip past them anyway: a
    /// second line of defence against a duplicate acked but not delivered.
    pub fn restart(&mut self, ctx: &mut Ctx<'_>, nonce: u64) {
        ctx.stats.peer_restarts += 1;
        ctx.events
            .push_back(DgramEvent::PeerRestarted { peer: self.id });
        self.fail_all(ctx, FailReason::PeerRestarted);
        self.tx.credit = Some(ctx.p.unscheduled);
        self.tx.credit_heard = false;
        self.rx = Rx::new();
        self.rx_more = false;
        self.rx_admitted = false;
        self.timers.stop(Timer::Ack);
        self.retired_nonces.rotate_right(1);
        self.retired_nonces[0] = self.remote_nonce;
        self.remote_nonce = nonce;
        self.recovery.largest_acked_sent = Instant::ZERO;
        self.ack_settled = false;
    }
}

impl Peer {
    /// Nothing to send and no timer armed: `poll_transmit` would return
    /// `None` and change nothing, `handle_timeout` has nothing to run. Only
    /// input from the peer, a datagram queued to it or a credit decision
    /// (an ack asked for) ends that.
    pub(crate) fn quiescent(&self) -> bool {
        !self.tx.busy()
            && self.tx.retx.is_empty()
            && !self.tx.idle_until_poll
            && !self.hs_due
            && !self.credit_probe_due
            && !self.probe_to_answer
            && !self.recovery.stall_probe_due
            && !self.recovery.tail_ask_due
            && !self.rx.ack_now
            && self.rx.unacked == 0
            && !self.timers_stale
            && self.timers.next().is_none()
            && self.rails_quiet()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn peer() -> Peer {
        let cfg = Config::new(
            crate::config::EpMode::Rdm,
            "198.18.0.1:7000".parse().unwrap(),
        );
        let srd = super::super::Srd::new(&cfg);
        Peer::new(PeerId(0), "198.18.0.2:7000".parse().unwrap(), &srd.p)
    }

    /// An answer counts for a probe only if it echoes that probe's number or
    /// a later one; an answer to an earlier probe (it may have left the peer
    /// before the probe, or the packets it asks about, arrived) does not.
    #[test]
    fn answers_match_probe_numbers() {
        let mut p = peer();
        let first = p.next_probe_no();
        let second = p.next_probe_no();
        assert_eq!((first, second), (1, 2));
        p.ack_answers_probe = true;
        p.answer_no = first;
        assert!(p.answers(first));
        assert!(!p.answers(second), "an earlier probe's answer");
        assert!(!p.answers(0), "a probe not sent yet");
        p.answer_no = second;
        assert!(p.answers(first) && p.answers(second));
        // Not an answer at all (no ACK_NOW).
        p.ack_answers_probe = false;
        assert!(!p.answers(first));
        // A peer that does not echo (0) is believed: any answer counts.
        p.ack_answers_probe = true;
        p.answer_no = 0;
        assert!(p.answers(second) && p.answers(0));
        // Numbers wrap, skipping 0.
        p.probe_no = u32::MAX;
        assert_eq!(p.next_probe_no(), 1);
        p.answer_no = 1;
        assert!(p.answers(u32::MAX) && !p.answers(2));
    }
}
