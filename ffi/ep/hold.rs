//! Post batching: sends posted back to back to one peer leave together.
//!
//! Every send call here costs a system call that takes the datagrams through
//! the whole kernel stack on the caller's CPU (between two hosts, through
//! the routers and up to the receiving socket): about 2.6 us, where the
//! engine's own work for a small message is a few hundred ns. A message-rate
//! benchmark (IMB Uniband or OSU bw: a window of 64 sends, then a wait) or
//! a stream of small messages paid it once per message, where libfabric's
//! `tcp` lets the kernel coalesce its writes. So a send that continues a
//! burst (the application posted a send to the same peer less than `gap_ns`
//! ago and has not progressed the endpoint since) and is small
//! (`HOLD_MAX_BYTES`) is queued in the engine
//! but not flushed: it leaves with the next flush, as one segmented send
//! with its neighbours (the engine puts a run of small packets on one path,
//! `Peer::small_flowlet`). The first send of a burst leaves at once, so a
//! ping-pong or a lone message waits for nothing.
//!
//! What flushes held sends: the application's next progress (any CQ or
//! counter read), a send that does not continue the burst, `MAX_HELD` of
//! them, or, when the application stops calling us altogether (an MPI rank
//! that posts its sends and computes before it waits), the progress-assist
//! thread after `assist::HOLD_BOUND_NS`. Without the assist thread
//! (`FI_SPRAY_ASSIST_US=0`) nothing would bound the wait, so nothing is held.
//! FI_MORE still means "more follow, flush nothing" as before.

use spray::PeerId;

/// Held sends before a flush anyway (a window of 64 leaves in 2 batches).
const MAX_HELD: u32 = 32;

/// Only messages up to this size are held, bytes: their packets are what
/// the engine batches on one path (`Peer::small_flowlet`, 512 bytes of
/// message and its header). A larger message is a flowlet or several of
/// its own, and holding it only delayed it: fi_stream across 2 hosts at
/// MTU 1500 (MB/s, held / not, n=3) 16 KiB 1362-1406 / 1424-1549, 64 KiB
/// 1628-1954 / 2034-2141, 1 MiB 2080-2547 / 2892-3015; 4 KiB even.
pub const HOLD_MAX_BYTES: usize = 512;

/// The hold state of one endpoint.
#[derive(Debug, Default)]
pub struct PostHold {
    /// A send less than this long after the one before (same peer, no
    /// progress between) is held, ns; 0 = never hold.
    gap_ns: u64,
    /// A send was posted since the application last progressed the endpoint.
    posted: bool,
    /// When the latest send was posted, ns.
    last_ns: u64,
    /// Its peer.
    last_peer: Option<PeerId>,
    /// Sends held since the latest flush.
    held: u32,
    /// When the first of them was held, ns (0 = none held).
    pub since_ns: u64,
    /// A hold began in the current call: the assist thread must learn of it
    /// (`assist::held`). Taken by the caller.
    pub started: bool,
}

impl PostHold {
    /// Hold sends closer together than `gap_ns` (0 = never).
    pub fn new(gap_ns: u64) -> PostHold {
        PostHold {
            gap_ns,
            ..PostHold::default()
        }
    }

    /// A send to `peer` was queued at `now_ns`: true = hold it (the caller
    /// must flush at the next progress), false = flush now.
    pub fn on_send(&mut self, peer: PeerId, now_ns: u64) -> bool {
        let burst = self.gap_ns != 0
            && self.posted
            && self.last_peer == Some(peer)
            && now_ns.saturating_sub(self.last_ns) < self.gap_ns
            && self.held < MAX_HELD;
        self.posted = true;
        self.last_ns = now_ns;
        self.last_peer = Some(peer);
        if !burst {
            return false;
        }
        if self.held == 0 {
            self.since_ns = now_ns.max(1);
            self.started = true;
        }
        self.held += 1;
        true
    }

    /// Everything queued was handed to the kernel (or tried).
    pub fn flushed(&mut self) {
        self.held = 0;
        self.since_ns = 0;
    }

    /// The application progressed the endpoint (the flush included): the
    /// next send starts a burst.
    pub fn progressed(&mut self) {
        self.flushed();
        self.posted = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAP: u64 = 5_000;

    #[test]
    fn a_burst_to_one_peer_is_held_after_its_first_send() {
        let (a, b) = (PeerId(1), PeerId(2));
        let mut h = PostHold::new(GAP);
        assert!(!h.on_send(a, 1_000), "the first send leaves at once");
        assert!(h.on_send(a, 1_500));
        assert!(h.started && h.since_ns == 1_500);
        h.started = false;
        assert!(h.on_send(a, 2_000));
        assert!(!h.started, "one start per burst");
        assert!(!h.on_send(b, 2_100), "another peer flushes");
        h.flushed();
        assert!(
            h.on_send(b, 2_200),
            "and continues the burst to its own peer"
        );
        assert!(!h.on_send(b, 2_200 + GAP), "a gap ends the burst");
        h.progressed();
        assert!(!h.on_send(b, 2_300 + GAP), "so does a progress call");
    }

    #[test]
    fn at_most_max_held_sends_wait() {
        let mut h = PostHold::new(GAP);
        let p = PeerId(7);
        assert!(!h.on_send(p, 10));
        let held = (0..100).take_while(|i| h.on_send(p, 11 + i)).count();
        assert_eq!(held, MAX_HELD as usize);
    }

    #[test]
    fn nothing_is_held_without_a_gap() {
        let mut h = PostHold::new(0);
        for t in 0..10 {
            assert!(!h.on_send(PeerId(1), t));
        }
    }
}
