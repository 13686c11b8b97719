"""runner.py: runs one traffic trial in the sprx- testbed (receiver + sender processes) and
collects its JSON lines, CPU load and ECMP link counters."""

import glob
import json
import math
import os
import resource
import signal
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTBED = os.path.join(HERE, "testbed.sh")
TRAFFIC = os.path.join(HERE, "traffic", "sprx-traffic")
CTRL_PORT = 19000

# Topologies: receiver namespace/address and sender hosts (namespace, address).
TOPO = {
    "incast": {
        "rx": ("sprx-rx", "198.18.100.2"),
        "senders": [("sprx-s%d" % i, "198.18.%d.2" % (i + 1)) for i in range(32)],
    },
    "ecmp": {"rx": ("sprx-b", "198.19.2.2"), "senders": [("sprx-a", "198.19.1.2")]},
}

# Flows per sender process: several flows share a process (non-blocking progress over all of
# them) so that 64 flows do not mean 64 processes fighting over 2 vCPUs.
FLOWS_PER_PROC = 8


class Transport:
    """spray / tcp (libfabric providers) or kernel-tcp (plain sockets)."""

    def __init__(self, name, prov_path=None):
        self.name = name
        self.prov_path = prov_path

    def args(self):
        return ["--kernel-tcp"] if self.name == "kernel-tcp" else ["--prov", self.name]

    def env(self):
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("FI_") and k not in ("FI_LOG_LEVEL",):
                del e[k]
        if self.name != "kernel-tcp":
            e["FI_PROVIDER"] = self.name
        if self.name == "spray":
            e["FI_PROVIDER_PATH"] = self.prov_path or ""
            # Hosts have one interface (h0) besides lo; naming it keeps spray off any other.
            e["FI_SPRAY_IFACE"] = "h0"
            for k, v in os.environ.items():
                if k.startswith("FI_SPRAY_") and k != "FI_SPRAY_IFACE":
                    e[k] = v
        return e


def sh(args, check=True, env=None, timeout=60):
    """Runs a command, returns stdout (text)."""
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r.stdout


def testbed(*args, env=None):
    e = dict(os.environ)
    if env:
        e.update({k: str(v) for k, v in env.items()})
    return sh(["bash", TESTBED] + [str(a) for a in args], env=e, timeout=120)


def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return idle, sum(v[:8])


def wait_idle(max_s=2.0, idle_frac=0.6):
    """Waits (bounded) until the machine was mostly idle over 0.2 s: other work on the 2 vCPUs
    distorts timings."""
    end = time.time() + max_s
    while time.time() < end:
        a = cpu_times()
        time.sleep(0.2)
        b = cpu_times()
        d = b[1] - a[1]
        if d > 0 and (b[0] - a[0]) / d >= idle_frac:
            return


def link_counters():
    try:
        return json.loads(testbed("counters"))
    except (RuntimeError, ValueError):
        return {}


def sport_on_link(link, first=40000, tries=2000):
    """A TCP source port whose A -> B flow (to the kernel TCP data port) R1 hashes onto link
    r1-l<link>, as the kernel predicts it (`ip route get`, correct under hash policy 3)."""
    src, dst = TOPO["ecmp"]["senders"][0][1], TOPO["ecmp"]["rx"][1]
    for p in range(first, first + tries):
        out = sh(["ip", "netns", "exec", "sprx-r1", "ip", "route", "get", dst, "from", src, "iif",
                  "r1-a", "ipproto", "tcp", "sport", str(p), "dport", str(CTRL_PORT + 1)])
        if " dev r1-l%d " % link in out + " ":
            return p
    return None


def split_flows(flows, hosts):
    """[(host_index, flow_base, n)] with flows spread round-robin over hosts, <= FLOWS_PER_PROC
    per process."""
    per_host = [flows // hosts + (1 if i < flows % hosts else 0) for i in range(hosts)]
    out, base = [], 0
    for h, n in enumerate(per_host):
        procs = max(1, math.ceil(n / FLOWS_PER_PROC)) if n else 0
        for p in range(procs):
            k = n // procs + (1 if p < n % procs else 0)
            if k:
                out.append((h, base, k))
                base += k
    return out


def kill_group(procs):
    for p in procs:
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + 2
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def trial(topo, tr, mode, flows, hosts=1, bytes_=1 << 20, msg=65536, duration_ms=2000,
          window=4, timeout_s=30, logdir=None, tag="trial", sport=None):
    """Runs one trial; returns a dict with the receiver's lines, summary, cpu and link deltas."""
    t = TOPO[topo]
    rx_ns, rx_ip = t["rx"]
    hosts = min(hosts, len(t["senders"]))
    wait_idle()
    env = tr.env()
    stats_glob = None
    if tr.name == "spray" and logdir and "FI_SPRAY_STATS" not in env:
        # Every spray process dumps its counters at endpoint close (FI_SPRAY_STATS).
        env["FI_SPRAY_STATS"] = os.path.join(logdir, tag + ".stats-%p.jsonl")
        stats_glob = os.path.join(logdir, tag + ".stats-*.jsonl")
        for old in glob.glob(stats_glob):  # a rerun into the same directory appends otherwise
            os.unlink(old)
    c0 = cpu_times()
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    links0 = link_counters() if topo == "ecmp" else {}
    t0 = time.time()
    rx_cmd = ["ip", "netns", "exec", rx_ns, TRAFFIC, "recv", "--bind", rx_ip, "--port",
              str(CTRL_PORT), "--flows", str(flows), "--mode", mode, "--bytes", str(bytes_),
              "--msg", str(msg), "--duration-ms", str(duration_ms), "--window", str(window),
              "--timeout-s", str(timeout_s)] + tr.args()
    errf = open(os.path.join(logdir, tag + ".err"), "w") if logdir else subprocess.DEVNULL
    procs = []
    try:
        rx = subprocess.Popen(rx_cmd, stdout=subprocess.PIPE, stderr=errf, text=True, env=env)
        procs.append(rx)
        for h, base, n in split_flows(flows, hosts):
            ns, ip = t["senders"][h]
            cmd = ["ip", "netns", "exec", ns, TRAFFIC, "send", "--bind", ip, "--server", rx_ip,
                   "--port", str(CTRL_PORT), "--flows", str(n), "--flow-base", str(base),
                   "--timeout-s", str(timeout_s + 10)] + tr.args()
            if sport and tr.name == "kernel-tcp":
                cmd += ["--sport", str(sport + base)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, env=env))
        try:
            out, _ = rx.communicate(timeout=timeout_s + 20)
        except subprocess.TimeoutExpired:
            out = ""
        for p in procs[1:]:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    finally:
        kill_group(procs)
        if logdir:
            errf.close()
    wall = time.time() - t0
    c1 = cpu_times()
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    tool_cpu = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
    links1 = link_counters() if topo == "ecmp" else {}
    lines = []
    for ln in (out or "").splitlines():
        try:
            lines.append(json.loads(ln))
        except ValueError:
            pass
    if logdir:
        with open(os.path.join(logdir, tag + ".jsonl"), "w") as f:
            f.write(out or "")
    summ = next((x for x in lines if x.get("kind") == "summary"), None)
    dt = c1[1] - c0[1]
    spray = spray_counters(glob.glob(stats_glob)) if stats_glob else None
    return {
        "spray": spray,
        "tag": tag, "topo": topo, "transport": tr.name, "mode": mode, "flows": flows,
        "hosts": hosts, "bytes": bytes_, "msg": msg, "duration_ms": duration_ms,
        "flow_lines": [x for x in lines if x.get("kind") == "flow"],
        "samples": [x for x in lines if x.get("kind") == "sample"],
        "summary": summ, "wall_s": wall,
        "cpu_busy": 1 - (c1[0] - c0[0]) / dt if dt > 0 else None,
        # CPU seconds of the traffic processes (process start-up included) per wall second,
        # as a share of all CPUs: our own load, apart from whatever else runs on the machine.
        "tool_cpu": tool_cpu / wall / (os.cpu_count() or 1) if wall > 0 else None,
        "links": {k: links1.get(k, 0) - links0.get(k, 0) for k in links1},
        "ok": summ is not None,
    }


def spray_counters(files):
    """Sums the FI_SPRAY_STATS close lines of one trial's processes: RTOs, tail probes,
    retransmissions, losses, DATA packets; the per-path view of the busiest sending peer."""
    tot = {"endpoints": 0, "timeouts": 0, "tail_probes": 0, "tail_asks": 0, "stall_probes": 0, "retransmits": 0,
           "lost": 0, "tx_data": 0, "rx_duplicates": 0, "peers_with_rto": 0, "max_rtos_per_peer": 0}
    busiest = None
    for fn in files:
        try:
            with open(fn) as f:
                rows = [json.loads(ln) for ln in f if ln.strip()]
        except (OSError, ValueError):
            continue
        for r in rows:
            if r.get("event") != "close":
                continue
            s = r["srd"]
            tot["endpoints"] += 1
            for k in ("timeouts", "tail_probes", "tail_asks", "stall_probes", "retransmits", "lost",
                      "tx_data", "rx_duplicates"):
                tot[k] += s.get(k, 0)
            for p in r.get("peers", []):
                if p.get("rtos", 0):
                    tot["peers_with_rto"] += 1
                tot["max_rtos_per_peer"] = max(tot["max_rtos_per_peer"], p.get("rtos", 0))
                sent = sum(x["sent_packets"] for x in p.get("paths", []))
                if busiest is None or sent > busiest[0]:
                    busiest = (sent, p)
    if busiest:
        p = busiest[1]
        tot["paths"] = [{k: x[k] for k in ("path", "sent_packets", "retransmits", "lost", "srtt_ns",
                                           "min_rtt_ns", "rate_bps", "health")}
                        for x in p.get("paths", [])]
        tot["peer"] = {k: p.get(k) for k in ("srtt_ns", "min_rtt_ns", "cwnd_bytes", "pacing_rate_bps",
                                              "bandwidth_bps", "rtos", "tail_probes", "retransmits")}
    return tot if tot["endpoints"] else None
