//! Receive window of one peer: which PSNs arrived (base + ring bitmap), and
//! the acknowledgement state derived from it.

use crate::time::Instant;
use crate::wire::srd::AckRepr;

/// Window size in packets (power of two, multiple of 64).
pub const WINDOW: u32 = 4096;
const WORDS: usize = (WINDOW / 64) as usize;

/// What arriving PSN was.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// New: deliver it.
    New,
    /// Already received (or below the window base).
    Duplicate,
    /// Beyond the window.
    OutOfWindow,
}

/// Receive side of one peer.
pub struct Rx {
    /// Every PSN below `base` has been received.
    base: u32,
    /// Bit `psn % WINDOW` = received, for PSNs in `base..base+WINDOW`.
    bits: [u64; WORDS],
    /// Highest PSN received (valid when `any`).
    highest: u32,
    /// At least one data packet was received in this session.
    pub any: bool,
    /// PSN of the most recently arrived data packet and when it arrived.
    recent: (u32, Instant),
    /// An ack reporting `recent` was sent (the next one is a repeat).
    recent_reported: bool,
    /// Data packets received since the last ack we sent.
    pub unacked: u32,
    /// An ack must go out at once (gap, duplicate, request).
    pub ack_now: bool,
    /// The latest new DATA packet had no MORE: its sender had nothing
    /// queued behind it, so it waits for no window an ack would open, only
    /// for the ack that completes its sends, which the reply hold
    /// (`Peer::reply_hold`) sends or a reply carries. A message that
    /// arrived whole (a ping-pong of 48 packets at MTU 1500) is then acked
    /// once, not also by a pure ACK between its receive and its
    /// completion, a send call on the way to the application's reply.
    pub ended: bool,
    /// New data packets received in this session (saturating): a young
    /// sender's credit ramps up with it.
    pub received: u32,
}

fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl Rx {
    /// An empty window expecting PSN 0.
    pub fn new() -> Self {
        Rx {
            base: 0,
            bits: [0; WORDS],
            highest: 0,
            any: false,
            recent: (0, Instant::ZERO),
            recent_reported: false,
            unacked: 0,
            ack_now: false,
            ended: false,
            received: 0,
        }
    }

    fn bit(&self, psn: u32) -> bool {
        let i = psn % WINDOW;
        self.bits[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
    fn set(&mut self, psn: u32, v: bool) {
        let i = psn % WINDOW;
        let w = &mut self.bits[(i / 64) as usize];
        if v {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }

    /// Would `psn` be new data (not a duplicate, inside the window), given a
    /// sender floor `floor`? Read-only: what `on_packet` would answer.
    pub fn is_new(&self, psn: u32, floor: u32) -> bool {
        if !self.any {
            return psn.wrapping_sub(floor) < WINDOW;
        }
        let d = psn.wrapping_sub(self.base);
        (d as i32) >= 0 && d < WINDOW && !self.bit(psn)
    }

    /// Record the arrival of `psn` at `now`.
    pub fn on_packet(&mut self, psn: u32, now: Instant) -> Arrival {
        let d = psn.wrapping_sub(self.base);
        if (d as i32) < 0 {
            return Arrival::Duplicate;
        }
        if d >= WINDOW {
            return Arrival::OutOfWindow;
        }
        // (The base's bit is never set: it is cleared as the base passes.)
        if d != 0 && self.bit(psn) {
            return Arrival::Duplicate;
        }
        let gap = if self.any {
            after(psn, self.highest.wrapping_add(1))
        } else {
            psn != self.base
        };
        if gap {
            // A new hole: tell the sender at once so it can repair quickly.
            self.ack_now = true;
        }
        if !self.any || after(psn, self.highest) {
            self.highest = psn;
        }
        self.any = true;
        self.recent = (psn, now);
        self.recent_reported = false;
        if d == 0 {
            // In order (the common case): the base moves past it without
            // its bit being set and cleared again.
            self.base = psn.wrapping_add(1);
        } else {
            self.set(psn, true);
        }
        while self.bit(self.base) {
            self.set(self.base, false);
            self.base = self.base.wrapping_add(1);
        }
        Arrival::New
    }

    /// A new data packet was delivered (`more`: its MORE flag): count it,
    /// and ask for an ack at once when the sender asked (`ack_asked`).
    pub fn count_new(&mut self, ack_asked: bool, more: bool) {
        self.unacked += 1;
        self.received = self.received.saturating_add(1);
        self.ended = !more;
        if ack_asked {
            self.ack_now = true;
        }
    }

    /// Must an ack go out at once (before its timer)? On a gap, duplicate
    /// or request (`ack_now`), and after `ack_every` unacked packets unless
    /// the sender's queue ended with the latest (`ended`).
    pub fn ack_due_now(&self, ack_every: u32) -> bool {
        self.ack_now || (self.unacked >= ack_every && !self.ended)
    }

    /// Would `advance_floor(floor)` leave the window as it is?
    pub fn floor_passed(&self, floor: u32) -> bool {
        self.any && floor.wrapping_sub(self.base) as i32 <= 0
    }

    /// The sender says it no longer cares about PSNs below `floor` (acked or
    /// failed): move the base up so its window cannot stall on them.
    pub fn advance_floor(&mut self, floor: u32) {
        if !self.any {
            // A fresh window (new session) takes the sender's numbering as
            // is, however far it is from 0 (a long-lived sender that learnt
            // of our restart keeps its PSNs going).
            self.base = floor;
            return;
        }
        let d = floor.wrapping_sub(self.base);
        if d as i32 <= 0 || d > 1 << 30 {
            return;
        }
        let steps = d.min(WINDOW);
        for k in 0..steps {
            self.set(self.base.wrapping_add(k), false);
        }
        self.base = floor;
        if !self.any || after(floor, self.highest.wrapping_add(1)) {
            self.highest = floor.wrapping_sub(1);
        }
        while self.bit(self.base) {
            self.set(self.base, false);
            self.base = self.base.wrapping_add(1);
        }
    }

    /// 64 received-bits starting at `start` (which must be at or after `base`).
    fn word(&self, start: u32) -> u64 {
        let i = start % WINDOW;
        let (w, off) = ((i / 64) as usize, i % 64);
        let lo = self.bits[w] >> off;
        let hi = if off == 0 {
            0
        } else {
            self.bits[(w + 1) % WORDS] << (64 - off)
        };
        lo | hi
    }

    /// PSNs between the base and the highest received (inclusive), i.e. how
    /// many bits a complete report needs.
    pub fn span(&self) -> u32 {
        if self.any {
            self.highest
                .wrapping_sub(self.base)
                .wrapping_add(1)
                .min(WINDOW)
        } else {
            0
        }
    }

    /// The acknowledgement describing the window now: the cumulative base and
    /// a 64-bit bitmap of the 64 PSNs starting at the base (`sack_base = cum`).
    pub fn ack(&self, now: Instant, credit: u16) -> AckRepr {
        let delay_us = now
            .saturating_since(self.recent.1)
            .as_micros()
            .min(u128::from(u16::MAX)) as u16;
        AckRepr {
            cum: self.base,
            recent: self.recent.0,
            delay_us,
            credit,
            sack_base: self.base,
            sack_bits: self.word(self.base),
            repeat: self.recent_reported,
        }
    }

    /// An ack built by `ack` was sent: later ones repeat its `recent`.
    pub fn reported(&mut self) {
        self.recent_reported = true;
    }

    /// Write the extension words (PSNs `base + 64 ..` up to the highest
    /// received) into `out` as big-endian u64s; returns the bytes written.
    pub fn write_ext(&self, out: &mut [u8]) -> usize {
        let words = (self.span().saturating_sub(1) / 64) as usize;
        let mut n = 0;
        for k in 0..words {
            let Some(dst) = out.get_mut(8 * k..8 * k + 8) else {
                break;
            };
            let w = self.word(self.base.wrapping_add(64 * (k as u32 + 1)));
            dst.copy_from_slice(&w.to_be_bytes());
            n = 8 * k + 8;
        }
        n
    }
}

impl Default for Rx {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_ack_waits_when_the_senders_queue_ended() {
        let mut rx = Rx::new();
        let t = Instant::ZERO;
        for psn in 0..16 {
            assert_eq!(rx.on_packet(psn, t), Arrival::New);
            rx.count_new(false, true);
        }
        assert!(rx.ack_due_now(16), "16 unacked with more behind: at once");
        // The sender's last queued packet: its ack waits for a reply or
        // the hold, even with 17 unacked.
        assert_eq!(rx.on_packet(16, t), Arrival::New);
        rx.count_new(false, false);
        assert!(!rx.ack_due_now(16), "the queue ended: no ack at once");
        // New data with more behind: the count applies again.
        assert_eq!(rx.on_packet(17, t), Arrival::New);
        rx.count_new(false, true);
        assert!(rx.ack_due_now(16));
        // A request is honoured whatever the queue.
        let mut rx = Rx::new();
        assert_eq!(rx.on_packet(0, t), Arrival::New);
        rx.count_new(true, false);
        assert!(rx.ack_due_now(16), "ACK_NOW asks at once");
    }

    #[test]
    fn window_basics() {
        let mut rx = Rx::new();
        let t = Instant::ZERO;
        assert_eq!(rx.on_packet(1, t), Arrival::New);
        assert!(rx.ack_now, "a hole at 0 asks for an ack at once");
        assert_eq!(rx.on_packet(1, t), Arrival::Duplicate);
        assert_eq!(rx.on_packet(WINDOW, t), Arrival::OutOfWindow);
        assert_eq!(rx.on_packet(0, t), Arrival::New);
        let a = rx.ack(t, 7);
        assert_eq!((a.cum, a.recent, a.credit), (2, 0, 7));
        assert_eq!(rx.on_packet(100, t), Arrival::New);
        let a = rx.ack(t, 1);
        assert_eq!(a.sack_bits, 0);
        let mut ext = [0u8; 16];
        assert_eq!(rx.write_ext(&mut ext), 8);
        // PSN 100 = sack_base 2 + 64 + 34.
        assert_eq!(u64::from_be_bytes(ext[..8].try_into().unwrap()), 1 << 34);
    }

    #[test]
    fn floor_skips_failed_and_fresh_window_takes_any_floor() {
        let mut rx = Rx::new();
        let t = Instant::ZERO;
        assert_eq!(rx.on_packet(5, t), Arrival::New);
        rx.advance_floor(10);
        assert_eq!(rx.ack(t, 1).cum, 10);
        assert_eq!(rx.on_packet(7, t), Arrival::Duplicate);
        assert_eq!(rx.on_packet(10, t), Arrival::New);
        let mut fresh = Rx::new();
        fresh.advance_floor(3_000_000_000);
        assert_eq!(fresh.on_packet(3_000_000_001, t), Arrival::New);
        assert_eq!(fresh.on_packet(3_000_000_000, t), Arrival::New);
        assert_eq!(fresh.ack(t, 1).cum, 3_000_000_002);
    }
}
