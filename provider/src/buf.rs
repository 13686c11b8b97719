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
