//! Datagram tokens: what the message layer tags each datagram it hands to the
//! SRD with, so that the SRD's later `Acked` / `Failed` report names its owner.
//!
//! A token never crosses the network (the SRD keeps it beside the datagram),
//! so its layout is ours to choose; it is written down in `PROTOCOL.md` §9
//! ("Tokens") and §10 because a failed control datagram is sent again from
//! what its token remembers (try count, CTS grant, CREDIT bytes).

/// Bit 63: a control datagram (anything but a message's DATA / RTS / RDATA).
const CTRL: u64 = 1 << 63;
/// With `CTRL`: a CTS; low 32 bits its `msg_seq`.
const CTS: u64 = 1 << 62;
/// With `CTRL`: an ABORT; low 32 bits its `msg_seq`.
const ABORT: u64 = 1 << 61;
/// With `CTRL`: a one-sided (RMA) datagram; low 32 bits the op id.
const RMA: u64 = 1 << 60;
/// With `RMA`: a target's reply (WRITE_DONE, RMA_NAK, ATOMIC_RESP, READ_RESP).
const RMA_REPLY: u64 = 1 << 59;
/// With `RMA`: an RMA_ABORT.
const RMA_ABORT: u64 = 1 << 58;
/// With `CTRL`: a keepalive (an empty CREDIT, see `keepalive.rs`).
const KEEPALIVE: u64 = 1 << 57;
/// With `CTRL`: a CREDIT; low 32 bits the bytes it returned.
const CREDIT: u64 = 1 << 56;
/// With `CTS`: the CTS granted 0 bytes (a discarded message: its record is
/// gone, so the retry cannot look the grant up).
const ZERO_GRANT: u64 = 1 << 40;
/// Message datagrams: the send slot takes bits 0..31, `msg_seq` bits 31..63.
const SLOT_MASK: u64 = 0x7FFF_FFFF;

/// Whose datagram it is, and what a retry needs to know.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Token {
    /// A DATA, RTS or RDATA of our message `seq` in send slot `slot` (below
    /// 2^31). The sequence number names the message even after its send
    /// completed (for ABORT) and makes reports for a reused slot stale.
    Msg { slot: usize, seq: u32 },
    /// Our CTS for the peer's message `seq`; `tries` earlier sends of it failed.
    Cts {
        seq: u32,
        tries: u8,
        zero_grant: bool,
    },
    /// Our ABORT of our message `seq`; `tries` earlier sends failed.
    Abort { seq: u32, tries: u8 },
    /// Our CREDIT returning `bytes` (at most 2^32 - 1 are remembered);
    /// `tries` earlier sends failed.
    Credit { bytes: u32, tries: u8 },
    /// Our keepalive.
    Keepalive,
    /// A request of our one-sided op `id` (WRITE, READ_REQ, ATOMIC).
    Rma { id: u32 },
    /// Our reply, as a target, to the peer's op `id`.
    RmaReply { id: u32 },
    /// Our RMA_ABORT of our write `id`; `tries` earlier sends failed.
    RmaAbort { id: u32, tries: u8 },
}

impl Token {
    /// The `u64` the SRD carries for it.
    #[inline]
    pub(crate) fn encode(self) -> u64 {
        let tries = |t: u8| (t as u64) << 32;
        match self {
            Token::Msg { slot, seq } => ((seq as u64) << 31) | (slot as u64 & SLOT_MASK),
            Token::Cts {
                seq,
                tries: t,
                zero_grant,
            } => CTRL | CTS | if zero_grant { ZERO_GRANT } else { 0 } | tries(t) | seq as u64,
            Token::Abort { seq, tries: t } => CTRL | ABORT | tries(t) | seq as u64,
            Token::Credit { bytes, tries: t } => CTRL | CREDIT | tries(t) | bytes as u64,
            Token::Keepalive => CTRL | KEEPALIVE,
            Token::Rma { id } => CTRL | RMA | id as u64,
            Token::RmaReply { id } => CTRL | RMA | RMA_REPLY | id as u64,
            Token::RmaAbort { id, tries: t } => CTRL | RMA | RMA_ABORT | tries(t) | id as u64,
        }
    }

    /// The token a report names; `None` for a value `encode` never makes.
    #[inline]
    pub(crate) fn decode(t: u64) -> Option<Token> {
        if t & CTRL == 0 {
            return Some(Token::Msg {
                slot: (t & SLOT_MASK) as usize,
                seq: (t >> 31) as u32,
            });
        }
        let (low, tries) = (t as u32, (t >> 32) as u8);
        Some(if t & RMA != 0 {
            if t & RMA_REPLY != 0 {
                Token::RmaReply { id: low }
            } else if t & RMA_ABORT != 0 {
                Token::RmaAbort { id: low, tries }
            } else {
                Token::Rma { id: low }
            }
        } else if t & CTS != 0 {
            Token::Cts {
                seq: low,
                tries,
                zero_grant: t & ZERO_GRANT != 0,
            }
        } else if t & ABORT != 0 {
            Token::Abort { seq: low, tries }
        } else if t & KEEPALIVE != 0 {
            Token::Keepalive
        } else if t & CREDIT != 0 {
            Token::Credit { bytes: low, tries }
        } else {
            return None;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips() {
        let all = [
            Token::Msg { slot: 0, seq: 0 },
            Token::Msg {
                slot: 0x7FFF_FFFF,
                seq: u32::MAX,
            },
            Token::Msg {
                slot: 5,
                seq: 1 << 31,
            },
            Token::Cts {
                seq: u32::MAX,
                tries: 7,
                zero_grant: true,
            },
            Token::Cts {
                seq: 3,
                tries: 0,
                zero_grant: false,
            },
            Token::Abort {
                seq: 0x8000_0001,
                tries: 255,
            },
            Token::Credit {
                bytes: u32::MAX,
                tries: 1,
            },
            Token::Keepalive,
            Token::Rma { id: u32::MAX },
            Token::RmaReply { id: 9 },
            Token::RmaAbort { id: 1, tries: 7 },
        ];
        for t in all {
            assert_eq!(Token::decode(t.encode()), Some(t), "{t:?}");
        }
        // Message datagrams never set bit 63; control ones always do.
        for t in all {
            assert_eq!(
                t.encode() >> 63 == 1,
                !matches!(t, Token::Msg { .. }),
                "{t:?}"
            );
        }
        assert_eq!(Token::decode(CTRL), None);
    }

    #[test]
    fn layout_is_the_documented_one() {
        // PROTOCOL.md §9 "Tokens" and §10: kept so across the move to `Token`.
        assert_eq!(Token::Msg { slot: 2, seq: 3 }.encode(), (3 << 31) | 2);
        let cts = Token::Cts {
            seq: 4,
            tries: 2,
            zero_grant: true,
        };
        assert_eq!(cts.encode(), 1 << 63 | 1 << 62 | 1 << 40 | 2 << 32 | 4);
        let abort = Token::Abort { seq: 4, tries: 1 };
        assert_eq!(abort.encode(), 1 << 63 | 1 << 61 | 1 << 32 | 4);
        assert_eq!(Token::Keepalive.encode(), 1 << 63 | 1 << 57);
        let credit = Token::Credit { bytes: 9, tries: 3 };
        assert_eq!(credit.encode(), 1 << 63 | 1 << 56 | 3 << 32 | 9);
        assert_eq!(Token::Rma { id: 6 }.encode(), 1 << 63 | 1 << 60 | 6);
        assert_eq!(
            Token::RmaReply { id: 6 }.encode(),
            1 << 63 | 1 << 60 | 1 << 59 | 6
        );
        let rma_abort = Token::RmaAbort { id: 6, tries: 1 };
        assert_eq!(
            rma_abort.encode(),
            1 << 63 | 1 << 60 | 1 << 58 | 1 << 32 | 6
        );
    }
}
