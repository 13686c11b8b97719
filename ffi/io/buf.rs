//! `FfiBuf`: application buffers (C iovecs) and inject copies as the engine's `UserBuf`.

use spray::UserBuf;

use crate::limits::IOV_LIMIT;

/// One scatter-gather entry of an application buffer.
#[derive(Copy, Clone, Debug)]
pub struct Seg {
    base: *mut u8,
    len: usize,
}

/// A buffer the engine reads from (sends) or writes into (receives).
#[derive(Debug)]
pub enum FfiBuf {
    /// Application memory, up to `IOV_LIMIT` segments; valid until the operation
    /// completes (the libfabric contract for posted buffers).
    Iov {
        segs: [Seg; IOV_LIMIT],
        count: usize,
        len: usize,
    },
    /// A private copy (inject, or a send that completes at once).
    Owned(Vec<u8>),
}

// SAFETY: the pointers refer to application buffers that libfabric requires to stay
// valid and untouched by the application until the operation completes; the engine
// is only used under the endpoint lock, so at most one thread accesses them at a time.
unsafe impl Send for FfiBuf {}

impl FfiBuf {
    /// A buffer over `iov[..count]`; `None` if count exceeds `IOV_LIMIT` or a
    /// segment with bytes has a NULL base.
    ///
    /// # Safety
    /// `iov` points to `count` valid iovecs whose memory stays valid until the
    /// operation completes.
    pub unsafe fn from_iov(iov: *const libc::iovec, count: usize) -> Option<FfiBuf> {
        if count > IOV_LIMIT || (count > 0 && iov.is_null()) {
            return None;
        }
        let mut segs = [Seg {
            base: std::ptr::null_mut(),
            len: 0,
        }; IOV_LIMIT];
        let mut len = 0usize;
        for (i, seg) in segs.iter_mut().enumerate().take(count) {
            // SAFETY: i < count and iov has count entries (caller).
            let v = unsafe { *iov.add(i) };
            if v.iov_len > 0 && v.iov_base.is_null() {
                return None;
            }
            *seg = Seg {
                base: v.iov_base as *mut u8,
                len: v.iov_len,
            };
            len = len.checked_add(v.iov_len)?;
        }
        Some(FfiBuf::Iov { segs, count, len })
    }

    /// Address of the first byte (for CQ `buf` fields), NULL for private copies.
    pub fn base(&self) -> *mut u8 {
        match self {
            FfiBuf::Iov { segs, count, .. } if *count > 0 => segs[0].base,
            _ => std::ptr::null_mut(),
        }
    }

    /// Visit bytes `offset..offset+n` as raw (address, length) pieces, in order:
    /// what `sendmmsg` reads straight from the application. Valid as long as the
    /// buffer is (until its operation completes).
    pub fn raw_range(&self, offset: usize, n: usize, mut f: impl FnMut(*const u8, usize)) {
        if let FfiBuf::Owned(v) = self {
            if let Some(b) = v.get(offset..offset + n) {
                f(b.as_ptr(), n);
            }
            return;
        }
        self.for_range(offset, n, |p, take, _| f(p, take));
    }

    /// Visit the segments overlapping `offset..offset+n` as (segment ptr, bytes, position in the range).
    fn for_range(&self, mut offset: usize, n: usize, mut f: impl FnMut(*mut u8, usize, usize)) {
        let FfiBuf::Iov { segs, count, .. } = self else {
            return;
        };
        let mut done = 0;
        for s in &segs[..*count] {
            if done == n {
                break;
            }
            if offset >= s.len {
                offset -= s.len;
                continue;
            }
            let take = (s.len - offset).min(n - done);
            // SAFETY: offset < s.len, so the pointer stays inside the segment.
            f(unsafe { s.base.add(offset) }, take, done);
            done += take;
            offset = 0;
        }
    }
}

impl UserBuf for FfiBuf {
    fn len(&self) -> usize {
        match self {
            FfiBuf::Iov { len, .. } => *len,
            FfiBuf::Owned(v) => v.len(),
        }
    }

    fn read_at(&self, offset: usize, out: &mut [u8]) {
        if let FfiBuf::Owned(v) = self {
            if let Some(src) = v.get(offset..offset + out.len()) {
                out.copy_from_slice(src);
            }
            return;
        }
        let n = out.len();
        self.for_range(offset, n, |p, take, at| {
            // SAFETY: p..p+take lies inside a segment of a live application buffer
            // (for_range), and out[at..at+take] is in bounds (at + take <= n).
            unsafe { std::ptr::copy_nonoverlapping(p, out[at..at + take].as_mut_ptr(), take) };
        });
    }

    fn write_at(&mut self, offset: usize, data: &[u8]) {
        match self {
            FfiBuf::Owned(v) => {
                if let Some(dst) = v.get_mut(offset..offset + data.len()) {
                    dst.copy_from_slice(data);
                }
                return;
            }
            // One segment (most receives): every segment of a message lands
            // here, and the general walk below cost ~30 instructions more.
            FfiBuf::Iov { segs, count: 1, .. }
                if !data.is_empty()
                    && offset <= segs[0].len
                    && data.len() <= segs[0].len - offset =>
            {
                // SAFETY: offset + data.len() <= the segment's length, inside a
                // live, writable application receive buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        segs[0].base.add(offset),
                        data.len(),
                    )
                };
                return;
            }
            FfiBuf::Iov { .. } => {}
        }
        self.for_range(offset, data.len(), |p, take, at| {
            // SAFETY: p..p+take lies inside a segment of a live, writable application
            // receive buffer (for_range), and data[at..at+take] is in bounds.
            unsafe { std::ptr::copy_nonoverlapping(data[at..at + take].as_ptr(), p, take) };
        });
    }
}
