//! Packet buffer pool: payload buffers reused across datagrams so the steady
//! state allocates nothing per packet.

/// A free list of payload buffers, each with capacity for one full payload.
pub struct Pool {
    free: Vec<Vec<u8>>,
    capacity: usize,
    /// Buffers allocated since creation (grows only while warming up).
    pub allocated: u64,
}

impl Pool {
    /// A pool of buffers of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Pool { free: Vec::new(), capacity, allocated: 0 }
    }

    /// A cleared buffer of length `len` (`len <= capacity`).
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        let mut b = match self.free.pop() {
            Some(b) => b,
            None => {
                self.allocated += 1;
                Vec::with_capacity(self.capacity)
            }
        };
        b.clear();
        b.resize(len, 0);
        b
    }

    /// Return a buffer for reuse.
    pub fn give(&mut self, b: Vec<u8>) {
        if b.capacity() >= self.capacity {
            self.free.push(b);
        }
    }
}
