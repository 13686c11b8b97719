//! The I/O driver under the engine: UDP sockets, batched receive/transmit, clock.

pub mod buf;
pub mod clock;
pub mod driver;
pub mod place;
pub mod rx;
pub mod sock;
pub mod tx;
