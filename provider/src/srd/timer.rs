//! Per-peer timer table, indexed by an enum (quinn style).

use crate::time::Instant;

/// The timers one peer runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Timer {
    /// Delayed acknowledgement must go out.
    Ack = 0,
    /// Retransmission timeout (last-resort loss detection).
    Rto = 1,
    /// Time-based loss detection (reorder window / overdue packet) expires.
    Loss = 2,
    /// Pacing releases the next packet.
    Pacing = 3,
    /// Nothing acknowledged for `unreachable_timeout`: fail everything.
    Unreachable = 4,
    /// Tail-loss probe: the newest packet went unacknowledged for ~2 RTTs.
    Tlp = 5,
    /// Waiting for credit (the receiver granted 0): send a credit probe.
    Credit = 6,
    /// Our HELLO went unanswered: send it again (or give up).
    Handshake = 7,
    /// Rails (`rails.rs`): our RAILS went unanswered, or a rail's check
    /// HELLO: send it again.
    Rails = 8,
}

const N: usize = 9;

/// Deadlines of every timer of one peer; `None` = not armed.
#[derive(Clone, Debug, Default)]
pub struct TimerTable {
    at: [Option<Instant>; N],
}

impl TimerTable {
    /// Arm `t` at `when`.
    pub fn set(&mut self, t: Timer, when: Instant) {
        self.at[t as usize] = Some(when);
    }
    /// Arm `t` at `when`, or disarm it (`None`).
    pub fn put(&mut self, t: Timer, when: Option<Instant>) {
        self.at[t as usize] = when;
    }
    /// Disarm `t`.
    pub fn stop(&mut self, t: Timer) {
        self.at[t as usize] = None;
    }
    /// Deadline of `t`.
    pub fn get(&self, t: Timer) -> Option<Instant> {
        self.at[t as usize]
    }
    /// Is `t` armed and due at `now`?
    pub fn due(&self, t: Timer, now: Instant) -> bool {
        matches!(self.at[t as usize], Some(x) if x <= now)
    }
    /// The earliest deadline of all.
    pub fn next(&self) -> Option<Instant> {
        self.at.iter().flatten().min().copied()
    }
}
