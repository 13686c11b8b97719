//! Fuzz target: any byte string parsed as an SRD header and as a message
//! header, then fed to a live RDM engine as a UDP datagram from a peer —
//! nothing may panic. Odd-length inputs are first given that peer's session
//! (its nonce and token patched in), so they reach past the token check into
//! the window, the acks and the message layer.
//! Run: `cd provider && cargo +nightly fuzz run wire_and_engine`.
#![no_main]

use core::net::SocketAddr;

use libfuzzer_sys::fuzz_target;
use spray::msg::{RecvFlags, RecvOp};
use spray::time::Instant;
use spray::wire::{msg, srd};
use spray::{Config, Engine, EpMode};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = srd::Packet::new_checked(data) {
        let _ = srd::Repr::parse(&p);
    }
    if let Ok(p) = msg::Packet::new_checked(data) {
        let _ = msg::Repr::parse(&p);
    }
    let local: SocketAddr = "10.0.0.1:5000".parse().expect("literal");
    let from: SocketAddr = "10.0.0.2:5003".parse().expect("literal");
    let mut cfg = Config::new(EpMode::Rdm, local);
    cfg.nonce = 9;
    let mut e: Engine<Vec<u8>> = Engine::new(cfg);
    // A real peer at `from` opens a session (HELLO, CHALLENGE, one message);
    // its last packet's nonce and token make the fuzzed bytes its own.
    let mut pc = Config::new(EpMode::Rdm, SocketAddr::new(from.ip(), 5000));
    pc.nonce = 10;
    let mut peer: Engine<Vec<u8>> = Engine::new(pc);
    let to = peer.peer(local);
    let op = spray::msg::SendOp {
        peer: to,
        buf: vec![1u8; 8],
        tag: None,
        data: None,
        context: 1,
        report: false,
        delivery_complete: false,
        lazy: false,
    };
    let _ = peer.post_send(op);
    let mut buf = vec![0u8; 65536];
    let mut session = None;
    for _ in 0..3 {
        while let Some(t) = peer.poll_transmit(Instant::from_nanos(500), &mut buf) {
            session = buf.get(8..24).map(|b| b.to_vec());
            e.handle_datagram(Instant::from_nanos(500), from, &buf[..t.len]);
        }
        while let Some(t) = e.poll_transmit(Instant::from_nanos(500), &mut buf) {
            peer.handle_datagram(Instant::from_nanos(500), local, &buf[..t.len]);
        }
    }
    let mut owned = data.to_vec();
    if let (Some(s), true) = (session, data.len() % 2 == 1) {
        if let Some(d) = owned.get_mut(8..24) {
            d.copy_from_slice(&s);
        }
        if let Some(d) = owned.get_mut(4..6) {
            d.copy_from_slice(&5000u16.to_be_bytes());
        }
    }
    let data = &owned[..];
    let recv = RecvOp {
        src: None,
        buf: vec![0u8; 4096],
        tag: None,
        context: 1,
        flags: RecvFlags::default(),
        report: true,
    };
    let _ = e.post_recv(recv);
    // The same bytes twice: the second time they meet the state the first left.
    for t in [1_000u64, 2_000_000] {
        e.handle_datagram(Instant::from_nanos(t), from, data);
        e.handle_timeout(Instant::from_nanos(t + 1));
        while e
            .poll_transmit(Instant::from_nanos(t + 2), &mut buf)
            .is_some()
        {}
        while e.poll_completion().is_some() {}
    }
});
