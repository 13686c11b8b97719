//! Fuzz target: the two-engine model of the stable test `fuzz_engine`
//! (`provider/tests/fuzz_model/engine.rs`) driven by libFuzzer's bytes
//! instead of seeded ones: checked messages over a live session while
//! hostile datagrams of every kind arrive; every invariant is an assert.
//! Run: `cd provider && cargo +nightly fuzz run engine_model`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/fuzz_model/mod.rs"]
mod fuzz_model;

fuzz_target!(|data: &[u8]| {
    let _ = fuzz_model::engine::run(data);
});
