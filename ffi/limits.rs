//! Sizes: the engine's (largest message, inject size), for getinfo and
//! endpoints, and the provider's own (scatter-gather entries per operation).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use once_cell::sync::Lazy;
use parking_lot::Mutex;
use spray::{Config, Engine, EpMode};

use crate::io::buf::FfiBuf;

/// Limits for one datagram size.
#[derive(Copy, Clone, Debug)]
pub struct Limits {
    /// Largest RDM message, bytes.
    pub rdm_max_msg: usize,
    /// Largest DGRAM message (one packet's payload), bytes.
    pub dgram_max_msg: usize,
    /// Largest inject (copied at call time), bytes; getinfo and endpoints
    /// cap it at the endpoint type's largest message (one datagram for
    /// DGRAM). An RDM inject may take several packets: at MTU 1500 a 4 KiB
    /// MPI message is then an inject, which completes without waiting for
    /// the peer's ack (MPICH and Open MPI inject up to this size).
    pub inject_size: usize,
}

/// Scatter-gather entries per operation.
pub const IOV_LIMIT: usize = 4;
/// Remote memory regions per RMA operation.
pub const RMA_IOV_LIMIT: usize = 1;

/// Inject copies are taken from a pool of buffers this large.
pub const INJECT_MAX: usize = 4096;

static CACHE: Lazy<Mutex<HashMap<usize, Limits>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// The limits for endpoints whose largest UDP payload is `max_datagram` bytes,
/// asked of the engine itself (cached: building an engine is not free).
pub fn for_datagram(max_datagram: usize) -> Limits {
    if let Some(l) = CACHE.lock().get(&max_datagram) {
        return *l;
    }
    let local = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    let max_of = |mode| {
        let mut cfg = Config::new(mode, local);
        cfg.max_datagram = max_datagram;
        // As if with a job key (a tag takes 16 bytes of each datagram):
        // getinfo cannot know whether the endpoint will get one, so a DGRAM
        // max_msg_size holds either way.
        cfg.auth_key = Some(spray::config::AuthKey(b"limits".to_vec()));
        Engine::<FfiBuf>::new(cfg).max_msg_size()
    };
    let rdm = max_of(EpMode::Rdm);
    let dgram = max_of(EpMode::Dgram);
    let l = Limits {
        rdm_max_msg: rdm,
        dgram_max_msg: dgram,
        inject_size: INJECT_MAX,
    };
    CACHE.lock().insert(max_datagram, l);
    l
}
