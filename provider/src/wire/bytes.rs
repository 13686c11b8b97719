//! Big-endian field readers shared by the wire codecs (`srd.rs`, `msg.rs`).
//!
//! Each reads the bytes `b[f]` of a field range. They index, so they panic on a
//! buffer shorter than the range: callers read only after their `check_len`
//! (or on a sub-header they sliced to length), which is what makes the
//! accessors of a checked `Packet` panic-free.

use core::ops::Range;

/// The big-endian `u16` at `b[f]` (`f` is 2 bytes long).
pub(crate) fn be16(b: &[u8], f: Range<usize>) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[f]);
    u16::from_be_bytes(a)
}

/// The big-endian `u32` at `b[f]` (`f` is 4 bytes long).
pub(crate) fn be32(b: &[u8], f: Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[f]);
    u32::from_be_bytes(a)
}

/// The big-endian `u64` at `b[f]` (`f` is 8 bytes long).
pub(crate) fn be64(b: &[u8], f: Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[f]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_fields() {
        let b = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09];
        assert_eq!(be16(&b, 1..3), 0x0203);
        assert_eq!(be32(&b, 0..4), 0x0102_0304);
        assert_eq!(be64(&b, 1..9), 0x0203_0405_0607_0809);
    }
}
