//! The SRD contract as the message layer sees it: reliable, exactly-once,
//! unordered datagrams of at most `max_payload` bytes to numbered peers.

/// A peer (remote endpoint) known to this engine; an index into its peer table.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerId(pub u32);

/// Why a datagram could not be queued.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SendError {
    /// No room now (window, credits or buffers); try again after progress.
    WouldBlock,
    /// Payload larger than `max_payload`.
    TooLarge,
    /// The peer is unknown or was declared unreachable.
    BadPeer,
}

/// Why an outstanding datagram failed back to its sender.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// Nothing acknowledged for `unreachable_timeout`.
    Unreachable,
    /// The peer restarted (a new nonce, proven by a handshake): the
    /// incarnation we sent to is gone.
    PeerRestarted,
}

/// What the SRD core reports to the layer above.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DgramEvent {
    /// `count` datagrams queued with `token` were acknowledged by `peer`
    /// (datagrams acked together that share a token, a message's segments,
    /// are reported at once).
    Acked {
        peer: PeerId,
        token: u64,
        count: u32,
    },
    /// The datagram queued with `token` will never be delivered.
    Failed {
        peer: PeerId,
        token: u64,
        reason: FailReason,
    },
    /// `peer` restarted (a new nonce): its receive state was reset.
    PeerRestarted { peer: PeerId },
}

/// A reliable, unordered datagram service (the SRD core implements it; the
/// message layer's tests use an in-memory fake).
pub trait Datagrams {
    /// Largest payload of one datagram, in bytes.
    fn max_payload(&self) -> usize;

    /// True when `send` to `peer` would be accepted now.
    fn can_send(&self, peer: PeerId) -> bool;

    /// The layer above holds more for `peer` than it could hand down (it
    /// stopped at `can_send`), or no longer does. A service may tell the
    /// receiver (the SRD's flag MORE: the receiver acknowledges the last
    /// packet of a sender with nothing more to send sooner, see
    /// `Config::ack_soon`).
    fn set_backlog(&mut self, peer: PeerId, more: bool) {
        let _ = (peer, more);
    }

    /// No completion waits on the acks of the datagrams of the next send
    /// call (`send`, `send_with_body` or `send_run`; this call only): an
    /// inject with no counter to count it. A service may acknowledge them
    /// late (the SRD's flag LAZY: the receiver holds such an ack up to
    /// `Config::ack_lazy` for a reply to carry it).
    fn set_lazy(&mut self) {}

    /// Queue one datagram of `len` bytes for `peer`. `fill` is called once with
    /// a buffer of exactly `len` bytes to write the payload into. `token` comes
    /// back in the `Acked` / `Failed` event of this datagram.
    fn send(
        &mut self,
        peer: PeerId,
        token: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), SendError>;

    /// Can this service send datagrams with a deferred body (`send_with_body`)?
    fn supports_body(&self) -> bool {
        false
    }

    /// Queue one datagram of `head_len + body_len` bytes: `fill` writes the first
    /// `head_len` now; the last `body_len` bytes are asked of the layer above at
    /// every transmission, by (`token`, `body_key`) (see `Engine::poll_transmit`).
    /// The caller keeps that body readable until the datagram is acked or failed:
    /// this is how large messages leave straight from the application's buffer.
    fn send_with_body(
        &mut self,
        peer: PeerId,
        token: u64,
        head_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
        body: Deferred,
    ) -> Result<(), SendError> {
        let _ = (peer, token, head_len, fill, body);
        Err(SendError::TooLarge)
    }

    /// Queue up to `count` datagrams with a deferred body for `peer`, all
    /// with `token`: datagram `k` is `head_len` bytes that `fill(k, buf)`
    /// writes, followed by the body `body(k)`. The same datagrams as `count`
    /// calls of `send_with_body`, stopping where one would fail; returns how
    /// many were queued (the error only when none was). A service may do the
    /// per-call work (peer lookup, activation, checks) once (the SRD does).
    fn send_run(
        &mut self,
        peer: PeerId,
        token: u64,
        head_len: usize,
        count: usize,
        fill: &mut dyn FnMut(usize, &mut [u8]),
        body: &mut dyn FnMut(usize) -> Deferred,
    ) -> Result<usize, SendError> {
        send_each(count, |k| {
            self.send_with_body(peer, token, head_len, &mut |b| fill(k, b), body(k))
        })
    }
}

/// A run's datagrams `0..count` one at a time with `send_one`, stopping at
/// the first that fails: how many were queued, the error only when none
/// was (`Datagrams::send_run`'s default, and the SRD's way for heads too
/// long to keep inline).
pub(crate) fn send_each(
    count: usize,
    mut send_one: impl FnMut(usize) -> Result<(), SendError>,
) -> Result<usize, SendError> {
    for k in 0..count {
        if let Err(e) = send_one(k) {
            return if k == 0 { Err(e) } else { Ok(k) };
        }
    }
    Ok(count)
}

/// The part of a datagram the layer above supplies at each transmission
/// (`Datagrams::send_with_body`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Deferred {
    /// The layer above's key for it (asked back with the datagram's token).
    pub key: u64,
    /// Length, bytes (0 = none: the datagram is all in its buffer).
    pub len: usize,
    /// Leaving as the last datagram queued for its peer, it asks the receiver
    /// to acknowledge at once rather than after its ack delay: a transfer that
    /// completes on that ack and has no reply to carry it (rendezvous data,
    /// RMA writes).
    pub ack_at_once: bool,
}

/// A datagram's body the layer above must supply (see `Datagrams::send_with_body`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Body {
    /// The peer it goes to.
    pub peer: PeerId,
    /// The datagram's token.
    pub token: u64,
    /// The key it was queued with.
    pub key: u64,
    /// Body length, bytes.
    pub len: usize,
}
