//! On-demand statistics: `FI_SPRAY_STATS=<file>|-` writes each endpoint's
//! counters (endpoint, per peer, per path) as one JSON line at close and every
//! `FI_SPRAY_STATS_MS` ms while it is open.
//!
//! A line: `{"t_unix_ns", "pid", "event": "periodic"|"close", "ep", "io": {..},
//! "srd": {..}, "msg": {..}, "peers": [{.., "paths": [{..}]}]}`. Per-path entries appear
//! for paths that sent DATA or had DATA acknowledged. `%p` in the file name
//! becomes the process id (one file per process); lines are appended, each
//! with one `write`, so processes sharing a file do not interleave within a line.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use spray::msg::MsgStats;
use spray::srd::{Health, PeerStats, SrdStats};

use crate::io::clock;
use crate::io::driver::IoStats;
use crate::{log, params};

/// Where lines go.
enum Sink {
    Stderr,
    File(File),
}

struct Dump {
    /// `None`: statistics are off (or the file could not be opened).
    sink: Mutex<Option<Sink>>,
    /// Period of the periodic dump, ns (0 = only at close).
    period_ns: u64,
    /// Monotonic time of the next periodic dump, ns.
    next_ns: AtomicU64,
}

static DUMP: Lazy<Dump> = Lazy::new(|| {
    let sink = params::get_str("stats").and_then(|name| open(&name));
    let period_ms = if sink.is_some() {
        params::int_or("stats_ms", 0, 0, 3_600_000) as u64
    } else {
        0
    };
    Dump {
        sink: Mutex::new(sink),
        period_ns: period_ms * 1_000_000,
        next_ns: AtomicU64::new(0),
    }
});

fn open(name: &str) -> Option<Sink> {
    if name == "-" {
        return Some(Sink::Stderr);
    }
    let path = name.replace("%p", &std::process::id().to_string());
    match OpenOptions::new().create(true).append(true).open(&path) {
        Ok(f) => Some(Sink::File(f)),
        Err(e) => {
            log::warn(&format!("FI_SPRAY_STATS: cannot open {path}: {e}"));
            None
        }
    }
}

/// True when statistics are on.
pub fn enabled() -> bool {
    DUMP.sink.lock().is_some()
}

/// Period of the periodic dump, ns (0 = none).
pub fn period_ns() -> u64 {
    DUMP.period_ns
}

/// True (once per period) when the periodic dump is due at monotonic `now_ns`.
pub fn periodic_due(now_ns: u64) -> bool {
    let period = DUMP.period_ns;
    if period == 0 {
        return false;
    }
    let next = DUMP.next_ns.load(Ordering::Relaxed);
    if now_ns < next {
        return false;
    }
    let at = if next == 0 { now_ns } else { next }.max(now_ns.saturating_sub(period)) + period;
    DUMP.next_ns
        .compare_exchange(next, at, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

/// Write one line for an endpoint (`event`: "periodic" or "close").
pub fn write(
    ep: &str,
    event: &str,
    io: &IoStats,
    srd: &SrdStats,
    msg: &MsgStats,
    peers: &[PeerStats],
) {
    if !enabled() {
        return;
    }
    let line = line(ep, event, io, srd, msg, peers);
    let mut g = DUMP.sink.lock();
    let res = match g.as_mut() {
        Some(Sink::Stderr) => std::io::stderr().write_all(line.as_bytes()),
        Some(Sink::File(f)) => f.write_all(line.as_bytes()),
        None => Ok(()),
    };
    if let Err(e) = res {
        log::warn(&format!(
            "FI_SPRAY_STATS: write failed ({e}); statistics off"
        ));
        *g = None;
    }
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn health(h: Health) -> &'static str {
    match h {
        Health::Good => "good",
        Health::Suspect => "suspect",
        Health::Bad => "bad",
    }
}

/// The JSON line (newline-terminated). Names and addresses need no escaping:
/// they are socket addresses and fixed words.
///
/// One function on purpose (~140 lines): it is the JSON line's schema, field
/// by field in output order; split, the schema would be spread over writers.
pub fn line(
    ep: &str,
    event: &str,
    io: &IoStats,
    s: &SrdStats,
    m: &MsgStats,
    peers: &[PeerStats],
) -> String {
    let mut o = String::with_capacity(512 + 256 * peers.len());
    let _ = write!(
        o,
        "{{\"t_unix_ns\":{},\"mono_ns\":{},\"pid\":{},\"event\":\"{event}\",\"ep\":\"{ep}\"",
        unix_ns(),
        clock::now_ns(),
        std::process::id()
    );
    let _ = write!(
        o,
        ",\"io\":{{\"rx_packets\":{},\"tx_packets\":{},\"syscalls\":{},\"tx_blocked\":{},\"tx_errors\":{},\"rx_truncated\":{},\"rx_placed\":{},\"rx_guessed\":{},\"rx_guess_missed\":{},\"tx_gso_sends\":{},\"tx_gso_packets\":{},\"tx_gso_fallbacks\":{},\"rx_gro_datagrams\":{},\"rx_gro_packets\":{},\"rx_chained\":{}}}",
        io.rx_packets, io.tx_packets, io.syscalls, io.tx_blocked, io.tx_errors, io.rx_truncated, io.rx_placed,
        io.rx_guessed, io.rx_guess_missed, io.tx_gso_sends, io.tx_gso_packets, io.tx_gso_fallbacks,
        io.rx_gro_datagrams, io.rx_gro_packets, io.rx_chained
    );
    let fields: [(&str, u64); 58] = [
        ("tx_packets", s.tx_packets),
        ("tx_bytes", s.tx_bytes),
        ("tx_data", s.tx_data),
        ("tx_acks", s.tx_acks),
        ("tx_resets", s.tx_resets),
        ("tx_hellos", s.tx_hellos),
        ("tx_challenges", s.tx_challenges),
        ("stateless_dropped", s.stateless_dropped),
        ("handshakes", s.handshakes),
        ("sessions_accepted", s.sessions_accepted),
        ("peer_polls", s.peer_polls),
        ("retransmits", s.retransmits),
        ("lost", s.lost),
        ("lost_by_count", s.lost_by_count),
        ("lost_by_time", s.lost_by_time),
        ("lost_overdue", s.lost_overdue),
        ("rto_lost", s.rto_lost),
        ("tail_probes", s.tail_probes),
        ("tail_asks", s.tail_asks),
        ("timeouts", s.timeouts),
        ("spurious_losses", s.spurious_losses),
        ("spurious_retransmits", s.spurious_retransmits),
        ("spurious_timeouts", s.spurious_timeouts),
        ("credit_probes", s.credit_probes),
        ("stall_probes", s.stall_probes),
        ("budget_after_cut", s.budget_after_cut),
        ("budget_cuts", s.budget_cuts),
        ("tail_hedges", s.tail_hedges),
        ("window_limited", s.window_limited),
        ("rx_packets", s.rx_packets),
        ("rx_continued", s.rx_continued),
        ("rx_train", s.rx_train),
        ("rx_delivered", s.rx_delivered),
        ("rx_duplicates", s.rx_duplicates),
        ("rx_out_of_window", s.rx_out_of_window),
        ("rx_malformed", s.rx_malformed),
        ("rx_stale_src", s.rx_stale_src),
        ("rx_bad_token", s.rx_bad_token),
        ("rx_no_session", s.rx_no_session),
        ("rx_bad_mac", s.rx_bad_mac),
        ("rx_mac_missing", s.rx_mac_missing),
        ("rx_mac_unexpected", s.rx_mac_unexpected),
        ("rx_resets", s.rx_resets),
        ("rx_peer_limit", s.rx_peer_limit),
        ("peers", s.peers),
        ("peers_reclaimed", s.peers_reclaimed),
        ("peers_trimmed", s.peers_trimmed),
        ("rx_bad_ack", s.rx_bad_ack),
        ("acked", s.acked),
        ("failed", s.failed),
        ("peer_restarts", s.peer_restarts),
        ("unreachable", s.unreachable),
        ("tx_rails", s.tx_rails),
        ("tx_rail_checks", s.tx_rail_checks),
        ("rx_rails", s.rx_rails),
        ("rx_rails_ignored", s.rx_rails_ignored),
        ("rails_valid", s.rails_valid),
        ("rails_refused", s.rails_refused),
    ];
    o.push_str(",\"srd\":{");
    for (i, (k, v)) in fields.iter().enumerate() {
        let _ = write!(o, "{}\"{k}\":{v}", if i > 0 { "," } else { "" });
    }
    let _ = write!(
        o,
        "}},\"msg\":{{\"datagrams_sent\":{},\"bad\":{},\"stray\":{},\"held\":{},\"dropped\":{},\"keepalives\":{},\"unexpected\":{},\"unexpected_bytes\":{},\"unexpected_peak\":{},\"credit_waits\":{},\"credit_withheld\":{}",
        m.datagrams_sent, m.bad, m.stray, m.held, m.dropped, m.keepalives, m.unexpected, m.unexpected_bytes,
        m.unexpected_peak, m.credit_waits, m.credit_withheld
    );
    o.push_str("},\"peers\":[");
    for (i, p) in peers.iter().enumerate() {
        let _ = write!(
            o,
            "{}{{\"peer\":\"{}\",\"srtt_ns\":{},\"min_rtt_ns\":{},\"rto_ns\":{},\"cwnd_bytes\":{},\"pacing_rate_bps\":{},\"bandwidth_bps\":{},\"bytes_in_flight\":{},\"retransmits\":{},\"lost\":{},\"rtos\":{},\"tail_probes\":{},\"flowlet_cap_pkts\":{},\"flowlet_spread\":{},\"flowlet_tight\":{},\"paths\":[",
            if i > 0 { "," } else { "" },
            p.addr,
            p.srtt_ns,
            p.min_rtt_ns,
            p.rto_ns,
            p.cwnd_bytes,
            p.pacing_rate_bps,
            p.bandwidth_bps,
            p.bytes_in_flight,
            p.retransmits,
            p.lost,
            p.rtos,
            p.tail_probes,
            p.flowlet_cap_pkts,
            p.flowlet_spread,
            p.flowlet_tight
        );
        let mut first = true;
        for x in p
            .paths
            .iter()
            .filter(|x| x.sent_packets > 0 || x.acked_packets > 0)
        {
            let _ = write!(
                o,
                "{}{{\"path\":{},\"rail\":{},\"health\":\"{}\",\"sent_packets\":{},\"sent_bytes\":{},\"retransmits\":{},\"lost\":{},\"acked_packets\":{},\"acked_bytes\":{},\"srtt_ns\":{},\"min_rtt_ns\":{},\"rate_bps\":{}}}",
                if first { "" } else { "," },
                x.path,
                x.rail,
                health(x.health),
                x.sent_packets,
                x.sent_bytes,
                x.retransmits,
                x.lost,
                x.acked_packets,
                x.acked_bytes,
                x.srtt_ns,
                x.min_rtt_ns,
                x.rate_bps
            );
            first = false;
        }
        o.push_str("]}");
    }
    o.push_str("]}\n");
    o
}
