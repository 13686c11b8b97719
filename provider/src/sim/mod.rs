//! A deterministic discrete-event network simulator (seeded) that runs real
//! engines over paths with delay, jitter, bandwidth, buffers, loss,
//! duplication and corruption.
