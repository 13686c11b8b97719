//! The sockets an endpoint only sends from (all but socket 0) hold a small
//! receive buffer (issue 17: "15 of the 16 sockets of an endpoint are never
//! read, yet each holds up to 32 MiB of kernel buffer that anyone can fill").
//! Their SO_RCVBUF reads back small while socket 0 keeps its large one, and a
//! flood of datagrams from a plain UDP socket at one of their ports leaves at
//! most a few KiB queued there (/proc/net/udp `rx_queue`); the endpoint still
//! works afterwards.

mod common;
use common::duo::{wait_one, Duo};
use common::fab::*;

use std::ptr::null_mut;

/// Most a send-only socket may hold, bytes (the kernel doubles what it is
/// given; as root SO_RCVBUFFORCE may go below the unprivileged minimum).
const SMALL: usize = 16 << 10;

fn rcvbuf(fd: i32) -> usize {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY (test): getsockopt of one int on our own socket.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt SO_RCVBUF");
    v as usize
}

/// (rx_queue bytes, drops) of the IPv4 UDP socket bound to 127.0.0.1:`port`.
fn udp_queue(port: u16) -> (usize, u64) {
    let t = std::fs::read_to_string("/proc/net/udp").expect("/proc/net/udp");
    let want = format!("0100007F:{port:04X}");
    for l in t.lines().skip(1) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() > 12 && f[1] == want {
            let rx = f[4].split(':').nth(1).expect("tx:rx");
            let q = usize::from_str_radix(rx, 16).expect("rx_queue");
            return (q, f[12].parse().unwrap_or(0));
        }
    }
    panic!("no UDP socket on port {port} in /proc/net/udp");
}

#[test]
fn send_only_sockets_have_small_receive_buffers() {
    let d = Duo::new();
    let mains: Vec<u16> =
        d.ep.iter()
            .map(|&e| u16::from_be(getname(e).sin_port))
            .collect();
    let mut send_only = Vec::new();
    for (fd, me, _) in common::udp_sockets() {
        let port = u16::from_be(me.sin_port);
        if u32::from_be(me.sin_addr.s_addr) != u32::from(std::net::Ipv4Addr::LOCALHOST) {
            continue;
        }
        let buf = rcvbuf(fd);
        if mains.contains(&port) {
            assert!(buf > 4 * SMALL, "socket 0 ({port}) keeps its buffer: {buf}");
        } else {
            assert!(buf <= SMALL, "send-only socket {port}: SO_RCVBUF {buf}");
            send_only.push(port);
        }
    }
    // Both endpoints' other sockets (FI_SPRAY_PATHS, default 16).
    assert!(
        send_only.len() >= 2 * 15,
        "send-only sockets: {send_only:?}"
    );
    // Flood one of them (nothing connected it to a peer yet: it takes
    // datagrams from anyone) from a plain UDP socket.
    let target = send_only[0];
    let (q0, drops0) = udp_queue(target);
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let junk = vec![0x5Au8; 1400];
    let mut sent = 0;
    for _ in 0..5000 {
        if s.send_to(&junk, ("127.0.0.1", target)).is_ok() {
            sent += 1;
        }
    }
    let (q, drops) = udp_queue(target);
    println!(
        "send-only socket {target}: {sent} datagrams of 1400 B sent at it; rx_queue {q0} -> {q} B, drops {drops0} -> {drops}"
    );
    assert!(sent > 1000, "the flood did not go out");
    assert!(q <= SMALL, "{q} bytes queued at a socket nobody reads");
    // The endpoints still talk.
    let mut out = [7u8; 64];
    let mut inb = [0u8; 64];
    unsafe {
        let rc = (*(*d.ep[1]).msg).recv.unwrap()(
            d.ep[1],
            inb.as_mut_ptr().cast(),
            inb.len(),
            null_mut(),
            u64::MAX,
            null_mut(),
        );
        assert_eq!(rc, 0);
        let rc = (*(*d.ep[0]).msg).send.unwrap()(
            d.ep[0],
            out.as_mut_ptr().cast(),
            out.len(),
            null_mut(),
            d.addr[1],
            null_mut(),
        );
        assert_eq!(rc, 0);
    }
    wait_one(d.cq[1], d.cq[0]).expect("receive");
    wait_one(d.cq[0], d.cq[1]).expect("send");
    assert_eq!(inb, out);
    d.close();
}
