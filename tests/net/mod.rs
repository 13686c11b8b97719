//! Helpers of the network integration tests (net_*.rs): prerequisites, provider build, script runs.
//!
//! The tests drive `scripts/pingpong.sh` (and through it `scripts/netns.sh`)
//! so that what `cargo test` checks is exactly what a person runs by hand.
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Repository root (where `Cargo.toml` and `scripts/` live).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Provider under test: `spray`, or `SPRAY_TEST_PROVIDER` when set (e.g. `tcp`).
pub fn provider() -> String {
    std::env::var("SPRAY_TEST_PROVIDER")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "spray".to_string())
}

/// True when `SPRAY_TEST_PROVIDER` replaces spray (validation of the harness itself).
pub fn provider_overridden() -> bool {
    provider() != "spray"
}

/// True under CI (`CI=true`), where a missing prerequisite is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true").unwrap_or(false)
}

/// Serialises the tests of one binary: they share the namespaces and the CPU.
/// (scripts/pingpong.sh also takes a file lock, for separate processes.)
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A test that panicked while holding the lock must not fail the others.
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Outcome of a prerequisite check: `Err(reason)` means the test cannot run here.
pub type Prereq = Result<(), String>;

/// Handles a missing prerequisite: fails under CI, else prints and records
/// "skipped: <why>" and returns so the caller can `return`.
pub fn skip(test: &str, why: &str) {
    if in_ci() {
        panic!("{test}: prerequisite missing under CI=true: {why}");
    }
    skip_always(test, why);
}

/// Reports a skip that is right even under CI (e.g. an override provider
/// without a dgram endpoint).
pub fn skip_always(test: &str, why: &str) {
    eprintln!("skipped: {test}: {why}");
    let log = skip_log_path();
    if let Some(dir) = log.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(&log) {
        let _ = writeln!(f, "skipped: {test}: {why}");
    }
}

/// Where skips are recorded for scripts/test.sh's summary.
pub fn skip_log_path() -> PathBuf {
    match std::env::var_os("SPRAY_TEST_SKIP_LOG") {
        Some(p) => PathBuf::from(p),
        None => target_dir().join("spray-test-skips.log"),
    }
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(p) => PathBuf::from(p),
        None => repo_root().join("target"),
    }
}

/// Runs `sh -c script` and reports whether it succeeded.
fn sh_ok(script: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Root, `ip netns`, nftables, fi_pingpong: what every network test needs.
pub fn host_prereqs(netns: bool) -> Prereq {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| format!("cannot run id: {e}"))?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not root (namespaces and nftables need root)".into());
    }
    for cmd in ["fi_pingpong", "fi_info", "timeout", "ss", "flock"] {
        if !sh_ok(&format!("command -v {cmd} >/dev/null")) {
            return Err(format!("{cmd} not found (run scripts/setup.sh)"));
        }
    }
    if netns {
        for cmd in ["ip", "nft", "ethtool"] {
            if !sh_ok(&format!("command -v {cmd} >/dev/null")) {
                return Err(format!("{cmd} not found (run scripts/setup.sh)"));
            }
        }
        if !sh_ok("ip netns list >/dev/null 2>&1") {
            return Err("ip netns is not usable here".into());
        }
    }
    Ok(())
}

/// Builds and installs spray once per test binary (`cargo build --release
/// --lib` + `scripts/install.sh`), then checks that libfabric can load the
/// provider under test. The result is cached: later tests reuse it.
/// `SPRAY_TEST_NO_BUILD=1` tests the library already in `SPRAY_PROVIDER_DIR`
/// (default `build/`) or installed system-wide, without building.
pub fn provider_ready() -> Prereq {
    static READY: OnceLock<Prereq> = OnceLock::new();
    READY.get_or_init(build_and_probe).clone()
}

fn build_and_probe() -> Prereq {
    let prov = provider();
    let no_build = std::env::var("SPRAY_TEST_NO_BUILD").is_ok_and(|v| v == "1");
    if prov == "spray" && !no_build {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args(["build", "--release", "--lib"])
            .current_dir(repo_root())
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo build --release --lib failed:\n{}",
                tail(&String::from_utf8_lossy(&out.stderr), 20)
            ));
        }
        let out = script("install.sh", &[])?;
        if !out.status.success() {
            return Err(format!("scripts/install.sh failed: {}", describe(&out)));
        }
    }
    let probe = Command::new("bash")
        .arg("-c")
        .arg(r#". "$1/scripts/lib.sh" && provider_env "$2" && timeout 20 fi_info -p "$2""#)
        .arg("probe")
        .arg(repo_root())
        .arg(&prov)
        .output()
        .map_err(|e| format!("cannot run fi_info: {e}"))?;
    if !probe.status.success() {
        return Err(format!(
            "libfabric does not offer provider '{prov}' (fi_info -p {prov}: {}, {})",
            probe.status,
            tail(&String::from_utf8_lossy(&probe.stderr), 3).replace('\n', " | ")
        ));
    }
    Ok(())
}

/// True if the provider under test offers endpoint type `ep` ("rdm", "dgram").
pub fn provider_has_ep(ep: &str) -> bool {
    Command::new("bash")
        .arg("-c")
        .arg(r#". "$1/scripts/lib.sh" && provider_has_ep "$2" "$3""#)
        .arg("probe")
        .arg(repo_root())
        .arg(provider())
        .arg(ep)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Runs `scripts/<name> args...` from the repository root.
pub fn script(name: &str, args: &[&str]) -> Result<Output, String> {
    script_env(name, args, &[])
}

/// `script` with extra environment variables.
pub fn script_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<Output, String> {
    let path: PathBuf = repo_root().join("scripts").join(name);
    run_bash(&path, args, env)
}

fn run_bash(path: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Output, String> {
    Command::new("bash")
        .arg(path)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo_root())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))
}

/// Exit status plus the last lines of stdout and stderr, for failure messages.
pub fn describe(out: &Output) -> String {
    format!(
        "{}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
        out.status,
        tail(&String::from_utf8_lossy(&out.stdout), 25),
        tail(&String::from_utf8_lossy(&out.stderr), 40)
    )
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The `SUMMARY ...` line of a pingpong.sh run as key/value pairs.
pub fn summary(out: &Output) -> Option<HashMap<String, String>> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with("SUMMARY "))?;
    Some(
        line.split_whitespace()
            .skip(1)
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// A numeric field of a summary (0 when absent or malformed).
pub fn field(sum: &HashMap<String, String>, key: &str) -> u64 {
    sum.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
}
