//! Shared pieces of the RMA tests: a buffer type that can alias registered
//! memory, a region table implementing `RmaTarget`, and engines over the simulator.
#![allow(dead_code)]

use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use spray::buf::{RmaAccess, RmaTarget, UserBuf};
use spray::msg::Completion;
use spray::rng::Rng;
use spray::sim::{addr, LinkSpec, Sim};
use spray::time::Instant;
use spray::{Config, Engine, EpMode};

/// Shared memory of one registered region.
pub type Mem = Arc<Mutex<Vec<u8>>>;

/// A test buffer: owned bytes, or a window `[base, base+len)` of shared memory
/// (what `RmaTarget::resolve` hands out, and fetch results the test reads back).
#[derive(Clone)]
pub enum TBuf {
    Own(Vec<u8>),
    View { mem: Mem, base: usize, len: usize },
}

impl core::fmt::Debug for TBuf {
    // Lengths only: failure messages must stay readable with MiB buffers.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TBuf::Own(v) => write!(f, "Own({} B)", v.len()),
            TBuf::View { base, len, .. } => write!(f, "View({base}+{len} B)"),
        }
    }
}

impl TBuf {
    pub fn view(mem: &Mem, base: usize, len: usize) -> TBuf {
        TBuf::View {
            mem: mem.clone(),
            base,
            len,
        }
    }

    /// The bytes (a copy for views).
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            TBuf::Own(v) => v.clone(),
            TBuf::View { mem, base, len } => lock(mem)[*base..*base + *len].to_vec(),
        }
    }
}

pub fn lock(m: &Mem) -> std::sync::MutexGuard<'_, Vec<u8>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl UserBuf for TBuf {
    fn len(&self) -> usize {
        match self {
            TBuf::Own(v) => v.len(),
            TBuf::View { len, .. } => *len,
        }
    }
    fn read_at(&self, offset: usize, out: &mut [u8]) {
        match self {
            TBuf::Own(v) => out.copy_from_slice(&v[offset..offset + out.len()]),
            TBuf::View { mem, base, .. } => {
                let m = lock(mem);
                out.copy_from_slice(&m[base + offset..base + offset + out.len()]);
            }
        }
    }
    fn write_at(&mut self, offset: usize, data: &[u8]) {
        match self {
            TBuf::Own(v) => v[offset..offset + data.len()].copy_from_slice(data),
            TBuf::View { mem, base, .. } => {
                let mut m = lock(mem);
                m[*base + offset..*base + offset + data.len()].copy_from_slice(data);
            }
        }
    }
}

/// One registered region: memory and the remote accesses it allows.
#[derive(Clone)]
pub struct Region {
    pub mem: Mem,
    pub read: bool,
    pub write: bool,
}

/// A key table: `addr` is an offset into the region (`FI_MR_SCALABLE`-like mode).
#[derive(Clone, Default)]
pub struct Regions {
    pub map: Arc<Mutex<HashMap<u64, Region>>>,
}

impl Regions {
    /// Register `len` bytes (filled from `seed`, or zero) under `key`.
    pub fn add(&self, key: u64, len: usize, seed: Option<u64>, read: bool, write: bool) -> Mem {
        let bytes = match seed {
            Some(s) => content(s, len),
            None => vec![0u8; len],
        };
        let mem = Arc::new(Mutex::new(bytes));
        let r = Region {
            mem: mem.clone(),
            read,
            write,
        };
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, r);
        mem
    }
}

impl RmaTarget<TBuf> for Regions {
    fn resolve(&self, key: u64, addr: u64, len: usize, access: RmaAccess) -> Option<TBuf> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let r = map.get(&key)?;
        let ok = match access {
            RmaAccess::Read => r.read,
            RmaAccess::Write => r.write,
            RmaAccess::Atomic => r.read && r.write,
        };
        let size = lock(&r.mem).len() as u64;
        let end = addr.checked_add(len as u64)?;
        (ok && end <= size).then(|| TBuf::view(&r.mem, addr as usize, len))
    }
}

/// Deterministic bytes for `(seed, len)`.
pub fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed.wrapping_mul(0x9e37_79b9) ^ len as u64);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

pub type Node = Engine<TBuf>;
pub type Comp = Completion<TBuf>;

pub fn engine(i: usize, nonce: u64) -> Node {
    let mut c = Config::new(EpMode::Rdm, addr(i));
    c.paths = 8;
    c.nonce = nonce;
    c.seed = 0xfeed ^ i as u64;
    c.unreachable_timeout = Duration::from_millis(100);
    Engine::new(c)
}

/// `n` engines over 8 paths with `loss` (and `loss / 4` duplication), jitter.
pub fn net(seed: u64, n: usize, loss: f64) -> Sim<Node> {
    let mut spec = LinkSpec::ideal(Duration::from_micros(20));
    spec.jitter = Duration::from_micros(15);
    spec.bandwidth = 1_250_000_000;
    spec.loss = loss;
    spec.dup = loss / 4.0;
    let nodes = (0..n).map(|i| engine(i, 100 + i as u64)).collect();
    Sim::new(seed, nodes, vec![spec; 8])
}

/// Step until `want(done)` holds or `limit`; collects every node's completions.
pub fn drive(
    sim: &mut Sim<Node>,
    done: &mut [Vec<Comp>],
    limit: Instant,
    mut want: impl FnMut(&[Vec<Comp>]) -> bool,
) -> bool {
    loop {
        for (i, d) in done.iter_mut().enumerate() {
            if !sim.down[i] {
                while let Some(c) = sim.nodes[i].poll_completion() {
                    d.push(c);
                }
            }
        }
        if want(done) {
            return true;
        }
        if !sim.step(limit) {
            return false;
        }
    }
}

pub fn secs(s: u64) -> Instant {
    Instant::from_nanos(s * 1_000_000_000)
}

/// Step for `d` of simulated time, collecting completions.
pub fn run_for(sim: &mut Sim<Node>, done: &mut [Vec<Comp>], d: Duration) {
    let until = sim.now + d;
    drive(sim, done, until, |_| false);
}
