//! Smoke test of the benchmark across hosts: `scripts/hostbench.sh --quick` with a small selection.
//!
//! fi_pingpong, the OSU-style benchmark under MPICH, spray's stream client and the kernel
//! baselines (kernel TCP, raw UDP with GSO/GRO), at MTU 1500 and two sizes, between two hosts
//! (network namespaces `SPRAY_HOSTS_PREFIX`, default `sprb-`) built and removed by the script.
//! Asserts that the run passed, that every cell of the table and of the CPU-per-packet table
//! holds a number, that the plot is a PNG and that no namespace is left — never the timings,
//! which depend on the machine. Needs root, `ip netns`, fi_pingpong, a C compiler with the
//! libfabric headers, python3 and MPICH (`mpi-tests/setup.sh`): a missing one fails the test
//! under `CI=true` and skips it otherwise. spray is built first (`cargo build --release --lib`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Bound on the whole script, seconds (it takes about a minute on an idle 2-core machine).
const TIMEOUT_S: u32 = 600;
/// Bound on building the provider, seconds.
const BUILD_TIMEOUT_S: u32 = 1800;
const SIZES: &[&str] = &["8", "65536"];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn ok_cmd(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn prefix() -> String {
    std::env::var("SPRAY_HOSTS_PREFIX").unwrap_or_else(|_| "sprb-".to_string())
}

/// Every missing prerequisite, as a readable reason.
fn missing() -> Vec<String> {
    let mut why = Vec::new();
    if !is_root() {
        why.push("not root".to_string());
    }
    for (cmd, arg) in [
        ("ip", "-V"),
        ("nft", "--version"),
        ("ethtool", "--version"),
        ("ping", "-V"),
        ("unshare", "--version"),
        ("flock", "--version"),
        ("timeout", "--version"),
        ("fi_info", "--version"),
        ("python3", "--version"),
        ("cc", "--version"),
    ] {
        if !ok_cmd(cmd, &[arg]) {
            why.push(format!("no {cmd}"));
        }
    }
    if !ok_cmd("sh", &["-c", "command -v fi_pingpong"]) {
        why.push("no fi_pingpong (libfabric-bin)".to_string());
    }
    if !Path::new("/usr/include/rdma/fabric.h").exists() {
        why.push("no libfabric headers (libfabric-dev)".to_string());
    }
    if !repo().join(".venv-mpich/bin/mpicc").exists() {
        why.push("no MPICH in .venv-mpich (mpi-tests/setup.sh)".to_string());
    }
    if why.is_empty() && !ok_cmd("ip", &["netns", "list"]) {
        why.push("ip netns does not work".to_string());
    }
    why
}

/// Builds spray and puts it where the script looks (`build/libspray-fi.so`).
fn build_provider() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new("timeout")
        .arg(BUILD_TIMEOUT_S.to_string())
        .arg(&cargo)
        .args(["build", "--release", "--lib"])
        .current_dir(repo())
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "cargo build --release --lib failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join("target"));
    let dir = repo().join("build");
    std::fs::create_dir_all(&dir).expect("mkdir build");
    // a temporary name and a rename, so that a concurrent reader never sees half a file
    let tmp = dir.join(format!(".libspray-fi.so.{}", std::process::id()));
    std::fs::copy(target.join("release/libspray_fi.so"), &tmp).expect("copy the provider");
    std::fs::rename(&tmp, dir.join("libspray-fi.so")).expect("rename the provider");
}

/// Tears the testbed down when dropped (the script does on exit; this covers its being killed).
struct Down;

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("scripts/hosts.sh"))
            .arg("down")
            .env("SPRAY_HOSTS_PREFIX", prefix())
            .output();
    }
}

/// The rows (line, cells) of every markdown table whose header starts with `header`.
fn rows<'a>(md: &'a str, header: &str) -> Vec<(&'a str, Vec<&'a str>)> {
    let mut out = Vec::new();
    let mut lines = md.lines();
    while let Some(l) = lines.next() {
        if !l.starts_with(header) {
            continue;
        }
        lines.next(); // |---|...
        for row in lines.by_ref().take_while(|r| r.starts_with('|')) {
            let cells = row.trim_matches('|').split('|').map(str::trim).collect();
            out.push((row, cells));
        }
    }
    out
}

/// A cell holds a number: "12.3", "12.3 (11.0-13.1)" or, in the CPU table, "812, 97%".
fn is_number(cell: &str) -> bool {
    cell.split_whitespace()
        .next()
        .and_then(|v| v.trim_end_matches(',').parse::<f64>().ok())
        .is_some_and(f64::is_finite)
}

#[test]
fn hostbench_quick_table() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let why = missing();
    if !why.is_empty() {
        assert!(
            !ci,
            "hostbench prerequisites missing under CI=true: {}",
            why.join(", ")
        );
        println!("skipped: {}", why.join(", "));
        return;
    }
    build_provider();
    let out = repo().join("target/hostbench-quick");
    let _ = std::fs::remove_dir_all(&out);
    let _down = Down;
    let status = Command::new("timeout")
        .args(["-k", "30", &TIMEOUT_S.to_string(), "bash"])
        .arg(repo().join("scripts/hostbench.sh"))
        .args(["--quick", "--clients", "fi_pingpong,osu-mpich,stream,base"])
        .args(["--mtus", "1500", "--sizes", &SIZES.join(",")])
        .arg("--out")
        .arg(&out)
        .env("SPRAY_HOSTS_PREFIX", prefix())
        .env_remove("PROVDIR")
        .status()
        .expect("run scripts/hostbench.sh");
    assert_ne!(
        status.code(),
        Some(124),
        "hostbench.sh --quick took over {TIMEOUT_S} s"
    );
    assert!(status.success(), "hostbench.sh --quick failed: {status}");

    let md_path = std::fs::read_dir(&out)
        .expect("the output directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .expect("a hostbench-<date>.md");
    let md = std::fs::read_to_string(&md_path).expect("read the table");
    // client x metric x size: fi_pingpong latency and ping-pong MB/s, osu latency, bw and
    // bibw, the stream's MB/s; columns spray, tcp, kernel TCP, raw UDP and three ratios.
    let table = rows(&md, "| MTU | client |");
    assert_eq!(table.len(), (2 + 3 + 1) * SIZES.len(), "table rows:\n{md}");
    for (line, cells) in &table {
        assert_eq!(cells.len(), 11, "columns of {line}");
        assert_eq!(cells[0], "1500", "MTU of {line}");
        assert!(
            cells[4..].iter().all(|c| is_number(c)),
            "a cell without a number: {line}"
        );
    }
    // CPU per packet: spray, tcp, kernel TCP and raw UDP at each end, and raw UDP's loss.
    let cpu = rows(&md, "| MTU | size | spray tx");
    assert_eq!(cpu.len(), SIZES.len(), "CPU table rows:\n{md}");
    for (line, cells) in &cpu {
        assert_eq!(cells.len(), 11, "columns of {line}");
        assert!(
            cells[2..].iter().all(|c| is_number(c)),
            "a CPU cell without a number: {line}"
        );
    }
    assert!(md.contains("No run failed."), "a run failed:\n{md}");
    let png = std::fs::read(md_path.with_extension("png")).expect("the plot");
    assert!(
        png.len() > 1000 && png.starts_with(b"\x89PNG"),
        "the plot is not a PNG"
    );
    let ns = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let left: Vec<String> = String::from_utf8_lossy(&ns.stdout)
        .lines()
        .filter(|l| l.starts_with(&prefix()))
        .map(str::to_string)
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}
