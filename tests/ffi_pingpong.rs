//! libfabric's own `fi_pingpong`, unmodified, over spray on loopback: RDM with
//! msg and tagged transfers, and DGRAM, with data checks (-c) at several sizes.

mod common;
use common::*;

use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// fi_pingpong busy-polls: run one pair at a time on a small machine.
static SERIAL: Mutex<()> = Mutex::new(());

/// A free TCP port for fi_pingpong's control connection.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn pingpong(ep: &str, mode: &str, size: usize, iters: usize) {
    if !have_tool("fi_pingpong") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_port().to_string();
    let size = size.to_string();
    let iters = iters.to_string();
    let args = [
        "-p", "spray", "-e", ep, "-m", mode, "-S", &size, "-I", &iters, "-c",
    ];
    let server = fi_cmd("timeout")
        .arg("60")
        .arg("fi_pingpong")
        .args(args)
        .args(["-B", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    // The server listens on its control port: retry the client until it connects.
    let t = Instant::now();
    let client = loop {
        let out = fi_cmd("timeout")
            .arg("60")
            .arg("fi_pingpong")
            .args(args)
            .args(["-P", &port, "127.0.0.1"])
            .output()
            .expect("run client");
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success()
            || !err.contains("Connection refused")
            || t.elapsed() > Duration::from_secs(10)
        {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let srv = server.wait_with_output().expect("server exit");
    let ctext = String::from_utf8_lossy(&client.stdout);
    let report = format!(
        "client {:?}\n{}{}\nserver {:?}\n{}{}",
        client.status,
        ctext,
        String::from_utf8_lossy(&client.stderr),
        srv.status,
        String::from_utf8_lossy(&srv.stdout),
        String::from_utf8_lossy(&srv.stderr)
    );
    assert!(
        client.status.success() && srv.status.success(),
        "fi_pingpong {ep}/{mode}/{size} failed:\n{report}"
    );
    // The result line: bytes, #sent, =#ack (all acknowledged), ..., usec/xfer.
    let line = ctext
        .lines()
        .find(|l| l.contains(&format!("={iters}")))
        .unwrap_or_default();
    assert!(!line.is_empty(), "no result line with ={iters}:\n{report}");
    eprintln!("fi_pingpong -e {ep} -m {mode} -S {size}: {line}");
}

#[test]
fn rdm_msg() {
    pingpong("rdm", "msg", 64, 50);
    pingpong("rdm", "msg", 4096, 20);
    pingpong("rdm", "msg", 200_000, 5);
}

#[test]
fn rdm_tagged() {
    pingpong("rdm", "tagged", 1, 50);
    pingpong("rdm", "tagged", 70_000, 10);
}

#[test]
fn dgram_msg() {
    pingpong("dgram", "msg", 64, 50);
    pingpong("dgram", "msg", 1024, 20);
}
