//! A fast hasher for the engine's small internal maps (message ids, peer
//! addresses): std's SipHash costs tens of ns per lookup, and a message takes
//! several lookups on the latency-critical path.
//!
//! Multiply-rotate mixing (the Fx family) over the key's integer words, with a
//! per-process random seed so keys that arrive from the network (source
//! addresses) cannot be chosen to collide on purpose.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// `HashMap` with [`FastHash`].
pub type FastMap<K, V> = HashMap<K, V, FastHash>;

const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// Hash state: one word.
#[derive(Clone, Copy, Debug)]
pub struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // hashbrown takes its control bits from the top 7 bits: fold the well
        // mixed high half down so both ends depend on every input bit.
        self.0 ^ (self.0 >> 29)
    }
}

/// Builds [`FastHasher`]s from the process seed.
#[derive(Clone, Copy, Debug)]
pub struct FastHash(u64);

impl Default for FastHash {
    fn default() -> Self {
        static SEED: OnceLock<u64> = OnceLock::new();
        FastHash(*SEED.get_or_init(|| RandomState::new().hash_one(0x5eed_u64) | 1))
    }
}

impl BuildHasher for FastHash {
    type Hasher = FastHasher;
    #[inline]
    fn build_hasher(&self) -> FastHasher {
        FastHasher(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn distinct_small_keys_spread() {
        // Sequential message ids from a few peers: the common key shape.
        let b = FastHash::default();
        let mut tops = HashSet::new();
        let mut all = HashSet::new();
        for peer in 0..8u32 {
            for id in 0..512u32 {
                let h = b.hash_one((peer, id));
                assert!(all.insert(h), "collision at ({peer}, {id})");
                tops.insert(h >> 57);
            }
        }
        assert!(tops.len() > 100, "top 7 bits poorly spread: {}", tops.len());
    }

    #[test]
    fn map_works() {
        let mut m: FastMap<(u32, u32), usize> = FastMap::default();
        for i in 0..10_000u32 {
            m.insert((i % 7, i), i as usize);
        }
        for i in 0..10_000u32 {
            assert_eq!(m.get(&(i % 7, i)), Some(&(i as usize)));
        }
        assert_eq!(m.remove(&(3, 10)), Some(10));
        assert!(!m.contains_key(&(3, 10)));
    }
}
