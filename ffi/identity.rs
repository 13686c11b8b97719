//! An endpoint's incarnation: its nonce, the secret keying its session
//! cookies, and its RNG seed, drawn from the OS's random source (the engine
//! itself stays deterministic: it takes them from its `Config`).

use spray::Config;

/// Fill `buf` from `getrandom(2)`, falling back to `/dev/urandom`; false if
/// neither gave every byte.
fn os_random(buf: &mut [u8]) -> bool {
    let mut got = 0;
    while got < buf.len() {
        let rest = &mut buf[got..];
        // SAFETY: `rest` is a valid, writable buffer of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n > 0 {
            got += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    if got == buf.len() {
        return true;
    }
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_ok()
}

/// Give `cfg` a fresh nonce, secret and seed. Without an OS random source
/// (never seen on Linux) the clock, the pid and the address stand in, so
/// restarts still differ, and a warning says the tokens are guessable.
pub fn fill(cfg: &mut Config) {
    let mut b = [0u8; 32];
    if !os_random(&mut b) {
        crate::log::warn("no OS random source: session tokens are guessable");
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        // SAFETY: getpid has no preconditions.
        let pid = u64::from(unsafe { libc::getpid() } as u32);
        let mut x = wall ^ (pid << 32) ^ crate::io::clock::now_ns().rotate_left(17);
        for c in b.chunks_mut(8) {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let z = (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            c.copy_from_slice(&(z ^ (z >> 29)).to_le_bytes());
        }
    }
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    cfg.nonce = word(0).max(1);
    cfg.seed = word(1);
    cfg.secret.copy_from_slice(&b[16..32]);
}
