//! Packet buffer pool: payload buffers reused across datagrams so the steady
//! state allocates (and zeroes) nothing per packet.

/// A free list of payload buffers, each `capacity` bytes long.
pub struct Pool {
    free: Vec<Vec<u8>>,
    capacity: usize,
    /// Buffers allocated since creation (grows only while warming up).
    pub allocated: u64,
}

impl Pool {
    /// A pool of buffers of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Pool {
            free: Vec::new(),
            capacity,
            allocated: 0,
        }
    }

    /// A buffer of exactly `capacity` bytes (old contents; callers track
    /// their own length).
    pub fn take(&mut self) -> Vec<u8> {
        match self.free.pop() {
            Some(b) => b,
            None => {
                self.allocated += 1;
                vec![0u8; self.capacity]
            }
        }
    }

    /// Return a buffer for reuse.
    pub fn give(&mut self, b: Vec<u8>) {
        if b.len() == self.capacity {
            self.free.push(b);
        }
    }
}
