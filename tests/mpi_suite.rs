//! Runs the MPI test programs of `mpi-tests/` (via `mpi-tests/run.sh`) under each MPI
//! library over the provider named by `SPRAY_TEST_PROVIDER` (default `spray`).
//!
//! One test per MPI at 2 ranks plus one 4-rank run. Missing prerequisites (an MPI not
//! installed: see `mpi-tests/setup.sh`) print `skipped: <why>` and pass, except with
//! `CI=true`, where they fail. For `spray` the provider is built first
//! (`cargo build --release --lib`) and copied to `build/libspray-fi.so`. The runs are
//! serialised (they share 2 cores) and each is bounded by `timeout`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Upper bound for one `run.sh` invocation, seconds (each launch inside has its own).
const RUN_TIMEOUT_S: u32 = 900;
/// Upper bound for building the provider, seconds.
const BUILD_TIMEOUT_S: u32 = 1800;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn provider() -> String {
    std::env::var("SPRAY_TEST_PROVIDER").unwrap_or_else(|_| "spray".to_string())
}

fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true").unwrap_or(false)
}

/// Skips (passes with a message) outside CI; fails in CI.
fn skip(why: &str) {
    assert!(!in_ci(), "CI=true and a prerequisite is missing: {why}");
    eprintln!("skipped: {why}");
}

/// Builds the spray provider once per test binary and returns the directory holding
/// `libspray-fi.so`, or why it could not.
fn provider_dir() -> &'static Result<Option<PathBuf>, String> {
    static DIR: OnceLock<Result<Option<PathBuf>, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        if provider() != "spray" {
            // a provider built into libfabric (tcp, ...) or found via the caller's
            // FI_PROVIDER_PATH / PROVDIR
            return Ok(std::env::var("PROVDIR").ok().map(PathBuf::from));
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let out = Command::new("timeout")
            .arg(BUILD_TIMEOUT_S.to_string())
            .arg(&cargo)
            .args(["build", "--release", "--lib"])
            .current_dir(repo())
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo build --release --lib failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| repo().join("target"));
        let so = target.join("release/libspray_fi.so");
        let dir = repo().join("build");
        std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        // copy to a temporary name and rename, so a concurrent reader never sees half a file
        let tmp = dir.join(format!(".libspray-fi.so.{}", std::process::id()));
        std::fs::copy(&so, &tmp).map_err(|e| format!("copy {}: {e}", so.display()))?;
        std::fs::rename(&tmp, dir.join("libspray-fi.so"))
            .map_err(|e| format!("rename into {}: {e}", dir.display()))?;
        Ok(Some(dir))
    })
}

/// Runs `mpi-tests/run.sh MPI PROV NP [TESTS...]`, serialised with the other tests.
fn run_suite(mpi: &str, np: u32, tests: &[&str]) {
    static SERIAL: Mutex<()> = Mutex::new(());
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = match provider_dir() {
        Ok(d) => d.clone(),
        Err(why) => panic!("provider {}: {why}", provider()),
    };
    let script = repo().join("mpi-tests/run.sh");
    if Command::new("timeout").arg("--version").output().is_err() {
        return skip("coreutils timeout not found");
    }
    let extra = std::env::var("MPI_SUITE_TESTS").ok();
    let all = std::env::var("MPI_SUITE_ALL").is_ok_and(|v| v == "1");
    let tests: Vec<String> = match &extra {
        Some(list) => list.split_whitespace().map(str::to_string).collect(),
        None => tests
            .iter()
            .filter(|t| {
                let known = known_failure(mpi, np, t);
                if let (Some(why), false) = (known, all) {
                    note_known_failure(&format!("{mpi} np={np} {t}: {why}"));
                }
                all || known.is_none()
            })
            .map(|s| s.to_string())
            .collect(),
    };
    let mut cmd = Command::new("timeout");
    cmd.arg(RUN_TIMEOUT_S.to_string())
        .arg("bash")
        .arg(&script)
        .arg(mpi)
        .arg(provider())
        .arg(np.to_string())
        .args(&tests)
        .current_dir(repo());
    if let Some(d) = dir {
        cmd.env("PROVDIR", d);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => return skip(&format!("cannot run bash {}: {e}", script.display())),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    match out.status.code() {
        Some(0) => {
            assert!(
                stdout.lines().any(|l| l.contains(" passed, 0 failed")),
                "run.sh {mpi} exited 0 without a summary line"
            );
            assert!(
                stdout.lines().any(|l| l.starts_with("PASS ")),
                "run.sh {mpi}: nothing passed (all skipped?)"
            );
        }
        // run.sh: 2 = cannot run (an MPI or the provider library missing)
        Some(2) if stderr.contains("cannot run") => skip(stderr.trim()),
        Some(124) => panic!("run.sh {mpi} exceeded {RUN_TIMEOUT_S} s"),
        code => panic!("run.sh {mpi} {} failed (exit {code:?})", provider()),
    }
}

/// Programs that fail over spray today, with what was seen (mpi, ranks, program,
/// why). Left out of the default run over spray only, and announced. Empty since
/// spray offers FI_RMA / FI_ATOMIC: Intel MPI `rma` / `imb-rma` and MPICH 4-rank
/// `rma` pass.
const SPRAY_KNOWN_FAILURES: &[(&str, u32, &str, &str)] = &[];

/// Announce a left-out known failure, also in scripts/test.sh's end summary
/// (libtest hides the output of passing tests).
fn note_known_failure(what: &str) {
    let line = format!("known failure, left out (MPI_SUITE_ALL=1 runs it): {what}");
    println!("{line}");
    if let Some(p) = std::env::var_os("SPRAY_TEST_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Why `test` of `mpi` at `np` ranks is a known failure over the provider under test.
fn known_failure(mpi: &str, np: u32, test: &str) -> Option<&'static str> {
    if provider() != "spray" {
        return None;
    }
    SPRAY_KNOWN_FAILURES
        .iter()
        .find(|(m, n, t, _)| *m == mpi && *n == np && *t == test)
        .map(|(_, _, _, why)| *why)
}

/// The programs every C-based MPI runs (osu is exercised by `mpi-tests/bench.sh`).
const C_TESTS: &[&str] = &["p2p", "coll", "rma", "thread"];

#[test]
fn mpi_ompi4_mtl_ofi() {
    run_suite("ompi4", 2, C_TESTS);
}

#[test]
fn mpi_ompi4_btl_ofi() {
    run_suite("ompi4-btl", 2, C_TESTS);
}

#[test]
fn mpi_ompi5() {
    run_suite("ompi5", 2, C_TESTS);
}

#[test]
fn mpi_mpich() {
    run_suite("mpich", 2, C_TESTS);
}

#[test]
fn mpi_impi_with_imb() {
    run_suite(
        "impi",
        2,
        &["p2p", "coll", "rma", "thread", "imb-mpi1", "imb-rma"],
    );
}

#[test]
fn mpi_mpi4py() {
    run_suite("mpi4py", 2, &["py-suite"]);
}

#[test]
fn mpi_mpich_4_ranks() {
    run_suite("mpich", 4, C_TESTS);
}

#[test]
fn mpi_ompi4_mtl_ofi_4_ranks() {
    run_suite("ompi4", 4, C_TESTS);
}

#[test]
fn mpi_ompi4_btl_ofi_4_ranks() {
    run_suite("ompi4-btl", 4, C_TESTS);
}

#[test]
fn mpi_ompi5_4_ranks() {
    run_suite("ompi5", 4, C_TESTS);
}

#[test]
fn mpi_impi_4_ranks() {
    run_suite(
        "impi",
        4,
        &["p2p", "coll", "rma", "thread", "imb-mpi1", "imb-rma"],
    );
}
