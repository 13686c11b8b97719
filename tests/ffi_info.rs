//! fi_info sees the spray provider with the advertised attributes, filters by
//! hints, and lists the FI_SPRAY_* parameters.

mod common;
use common::*;

#[test]
fn lists_rdm_and_dgram() {
    if !have_tool("fi_info") {
        return;
    }
    let o = fi_info(&["-p", "spray", "-v"]);
    assert!(
        o.status.success(),
        "fi_info failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let t = text(&o);
    assert!(t.contains("type: FI_EP_RDM"), "{t}");
    assert!(t.contains("type: FI_EP_DGRAM"), "{t}");
    assert!(t.contains("prov_name: spray"), "{t}");
    assert!(t.contains("name: spray"), "{t}");
    // Loopback only (FI_SPRAY_IFACE=lo): domain is the interface name.
    assert!(t.contains("name: lo"), "{t}");
    assert!(t.contains("src_addr: fi_sockaddr_in://127.0.0.1:0"), "{t}");
    assert!(t.contains("FI_ORDER_SAS"), "{t}");
    assert!(t.contains("FI_TAGGED"), "{t}");
    assert!(t.contains("FI_DIRECTED_RECV"), "{t}");
    assert!(t.contains("FI_MULTI_RECV"), "{t}");
    assert!(t.contains("threading: FI_THREAD_SAFE"), "{t}");
    assert!(t.contains("data_progress: FI_PROGRESS_MANUAL"), "{t}");
    // Both AV types are served, none imposed unless asked.
    assert!(t.contains("av_type: FI_AV_UNSPEC"), "{t}");
    assert!(t.contains("cq_data_size: 8"), "{t}");
    assert!(t.contains("iov_limit: 4"), "{t}");
    assert!(t.contains("mode: [  ]"), "{t}");
    assert!(
        !t.contains("ofi_rxm"),
        "utility providers must not wrap spray: {t}"
    );
    // RDM messages are not limited to one packet.
    let rdm = t.split("type: FI_EP_DGRAM").next().unwrap_or_default();
    let max: Vec<u64> = t
        .lines()
        .filter_map(|l| l.trim().strip_prefix("max_msg_size: "))
        .filter_map(|v| v.parse().ok())
        .collect();
    assert_eq!(max.len(), 2, "{t}");
    assert!(max[0] > 1 << 30, "RDM max_msg_size {}", max[0]);
    assert!(
        max[1] < 65536 && max[1] > 1000,
        "DGRAM max_msg_size {}",
        max[1]
    );
    assert!(rdm.contains("mem_tag_format: 0xffffffffffffffff"), "{rdm}");
}

#[test]
fn hints_filter() {
    if !have_tool("fi_info") {
        return;
    }
    let t = text(&fi_info(&["-p", "spray", "-t", "FI_EP_DGRAM"]));
    assert!(t.contains("FI_EP_DGRAM") && !t.contains("FI_EP_RDM"), "{t}");
    let t = text(&fi_info(&["-p", "spray", "-t", "FI_EP_RDM"]));
    assert!(t.contains("FI_EP_RDM") && !t.contains("FI_EP_DGRAM"), "{t}");
    let t = text(&fi_info(&["-p", "spray", "-c", "FI_TAGGED"]));
    assert!(t.contains("FI_EP_RDM") && !t.contains("FI_EP_DGRAM"), "{t}");
    // RMA and atomics: RDM only.
    for cap in ["FI_RMA", "FI_ATOMIC"] {
        let t = text(&fi_info(&["-p", "spray", "-c", cap]));
        assert!(t.contains("FI_EP_RDM") && !t.contains("FI_EP_DGRAM"), "{t}");
    }
    // Not offered: MSG endpoints, another fabric name.
    for args in [
        &["-p", "spray", "-t", "FI_EP_MSG"][..],
        &["-p", "spray", "-f", "tcp"][..],
        &["-p", "spray", "-a", "FI_ADDR_STR"][..],
    ] {
        let o = fi_info(args);
        assert!(
            !o.status.success(),
            "{args:?} should find nothing: {}",
            text(&o)
        );
    }
    // Domain name = interface name; naming one selects it.
    let t = text(&fi_info(&["-p", "spray", "-d", "lo", "-v"]));
    assert!(t.contains("src_addr: fi_sockaddr_in://127.0.0.1:0"), "{t}");
    assert!(!fi_info(&["-p", "spray", "-d", "nosuchif0"])
        .status
        .success());
    // node/service: a client gets dest_addr, FI_SOURCE gives src_addr.
    let t = text(&fi_info(&[
        "-p",
        "spray",
        "-n",
        "127.0.0.1",
        "-P",
        "4242",
        "-v",
    ]));
    assert!(
        t.contains("dest_addr: fi_sockaddr_in://127.0.0.1:4242"),
        "{t}"
    );
    let t = text(&fi_info(&[
        "-p",
        "spray",
        "-s",
        "127.0.0.1",
        "-P",
        "4243",
        "-v",
    ]));
    assert!(
        t.contains("src_addr: fi_sockaddr_in://127.0.0.1:4243"),
        "{t}"
    );
}

#[test]
fn params_listed() {
    if !have_tool("fi_info") {
        return;
    }
    let o = fi_info(&["-e"]);
    let t = String::from_utf8_lossy(&o.stdout);
    for p in [
        "FI_SPRAY_IFACE",
        "FI_SPRAY_IPV6",
        "FI_SPRAY_PORT",
        "FI_SPRAY_PATHS",
        "FI_SPRAY_MTU",
        "FI_SPRAY_UNREACHABLE_TIMEOUT_MS",
        "FI_SPRAY_ACK_DELAY_US",
        "FI_SPRAY_MAX_HOST_DELAY_US",
        "FI_SPRAY_RX_CREDIT_PACKETS",
        "FI_SPRAY_STATS",
        "FI_SPRAY_STATS_MS",
    ] {
        assert!(t.contains(p), "{p} missing from fi_info -e");
    }
}

#[test]
fn info_log_names_interface() {
    if !have_tool("fi_info") {
        return;
    }
    let o = fi_cmd("fi_info")
        .env("FI_LOG_LEVEL", "info")
        .args(["-p", "spray"])
        .output()
        .expect("fi_info");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("interface lo address 127.0.0.1:0"), "{e}");
}
