//! Shared helpers of the `ffi_*` integration tests: find the built provider,
//! run libfabric's tools against it, and open objects through the real core.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub mod duo;
pub mod fab;
pub mod pair;
pub mod wait;

/// A directory holding only `libspray-fi.so`, a link to the cdylib cargo built
/// with these tests (the test binary lives in `<target>/<profile>/deps/`, where
/// `cargo test` leaves the cdylib).
pub fn provider_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    let so = [deps.join("libspray_fi.so"), deps.join("../libspray_fi.so")]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("libspray_fi.so not found next to {}", exe.display()));
    let dir = deps.join("../spray-provider");
    std::fs::create_dir_all(&dir).expect("create provider dir");
    let link = dir.join("libspray-fi.so");
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!("tmp-{}-{n}", std::process::id()));
    std::os::unix::fs::symlink(so.canonicalize().expect("canonical path"), &tmp).expect("symlink");
    // rename is atomic: parallel tests never see a missing link.
    std::fs::rename(&tmp, &link).expect("install provider link");
    dir
}

/// True when a libfabric tool is installed; when it is not, fail under CI=true
/// and tell the caller to skip otherwise.
pub fn have_tool(name: &str) -> bool {
    let ok = Command::new(name).arg("-h").output().is_ok();
    if !ok {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{name} is required under CI=true (apt-get install libfabric-bin)");
        }
        eprintln!("SKIP: {name} not installed (apt-get install libfabric-bin)");
    }
    ok
}

/// True when root can build network namespaces here; under CI=true a
/// missing prerequisite fails the test `what`, elsewhere it is skipped with a
/// message.
pub fn can_build_namespaces(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .is_ok_and(|o| o.status.success());
    if root && ip {
        return true;
    }
    let why = if root {
        "`ip netns` unavailable"
    } else {
        "not root"
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} needs root and ip netns under CI=true: {why}");
    }
    eprintln!("skipped: {what}: {why}");
    false
}

/// A command with the provider made visible, on loopback only.
pub fn fi_cmd(tool: &str) -> Command {
    let mut c = Command::new(tool);
    c.env("FI_PROVIDER_PATH", provider_dir())
        .env("FI_PROVIDER", "spray")
        .env("FI_SPRAY_IFACE", "lo")
        .env_remove("FI_LOG_LEVEL");
    c
}

/// Run `fi_info` with `args`.
pub fn fi_info(args: &[&str]) -> Output {
    fi_cmd("fi_info").args(args).output().expect("run fi_info")
}

/// Stdout as text.
pub fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Sum of `"key":N` over the JSON lines of a stats file.
pub fn stat_sum(text: &str, key: &str) -> u64 {
    let pat = format!("\"{key}\":");
    let mut sum = 0;
    for l in text.lines() {
        for (i, _) in l.match_indices(&pat) {
            let rest = &l[i + pat.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            sum += rest[..end].parse::<u64>().unwrap_or(0);
        }
    }
    sum
}

/// This process's IPv4 UDP sockets: (fd, bound address, peer if connected).
pub fn udp_sockets() -> Vec<(i32, libc::sockaddr_in, Option<libc::sockaddr_in>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let Ok(fd) = e
            .expect("fd entry")
            .file_name()
            .to_string_lossy()
            .parse::<i32>()
        else {
            continue;
        };
        let len0 = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY (test): getsockname / getpeername on our own fds into locals.
        unsafe {
            let mut me: libc::sockaddr_in = std::mem::zeroed();
            let mut len = len0;
            if libc::getsockname(fd, (&mut me as *mut libc::sockaddr_in).cast(), &mut len) != 0
                || len != len0
                || i32::from(me.sin_family) != libc::AF_INET
            {
                continue;
            }
            let mut peer: libc::sockaddr_in = std::mem::zeroed();
            let mut len = len0;
            let connected =
                libc::getpeername(fd, (&mut peer as *mut libc::sockaddr_in).cast(), &mut len) == 0;
            out.push((fd, me, connected.then_some(peer)));
        }
    }
    out
}
