//! Wall-clock cost of the SRD core: two `Srd`s wired back to back in memory
//! (a zero-latency loopback), bulk 64 KiB datagrams and 8-byte ping-pong.
//! Prints rates (run with `--release --nocapture` for meaningful numbers);
//! asserts that everything arrives exactly once and the pool stops allocating.

use core::net::SocketAddr;
use std::time::Instant as Wall;

use spray::config::{Config, EpMode};
use spray::dgram::DgramEvent;
use spray::srd::Srd;
use spray::time::Instant;
use spray::Datagrams;

fn pair(max_datagram: usize) -> (Srd, Srd, SocketAddr, SocketAddr) {
    let a_addr: SocketAddr = "127.0.0.1:7000".parse().unwrap();
    let b_addr: SocketAddr = "127.0.0.1:7100".parse().unwrap();
    let mut ca = Config::new(EpMode::Dgram, a_addr);
    let mut cb = Config::new(EpMode::Dgram, b_addr);
    ca.max_datagram = max_datagram;
    cb.max_datagram = max_datagram;
    ca.nonce = 5;
    cb.nonce = 6;
    (Srd::new(&ca), Srd::new(&cb), a_addr, b_addr)
}

/// Move every packet each side has, both ways, at `now`; returns delivered count at b.
fn pump(
    a: &mut Srd,
    b: &mut Srd,
    a_addr: SocketAddr,
    b_addr: SocketAddr,
    now: Instant,
    buf: &mut [u8],
) -> (u64, u64) {
    let (mut to_b, mut to_a) = (0, 0);
    while let Some(t) = a.poll_transmit(now, buf) {
        if b.handle_datagram(now, a_addr, &buf[..t.len]).is_some() {
            to_b += 1;
        }
    }
    while let Some(t) = b.poll_transmit(now, buf) {
        if a.handle_datagram(now, b_addr, &buf[..t.len]).is_some() {
            to_a += 1;
        }
    }
    (to_b, to_a)
}

#[test]
fn bulk_and_ping_pong_cost() {
    let (mut a, mut b, a_addr, b_addr) = pair(65000);
    let pb = a.peer(b_addr);
    let mut buf = vec![0u8; 65536];
    let n = 20_000u64;
    let size = 64000;
    let start = Wall::now();
    let (mut sent, mut got, mut acked) = (0u64, 0u64, 0u64);
    let mut now_ns = 0u64;
    let mut spins = 0;
    while acked < n && spins < 10_000_000 {
        spins += 1;
        while sent < n && a.can_send(pb) {
            a.send(pb, sent, size, &mut |x| x[0] = 1).unwrap();
            sent += 1;
        }
        let now = Instant::from_nanos(now_ns);
        got += pump(&mut a, &mut b, a_addr, b_addr, now, &mut buf).0;
        while let Some(e) = a.poll_event() {
            if let DgramEvent::Acked { count, .. } = e {
                acked += u64::from(count);
            }
        }
        // Time moves like a fast loopback: 20 µs per round.
        now_ns += 20_000;
        a.handle_timeout(Instant::from_nanos(now_ns));
        b.handle_timeout(Instant::from_nanos(now_ns));
    }
    let el = start.elapsed().as_secs_f64();
    println!(
        "bulk: {n} x {size} B in {el:.3} s wall = {:.2} GB/s of CPU, {:.0} ns/packet; simulated {:.2} GB/s",
        (n * size as u64) as f64 / el / 1e9,
        el * 1e9 / n as f64,
        (n * size as u64) as f64 / now_ns as f64
    );
    assert_eq!(got, n);
    assert_eq!(acked, n);
    let bufs = a.pool_allocated();
    println!("pool buffers allocated: {bufs}");
    assert!(
        bufs <= 4096,
        "pool allocated {bufs} buffers for {n} datagrams"
    );

    // Ping-pong of 8-byte messages: one packet each way per round, once the
    // session is up (HELLO, CHALLENGE, then the first datagram: one round
    // trip before the first data, none after).
    let (mut a, mut b, a_addr, b_addr) = pair(1472);
    let pb = a.peer(b_addr);
    a.send(pb, u64::MAX, 8, &mut |x| x.fill(0)).unwrap();
    let hello = a.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    assert!(b
        .handle_datagram(Instant::ZERO, a_addr, &buf[..hello.len])
        .is_none());
    let challenge = b.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    assert!(a
        .handle_datagram(Instant::ZERO, b_addr, &buf[..challenge.len])
        .is_none());
    let first = a.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    let (pa, _) = b
        .handle_datagram(Instant::ZERO, a_addr, &buf[..first.len])
        .unwrap();
    b.send(pa, u64::MAX, 8, &mut |x| x.fill(0)).unwrap();
    let reply = b.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    assert!(a
        .handle_datagram(Instant::ZERO, b_addr, &buf[..reply.len])
        .is_some());
    while a.poll_event().is_some() {}
    while b.poll_event().is_some() {}
    let rounds = 100_000u64;
    let start = Wall::now();
    let mut tx = 0u64;
    for r in 0..rounds {
        let now = Instant::from_nanos(r * 10_000);
        a.send(pb, r, 8, &mut |x| x.copy_from_slice(&r.to_le_bytes()))
            .unwrap();
        let t = a.poll_transmit(now, &mut buf).unwrap();
        tx += 1;
        let (peer, data) = b.handle_datagram(now, a_addr, &buf[..t.len]).unwrap();
        assert_eq!(data, &r.to_le_bytes());
        b.send(peer, r, 8, &mut |x| x.copy_from_slice(&r.to_le_bytes()))
            .unwrap();
        let t = b.poll_transmit(now, &mut buf).unwrap();
        tx += 1;
        assert!(a.handle_datagram(now, b_addr, &buf[..t.len]).is_some());
        while a.poll_event().is_some() {}
        while b.poll_event().is_some() {}
        assert!(
            a.poll_transmit(now, &mut buf).is_none() && b.poll_transmit(now, &mut buf).is_none()
        );
    }
    let el = start.elapsed().as_secs_f64();
    println!(
        "ping-pong: {rounds} rounds, {tx} packets, {:.0} ns per round trip of CPU",
        el * 1e9 / rounds as f64
    );
    assert_eq!(tx, 2 * rounds);
}
