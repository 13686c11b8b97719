//! Shared by the stable fuzzing property tests (`fuzz_*.rs`) and the
//! cargo-fuzz targets (`provider/fuzz/`): a case runner that turns seeds
//! into `arbitrary` byte streams, and the two-engine model.
//!
//! Each case is a seed; its bytes come from a seeded `Rng`, so a failure
//! prints the seed and `SPRAY_FUZZ_SEED=<seed>` replays exactly that case.
//! `SPRAY_FUZZ_CASES=<n>` runs n cases instead of the test's default.
#![allow(dead_code)] // each test binary uses a part

pub mod engine;

use arbitrary::Unstructured;
use spray::rng::Rng;

/// Cases to run: `SPRAY_FUZZ_CASES`, else `default`.
pub fn case_count(default: u64) -> u64 {
    std::env::var("SPRAY_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `len` pseudo-random bytes from `seed` (the case's input).
pub fn case_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Run `f` on `case_count(default)` cases (seeds `base..`, `base` mixed with
/// the test's name so tests do not share inputs), each with `len` bytes;
/// `SPRAY_FUZZ_SEED` runs that one seed only. A failing case panics with
/// its seed and the command that replays it. Returns the cases run.
pub fn run_cases(name: &str, default: u64, len: usize, mut f: impl FnMut(u64, &[u8])) -> u64 {
    let one: Option<u64> = std::env::var("SPRAY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let base = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) >> 16;
    let seeds: Vec<u64> = match one {
        Some(s) => vec![s],
        None => (0..case_count(default)).map(|i| base + i).collect(),
    };
    for &seed in &seeds {
        let data = case_bytes(seed, len);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(seed, &data)));
        if let Err(e) = r {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "{name}: case seed {seed} failed: {msg}\n  replay: SPRAY_FUZZ_SEED={seed} cargo test --release -p spray --test {name}"
            );
        }
    }
    seeds.len() as u64
}

/// An integer below `n` (0 when `n` is 0 or the input ran out).
pub fn below(u: &mut Unstructured, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    u.int_in_range(0..=n - 1).unwrap_or(0)
}

/// A u64 from the input (0 when it ran out).
pub fn word(u: &mut Unstructured) -> u64 {
    u.arbitrary().unwrap_or(0)
}
