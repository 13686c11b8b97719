//! fi_pingpong between two network namespaces joined by a veth with 5 % UDP
//! loss on each side: spray must recover every loss (data checked with -c),
//! including packets lost while the application is not calling the provider
//! (fi_pingpong waits on its TCP control channel between sizes; the progress
//! assist thread resends then). Needs root, `ip` and `nft`; skipped otherwise.

mod common;
use common::*;

use std::process::{Command, Stdio};

/// Namespaces and a veth pair that are deleted on drop.
struct Net {
    ns: [String; 2],
}

fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Net {
    fn new(loss_pct: u32) -> Option<Net> {
        let id = std::process::id() % 100_000;
        let ns = [format!("sprayffi{id}a"), format!("sprayffi{id}b")];
        let dev = [format!("sf{id}a"), format!("sf{id}b")];
        let net = Net { ns: ns.clone() };
        let ok = sh(&["ip", "netns", "add", &ns[0]])
            && sh(&["ip", "netns", "add", &ns[1]])
            && sh(&[
                "ip", "link", "add", &dev[0], "type", "veth", "peer", "name", &dev[1],
            ]);
        if !ok {
            return None;
        }
        for i in 0..2 {
            let addr = format!("198.18.{}.{}/24", 200 + id % 50, i + 1);
            let rule = format!(
                "add rule inet loss in meta l4proto udp numgen random mod 100 < {loss_pct} drop"
            );
            let steps: Vec<Vec<&str>> = vec![
                vec!["ip", "link", "set", &dev[i], "netns", &ns[i]],
                vec!["ip", "-n", &ns[i], "addr", "add", &addr, "dev", &dev[i]],
                vec!["ip", "-n", &ns[i], "link", "set", &dev[i], "up"],
                vec!["ip", "-n", &ns[i], "link", "set", "lo", "up"],
                vec![
                    "ip", "netns", "exec", &ns[i], "nft", "add", "table", "inet", "loss",
                ],
                vec![
                    "ip",
                    "netns",
                    "exec",
                    &ns[i],
                    "nft",
                    "add chain inet loss in { type filter hook input priority 0; policy accept; }",
                ],
                vec!["ip", "netns", "exec", &ns[i], "nft", &rule],
            ];
            for s in &steps {
                if !sh(s) {
                    eprintln!("SKIP: setup step failed: {s:?}");
                    return None;
                }
            }
        }
        Some(net)
    }

    fn server_addr(&self) -> String {
        format!("198.18.{}.1", 200 + std::process::id() % 100_000 % 50)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in &self.ns {
            sh(&["ip", "netns", "del", ns]);
        }
    }
}

fn run(net: &Net, args: &[&str]) {
    let prov = provider_dir();
    let spawn = |ns: &str, extra: &[&str]| {
        Command::new("timeout")
            .args([
                "120",
                "ip",
                "netns",
                "exec",
                ns,
                "fi_pingpong",
                "-p",
                "spray",
            ])
            .args(args)
            .args(extra)
            .env("FI_PROVIDER_PATH", &prov)
            .env_remove("FI_SPRAY_IFACE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fi_pingpong")
    };
    let server = spawn(&net.ns[0], &[]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let client = spawn(&net.ns[1], &[&net.server_addr()])
        .wait_with_output()
        .expect("client");
    let server = server.wait_with_output().expect("server");
    let report = format!(
        "client {:?}: {}{}\nserver {:?}: {}{}",
        client.status,
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&client.stderr),
        server.status,
        String::from_utf8_lossy(&server.stdout),
        String::from_utf8_lossy(&server.stderr)
    );
    assert!(
        client.status.success() && server.status.success(),
        "fi_pingpong {args:?} under loss:\n{report}"
    );
}

#[test]
fn pingpong_survives_loss() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !sh(&["nft", "--version"]) || !sh(&["ip", "-V"]) {
        eprintln!("SKIP: needs root, ip and nft");
        return;
    }
    if !have_tool("fi_pingpong") {
        return;
    }
    let Some(net) = Net::new(5) else {
        eprintln!("SKIP: cannot build the namespaces");
        return;
    };
    // All sizes: between sizes fi_pingpong talks only TCP, so a lost last packet
    // of a size is resent by the progress assist or never.
    run(
        &net,
        &["-e", "rdm", "-m", "tagged", "-S", "all", "-I", "3", "-c"],
    );
    run(
        &net,
        &["-e", "rdm", "-m", "msg", "-S", "300000", "-I", "10", "-c"],
    );
    run(&net, &["-e", "dgram", "-S", "1000", "-I", "40", "-c"]);
}
