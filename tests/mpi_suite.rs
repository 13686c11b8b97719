//! Runs the MPI test programs of `mpi-tests/` (via `mpi-tests/run.sh`) under each MPI
//! library over the provider named by `SPRAY_TEST_PROVIDER` (default `spray`).
//!
//! One test per MPI at 2 ranks plus one 4-rank run, and `mpi_*_2_hosts*`: the suite with
//! its two ranks on two hosts (network namespaces of `scripts/hosts.sh`, over the ECMP
//! fabric, started by the MPI's own launcher through `scripts/netns-rsh`), without faults
//! and with 1 % random UDP loss into every host, `mpi_*_4_hosts*`: the suite on four hosts
//! (one rank each) through `mpi-tests/faults.sh`, without faults, with 1 % loss, and (MPICH)
//! with a dead, a flapping or a 10x slower ECMP link and through the incast topology, and
//! `mpi_mpich*_rank_*`: a rank that dies (`mpi-tests/rankdeath.sh`: kill -9, or its host's
//! link down). Missing prerequisites (an MPI not
//! installed: see `mpi-tests/setup.sh`; root and `ip netns` for the hosts) print
//! `skipped: <why>` and pass, except with `CI=true`, where they fail. For `spray` the
//! provider is built first (`cargo build --release --lib`) and copied to
//! `build/libspray-fi.so`. The runs are serialised (they share 2 cores) and each is
//! bounded by `timeout`.

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

/// Serialises the runs of this binary (they share 2 cores and the hosts testbed).
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `mpi-tests/run.sh MPI PROV NP [TESTS...]`, serialised with the other tests.
fn run_suite(mpi: &str, np: u32, tests: &[&str]) {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ = run_harness(mpi, np, &[], &[], &[], tests);
}

/// Runs `[PRE...] mpi-tests/run.sh [ARGS...] MPI PROV NP [TESTS...]` with `env` added,
/// checks its verdict and returns its standard output (`None` when skipped).
fn run_harness(
    mpi: &str,
    np: u32,
    pre: &[&str],
    args: &[&str],
    env: &[(&str, &str)],
    tests: &[&str],
) -> Option<String> {
    let dir = match provider_dir() {
        Ok(d) => d.clone(),
        Err(why) => panic!("provider {}: {why}", provider()),
    };
    let script = repo().join("mpi-tests/run.sh");
    if Command::new("timeout").arg("--version").output().is_err() {
        skip("coreutils timeout not found");
        return None;
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
    let mut cmd = Command::new(pre.first().copied().unwrap_or("timeout"));
    if !pre.is_empty() {
        cmd.args(&pre[1..]).arg("timeout");
    }
    cmd.arg(RUN_TIMEOUT_S.to_string())
        .arg("bash")
        .arg(&script)
        .args(args)
        .arg(mpi)
        .arg(provider())
        .arg(np.to_string())
        .args(&tests)
        .current_dir(repo());
    if let Some(d) = dir {
        cmd.env("PROVDIR", d);
    }
    cmd.envs(env.iter().copied());
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            skip(&format!("cannot run bash {}: {e}", script.display()));
            return None;
        }
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
            Some(stdout.into_owned())
        }
        // run.sh: 2 = cannot run (an MPI, the provider library or the hosts missing)
        Some(2) if stderr.contains("cannot run") => {
            skip(stderr.trim());
            None
        }
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

/// Namespace prefix of the hosts testbed these tests build (`SPRAY_HOSTS_PREFIX`, default
/// `sprh-`); another testbed with another prefix may run beside it.
fn hosts_prefix() -> String {
    std::env::var("SPRAY_HOSTS_PREFIX").unwrap_or_else(|_| "sprh-".to_string())
}

/// Tears the hosts testbed down when dropped, so that a failing or panicking test leaves
/// no namespace behind (run.sh -U also does on its exit; this covers its being killed).
struct HostsDown;

impl Drop for HostsDown {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("scripts/hosts.sh"))
            .arg("down")
            .env("SPRAY_HOSTS_PREFIX", hosts_prefix())
            .output();
    }
}

/// Why the hosts testbed cannot be built here (empty if it can).
fn hosts_missing() -> Vec<String> {
    let mut why = Vec::new();
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        why.push("not root (network namespaces)".to_string());
    }
    for (c, a) in [
        ("ip", "-V"),
        ("nft", "--version"),
        ("ethtool", "--version"),
        ("tc", "-V"),
        ("unshare", "--version"),
        ("flock", "--version"),
        ("ping", "-V"),
    ] {
        if !Command::new(c)
            .arg(a)
            .output()
            .is_ok_and(|o| o.status.success())
        {
            why.push(format!("no {c}"));
        }
    }
    if why.is_empty()
        && !Command::new("ip")
            .args(["netns", "list"])
            .output()
            .is_ok_and(|o| o.status.success())
    {
        why.push("ip netns does not work".to_string());
    }
    why
}

/// Runs the suite with its ranks on 2 hosts (`run.sh -H 2 -U`: run.sh brings the testbed up
/// with `up_args` and down again), under a lock per prefix (another test binary on this
/// machine may want the same testbed). Returns the PASS lines' `dropped udp D/IN` totals.
fn run_hosts(mpi: &str, up_args: &str, tests: &[&str]) -> Option<(u64, u64)> {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let why = hosts_missing();
    if !why.is_empty() {
        skip(&format!("hosts testbed: {}", why.join(", ")));
        return None;
    }
    let prefix = hosts_prefix();
    let lock = format!("/run/lock/spray-hosts-{prefix}run.lock");
    let _down = HostsDown;
    let stdout = run_harness(
        mpi,
        2,
        &["flock", "-w", "1800", &lock],
        &["-H", "2", "-U"],
        &[
            ("MPI_HOSTS_UP_ARGS", up_args),
            ("SPRAY_HOSTS_PREFIX", &prefix),
        ],
        tests,
    )?;
    // Every PASS line carries the fabric counters of its launch:
    // "[fabric l0=a/b ...; dropped udp D/IN tcp T]".
    let (mut dropped, mut udp_in) = (0, 0);
    for l in stdout.lines().filter(|l| l.starts_with("PASS ")) {
        assert!(l.contains("[fabric l0="), "no fabric counters in: {l}");
        let d = l
            .split("dropped udp ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|r| r.split_once('/'))
            .and_then(|(d, n)| Some((d.parse::<u64>().ok()?, n.parse::<u64>().ok()?)))
            .unwrap_or_else(|| panic!("no 'dropped udp D/IN' in: {l}"));
        dropped += d.0;
        udp_in += d.1;
    }
    println!("{mpi} on 2 hosts ({up_args}): {dropped} of {udp_in} UDP packets dropped");
    Some((dropped, udp_in))
}

/// The suite across 2 hosts on a fabric that drops nothing.
fn hosts_fault_free(mpi: &str, tests: &[&str]) {
    if let Some((dropped, _)) = run_hosts(mpi, "", tests) {
        assert_eq!(dropped, 0, "{mpi}: the fault-free fabric dropped packets");
    }
}

/// The suite across 2 hosts with 1 % random loss of the UDP arriving at each host.
fn hosts_loss_1pct(mpi: &str, tests: &[&str]) {
    if let Some((dropped, udp_in)) = run_hosts(mpi, "--loss 1", tests) {
        // Only a fabric that really dropped shows that the suite survives loss; with
        // tens of thousands of datagrams 1 % is far from 0 (spray's traffic is UDP;
        // a TCP provider sees none of this loss).
        if provider() == "spray" {
            assert!(
                dropped > 0 && dropped * 1000 < udp_in * 30,
                "{mpi}: {dropped} of {udp_in} UDP packets dropped, expected about 1 %"
            );
        }
    }
}

#[test]
fn mpi_mpich_2_hosts() {
    hosts_fault_free("mpich", C_TESTS);
}

#[test]
fn mpi_mpich_2_hosts_loss_1pct() {
    hosts_loss_1pct("mpich", C_TESTS);
}

#[test]
fn mpi_ompi5_2_hosts() {
    hosts_fault_free("ompi5", C_TESTS);
}

#[test]
fn mpi_ompi5_2_hosts_loss_1pct() {
    hosts_loss_1pct("ompi5", C_TESTS);
}

#[test]
fn mpi_impi_2_hosts() {
    hosts_fault_free("impi", &["p2p", "coll", "rma", "thread", "imb-mpi1"]);
}

#[test]
fn mpi_impi_2_hosts_loss_1pct() {
    hosts_loss_1pct("impi", &["p2p", "coll", "rma", "thread", "imb-mpi1"]);
}

#[test]
fn mpi_ompi4_2_hosts() {
    hosts_fault_free("ompi4", C_TESTS);
}

#[test]
fn mpi_ompi4_2_hosts_loss_1pct() {
    hosts_loss_1pct("ompi4", C_TESTS);
}

#[test]
fn mpi_mpi4py_2_hosts_loss_1pct() {
    hosts_loss_1pct("mpi4py", &["py-suite"]);
}

/// Runs `mpi-tests/rankdeath.sh [ARGS...] MPI PROV` (a rank that dies mid-job; see
/// mpi-tests/README.md) with `env` added and returns its result lines (`None` when
/// skipped). The script itself asserts that every job ended within its bound (30 s) with
/// a non-zero status and left no process behind.
fn run_rankdeath(mpi: &str, pre: &[&str], args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    let dir = match provider_dir() {
        Ok(d) => d.clone(),
        Err(why) => panic!("provider {}: {why}", provider()),
    };
    let script = repo().join("mpi-tests/rankdeath.sh");
    let mut cmd = Command::new(pre.first().copied().unwrap_or("timeout"));
    if !pre.is_empty() {
        cmd.args(&pre[1..]).arg("timeout");
    }
    cmd.arg(RUN_TIMEOUT_S.to_string())
        .arg("bash")
        .arg(&script)
        .args(args)
        .arg(mpi)
        .arg(provider())
        .current_dir(repo())
        .envs(env.iter().copied());
    if let Some(d) = dir {
        cmd.env("PROVDIR", d);
    }
    let out = cmd.output().expect("run bash mpi-tests/rankdeath.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    match out.status.code() {
        Some(0) => {
            assert!(
                stdout.lines().any(|l| l.starts_with("PASS ")),
                "rankdeath.sh {mpi}: nothing passed"
            );
            Some(stdout)
        }
        Some(2) if stderr.contains("cannot run") => {
            skip(stderr.trim());
            None
        }
        code => panic!("rankdeath.sh {mpi} {} failed (exit {code:?})", provider()),
    }
}

/// Seconds after the death that a result line reports for `what` ("end", "err").
fn death_secs(line: &str, what: &str) -> Option<f64> {
    line.split(&format!(" {what} "))
        .nth(1)?
        .split('s')
        .next()?
        .parse()
        .ok()
}

/// Unreachable timeout the death tests give spray (ms): not the 5 s default, so that the
/// survivors' error time shows the parameter at work.
const DEATH_UNREACHABLE_MS: &str = "2000";

/// kill -9 of one of two ranks on this machine: the job ends at once, nothing is left.
#[test]
fn mpi_mpich_rank_killed() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run_rankdeath("mpich", &[], &["-m", "kill"], &[]);
}

/// A rank dies on one of two hosts: kill -9 (the launcher sees it), and over spray also
/// its host's link taken down, which no launcher sees: the survivor's operations to it
/// must fail after FI_SPRAY_UNREACHABLE_TIMEOUT_MS and the job end well within 30 s.
#[test]
fn mpi_mpich_2_hosts_rank_dies() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let why = hosts_missing();
    if !why.is_empty() {
        skip(&format!("hosts testbed: {}", why.join(", ")));
        return;
    }
    let prefix = hosts_prefix();
    let lock = format!("/run/lock/spray-hosts-{prefix}run.lock");
    let _down = HostsDown;
    // libfabric's tcp has no such bound: with the link gone its job hangs until the
    // launcher's timeout (mpi-tests/README.md), so only spray runs the link mode.
    let modes = if provider() == "spray" {
        "kill link"
    } else {
        "kill"
    };
    let Some(out) = run_rankdeath(
        "mpich",
        &["flock", "-w", "1800", &lock],
        &["-H", "2", "-U", "-m", modes],
        &[
            ("SPRAY_HOSTS_PREFIX", &prefix),
            ("FI_SPRAY_UNREACHABLE_TIMEOUT_MS", DEATH_UNREACHABLE_MS),
            ("LAUNCH_TIMEOUT", "90"),
        ],
    ) else {
        return;
    };
    if provider() == "spray" {
        let link = out
            .lines()
            .find(|l| l.starts_with("PASS mpich/spray link"))
            .expect("a PASS line for the link mode");
        // the survivor's rank went once its operation to the dead host failed (MPICH
        // returns the error or aborts in its own handler, quoting FI_EHOSTUNREACH)
        assert!(
            link.contains(" cause error ") || link.contains(" cause unreachable "),
            "the survivor did not see its operation fail: {link}"
        );
        let gone = death_secs(link, "ranks").expect("the survivors' end time");
        let bound: f64 = DEATH_UNREACHABLE_MS.parse::<f64>().unwrap_or(0.0) / 1000.0;
        assert!(
            gone >= bound * 0.75 && gone <= bound + 10.0,
            "the survivor ended {gone} s after the link went, expected about {bound} s: {link}"
        );
    }
}

/// Fault tests that fail over spray today (MPI, fault, what was seen): left out over spray
/// unless `MPI_SUITE_ALL=1`, and announced, as `SPRAY_KNOWN_FAILURES`. Remove an entry with
/// its fix.
const SPRAY_FAULT_KNOWN_FAILURES: &[(&str, &str, &str)] = &[
    // (The blackholed link was one until the handshake stopped taking path 0
    // only and stall probes stopped taking one dead path: PROTOCOL.md §3, §4.)
];

/// Hosts of the fault matrix tests (`mpi-tests/faults.sh -H 4`): one rank on each.
const FAULT_HOSTS: &str = "4";
/// Upper bound for one `faults.sh` invocation (one MPI, one fault, one provider), seconds.
const FAULTS_TIMEOUT_S: u32 = 1200;

/// One launch of a `faults.sh` run (a line of its `results.tsv`).
#[derive(Debug)]
struct FaultRow {
    test: String,
    verdict: String,
    secs: String,
    why: String,
    stats: String,
}

/// Runs `mpi-tests/faults.sh -H 4 -m MPI -p PROV -f FAULT -t TESTS` (the testbed it builds
/// and removes has the prefix `SPRAY_HOSTS_PREFIX`, under the same lock as the 2-host tests),
/// asserts that every launch passed (skips allowed: run.sh's known limits of a provider)
/// and returns the launches and the fault's evidence line (what the fault did), or `None`
/// when skipped. The results directory is kept, and named, when the test fails.
fn run_faults(mpi: &str, fault: &str, tests: &[&str]) -> Option<(Vec<FaultRow>, String)> {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if provider() == "spray" && !std::env::var("MPI_SUITE_ALL").is_ok_and(|v| v == "1") {
        if let Some((_, _, why)) = SPRAY_FAULT_KNOWN_FAILURES
            .iter()
            .find(|(m, f, _)| *m == mpi && *f == fault)
        {
            note_known_failure(&format!("{mpi} across {FAULT_HOSTS} hosts, {fault}: {why}"));
            return None;
        }
    }
    let why = hosts_missing();
    if !why.is_empty() {
        skip(&format!("hosts testbed: {}", why.join(", ")));
        return None;
    }
    let dir = match provider_dir() {
        Ok(d) => d.clone(),
        Err(why) => panic!("provider {}: {why}", provider()),
    };
    let prefix = hosts_prefix();
    let lock = format!("/run/lock/spray-hosts-{prefix}run.lock");
    let _down = HostsDown;
    let out_dir = std::env::temp_dir().join(format!(
        "spray-faults-{mpi}-{fault}-{}-{}",
        provider(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out_dir);
    let tests = tests.join(" ");
    let mut cmd = Command::new("flock");
    cmd.args([
        "-w",
        "1800",
        &lock,
        "timeout",
        &FAULTS_TIMEOUT_S.to_string(),
    ])
    .arg("bash")
    .arg(repo().join("mpi-tests/faults.sh"))
    .args(["-H", FAULT_HOSTS, "-m", mpi, "-p", &provider(), "-f", fault])
    .args(["-t", &tests, "-o"])
    .arg(&out_dir)
    .current_dir(repo())
    .env("SPRAY_HOSTS_PREFIX", &prefix);
    if let Some(d) = dir {
        cmd.env("PROVDIR", d);
    }
    let out = cmd.output().expect("run bash mpi-tests/faults.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    let code = out.status.code();
    if code == Some(2) && stderr.contains("cannot run") {
        skip(stderr.trim());
        return None;
    }
    let keep = format!("results kept in {}", out_dir.display());
    assert_ne!(
        code,
        Some(124),
        "faults.sh exceeded {FAULTS_TIMEOUT_S} s; {keep}"
    );
    let tsv = std::fs::read_to_string(out_dir.join("results.tsv"))
        .unwrap_or_else(|e| panic!("faults.sh wrote no results.tsv ({e}); exit {code:?}; {keep}"));
    let mut rows = Vec::new();
    let mut evidence = String::new();
    for l in tsv.lines() {
        if let Some(e) = l.strip_prefix(&format!("#evidence {fault} ")) {
            evidence = e.to_string();
        }
        if l.starts_with('#') {
            continue;
        }
        let c: Vec<&str> = l.split('\t').collect();
        assert!(c.len() >= 9, "a short line in results.tsv: {l}; {keep}");
        rows.push(FaultRow {
            test: c[3].to_string(),
            verdict: c[4].to_string(),
            secs: c[5].to_string(),
            why: c[6].to_string(),
            stats: c[8].to_string(),
        });
    }
    let failed: Vec<&FaultRow> = rows.iter().filter(|r| r.verdict == "FAIL").collect();
    assert!(
        failed.is_empty(),
        "{mpi} / {} under {fault} across {FAULT_HOSTS} hosts: {} launch(es) failed: {:?}; {keep}",
        provider(),
        failed.len(),
        failed
    );
    assert!(
        rows.iter().any(|r| r.verdict == "PASS"),
        "{mpi} under {fault}: nothing passed: {rows:?}; {keep}"
    );
    // faults.sh counts the failures of every provider but tcp in its exit status
    assert!(
        code == Some(0),
        "faults.sh exited {code:?} with every launch passed; {keep}"
    );
    for r in &rows {
        println!(
            "{mpi} {fault} {} {} {}s {}{}",
            r.test, r.verdict, r.secs, r.why, r.stats
        );
    }
    println!("{mpi} {fault}: {evidence}");
    let _ = std::fs::remove_dir_all(&out_dir);
    Some((rows, evidence))
}

/// The number after `key` in `line` ("udp_dropped=12" -> 12, "link: 34" -> 34).
fn number_after(line: &str, key: &str) -> Option<f64> {
    let rest = line.split(key).nth(1)?;
    let num: String = rest
        .trim_start_matches(['=', ':', ' ', '('])
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    num.parse().ok()
}

/// The programs of the 4-host tests for `mpi` (IMB for Intel MPI; osu is bench.sh's).
fn four_host_tests(mpi: &str) -> &'static [&'static str] {
    match mpi {
        "impi" => &["p2p", "coll", "rma", "thread", "imb-mpi1", "imb-rma"],
        "mpi4py" => &["py-suite"],
        _ => C_TESTS,
    }
}

/// The suite across 4 hosts (1 rank each) on the ECMP fabric without faults.
fn four_hosts_fault_free(mpi: &str) {
    if let Some((_, evidence)) = run_faults(mpi, "none", four_host_tests(mpi)) {
        assert_eq!(
            number_after(&evidence, "udp_dropped"),
            Some(0.0),
            "{mpi}: the fault-free fabric dropped packets: {evidence}"
        );
    }
}

/// The suite across 4 hosts with 1 % random loss of the UDP into every host (and of
/// libfabric tcp's connections).
fn four_hosts_loss_1pct(mpi: &str) {
    if let Some((_, evidence)) = run_faults(mpi, "loss", four_host_tests(mpi)) {
        if provider() == "spray" {
            // "udp_in=N udp_dropped=D (P %)": only a fabric that really dropped shows that
            // the suite survives loss
            let pct = evidence
                .split('(')
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|p| p.parse::<f64>().ok())
                .unwrap_or(-1.0);
            assert!(
                (0.5..=2.0).contains(&pct),
                "{mpi}: expected about 1 % of UDP dropped: {evidence}"
            );
        }
    }
}

#[test]
fn mpi_mpich_4_hosts() {
    four_hosts_fault_free("mpich");
}

#[test]
fn mpi_mpich_4_hosts_loss_1pct() {
    four_hosts_loss_1pct("mpich");
}

#[test]
fn mpi_ompi5_4_hosts() {
    four_hosts_fault_free("ompi5");
}

#[test]
fn mpi_ompi5_4_hosts_loss_1pct() {
    four_hosts_loss_1pct("ompi5");
}

#[test]
fn mpi_impi_4_hosts() {
    four_hosts_fault_free("impi");
}

#[test]
fn mpi_impi_4_hosts_loss_1pct() {
    four_hosts_loss_1pct("impi");
}

#[test]
fn mpi_mpi4py_4_hosts_loss_1pct() {
    four_hosts_loss_1pct("mpi4py");
}

/// One ECMP link silently drops every packet for the whole run (`hosts.sh bad drop 1 100`).
/// spray only: a TCP connection hashed onto the dead link never recovers (the routers hash
/// its 5-tuple), so libfabric's tcp hangs there until the launch's bound (mpi-tests/README.md).
#[test]
fn mpi_mpich_4_hosts_dead_link() {
    if provider() != "spray" {
        println!(
            "not run for {}: a TCP connection on a dead ECMP link never recovers",
            provider()
        );
        return;
    }
    if let Some((_, evidence)) = run_faults("mpich", "blackhole", C_TESTS) {
        let dropped = number_after(&evidence, "link:").unwrap_or(0.0);
        assert!(dropped > 0.0, "the dead link dropped nothing: {evidence}");
    }
}

/// One ECMP link goes down 2 s and up 2 s, again and again, while the suite runs.
#[test]
fn mpi_mpich_4_hosts_flapping_link() {
    if let Some((_, evidence)) = run_faults("mpich", "flap", C_TESTS) {
        assert!(
            evidence.contains("running at the end: yes"),
            "the link did not flap through the run: {evidence}"
        );
        assert!(
            number_after(&evidence, "about").unwrap_or(0.0) >= 1.0,
            "not one down/up cycle: {evidence}"
        );
    }
}

/// Every ECMP link shaped to 1 Gbit/s, one of them 10 times slower.
#[test]
fn mpi_mpich_4_hosts_slow_link() {
    if let Some((_, evidence)) = run_faults("mpich", "slow", C_TESTS) {
        // the slow link's shaper ("r1 l1 SENT DROPPED OVERLIMITS") carried traffic
        let sent = number_after(&evidence, "r1 l1 ").unwrap_or(0.0);
        assert!(sent > 0.0, "nothing crossed the slow link: {evidence}");
    }
}

/// The 4 hosts behind one switch, every downlink a 500 Mbit/s TBF with a 64 KiB buffer.
#[test]
fn mpi_mpich_4_hosts_incast() {
    if let Some((_, evidence)) = run_faults("mpich", "incast", C_TESTS) {
        for h in 0..4 {
            let sent = number_after(&evidence, &format!("sw rh{h} ")).unwrap_or(0.0);
            assert!(
                sent > 0.0,
                "nothing crossed host {h}'s downlink: {evidence}"
            );
        }
    }
}
