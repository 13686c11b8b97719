//! Stable fuzzing of the whole engine (`fuzz_model::engine`): sequences of
//! operations drawn by `arbitrary` from seeded bytes (sends and receives of
//! checked messages, time, hostile datagrams of every kind from the peer's
//! address and from strangers) run two engines through the simulator with a
//! live session between them; invariants are checked after every step and
//! every message must arrive exactly once at the end.
//! `SPRAY_FUZZ_CASES=<n>` runs more cases; a failure prints the seed that
//! replays it (`SPRAY_FUZZ_SEED=<seed>`). The same model is the cargo-fuzz
//! target `engine_model` (nightly: `cd provider && cargo +nightly fuzz run engine_model`).

mod fuzz_model;

use fuzz_model::engine::{run, Tally};
use fuzz_model::run_cases;

#[test]
fn engines_under_hostile_input() {
    let mut sum = Tally::default();
    let t = std::time::Instant::now();
    // 4000 cases (about 20 s in release): 400 missed the copied HELLO of
    // case 2876 (a session token for another nonce, `srd_forgery`).
    let n = run_cases("fuzz_engine", 4000, 8000, |_, data| {
        let c = run(data);
        sum.ops += c.ops;
        sum.messages += c.messages;
        sum.bytes += c.bytes;
        sum.hostile += c.hostile;
        sum.malformed += c.malformed;
        sum.forged += c.forged;
        sum.hellos += c.hellos;
        sum.replays += c.replays;
        sum.on_path_skipped += c.on_path_skipped;
    });
    println!("{n} cases in {:.1?}: {sum:?}", t.elapsed());
    assert!(
        sum.messages > 0
            && sum.malformed > 0
            && sum.forged > 0
            && sum.hellos > 0
            && sum.replays > 0
    );
}
