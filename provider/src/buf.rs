//! The user-buffer abstraction: how the message layer reads application send
//! buffers and writes into application receive buffers without `unsafe`.
//!
//! The FFI implements [`UserBuf`] over C iovecs (its only unsafe part);
//! tests use `Vec<u8>`.

/// A (possibly scattered) application buffer of fixed length.
pub trait UserBuf {
    /// Total length in bytes.
    fn len(&self) -> usize;

    /// True when the buffer holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copy `out.len()` bytes starting at byte `offset` into `out`.
    /// Callers guarantee `offset + out.len() <= self.len()`.
    fn read_at(&self, offset: usize, out: &mut [u8]);

    /// Copy `data` into the buffer starting at byte `offset`.
    /// Callers guarantee `offset + data.len() <= self.len()`.
    fn write_at(&mut self, offset: usize, data: &[u8]);
}

impl UserBuf for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn read_at(&self, offset: usize, out: &mut [u8]) {
        out.copy_from_slice(&self[offset..offset + out.len()]);
    }
    fn write_at(&mut self, offset: usize, data: &[u8]) {
        self[offset..offset + data.len()].copy_from_slice(data);
    }
}

/// What a remote memory-access request wants to do to registered memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RmaAccess {
    /// `fi_read`: the target's memory is read (`FI_REMOTE_READ`).
    Read,
    /// `fi_write`: the target's memory is written (`FI_REMOTE_WRITE`).
    Write,
    /// An atomic: read, combined and written (needs both remote accesses).
    Atomic,
}

/// The target side of RMA: resolves a remote key and address to registered memory.
///
/// The FFI implements it over the domain's memory-region table; tests use a map of
/// `Vec<u8>`-backed regions. The engine calls it once per arriving RMA request or
/// write segment, so it must be cheap (a hash lookup).
pub trait RmaTarget<B>: Send {
    /// The `len` bytes at `addr` of the region registered under `key`, as a buffer
    /// that the engine reads or writes at offsets `0..len`; `None` when the key is
    /// unknown, the range falls outside the region or the access is not allowed
    /// (the initiator then gets a remote-access error completion).
    fn resolve(&self, key: u64, addr: u64, len: usize, access: RmaAccess) -> Option<B>;
}
