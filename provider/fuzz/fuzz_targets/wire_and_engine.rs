//! Fuzz target: any byte string parsed as an SRD header and as a message
//! header, then fed to a live RDM engine as a UDP datagram from a peer —
//! nothing may panic. Run: `cd provider && cargo +nightly fuzz run wire_and_engine`.
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
        let mut buf = vec![0u8; 65536];
        while e
            .poll_transmit(Instant::from_nanos(t + 2), &mut buf)
            .is_some()
        {}
        while e.poll_completion().is_some() {}
    }
});
