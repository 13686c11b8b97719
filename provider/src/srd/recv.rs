//! The receive path of the SRD core: parsing, epoch checks (stale packets,
//! peer restarts, RESET), acks, the receive window and receiver credits.

use core::net::SocketAddr;

use super::rx::Arrival;
use super::timer::Timer;
use super::Srd;
use crate::dgram::PeerId;
use crate::time::Instant;
use crate::wire::srd::{flags, Packet, PacketType, Repr, CREDIT_UNLIMITED};

/// A sender is active if it sent us new data this recently, ns.
const ACTIVE_NS: u64 = 1_000_000;

impl Srd {
    /// Receiver credit per sender at `now` (incast defence): unlimited with
    /// one active sender; with several, `credit_budget` packets beyond their
    /// cumulative acks shared among them (at least one each). A sender is
    /// active if it sent us new data in the last `ACTIVE_NS`.
    pub(crate) fn update_credit(&mut self, now: Instant) {
        const REFRESH_NS: u64 = 50_000;
        if !self.recount
            && self
                .credit_at
                .is_some_and(|t| now.saturating_since(t).as_nanos() < u128::from(REFRESH_NS))
        {
            return;
        }
        self.credit_at = Some(now);
        self.recount = false;
        let active = self
            .peers
            .iter()
            .filter(|p| {
                p.rx_last_data
                    .is_some_and(|t| now.saturating_since(t).as_nanos() < u128::from(ACTIVE_NS))
            })
            .count() as u32;
        self.credit = if active <= 1 {
            CREDIT_UNLIMITED
        } else {
            (self.p.credit_budget / active).clamp(1, u32::from(CREDIT_UNLIMITED) - 1) as u16
        };
    }

    /// A UDP datagram arrived from `from` (source IP and port). Returns the
    /// payload to deliver, if this packet carries new data.
    pub fn handle_datagram<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a [u8],
    ) -> Option<(PeerId, &'a [u8])> {
        self.stats.rx_packets += 1;
        let parsed = Packet::new_checked(data).and_then(|p| Repr::parse(&p).map(|r| (p, r)));
        let Ok((pkt, h)) = parsed else {
            self.stats.rx_malformed += 1;
            return None;
        };
        if h.ty == PacketType::Data && usize::from(h.payload_len) > self.p.max_payload {
            self.stats.rx_malformed += 1;
            return None;
        }
        let addr = SocketAddr::new(from.ip(), h.src_port);
        let id = self.peer(addr);
        if h.ty == PacketType::Data {
            self.update_credit(now);
        }
        let my_epoch = self.p.epoch;
        let (peer, mut ctx) = self.split(id.0 as usize);
        if h.ty != PacketType::Reset && h.dst_epoch != 0 && h.dst_epoch != my_epoch {
            // Meant for another incarnation of us: tell the sender (rate-limited).
            ctx.stats.rx_stale_dst += 1;
            let quiet = peer
                .last_reset
                .is_none_or(|t| now.saturating_since(t).as_nanos() as u64 >= ctx.p.min_rto_ns);
            if h.dst_epoch < my_epoch && quiet {
                peer.reset_pending = true;
            }
            return None;
        }
        if peer.remote_epoch == 0 {
            peer.remote_epoch = h.src_epoch;
        } else if h.src_epoch < peer.remote_epoch {
            ctx.stats.rx_stale_src += 1;
            return None;
        } else if h.src_epoch > peer.remote_epoch {
            peer.restart(&mut ctx, h.src_epoch);
        }
        if let Some(ack) = &h.ack {
            if h.dst_epoch == my_epoch {
                let ext = if h.ty == PacketType::Ack {
                    pkt.payload_ref()
                } else {
                    &[]
                };
                peer.on_ack(&mut ctx, now, ack, ext);
            }
        }
        match h.ty {
            PacketType::Reset | PacketType::Ack => None,
            PacketType::Probe => {
                peer.rx.ack_now = true;
                None
            }
            PacketType::Data => {
                if (h.psn_floor.wrapping_sub(h.psn) as i32) > 0 {
                    ctx.stats.rx_malformed += 1;
                    return None;
                }
                peer.rx.advance_floor(h.psn_floor);
                match peer.rx.on_packet(h.psn, now) {
                    Arrival::New => {
                        let was_active = peer.rx_last_data.is_some_and(|t| {
                            now.saturating_since(t).as_nanos() < u128::from(ACTIVE_NS)
                        });
                        peer.rx_last_data = Some(now);
                        peer.rx.unacked += 1;
                        peer.rx.received = peer.rx.received.saturating_add(1);
                        if peer.rx.unacked >= ctx.p.ack_every || h.flags & flags::ACK_NOW != 0 {
                            peer.rx.ack_now = true;
                        }
                        if peer.timers.get(Timer::Ack).is_none() {
                            peer.timers.set(
                                Timer::Ack,
                                now + core::time::Duration::from_nanos(ctx.p.ack_delay_ns),
                            );
                        }
                        ctx.stats.rx_delivered += 1;
                        if !was_active {
                            // The set of active senders grew: recount the
                            // fair share before the next ack leaves.
                            *ctx.recount = true;
                        }
                        Some((id, pkt.payload_ref()))
                    }
                    Arrival::Duplicate => {
                        ctx.stats.rx_duplicates += 1;
                        peer.rx.ack_now = true;
                        None
                    }
                    Arrival::OutOfWindow => {
                        ctx.stats.rx_out_of_window += 1;
                        peer.rx.ack_now = true;
                        None
                    }
                }
            }
        }
    }
}
