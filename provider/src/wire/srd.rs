//! SRD packet header: Packet/Repr view (layout in `PROTOCOL.md`).
