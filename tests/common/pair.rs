//! Two spray endpoints of one domain over loopback, and application buffers
//! split into uneven pieces with guard bytes around each: what the tests of
//! large messages and direct placement share.
#![allow(dead_code)]

use std::os::raw::c_void;
use std::ptr::null_mut;

use spray_fi::sys;

use super::fab::*;

pub const GUARD: usize = 64;
pub const GUARD_BYTE: u8 = 0xA7;

/// A buffer split into uneven pieces with guard bytes around each one.
pub struct Scattered {
    pub mem: Vec<u8>,
    /// (offset in `mem`, length) of each piece.
    pub pieces: Vec<(usize, usize)>,
}

impl Scattered {
    /// `total` bytes in pieces of the given proportions (last takes the rest).
    pub fn new(total: usize, splits: &[usize], fill: u8) -> Scattered {
        let mut pieces = Vec::new();
        let mut off = GUARD;
        let mut left = total;
        for (k, &s) in splits.iter().enumerate() {
            let n = if k + 1 == splits.len() {
                left
            } else {
                (total * s / 100).min(left)
            };
            pieces.push((off, n));
            off += n + GUARD;
            left -= n;
        }
        let mut mem = vec![GUARD_BYTE; off];
        for &(o, n) in &pieces {
            mem[o..o + n].fill(fill);
        }
        Scattered { mem, pieces }
    }

    pub fn iov(&mut self) -> Vec<libc::iovec> {
        let base = self.mem.as_mut_ptr();
        self.pieces
            .iter()
            .map(|&(o, n)| libc::iovec {
                // SAFETY (test): o + n <= mem.len().
                iov_base: unsafe { base.add(o) }.cast(),
                iov_len: n,
            })
            .collect()
    }

    /// The bytes of the pieces, concatenated.
    pub fn data(&self) -> Vec<u8> {
        self.pieces
            .iter()
            .flat_map(|&(o, n)| self.mem[o..o + n].iter().copied())
            .collect()
    }

    pub fn write(&mut self, data: &[u8]) {
        let mut at = 0;
        for &(o, n) in &self.pieces {
            let k = n.min(data.len() - at);
            self.mem[o..o + k].copy_from_slice(&data[at..at + k]);
            at += k;
        }
    }

    /// Every guard byte untouched.
    pub fn guards_ok(&self) -> bool {
        let mut prev = 0;
        for &(o, n) in &self.pieces {
            if self.mem[prev..o].iter().any(|&b| b != GUARD_BYTE) {
                return false;
            }
            prev = o + n;
        }
        self.mem[prev..].iter().all(|&b| b == GUARD_BYTE)
    }
}

pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub struct Pair {
    pub info: *mut sys::fi_info,
    pub fab: *mut sys::fid_fabric,
    pub dom: *mut sys::fid_domain,
    pub av: *mut sys::fid_av,
    pub ep: [*mut sys::fid_ep; 2],
    pub cq: [*mut sys::fid_cq; 2],
    pub addr: [u64; 2],
}

impl Pair {
    pub fn new() -> Pair {
        let info = getinfo(
            sys::fi_ep_type_FI_EP_RDM,
            (sys::FI_MSG | sys::FI_TAGGED) as u64,
        );
        let (fab, dom) = open_domain(info);
        let av = open_av(dom);
        let mut ep = [null_mut(); 2];
        let mut cq = [null_mut(); 2];
        for i in 0..2 {
            ep[i] = open_ep(dom, info);
            cq[i] = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
            assert_eq!(bind(ep[i], av, 0), 0);
            assert_eq!(
                bind(ep[i], cq[i], (sys::FI_TRANSMIT | sys::FI_RECV) as u64),
                0
            );
            assert_eq!(control(ep[i], sys::FI_ENABLE, null_mut()), 0);
        }
        let addr = [
            av_insert(av, &getname(ep[0])),
            av_insert(av, &getname(ep[1])),
        ];
        Pair {
            info,
            fab,
            dom,
            av,
            ep,
            cq,
            addr,
        }
    }

    pub fn close(self) {
        for i in 0..2 {
            assert_eq!(close(self.ep[i]), 0);
            assert_eq!(close(self.cq[i]), 0);
        }
        assert_eq!(close(self.av), 0);
        assert_eq!(close(self.dom), 0);
        assert_eq!(close(self.fab), 0);
        unsafe { sys::fi_freeinfo(self.info) };
    }

    pub fn trecvv(&self, buf: &mut Scattered, tag: u64, ctx: usize) {
        let iov = buf.iov();
        let rc = unsafe {
            (*(*self.ep[1]).tagged).recvv.unwrap()(
                self.ep[1],
                iov.as_ptr().cast(),
                null_mut(),
                iov.len(),
                u64::MAX, // FI_ADDR_UNSPEC
                tag,
                0,
                ctx as *mut c_void,
            )
        };
        assert_eq!(rc, 0, "fi_trecvv");
    }

    pub fn tsendv(&self, buf: &mut Scattered, tag: u64, ctx: usize) {
        let iov = buf.iov();
        let rc = unsafe {
            (*(*self.ep[0]).tagged).sendv.unwrap()(
                self.ep[0],
                iov.as_ptr().cast(),
                null_mut(),
                iov.len(),
                self.addr[1],
                tag,
                ctx as *mut c_void,
            )
        };
        assert_eq!(rc, 0, "fi_tsendv");
    }
}

/// The fd of this process's UDP socket bound to `sa` (an endpoint's main socket).
pub fn socket_fd_of(sa: &libc::sockaddr_in) -> i32 {
    super::udp_sockets()
        .into_iter()
        .find(|(_, me, _)| me.sin_port == sa.sin_port && me.sin_addr.s_addr == sa.sin_addr.s_addr)
        .map(|(fd, _, _)| fd)
        .unwrap_or_else(|| panic!("no socket bound to port {}", u16::from_be(sa.sin_port)))
}

/// Take every datagram waiting at (non-blocking) `fd`; returns how many.
pub fn take_all(fd: i32) -> usize {
    let mut buf = vec![0u8; 65536];
    let mut n = 0;
    // SAFETY (test): recv into our own buffer; the socket is non-blocking.
    while unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) } >= 0 {
        n += 1;
        assert!(n < 10_000, "socket never ran dry");
    }
    n
}
