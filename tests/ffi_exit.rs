//! Process exit with the provider loaded: libfabric runs our `cleanup` at exit
//! (its destructor), on whichever thread called `exit()`. Each case runs in a
//! child process of this test binary that opens an endpoint through the real
//! libfabric core (so the progress assist thread runs), then exits one way:
//! a SIGTERM whose handler calls `exit()`, delivered to the assist thread or to
//! the application thread that opened the endpoint, or a plain `exit()` with
//! the endpoint still open. The child
//! must leave with the status its handler gave, promptly, and print no panic.

mod common;
use common::fab::*;

use std::os::raw::c_int;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use spray_fi::sys;

/// Status the children's exit paths use (not 0, 1 or 101, which a panic,
/// an abort or a failed test would give).
const STATUS: i32 = 7;
/// How long a child may take from its exit trigger to being gone.
const EXIT_LIMIT: Duration = Duration::from_secs(5);

extern "C" fn exit_on_signal(_: c_int) {
    // SAFETY (test): what applications do (exit from a SIGTERM handler); it
    // runs the atexit handlers and libfabric's destructor on this thread.
    unsafe { libc::exit(STATUS) };
}

/// Thread id of this process's thread named `name`.
fn tid_of(name: &str) -> Option<i32> {
    for e in std::fs::read_dir("/proc/self/task").ok()? {
        let e = e.ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            return e.file_name().to_str()?.parse().ok();
        }
    }
    None
}

/// Open and enable an RDM endpoint (left open on purpose) and wait for the
/// assist thread to appear; returns its thread id.
fn open_endpoint() -> i32 {
    let info = getinfo(
        sys::fi_ep_type_FI_EP_RDM,
        (sys::FI_MSG | sys::FI_TAGGED) as u64,
    );
    let (_fab, dom) = open_domain(info);
    let av = open_av(dom);
    let cq = open_cq(dom, sys::fi_cq_format_FI_CQ_FORMAT_TAGGED);
    let ep = open_ep(dom, info);
    assert_eq!(bind(ep, av, 0), 0);
    assert_eq!(bind(ep, cq, (sys::FI_TRANSMIT | sys::FI_RECV) as u64), 0);
    assert_eq!(control(ep, sys::FI_ENABLE, null_mut()), 0);
    let t = Instant::now();
    loop {
        if let Some(tid) = tid_of("spray-assist") {
            return tid;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "no spray-assist thread"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The body of one case, in the child.
fn child(case: &str) {
    init();
    std::env::set_var("FI_SPRAY_ASSIST_US", "200");
    let assist = open_endpoint();
    // SAFETY (test): installing a plain handler; getpid/gettid/tgkill on ourselves.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            exit_on_signal as *const () as libc::sighandler_t,
        );
        let pid = libc::getpid();
        match case {
            "sigterm_on_assist" => {
                libc::syscall(libc::SYS_tgkill, pid, assist, libc::SIGTERM);
            }
            "sigterm_on_main" => {
                let me = libc::syscall(libc::SYS_gettid) as i32;
                libc::syscall(libc::SYS_tgkill, pid, me, libc::SIGTERM);
            }
            "exit_with_open_endpoint" => libc::exit(STATUS),
            _ => panic!("unknown case {case}"),
        }
    }
    // The handler exits the process from under us.
    std::thread::sleep(EXIT_LIMIT * 2);
    eprintln!("still running after the signal");
    std::process::exit(2);
}

/// Run `case` in a child process and check how it ended.
fn run_case(case: &str) {
    if let Ok(c) = std::env::var("SPRAY_EXIT_CHILD") {
        if c == case {
            child(case);
        }
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([case, "--exact", "--nocapture", "--test-threads=1"])
        .env("SPRAY_EXIT_CHILD", case)
        .env("RUST_BACKTRACE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let t = Instant::now();
    let mut ch = cmd.spawn().expect("run child");
    let status = loop {
        if let Some(s) = ch.try_wait().expect("wait child") {
            break s;
        }
        if t.elapsed() > Duration::from_secs(30) {
            let _ = ch.kill();
            let _ = ch.wait();
            panic!("{case}: child hung at exit");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = ch.wait_with_output().expect("child output");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    println!("{case}: {status:?} after {:?}\n{text}", t.elapsed());
    assert_eq!(
        status.code(),
        Some(STATUS),
        "{case}: exit status (a panic at exit gives 1 or 101, a crash a signal)\n{text}"
    );
    for bad in [
        "panicked",
        "backtrace",
        "internal error",
        "Resource deadlock",
    ] {
        assert!(
            !text.contains(bad),
            "{case}: {bad:?} in the output:\n{text}"
        );
    }
}

/// A SIGTERM handled on the assist thread: the handler's `exit()` runs the
/// provider's cleanup on the very thread cleanup used to join.
#[test]
fn sigterm_on_assist() {
    run_case("sigterm_on_assist");
}

/// A SIGTERM handled on the application's thread (the one that opened the
/// endpoint), endpoint open, assist thread running.
#[test]
fn sigterm_on_main() {
    run_case("sigterm_on_main");
}

/// `exit()` from the application's thread while an endpoint is still open.
#[test]
fn exit_with_open_endpoint() {
    run_case("exit_with_open_endpoint");
}
