//! Wire formats: Packet/Repr pairs (smoltcp style) for every header spray sends.
//!
//! A `Packet<T: AsRef<[u8]>>` is a checked view over bytes; after
//! `new_checked` succeeds no accessor panics. A `Repr` is the parsed form with
//! `parse`, `emit` and `buffer_len`. Parsing never panics on any input.
//! The byte layout of each is documented in `PROTOCOL.md`.

mod bytes;
pub mod msg;
pub mod rails;
pub mod srd;

/// Why bytes could not be parsed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than the header or than the length it declares.
    Truncated,
    /// Unknown version.
    BadVersion,
    /// Unknown packet / message type.
    BadType,
    /// A field holds a value the protocol forbids.
    Malformed,
}
