//! End-to-end check of the experiment pipeline: `experiments/run.py --quick` in network namespaces.
//!
//! Runs when `CI=true` or `SPRAY_EXP=1` (it takes a few minutes and owns the `sprx-` namespaces);
//! prerequisites missing → a failure under `CI=true`, else "skipped: <why>". Asserts that the
//! pipeline finished and that report.md and its plots exist with numbers for every transport —
//! never timings, which depend on the machine — and that spray trials carry their FI_SPRAY_STATS
//! counters. `SPRAY_EXP_TRANSPORTS` (default `spray,tcp,kernel-tcp`) narrows the transports,
//! e.g. to validate the pipeline without spray.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(600);

fn ok_cmd(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
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

/// Every missing prerequisite, as a readable reason.
fn missing(root: &Path, transports: &[String]) -> Vec<String> {
    let mut why = Vec::new();
    if !is_root() {
        why.push("not root".to_string());
    }
    for (cmd, arg) in [
        ("ip", "-V"),
        ("tc", "-V"),
        ("nft", "--version"),
        ("ethtool", "--version"),
        ("python3", "--version"),
        ("make", "--version"),
        ("gcc", "--version"),
    ] {
        if !ok_cmd(cmd, &[arg]) {
            why.push(format!("no {cmd}"));
        }
    }
    if !Path::new("/usr/include/rdma/fabric.h").exists() {
        why.push("no libfabric headers (libfabric-dev)".to_string());
    }
    if why.is_empty() && !ok_cmd("ip", &["netns", "add", "sprx-probe"]) {
        why.push("cannot create network namespaces".to_string());
    }
    let _ = Command::new("ip")
        .args(["netns", "del", "sprx-probe"])
        .output();
    if transports.iter().any(|t| t == "spray") && !root.join("build/libspray-fi.so").exists() {
        why.push("no build/libspray-fi.so (cargo build --release --lib && cp target/release/libspray_fi.so build/libspray-fi.so)".to_string());
    }
    why
}

/// Rows of a markdown section that mention `transport` as a cell and hold at least one number.
fn rows_with_numbers(section: &str, transport: &str) -> usize {
    let cell = format!("| {transport} |");
    section
        .lines()
        .filter(|l| l.contains(&cell))
        .filter(|l| {
            l.split('|').any(|c| {
                c.trim()
                    .parse::<f64>()
                    .map(|v| v.is_finite())
                    .unwrap_or(false)
            })
        })
        .count()
}

#[test]
fn experiments_quick_pipeline() {
    let ci = std::env::var("CI").map(|v| v == "true").unwrap_or(false);
    let wanted = std::env::var("SPRAY_EXP")
        .map(|v| v == "1")
        .unwrap_or(false);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let transports: Vec<String> = std::env::var("SPRAY_EXP_TRANSPORTS")
        .unwrap_or_else(|_| "spray,tcp,kernel-tcp".to_string())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if !ci && !wanted {
        println!("skipped: set SPRAY_EXP=1 (or CI=true) to run the network experiments (a few minutes, root)");
        return;
    }
    let why = missing(&root, &transports);
    if !why.is_empty() {
        assert!(
            !ci,
            "experiment prerequisites missing under CI=true: {}",
            why.join(", ")
        );
        println!("skipped: {}", why.join(", "));
        return;
    }
    let out = root.join("target/exp-quick");
    let _ = std::fs::remove_dir_all(&out);
    let mut child = Command::new("python3")
        .arg(root.join("experiments/run.py"))
        .args(["--quick", "--transports", &transports.join(",")])
        .arg("--prov-path")
        .arg(root.join("build"))
        .arg("--out")
        .arg(&out)
        .spawn()
        .expect("start python3 experiments/run.py");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for run.py") {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            let _ = Command::new("bash")
                .arg(root.join("experiments/testbed.sh"))
                .arg("down")
                .status();
            panic!("run.py --quick did not finish in {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(status.success(), "run.py --quick failed: {status}");
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md written");
    let sections: Vec<&str> = report.split("\n## ").collect();
    for n in 1..=6 {
        let sec = sections
            .iter()
            .find(|s| s.starts_with(&format!("{n}. ")))
            .unwrap_or_else(|| panic!("report has no section {n}"));
        for t in &transports {
            assert!(
                rows_with_numbers(sec, t) > 0,
                "section {n} has no numbers for {t}:\n{sec}"
            );
        }
    }
    if transports.iter().any(|t| t == "spray") {
        // Every completed spray trial carries its FI_SPRAY_STATS counters, and the
        // incast table shows them (RTO/TLP/retx/dup cells like `0/3/12/2`).
        let results = std::fs::read_to_string(out.join("results.json")).expect("results.json");
        assert!(
            results.contains("\"tx_data\"") && results.contains("\"timeouts\""),
            "no spray counters in results.json"
        );
        let sec1 = sections
            .iter()
            .find(|s| s.starts_with("1. "))
            .expect("section 1");
        let with_counters = sec1
            .lines()
            .filter(|l| l.contains("| spray |"))
            .filter(|l| {
                l.split('|').any(|c| {
                    let v: Vec<&str> = c.trim().split('/').collect();
                    v.len() == 4 && v.iter().all(|x| x.parse::<u64>().is_ok())
                })
            })
            .count();
        assert!(
            with_counters > 0,
            "no RTO/TLP/retx/dup cells for spray:\n{sec1}"
        );
    }
    for png in [
        "fct_cdf.png",
        "throughput_time.png",
        "goodput_loss.png",
        "links.png",
    ] {
        let bytes = std::fs::read(out.join(png)).unwrap_or_else(|_| panic!("{png} written"));
        assert!(
            bytes.len() > 1000 && bytes.starts_with(b"\x89PNG"),
            "{png} is not a PNG plot"
        );
    }
    // The testbed is torn down afterwards. Listed under run.py's lock: another
    // experiment run on this machine (same names) holds it while its testbed
    // is up, so its namespaces are not taken for ours.
    let ns = Command::new("flock")
        .args(["-w", "900", "/run/lock/sprx-experiments.lock"])
        .args(["ip", "netns", "list"])
        .output()
        .expect("flock ip netns list");
    assert!(ns.status.success(), "flock on the experiments lock failed");
    assert!(
        !String::from_utf8_lossy(&ns.stdout).contains("sprx-"),
        "sprx- namespaces left behind"
    );
}
