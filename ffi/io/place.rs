//! Direct placement: while a matched rendezvous receive (or an RMA transfer)
//! waits for data, a datagram's payload is received straight into the
//! application's buffer instead of a slot.
//!
//! Two ways in. The peek path: a `MSG_PEEK` at the headers, `place_with`
//! says where the payload goes, then the receive scatters headers to slot 0
//! and payload to that range (2 syscalls). The guessed path: where the next
//! pieces of an in-order stream go is known before they arrive
//! (`Engine::guess_rdata_nth`), so up to `GUESS_BATCH` datagrams are received
//! in one `recvmmsg`, each as [headers | its guessed range | spill-over],
//! then confirmed in order with `Engine::check_guess`. From the first one
//! that is not the piece guessed for it, it and every later one of the batch
//! are put back together in their slots *before* any of them is handled
//! (their bytes sit in guessed ranges, where a datagram handled as received
//! may belong), then handled as received.
//!
//! Coalesced receives (GRO): a datagram holding several segments is placed
//! for its first segment only; the rest of it (already behind the first
//! segment's range in the slot: the spill-over starts where a contiguous
//! layout has the second segment) is handled as received, after every later
//! datagram of the batch was put back together.

use spray::{Engine, GuessCheck};

use crate::io::buf::FfiBuf;
use crate::io::clock;
use crate::io::driver::IoStats;
use crate::io::rx::{for_each_segment, sys_recvmmsg, Rx, GRO_SLOT_BYTES};
use crate::limits::IOV_LIMIT;

/// After a wrong guess, this many datagrams go through the peek path before
/// the next guess (several senders' data interleaving would miss every time).
const GUESS_COOLDOWN: u32 = 8;

/// Most guessed receives in one `recvmmsg` (each into its own place).
const GUESS_BATCH: usize = 8;

/// iovecs of one guessed receive: headers, up to `IOV_LIMIT` pieces, spill-over.
const GUESS_IOVS: usize = IOV_LIMIT + 2;

/// Most pieces guessed for one coalesced receive (the kernel coalesces at
/// most 64 datagrams).
const CHAIN_MAX: usize = 64;

/// Coalesced receives are chained (`recv_chain`) while datagrams come this
/// many to a receive or more, on average.
const CHAIN_MIN_COALESCED: u32 = 4;

/// iovecs of one directly placed receive: headers into slot 0, payload into
/// up to `IOV_LIMIT` application pieces, the rest of slot 0.
const PLACE_IOVS: usize = 2 + IOV_LIMIT;

/// Where one datagram of a batch of guessed receives was expected to put its
/// payload: `n` bytes at `at` of the receive buffer `buf`, which lies in
/// `pieces[..np]` of application memory.
#[derive(Copy, Clone)]
struct Guess {
    buf: *const FfiBuf,
    at: usize,
    n: usize,
    pieces: [(*const u8, usize); IOV_LIMIT],
    np: usize,
}

const NO_GUESS: Guess = Guess {
    buf: std::ptr::null(),
    at: 0,
    n: 0,
    pieces: [(std::ptr::null(), 0); IOV_LIMIT],
    np: 0,
};

/// The placement paths' own state (the slots are `Rx`'s).
pub(crate) struct Placer {
    /// iovecs of one directly placed receive.
    place_iov: [libc::iovec; PLACE_IOVS],
    /// Guessed receives, `GUESS_IOVS` per slot: headers in the slot, the
    /// guessed range (up to `IOV_LIMIT` pieces), the rest of the slot for
    /// whatever spills over.
    guess_iov: Vec<libc::iovec>,
    /// Per slot of a batch of guessed receives: where its payload was
    /// expected to go.
    guesses: Vec<Guess>,
    /// Datagrams left to receive through the peek path before guessing again.
    cooldown: u32,
    /// Coalesced receives (see `recv_chain`): per guessed piece, its headers
    /// (`RDATA_HEAD_LEN` bytes each).
    chain_hdrs: Vec<u8>,
    /// The iovecs of one coalesced receive: [headers | piece] per guess, then
    /// the spill-over.
    chain_iov: Vec<libc::iovec>,
    /// The guesses of one coalesced receive.
    chain: Vec<Guess>,
    /// The spill-over of a coalesced receive (`GRO_SLOT_BYTES`).
    chain_spill: Vec<u8>,
    /// One segment's headers, as long as the segment (the check reads the
    /// headers and the length only).
    chain_seg: Vec<u8>,
    /// Datagrams per receive lately, fixed point x16 (an average): the
    /// chained receive pays off only while datagrams come coalesced.
    coalesce_x16: u32,
}

impl Placer {
    pub(crate) fn new(batch: usize) -> Placer {
        let none = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        Placer {
            place_iov: [none; PLACE_IOVS],
            guess_iov: vec![none; batch.min(GUESS_BATCH) * GUESS_IOVS],
            guesses: vec![NO_GUESS; batch.min(GUESS_BATCH)],
            cooldown: 0,
            chain_hdrs: vec![0; CHAIN_MAX * Engine::<FfiBuf>::RDATA_HEAD_LEN],
            chain_iov: vec![none; CHAIN_MAX * (1 + IOV_LIMIT) + 1],
            chain: vec![NO_GUESS; CHAIN_MAX],
            chain_spill: Vec::new(),
            chain_seg: Vec::new(),
            coalesce_x16: 16,
        }
    }

    /// Receive up to `max` datagrams (at most the batch size) from socket
    /// `fd`, rendezvous data for a matched receive straight into the
    /// application's buffer, everything else through the slots and
    /// `handle_datagram`. Returns how many arrived; `rx.full` tells whether
    /// the socket may hold more. Worth it only while `engine.expects_rdata()`.
    pub(crate) fn recv_placed(
        &mut self,
        rx: &mut Rx,
        fd: i32,
        engine: &mut Engine<FfiBuf>,
        max: usize,
        stats: &mut IoStats,
    ) -> usize {
        let want = max.clamp(1, rx.batch);
        let mut got = 0;
        while got < want {
            if self.cooldown == 0 && rx.gro && self.coalesce_x16 >= 16 * CHAIN_MIN_COALESCED {
                if let Some((n, drained)) = self.recv_chain(rx, fd, engine, stats) {
                    got += n;
                    if drained {
                        break;
                    }
                    continue;
                }
            }
            if self.cooldown == 0 {
                if let Some((n, drained)) = self.recv_guessed(rx, fd, engine, want - got, stats) {
                    got += n;
                    if drained {
                        break;
                    }
                    continue;
                }
            } else {
                self.cooldown -= 1;
            }
            match self.recv_peeked(rx, fd, engine, stats) {
                Some(n) => got += n,
                None => break,
            }
        }
        stats.rx_packets += got as u64;
        rx.last = got;
        // Every way out of the loop but a full count found the socket empty.
        rx.full = got >= want;
        got
    }

    /// One receive brought `n` datagrams: the running average of coalescing.
    fn note_coalesced(&mut self, n: usize) {
        let n = (n.min(64) as u32) * 16;
        self.coalesce_x16 = (7 * self.coalesce_x16 + n) / 8;
    }

    /// One coalesced datagram received straight into the places of up to
    /// `CHAIN_MAX` guessed pieces: one `recvmsg` with the iovecs [headers |
    /// piece] per guess, then a spill-over. Where the kernel coalesced the
    /// next pieces of the stream (a flowlet the sender sent segmented), each
    /// segment lands with its headers in `chain_hdrs` and its payload in its
    /// place, and `check_guess` confirms them in order. From the first
    /// segment that is not where its guess put it (another size, another
    /// piece, not data at all), the rest of the datagram is put back
    /// together in a buffer of its own *before* any of it is handled (its bytes
    /// sit in guessed places, where a segment handled as received may
    /// belong), then handled as received. None: no guess; else (datagrams
    /// handled, whether the socket ran dry).
    ///
    /// One function on purpose (~160 lines): the iovecs it builds borrow the
    /// guessed receive buffers and the chain headers at once, for one
    /// `recvmsg`, and the confirmation walks them in the same order; a split
    /// would pass that whole borrow set around on the hottest receive path.
    fn recv_chain(
        &mut self,
        rx: &mut Rx,
        fd: i32,
        engine: &mut Engine<FfiBuf>,
        stats: &mut IoStats,
    ) -> Option<(usize, bool)> {
        let head = Engine::<FfiBuf>::RDATA_HEAD_LEN;
        let mut g = 0;
        while g < CHAIN_MAX {
            let Some((gbuf, at, n)) = engine.guess_rdata_nth(g) else {
                break;
            };
            let mut guess = Guess {
                buf: gbuf,
                at,
                n,
                ..NO_GUESS
            };
            let mut covered = 0;
            gbuf.raw_range(at, n, |p, k| {
                if guess.np < IOV_LIMIT {
                    guess.pieces[guess.np] = (p, k);
                    guess.np += 1;
                    covered += k;
                }
            });
            if covered != n {
                break;
            }
            self.chain[g] = guess;
            g += 1;
        }
        if g < 2 {
            return None;
        }
        if self.chain_spill.len() < GRO_SLOT_BYTES {
            self.chain_spill = vec![0; GRO_SLOT_BYTES];
        }
        let hdrs = self.chain_hdrs.as_mut_ptr();
        let mut v = 0;
        for (i, q) in self.chain[..g].iter().enumerate() {
            // SAFETY: i < CHAIN_MAX: inside chain_hdrs (CHAIN_MAX * head bytes).
            let h = unsafe { hdrs.add(i * head) };
            scatter_iovs(&mut self.chain_iov[v..], h, head, &q.pieces[..q.np]);
            v += 1 + q.np;
        }
        self.chain_iov[v] = libc::iovec {
            iov_base: self.chain_spill.as_mut_ptr().cast(),
            iov_len: GRO_SLOT_BYTES,
        };
        v += 1;
        rx.reset_hdr(0);
        {
            let h = &mut rx.hdr[0].msg_hdr;
            h.msg_iov = self.chain_iov.as_mut_ptr();
            h.msg_iovlen = v as _;
        }
        // SAFETY: header 0 points at our own address and control buffers, and
        // its iovecs at chain_hdrs, chain_spill and pieces of live application
        // receive buffers the engine named (raw_range) and still holds: it
        // handles no input before this datagram is dealt with.
        let r = unsafe { libc::recvmsg(fd, &mut rx.hdr[0].msg_hdr, libc::MSG_DONTWAIT) };
        stats.syscalls += 1;
        {
            let h = &mut rx.hdr[0].msg_hdr;
            h.msg_iov = &mut rx.iov[0];
            h.msg_iovlen = 1;
        }
        if r < 0 {
            return Some((0, true));
        }
        let len = r as usize;
        let trunc = rx.hdr[0].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        let mono = clock::now_ns();
        let real_to_mono = i128::from(mono) - i128::from(clock::realtime_ns());
        let (when, seg) = rx.arrival(0, mono, real_to_mono, stats);
        let Some(from) = rx.from(0) else {
            return Some((1, false));
        };
        if trunc {
            stats.rx_truncated += 1;
            return Some((1, false));
        }
        let segl = seg.filter(|&s| s < len).unwrap_or(len).max(1);
        let segs = len.div_ceil(segl);
        self.note_coalesced(segs);
        if segl > rx.max_datagram {
            stats.rx_truncated += 1;
            return Some((1, false));
        }
        // Confirm in order while each segment sits exactly in its pair of
        // iovecs: headers in chain_hdrs[i], payload at guess i.
        let mut done = 0;
        let mut off = 0;
        while done < segs && done < g {
            let sl = segl.min(len - off);
            let q = self.chain[done];
            let fits = sl > head && (sl == head + q.n || (done + 1 == segs && sl < head + q.n));
            if !fits {
                break;
            }
            if self.chain_seg.len() < sl {
                self.chain_seg.resize(sl, 0);
            }
            self.chain_seg[..head]
                .copy_from_slice(&self.chain_hdrs[done * head..(done + 1) * head]);
            let seen = &self.chain_seg[..sl];
            if engine.check_guess(from, seen, q.buf, q.at, q.n) != GuessCheck::Hit {
                break;
            }
            stats.rx_placed += 1;
            stats.rx_guessed += 1;
            stats.rx_chained += 1;
            engine.handle_placed(when, from, &self.chain_seg[..sl]);
            done += 1;
            off += sl;
        }
        if done == segs {
            return Some((segs, false));
        }
        stats.rx_guess_missed += 1;
        // Put the rest back together (from byte `off`) before handling it.
        let rest = len - off;
        let mut tmp = vec![0u8; rest];
        let mut pos = 0; // where the current iovec starts in the datagram
        let mut w = 0;
        for iv in &self.chain_iov[..v] {
            if w == rest {
                break;
            }
            let (a, b) = (pos, pos + iv.iov_len);
            pos = b;
            if b <= off {
                continue;
            }
            let from_at = off.max(a) - a;
            let take = (b - a - from_at).min(rest - w);
            // SAFETY: the iovec describes memory the kernel wrote this
            // datagram into (ours, or a live receive buffer's still unhandled
            // guessed range); from_at + take <= its length; tmp has room.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (iv.iov_base as *const u8).add(from_at),
                    tmp.as_mut_ptr().add(w),
                    take,
                )
            };
            w += take;
        }
        let n = for_each_segment(&tmp, Some(segl), rx.max_datagram, stats, |d| {
            engine.handle_datagram(when, from, d)
        });
        if done == 0 {
            // Not the stream guessed: back to the peek path for a while.
            self.cooldown = GUESS_COOLDOWN;
        }
        Some((done + n, false))
    }

    /// One datagram through the peek path. None: the socket was empty.
    ///
    /// One function on purpose (~130 lines): peek the headers, ask the
    /// engine where the payload goes, receive it there or to the bounce
    /// buffer, hand it over: one datagram's steps in order, sharing its
    /// buffers, on the receive hot path.
    fn recv_peeked(
        &mut self,
        rx: &mut Rx,
        fd: i32,
        engine: &mut Engine<FfiBuf>,
        stats: &mut IoStats,
    ) -> Option<usize> {
        let head = Engine::<FfiBuf>::PLACE_HEAD_LEN;
        // Peek: headers only, the datagram's real length (MSG_TRUNC) and,
        // with GRO, its segment size.
        let slot0 = rx.buf.as_mut_ptr();
        let mut peek_iov = libc::iovec {
            iov_base: slot0.cast(),
            iov_len: head.min(rx.slot_bytes),
        };
        rx.reset_hdr(0);
        rx.hdr[0].msg_hdr.msg_iov = &mut peek_iov;
        // SAFETY: header 0 points at our own address and control buffers and
        // the first `head` bytes of slot 0.
        let r = unsafe {
            libc::recvmsg(
                fd,
                &mut rx.hdr[0].msg_hdr,
                libc::MSG_PEEK | libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        rx.hdr[0].msg_hdr.msg_iov = &mut rx.iov[0];
        stats.syscalls += 1;
        if r < 0 {
            return None;
        }
        let total = r as usize;
        let mono = clock::now_ns();
        let real_to_mono = i128::from(mono) - i128::from(clock::realtime_ns());
        let seg = rx.arrival(0, mono, real_to_mono, stats).1;
        // The first segment's length (the whole datagram unless coalesced).
        let dlen = seg.map_or(total, |g| g.min(total));
        self.note_coalesced(total.div_ceil(dlen.max(1)));
        let Some(from) = rx.from(0) else {
            // Not a family we speak: take it off the socket and drop it.
            rx.reset_hdr(0);
            // SAFETY: header 0 points at our own address, control and slot-0 buffers.
            unsafe { libc::recvmsg(fd, &mut rx.hdr[0].msg_hdr, libc::MSG_DONTWAIT) };
            stats.syscalls += 1;
            return Some(1);
        };
        let mut pieces = [(std::ptr::null::<u8>(), 0usize); IOV_LIMIT];
        let mut np = 0;
        let mut hdr = 0;
        // The range the engine named, and how much of it the pieces cover:
        // placing into less than the range would complete it unwritten.
        let (mut want_n, mut covered) = (0, 0);
        if total <= rx.slot_bytes {
            if let Some(h) = engine.place_with(from, &rx.buf[..dlen], &mut |b, off, n| {
                want_n = n;
                b.raw_range(off, n, |p, k| {
                    if np < IOV_LIMIT {
                        pieces[np] = (p, k);
                        np += 1;
                        covered += k;
                    }
                })
            }) {
                hdr = h;
            }
        }
        // A coalesced datagram whose first payload the engine truncates is
        // not placed: the kernel would drop its later segments with the rest.
        let whole = hdr + want_n == dlen || total == dlen;
        let placed = hdr > 0 && hdr < dlen && covered == want_n && whole;
        // The real receive, through slot 0's header (timestamp control included).
        rx.reset_hdr(0);
        if placed {
            // [headers | the payload's range | the rest of the slot]: a
            // coalesced datagram's later segments land behind the first
            // segment's place in the slot, where a contiguous layout has them.
            scatter_iovs(&mut self.place_iov, slot0, hdr, &pieces[..np]);
            self.place_iov[1 + np] = libc::iovec {
                // SAFETY: dlen <= total <= slot_bytes: inside slot 0.
                iov_base: unsafe { slot0.add(dlen) }.cast(),
                iov_len: rx.slot_bytes - dlen,
            };
            // A payload the engine truncates (hdr + want_n < dlen) has no
            // spill-over: the kernel drops the rest of the datagram.
            let spill = usize::from(hdr + want_n == dlen);
            let h = &mut rx.hdr[0].msg_hdr;
            h.msg_iov = self.place_iov.as_mut_ptr();
            h.msg_iovlen = (1 + np + spill) as _;
        }
        // SAFETY: the header points at our own address, control and slot-0
        // buffers, and (placed) at pieces of a live application receive
        // buffer that the engine just named for this very datagram (we are
        // its socket's only reader, so the datagram peeked is the one read).
        let r = unsafe { libc::recvmsg(fd, &mut rx.hdr[0].msg_hdr, libc::MSG_DONTWAIT) };
        stats.syscalls += 1;
        let h = &mut rx.hdr[0].msg_hdr;
        h.msg_iov = &mut rx.iov[0];
        h.msg_iovlen = 1;
        if r < 0 {
            return None;
        }
        let flags = h.msg_flags;
        let mono = clock::now_ns();
        let real_to_mono = i128::from(mono) - i128::from(clock::realtime_ns());
        let (at, _) = rx.arrival(0, mono, real_to_mono, stats);
        if !placed && flags & libc::MSG_TRUNC != 0 {
            stats.rx_truncated += 1;
            return Some(1);
        }
        let len = (r as usize).min(rx.slot_bytes);
        if placed {
            stats.rx_placed += 1;
            engine.handle_placed(at, from, &rx.buf[..dlen]);
            if len <= dlen {
                return Some(1);
            }
            let rest = &rx.buf[dlen..len];
            return Some(
                1 + for_each_segment(rest, seg, rx.max_datagram, stats, |d| {
                    engine.handle_datagram(at, from, d)
                }),
            );
        }
        Some(for_each_segment(
            &rx.buf[..len],
            seg,
            rx.max_datagram,
            stats,
            |d| engine.handle_datagram(at, from, d),
        ))
    }

    /// Receives straight into where `Engine::guess_rdata_nth` expects the
    /// next RDATA payloads (one `recvmmsg` for up to `GUESS_BATCH` datagrams
    /// of a message, where the peek path takes two syscalls each): datagram
    /// i's headers to slot i, its payload to the i-th guessed range, anything
    /// longer to the rest of slot i. See the module's description for how
    /// they are confirmed. None: no guess (take the peek path); else
    /// (datagrams handled, whether the socket ran dry: fewer came than were
    /// asked for).
    ///
    /// One function on purpose (~140 lines): as `recv_chain`, one syscall's
    /// iovec set built over borrowed guessed ranges and then confirmed in
    /// order, on the receive hot path.
    fn recv_guessed(
        &mut self,
        rx: &mut Rx,
        fd: i32,
        engine: &mut Engine<FfiBuf>,
        room: usize,
        stats: &mut IoStats,
    ) -> Option<(usize, bool)> {
        let head = Engine::<FfiBuf>::RDATA_HEAD_LEN;
        let want = room.min(self.guesses.len());
        let mut g = 0;
        while g < want {
            let Some((gbuf, at, n)) = engine.guess_rdata_nth(g) else {
                break;
            };
            if head + n > rx.slot_bytes {
                break;
            }
            let mut guess = Guess {
                buf: gbuf,
                at,
                n,
                ..NO_GUESS
            };
            let mut covered = 0;
            gbuf.raw_range(at, n, |p, k| {
                if guess.np < IOV_LIMIT {
                    guess.pieces[guess.np] = (p, k);
                    guess.np += 1;
                    covered += k;
                }
            });
            if covered != n {
                break;
            }
            self.guesses[g] = guess;
            g += 1;
        }
        if g == 0 {
            return None;
        }
        let base = rx.buf.as_mut_ptr();
        for i in 0..g {
            rx.reset_hdr(i);
            let q = &self.guesses[i];
            // SAFETY: i < batch: slot i lies inside buf.
            let slot = unsafe { base.add(i * rx.slot_bytes) };
            let iovs = &mut self.guess_iov[i * GUESS_IOVS..(i + 1) * GUESS_IOVS];
            scatter_iovs(iovs, slot, head, &q.pieces[..q.np]);
            iovs[1 + q.np] = libc::iovec {
                // SAFETY: head + n <= slot_bytes (checked above): inside slot i.
                iov_base: unsafe { slot.add(head + q.n) }.cast(),
                iov_len: rx.slot_bytes - head - q.n,
            };
            let h = &mut rx.hdr[i].msg_hdr;
            h.msg_iov = iovs.as_mut_ptr();
            h.msg_iovlen = (2 + q.np) as _;
        }
        // SAFETY: the first g headers point at our own address, control and
        // slot buffers and at pieces of live application receive buffers the
        // engine named (raw_range) and still holds: it handles no input before
        // these datagrams are dealt with.
        let r = unsafe { sys_recvmmsg(fd, rx.hdr.as_mut_ptr(), g as libc::c_uint) };
        stats.syscalls += 1;
        for i in 0..g {
            let h = &mut rx.hdr[i].msg_hdr;
            h.msg_iov = &mut rx.iov[i];
            h.msg_iovlen = 1;
        }
        if r <= 0 {
            return Some((0, true));
        }
        let r = r as usize;
        let mono = clock::now_ns();
        let real_to_mono = i128::from(mono) - i128::from(clock::realtime_ns());
        let mut broken = false;
        let mut got = 0;
        for i in 0..r {
            let len = (rx.hdr[i].msg_len as usize).min(rx.slot_bytes);
            let trunc = rx.hdr[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            let from = rx.from(i);
            let start = i * rx.slot_bytes;
            let (when, seg) = rx.arrival(i, mono, real_to_mono, stats);
            // The first segment's length (the whole datagram unless coalesced).
            let dlen = seg.map_or(len, |s| s.min(len));
            self.note_coalesced(len.div_ceil(dlen.max(1)));
            if let (false, false, true, Some(from)) = (broken, trunc, dlen > head, from) {
                let q = self.guesses[i];
                let seen = &rx.buf[start..start + dlen];
                let check = engine.check_guess(from, seen, q.buf, q.at, q.n);
                if check == GuessCheck::Hit {
                    stats.rx_placed += 1;
                    stats.rx_guessed += 1;
                    engine.handle_placed(when, from, &rx.buf[start..start + dlen]);
                    got += 1;
                    if len > dlen {
                        // Coalesced: the later datagrams were not received
                        // where guessed (their pieces are in this slot).
                        broken = true;
                        for j in i + 1..r {
                            self.take_back(rx, j, head);
                        }
                        let rest = &rx.buf[start + dlen..start + len];
                        got += for_each_segment(rest, seg, rx.max_datagram, stats, |d| {
                            engine.handle_datagram(when, from, d)
                        });
                    }
                    continue;
                }
                if check == GuessCheck::Placeable {
                    // Placeable data, but not the piece guessed (another
                    // message's, a resend, a reordered one): the stream is
                    // not in order now.
                    stats.rx_guess_missed += 1;
                    self.cooldown = GUESS_COOLDOWN;
                }
            }
            if !broken {
                broken = true;
                for j in i..r {
                    self.take_back(rx, j, head);
                }
            }
            let Some(from) = from.filter(|_| !trunc) else {
                // Longer than a slot, or from a family we do not speak:
                // dropped (what it wrote into its range was moved out, and
                // the real data overwrites it later).
                stats.rx_truncated += u64::from(trunc);
                got += 1;
                continue;
            };
            got += for_each_segment(
                &rx.buf[start..start + len],
                seg,
                rx.max_datagram,
                stats,
                |d| engine.handle_datagram(when, from, d),
            );
        }
        Some((got, r < g))
    }

    /// Slot `j` of a batch of guessed receives put back together: the payload
    /// bytes that landed in its guessed range moved behind its headers (the
    /// range was unwritten before, and nothing has been handled since; what
    /// spilled over already sits behind them).
    fn take_back(&mut self, rx: &mut Rx, j: usize, head: usize) {
        let dlen = (rx.hdr[j].msg_len as usize).min(rx.slot_bytes);
        let payload = dlen.saturating_sub(head);
        let q = self.guesses[j];
        // SAFETY: j < batch: slot j lies inside buf.
        let slot = unsafe { rx.buf.as_mut_ptr().add(j * rx.slot_bytes) };
        let mut done = 0;
        for &(p, k) in &q.pieces[..q.np] {
            if done == payload {
                break;
            }
            let take = k.min(payload - done);
            // SAFETY: (p, k) is a piece of the live receive buffer the engine
            // named for this guess (the kernel wrote `take` bytes of this
            // datagram there); the destination lies in slot j before
            // head + n <= slot_bytes.
            unsafe { std::ptr::copy_nonoverlapping(p, slot.add(head + done), take) };
            done += take;
        }
    }
}

/// `iovs` = [the first `head` bytes at `slot`, then `pieces` of an application
/// receive buffer] (a receive that scatters headers and payload).
fn scatter_iovs(
    iovs: &mut [libc::iovec],
    slot: *mut u8,
    head: usize,
    pieces: &[(*const u8, usize)],
) {
    iovs[0] = libc::iovec {
        iov_base: slot.cast(),
        iov_len: head,
    };
    for (v, &(p, k)) in iovs[1..].iter_mut().zip(pieces) {
        // Receive buffers are writable by the libfabric contract.
        *v = libc::iovec {
            iov_base: p as *mut libc::c_void,
            iov_len: k,
        };
    }
}
