//! Message-layer header inside an SRD payload: Packet/Repr view (layout in `PROTOCOL.md`).
