//! `FI_SPRAY_STATS`: fi_pingpong over spray on loopback with the statistics
//! dump on (a file per process, periodic lines every 20 ms); every line must
//! parse as JSON, carry nonzero traffic, and its per-path / per-peer counters
//! must add up to the endpoint totals; periodic lines must only grow.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A parsed JSON value (just what the dump uses).
#[derive(Debug, Clone)]
enum J {
    Num(f64),
    Str(String),
    Arr(Vec<J>),
    Obj(BTreeMap<String, J>),
    Lit,
}

impl J {
    fn get(&self, k: &str) -> &J {
        match self {
            J::Obj(m) => m.get(k).unwrap_or_else(|| panic!("no key {k} in {self:?}")),
            _ => panic!("not an object looking up {k}"),
        }
    }
    fn u(&self, k: &str) -> u64 {
        match self.get(k) {
            J::Num(n) if *n >= 0.0 && n.fract() == 0.0 => *n as u64,
            v => panic!("{k} is not a count: {v:?}"),
        }
    }
    fn s(&self, k: &str) -> &str {
        match self.get(k) {
            J::Str(s) => s,
            v => panic!("{k} is not a string: {v:?}"),
        }
    }
    fn arr(&self, k: &str) -> &[J] {
        match self.get(k) {
            J::Arr(a) => a,
            v => panic!("{k} is not an array: {v:?}"),
        }
    }
}

/// A minimal strict JSON parser: returns the value and the rest of the input.
fn parse(s: &str) -> Result<(J, &str), String> {
    let s = s.trim_start();
    let c = s.chars().next().ok_or("unexpected end")?;
    match c {
        '{' => {
            let mut m = BTreeMap::new();
            let mut r = s[1..].trim_start();
            if let Some(rest) = r.strip_prefix('}') {
                return Ok((J::Obj(m), rest));
            }
            loop {
                let (k, rest) = parse(r)?;
                let J::Str(k) = k else {
                    return Err(format!("key not a string: {k:?}"));
                };
                let rest = rest.trim_start().strip_prefix(':').ok_or("no colon")?;
                let (v, rest) = parse(rest)?;
                m.insert(k, v);
                let rest = rest.trim_start();
                if let Some(rest) = rest.strip_prefix(',') {
                    r = rest;
                } else if let Some(rest) = rest.strip_prefix('}') {
                    return Ok((J::Obj(m), rest));
                } else {
                    return Err(format!("bad object near {:.40}", rest));
                }
            }
        }
        '[' => {
            let mut a = Vec::new();
            let mut r = s[1..].trim_start();
            if let Some(rest) = r.strip_prefix(']') {
                return Ok((J::Arr(a), rest));
            }
            loop {
                let (v, rest) = parse(r)?;
                a.push(v);
                let rest = rest.trim_start();
                if let Some(rest) = rest.strip_prefix(',') {
                    r = rest;
                } else if let Some(rest) = rest.strip_prefix(']') {
                    return Ok((J::Arr(a), rest));
                } else {
                    return Err(format!("bad array near {:.40}", rest));
                }
            }
        }
        '"' => {
            let end = s[1..].find('"').ok_or("unterminated string")?;
            let body = &s[1..1 + end];
            if body.contains('\\') {
                return Err("escapes not expected".into());
            }
            Ok((J::Str(body.to_string()), &s[end + 2..]))
        }
        't' | 'f' | 'n' => {
            for w in ["true", "false", "null"] {
                if let Some(rest) = s.strip_prefix(w) {
                    return Ok((J::Lit, rest));
                }
            }
            Err("bad literal".into())
        }
        _ => {
            let end = s
                .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
                .unwrap_or(s.len());
            let n: f64 = s[..end].parse().map_err(|e| format!("bad number: {e}"))?;
            Ok((J::Num(n), &s[end..]))
        }
    }
}

fn parse_line(l: &str) -> J {
    let (v, rest) = parse(l).unwrap_or_else(|e| panic!("bad JSON ({e}): {l}"));
    assert!(rest.trim().is_empty(), "trailing text after JSON: {rest}");
    v
}

/// Checks one line's internal consistency; returns (tx_data, path packets) for monotonicity.
fn check_line(v: &J) -> (u64, u64) {
    let srd = v.get("srd");
    let peers = v.arr("peers");
    let sum = |f: &dyn Fn(&J) -> u64| -> u64 {
        peers
            .iter()
            .flat_map(|p| p.arr("paths").iter())
            .map(f)
            .sum::<u64>()
    };
    let sent = sum(&|x| x.u("sent_packets"));
    assert_eq!(sent, srd.u("tx_data"), "path packets vs tx_data: {v:?}");
    assert_eq!(
        sum(&|x| x.u("retransmits")),
        srd.u("retransmits"),
        "path retransmits"
    );
    assert_eq!(sum(&|x| x.u("lost")), srd.u("lost"), "path losses");
    assert!(sum(&|x| x.u("acked_packets")) <= srd.u("acked"));
    // (Message-layer datagrams are queued in the SRD layer before they leave,
    // so a periodic line may count more of them than DATA packets sent.)
    let msg = v.get("msg");
    assert!(
        msg.u("unexpected_bytes") == 0 || msg.u("unexpected") > 0,
        "{msg:?}"
    );
    let rtos: u64 = peers.iter().map(|p| p.u("rtos")).sum();
    assert_eq!(rtos, srd.u("timeouts"), "peer RTOs vs timeouts");
    for p in peers {
        let paths = p.arr("paths");
        assert_eq!(
            paths.iter().map(|x| x.u("retransmits")).sum::<u64>(),
            p.u("retransmits")
        );
        for x in paths {
            assert!(x.u("sent_bytes") >= x.u("acked_bytes"), "path bytes: {x:?}");
            assert!(x.u("sent_packets") >= x.u("acked_packets"));
            // (No relation of min RTT and srtt holds: only samples the
            // receiver held briefly may set the min, every sample feeds srtt,
            // and a path may have samples but no min yet.)
            if x.u("min_rtt_ns") > 0 {
                assert!(x.u("srtt_ns") > 0, "a min RTT without samples: {x:?}");
            }
            assert!(["good", "suspect", "bad"].contains(&x.s("health")));
        }
    }
    (srd.u("tx_data"), sent)
}

#[test]
fn stats_dump_adds_up() {
    if !have_tool("fi_pingpong") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("spray-stats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pattern = dir.join("s-%p.jsonl");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
        .to_string();
    // 1 MB messages: hundreds of packets each, over every path; ~0.3 s of traffic.
    let args = [
        "-p", "spray", "-e", "rdm", "-m", "msg", "-S", "1000000", "-I", "30", "-c",
    ];
    let cmd = |extra: &[&str]| {
        let mut c = fi_cmd("timeout");
        c.arg("60")
            .arg("fi_pingpong")
            .args(args)
            .args(extra)
            .env("FI_SPRAY_STATS", &pattern)
            .env("FI_SPRAY_STATS_MS", "20")
            .env("FI_SPRAY_PATHS", "8")
            // Loopback peers use one path by default; this test checks spraying.
            .env("FI_SPRAY_LOCAL_PATHS", "8")
            // Ethernet-sized datagrams, so each message is hundreds of packets and
            // every path gets delivery-rate samples (with loopback's 64 KB
            // datagrams a 1 MB message is 2 packets per path).
            .env("FI_SPRAY_MTU", "1400");
        c
    };
    let server = cmd(&["-B", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    let t = Instant::now();
    let client = loop {
        let out = cmd(&["-P", &port, "127.0.0.1"])
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
    assert!(
        client.status.success() && srv.status.success(),
        "fi_pingpong failed: {}\n{}",
        String::from_utf8_lossy(&client.stderr),
        String::from_utf8_lossy(&srv.stderr)
    );
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("read dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    // The server and the refused clients' attempts (if any) each wrote a file;
    // the two that moved data both close with traffic.
    let mut with_traffic = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read stats file");
        let lines: Vec<J> = text.lines().map(parse_line).collect();
        let Some(close) = lines.iter().rev().find(|v| v.s("event") == "close") else {
            continue;
        };
        let (tx_data, _) = check_line(close);
        if tx_data == 0 {
            continue;
        }
        with_traffic += 1;
        let srd = close.get("srd");
        assert!(srd.u("acked") > 0 && srd.u("rx_delivered") > 0, "{srd:?}");
        assert!(close.get("msg").u("datagrams_sent") > 0, "{close:?}");
        let peers = close.arr("peers");
        assert_eq!(peers.len(), 1, "one peer expected");
        let p = &peers[0];
        assert!(p.u("srtt_ns") > 0 && p.u("cwnd_bytes") > 0, "{p:?}");
        let paths = p.arr("paths");
        // Spraying: with 8 entropy values, several paths carried data and
        // none carried everything.
        assert!(paths.len() >= 4, "only {} paths used", paths.len());
        let max = paths.iter().map(|x| x.u("sent_packets")).max().unwrap_or(0);
        assert!(max < tx_data, "one path carried everything");
        assert!(paths.iter().any(|x| x.u("rate_bps") > 0), "no path rate");
        assert!(
            paths
                .iter()
                .all(|x| x.u("sent_bytes") >= x.u("sent_packets")),
            "bytes per path"
        );
        // Periodic lines: at least one, each consistent, counters never shrink.
        let periodic: Vec<&J> = lines
            .iter()
            .filter(|v| v.s("event") == "periodic")
            .collect();
        assert!(!periodic.is_empty(), "no periodic line in {}", f.display());
        let mut last = (0u64, 0u64);
        for v in periodic.iter().copied().chain(std::iter::once(close)) {
            if v.s("ep") != close.s("ep") {
                continue;
            }
            let now = (check_line(v), v.u("mono_ns"));
            assert!(now.0 .0 >= last.0 && now.1 >= last.1, "counters went back");
            last = (now.0 .0, now.1);
        }
    }
    assert_eq!(with_traffic, 2, "stats of both sides in {files:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
