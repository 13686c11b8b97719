//! spray engine: the sans-IO heart of the spray libfabric provider.
//!
//! Layers, bottom up (the wire format and every mechanism are in the
//! repository's `PROTOCOL.md`; the README says how to use and test it):
//! - [`wire`]: Packet/Repr views of every header on the wire;
//! - [`srd`]: the per-peer reliable, exactly-once, unordered, multipath
//!   datagram core (paths, loss recovery, congestion control, credits);
//! - [`msg`]: RDM message semantics above it (matching, send-order matching,
//!   segmentation, completions);
//! - [`engine`]: the facade the FFI driver runs: one endpoint's SRD + message layer;
//! - `sim` (cargo feature `sim`, on for tests only): a deterministic,
//!   seeded network simulator; the provider library is built without it.
//!
//! Nothing here reads a clock, opens a socket or uses `unsafe`: time comes
//! in as [`time::Instant`] arguments and randomness from a seeded [`rng::Rng`].
#![forbid(unsafe_code)]

pub mod buf;
pub mod config;
pub mod dgram;
pub mod engine;
pub mod hash;
pub mod msg;
pub mod muldiv;
pub mod rng;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod srd;
pub mod time;
pub mod wire;

pub use buf::{RmaAccess, RmaTarget, UserBuf};
pub use config::{Config, EpMode};
pub use dgram::{Datagrams, PeerId};
pub use engine::{Engine, GuessCheck};
pub use time::Instant;
