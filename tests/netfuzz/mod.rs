//! The network fuzzer of `ffi_netfuzz.rs`: a sniffer of real spray packets on
//! `lo` (an `AF_PACKET` socket, root only), a pool of UDP sockets on many
//! loopback addresses (127.0.0.1 and 127.77.x.y) that every reply comes
//! back to, and a generator of hostile datagrams (random bytes, truncated,
//! extended and mutated real packets, replays, forged packets of every type
//! with right and wrong tokens and nonces, forged HELLOs from many
//! addresses), each classified by `spray::sim::forge::verdict` so the
//! endpoints' drop counters can be checked against what was sent.
//! `SPRAY_NETFUZZ_ONLY=<lo>-<hi>` draws only the generator's classes
//! lo..=hi (of 0..=99, see `Gen::make`), to find which one a miscount
//! comes from.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub mod traffic;

use spray::rng::Rng;
use spray::sim::forge::{
    bytes_of, is_replay, spec_parses, verdict, Field, Forged, Mutation, Verdict,
};
use spray::wire::msg::{MsgType, Repr as MsgRepr, HEADER_LEN as MSG_HEAD};
use spray::wire::srd::{PacketType, HEADER_LEN};

/// `FI_SPRAY_MTU` of the endpoints under test (a jumbo frame's): their
/// largest datagram, bytes.
pub const MTU: usize = 9000;

/// Real packets the sniffer keeps (the newest; at most 64 KiB each, GSO
/// runs included, so the fuzzer's own memory stays bounded).
pub const KEEP: usize = 512;

/// Packets captured on `lo` between the endpoints: (UDP destination port,
/// UDP payload).
#[derive(Default)]
pub struct Captured {
    pub pkts: VecDeque<(u16, Vec<u8>)>,
    pub total: u64,
}

/// A thread reading every IPv4 packet on `lo` and keeping the spray packets
/// sent to one of `ports` from another of them (header `src_port`).
pub struct Sniffer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub caught: Arc<Mutex<Captured>>,
}

impl Sniffer {
    /// `None` without the rights for a packet socket (not root).
    pub fn start(ports: Vec<u16>, exclude_src: Vec<u16>) -> Option<Sniffer> {
        // SAFETY (test): a packet socket bound to lo; all buffers are ours.
        let fd = unsafe {
            let fd = libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM,
                i32::from((libc::ETH_P_IP as u16).to_be()),
            );
            if fd < 0 {
                return None;
            }
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = (libc::ETH_P_IP as u16).to_be();
            sll.sll_ifindex = libc::if_nametoindex(c"lo".as_ptr()) as i32;
            let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            if libc::bind(fd, (&sll as *const libc::sockaddr_ll).cast(), len) != 0 {
                libc::close(fd);
                return None;
            }
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 50_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
            let big: i32 = 8 << 20;
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&big as *const i32).cast(),
                4,
            );
            fd
        };
        let stop = Arc::new(AtomicBool::new(false));
        let caught = Arc::new(Mutex::new(Captured::default()));
        let (s, c) = (stop.clone(), caught.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 70_000];
            while !s.load(Ordering::Relaxed) {
                // SAFETY (test): recvfrom into our buffer and address.
                let (n, kind) = unsafe {
                    let mut sll: libc::sockaddr_ll = std::mem::zeroed();
                    let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
                    let n = libc::recvfrom(
                        fd,
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        0,
                        (&mut sll as *mut libc::sockaddr_ll).cast(),
                        &mut len,
                    );
                    (n, sll.sll_pkttype)
                };
                if n <= 0 || kind == libc::PACKET_OUTGOING {
                    continue;
                }
                if let Some((sport, dport, payload)) = udp_of(&buf[..n as usize]) {
                    let hdr_port = Field::SrcPort.get(payload).unwrap_or(0) as u16;
                    if ports.contains(&dport)
                        && ports.contains(&hdr_port)
                        && !exclude_src.contains(&sport)
                        && spec_parses(payload)
                    {
                        let mut g = c.lock().unwrap_or_else(|e| e.into_inner());
                        if g.pkts.len() == KEEP {
                            g.pkts.pop_front();
                        }
                        g.pkts.push_back((dport, payload.to_vec()));
                        g.total += 1;
                    }
                }
            }
            // SAFETY (test): our own fd.
            unsafe { libc::close(fd) };
        });
        Some(Sniffer {
            stop,
            thread: Some(thread),
            caught,
        })
    }
}

impl Drop for Sniffer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// (UDP source port, destination port, payload) of an IPv4 packet from
/// 127.0.0.1.
fn udp_of(ip: &[u8]) -> Option<(u16, u16, &[u8])> {
    let ihl = usize::from(*ip.first()? & 0x0f) * 4;
    if ip[0] >> 4 != 4 || *ip.get(9)? != 17 || ip.get(12..16)? != [127, 0, 0, 1] {
        return None;
    }
    let u = ip.get(ihl..)?;
    let sport = u16::from_be_bytes([*u.first()?, *u.get(1)?]);
    let dport = u16::from_be_bytes([*u.get(2)?, *u.get(3)?]);
    let ulen = usize::from(u16::from_be_bytes([*u.get(4)?, *u.get(5)?]));
    Some((sport, dport, u.get(8..ulen)?))
}

/// What the session between the two endpoints has shown on the wire.
#[derive(Default, Clone, Debug)]
pub struct Session {
    /// Per endpoint main port: the nonce it sends with.
    pub nonce: Vec<(u16, u64)>,
    /// Tokens, echo values and cookies seen (see `forge::verdict`).
    pub tokens: Vec<u64>,
    /// Tokens of DATA / ACK / PROBE packets.
    pub data_tokens: Vec<u64>,
}

impl Session {
    /// Learn from captured packets.
    pub fn learn(&mut self, pkts: &VecDeque<(u16, Vec<u8>)>) {
        for (_, p) in pkts {
            let get = |f: Field| f.get(p).unwrap_or(0);
            let port = get(Field::SrcPort) as u16;
            match get(Field::Type) {
                1 | 2 | 4 => {
                    let t = get(Field::DstToken);
                    if !self.data_tokens.contains(&t) {
                        self.data_tokens.push(t);
                        self.tokens.push(t);
                    }
                    let n = get(Field::SrcNonce);
                    if !self.nonce.contains(&(port, n)) {
                        self.nonce.push((port, n));
                    }
                }
                5 | 6 => {
                    let v = p
                        .get(HEADER_LEN..HEADER_LEN + 8)
                        .map_or(0, |v| v.iter().fold(0u64, |x, &b| (x << 8) | u64::from(b)));
                    if !self.tokens.contains(&v) {
                        self.tokens.push(v);
                    }
                }
                _ => {}
            }
        }
    }

    fn nonce_of(&self, port: u16) -> u64 {
        self.nonce
            .iter()
            .find(|(p, _)| *p == port)
            .map_or(0, |x| x.1)
    }
}

/// The UDP sockets the fuzzer sends from: socket 0 on 127.0.0.1 (it may
/// claim the endpoints' own address), the others on 127.77.x.y (many
/// source addresses). Every reply to a datagram comes back to one of them.
pub struct Pool {
    pub socks: Vec<UdpSocket>,
    pub ports: Vec<u16>,
}

impl Pool {
    /// Socket 0 and `n` more.
    pub fn new(n: usize) -> Pool {
        let mut socks = vec![UdpSocket::bind("127.0.0.1:0").expect("bind fuzzer socket")];
        for k in 1..=n {
            let ip = Ipv4Addr::new(127, 77, (k >> 8) as u8, k as u8);
            socks.push(UdpSocket::bind(SocketAddrV4::new(ip, 0)).expect("bind 127.77/16"));
        }
        for s in &socks {
            s.set_nonblocking(true).expect("nonblocking");
        }
        let ports = socks
            .iter()
            .map(|s| s.local_addr().expect("addr").port())
            .collect();
        Pool { socks, ports }
    }

    /// Drain every reply; returns (replies, bytes, largest).
    pub fn drain(&self) -> (u64, u64, usize) {
        let mut b = [0u8; 2048];
        let (mut n, mut bytes, mut max) = (0, 0, 0);
        for s in &self.socks {
            while let Ok(k) = s.recv(&mut b) {
                n += 1;
                bytes += k as u64;
                max = max.max(k);
            }
        }
        (n, bytes, max)
    }
}

/// Counts per target endpoint (by main port) of what was sent to it.
#[derive(Default, Clone, Debug)]
pub struct Sent {
    pub total: u64,
    pub bytes: u64,
    pub malformed: u64,
    pub forged: u64,
    pub hellos: u64,
    pub replays: u64,
    /// In-session mutations not sent (only an on-path attacker can make
    /// them; the optional per-packet MAC is for those).
    pub on_path_skipped: u64,
}

impl Sent {
    /// Count a datagram of `len` bytes with verdict `v` as sent.
    pub fn count(&mut self, v: Verdict, len: usize) {
        self.total += 1;
        self.bytes += len as u64;
        match v {
            Verdict::Malformed => self.malformed += 1,
            Verdict::Forged => self.forged += 1,
            Verdict::Hello => self.hellos += 1,
            Verdict::InSession => self.replays += 1,
        }
    }
}

/// The generator: makes one hostile datagram at a time for a target.
pub struct Gen {
    pub rng: Rng,
    pub session: Session,
    /// The two endpoints' main ports.
    pub targets: [u16; 2],
}

impl Gen {
    /// One datagram for target `t` sent from pool socket `sock` (port
    /// `sport`; socket 0 is on 127.0.0.1) and its verdict; `None` when the
    /// try made an in-session packet that is no replay (only an on-path
    /// attacker can: counted in `sent.on_path_skipped`).
    pub fn make(
        &mut self,
        t: usize,
        sock: usize,
        sport: u16,
        caught: &VecDeque<(u16, Vec<u8>)>,
        sent: &mut Sent,
    ) -> Option<(Vec<u8>, Verdict)> {
        let target = self.targets[t];
        let peer = self.targets[1 - t];
        // Real packets sent to this target.
        let pick = |rng: &mut Rng| -> Option<Vec<u8>> {
            if caught.is_empty() {
                return None;
            }
            for _ in 0..8 {
                let (d, p) = &caught[rng.below(caught.len() as u64) as usize];
                if *d == target {
                    return Some(p.clone());
                }
            }
            None
        };
        let r = &mut self.rng;
        let class = match std::env::var("SPRAY_NETFUZZ_ONLY").ok().and_then(|v| {
            let (a, b) = v.split_once('-')?;
            Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?))
        }) {
            Some((lo, hi)) => lo + r.below(hi - lo + 1),
            None => r.below(100),
        };
        let (mut b, orig) = match class {
            0..=14 => {
                let len = match r.below(10) {
                    0 => 0,
                    1..=3 => r.below(64),
                    4..=7 => 56 + r.below(80),
                    8 => r.below(1500),
                    _ => r.below(9000),
                } as usize;
                (bytes_of(r.next_u64(), len), None)
            }
            15..=24 => {
                // Random bytes with a plausible header start.
                let mut b = bytes_of(r.next_u64(), 56 + r.below(120) as usize);
                Field::Version.set(&mut b, 2);
                Field::Type.set(&mut b, 1 + r.below(7));
                Field::Flags.set(&mut b, r.next_u64() & 0x8f);
                Field::PayloadLen.set(&mut b, r.below(130));
                (b, None)
            }
            25..=54 => match pick(r) {
                Some(o) => {
                    let mut b = o.clone();
                    for _ in 0..=r.below(3) {
                        Mutation::random(r).apply(&mut b);
                    }
                    (b, Some(o))
                }
                None => (self.forged(t, sport), None),
            },
            55..=57 => match newest_data(caught, target) {
                // A malformed packet with the session's token (a DATA
                // floor after its PSN) that claims more acknowledged than
                // the newest real ack did: dropped at parsing. Applied
                // (as before the floor moved into `Repr::parse`), the
                // sender took lost datagrams for delivered and the
                // session stalled on them.
                Some(o) => {
                    let mut b = o.clone();
                    let psn = Field::Psn.get(&b).unwrap_or(0);
                    Field::PsnFloor.set(&mut b, psn.wrapping_add(1 + r.below(4)) & 0xffff_ffff);
                    let cum = Field::AckCum.get(&b).unwrap_or(0);
                    let claim = cum.wrapping_add(1 + r.below(256)) & 0xffff_ffff;
                    Field::AckCum.set(&mut b, claim);
                    Field::AckRecent.set(&mut b, claim.wrapping_sub(1) & 0xffff_ffff);
                    Field::SackBase.set(&mut b, claim);
                    (b, Some(o))
                }
                None => (self.forged(t, sport), None),
            },
            58..=64 => match pick(r) {
                Some(o) => {
                    let mut b = o.clone();
                    if r.chance(0.3) {
                        b.extend(bytes_of(r.next_u64(), r.below(64) as usize));
                    }
                    (b, Some(o))
                }
                None => (self.forged(t, sport), None),
            },
            65..=84 => (self.forged(t, sport), None),
            _ => {
                let f = Forged::new(
                    PacketType::Hello,
                    sport,
                    r.next_u64().max(1),
                    r.next_u64(),
                    &[],
                );
                (f.to_bytes(), None)
            }
        };
        // Replies go to sockets of ours only: a parsable packet claims the
        // peer endpoint's address (from 127.0.0.1) or the sending socket's.
        if spec_parses(&b) {
            let claimed = Field::SrcPort.get(&b).unwrap_or(0) as u16;
            if sock != 0 || claimed != peer {
                Field::SrcPort.set(&mut b, u64::from(sport));
            }
        }
        // Longer than the endpoint's receive slot: cut and counted
        // (`rx_truncated`). Captures of GSO super-packets (a run of
        // datagrams the kernel carries as one on `lo`) come close.
        let v = if b.len() > MTU {
            Verdict::Malformed
        } else {
            verdict(
                &b,
                sock == 0,
                peer,
                self.session.nonce_of(peer),
                &self.session.tokens,
                MTU - HEADER_LEN,
            )
        };
        if v == Verdict::InSession && !orig.as_ref().is_some_and(|o| is_replay(&b, o)) {
            sent.on_path_skipped += 1;
            return None;
        }
        Some((b, v))
    }

    /// A forged packet of any type for target `t`: claiming the peer
    /// endpoint (its nonce or not) or the sender, with the session's token,
    /// none, or a guess, and random sequence and ack fields; DATA carries a
    /// forged message (eager DATA or a rendezvous request) or junk.
    fn forged(&mut self, t: usize, sport: u16) -> Vec<u8> {
        let peer = self.targets[1 - t];
        let r = &mut self.rng;
        let ty = [
            PacketType::Data,
            PacketType::Data,
            PacketType::Ack,
            PacketType::Reset,
            PacketType::Probe,
            PacketType::Hello,
            PacketType::Challenge,
            PacketType::Rails,
        ][r.below(8) as usize];
        let port = if r.chance(0.7) { peer } else { sport };
        let nonce = match (r.below(3), self.session.nonce_of(peer)) {
            (0, n) if n != 0 => n,
            (1, _) => 0xffff_ffff,
            _ => r.next_u64().max(1),
        };
        let token = match (r.below(3), self.session.data_tokens.first()) {
            (0, Some(&tk)) => tk,
            (1, _) => 0,
            _ => r.next_u64(),
        };
        let payload = if ty == PacketType::Data && r.chance(0.6) {
            let rts = r.chance(0.5);
            let body = if rts {
                Vec::new()
            } else {
                vec![0xF0; r.below(1200) as usize]
            };
            let m = MsgRepr {
                ty: if rts { MsgType::Rts } else { MsgType::Data },
                seq: r.below(64) as u32,
                total: if rts { 1 << 20 } else { body.len() as u64 },
                offset: 0,
                tag: r.chance(0.7).then(|| r.below(4)),
                data: None,
            };
            let mut b = vec![0u8; MSG_HEAD + body.len()];
            m.emit_into(&mut b);
            b[MSG_HEAD..].copy_from_slice(&body);
            b
        } else {
            bytes_of(r.next_u64(), r.below(300) as usize)
        };
        let mut f = Forged::new(ty, port, nonce, token, &payload);
        if !matches!(
            ty,
            PacketType::Reset | PacketType::Hello | PacketType::Challenge
        ) {
            f.repr.psn = r.next_u64() as u32;
            f.repr.psn_floor = f.repr.psn.wrapping_sub(r.below(3) as u32);
            f.repr.flags = r.next_u64() as u8 & 0x0e;
            if let Some(a) = f.repr.ack.as_mut() {
                a.cum = r.next_u64() as u32;
                a.recent = r.next_u64() as u32;
                a.credit = r.next_u64() as u16;
                a.sack_base = a.cum;
                a.sack_bits = r.next_u64();
            }
        }
        f.to_bytes()
    }
}

/// The newest captured DATA packet to `target` that carries an ack.
fn newest_data(caught: &VecDeque<(u16, Vec<u8>)>, target: u16) -> Option<Vec<u8>> {
    caught
        .iter()
        .rev()
        .find(|(d, p)| {
            *d == target
                && Field::Type.get(p) == Some(PacketType::Data as u64)
                && Field::Flags.get(p).is_some_and(|f| f & 0x01 != 0)
        })
        .map(|(_, p)| p.clone())
}

/// Send `pkts` from `sock` to `to` with one `sendmmsg` call (as many as the
/// kernel takes); returns how many left.
pub fn send_batch(sock: &UdpSocket, to: &[SocketAddrV4], pkts: &[Vec<u8>]) -> usize {
    let addrs: Vec<libc::sockaddr_in> = to
        .iter()
        .map(|a| libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*a.ip()).to_be(),
            },
            sin_zero: [0; 8],
        })
        .collect();
    let mut iov: Vec<libc::iovec> = pkts
        .iter()
        .map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = (0..pkts.len())
        .map(|i| {
            // SAFETY (test): a zeroed msghdr is valid; pointers set below.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = (&addrs[i] as *const libc::sockaddr_in) as *mut libc::c_void;
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
            h.msg_hdr.msg_iov = &mut iov[i];
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    // SAFETY (test): every pointer refers to the vectors above, alive here.
    let n = unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), msgs.len() as u32, 0) };
    n.max(0) as usize
}

/// Datagrams the kernel dropped at the full receive buffer of this
/// process's UDP socket on `port` (the `drops` column of `/proc/net/udp`;
/// 0 once the socket is closed).
pub fn udp_drops(port: u16) -> u64 {
    let t = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    let hex = format!(":{port:04X}");
    t.lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|local| local.ends_with(&hex))
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum()
}

/// (VmRSS, VmHWM) of this process, KiB.
pub fn rss_kib() -> (u64, u64) {
    let t = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| {
        t.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|x| x.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
