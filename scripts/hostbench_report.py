#!/usr/bin/env python3
"""hostbench_report.py: the tables and the plot of scripts/hostbench.sh from its .tsv.

Usage: hostbench_report.py --tsv FILE --md FILE [--png FILE]
The .tsv holds one measurement per line (MTU, client, metric, transport, size in bytes,
repetition, value), "#meta KEY VALUE" lines and "#fail ..." lines. Markdown goes to --md; the
plot (log-log latency and bandwidth against size, a panel per MTU and metric) to --png, with
matplotlib from the repo's .venv-exp (made on first use, as experiments/run.py does).
Exit status 0; 1 when the plot was asked for and could not be made (the markdown is written).
"""

import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv-exp")

CLIENTS = ["fi_pingpong", "osu-mpich", "osu-ompi5", "osu-impi", "imb", "stream"]
# Metrics of each client, as (metric, label); a row's baselines are base rows of the same metric.
METRICS = {
    "fi_pingpong": [("lat", "latency us"), ("ppbw", "ping-pong MB/s")],
    "osu-mpich": [("lat", "latency us"), ("bw", "bw MB/s"), ("bibw", "bibw MB/s")],
    "osu-ompi5": [("lat", "latency us"), ("bw", "bw MB/s"), ("bibw", "bibw MB/s")],
    "osu-impi": [("lat", "latency us"), ("bw", "bw MB/s"), ("bibw", "bibw MB/s")],
    "imb": [("lat", "PingPong us"), ("bw", "Uniband MB/s")],
    "stream": [("bw", "stream MB/s")],
}
# Legend names of the plotted series.
PLOT_NAMES = {
    ("fi_pingpong", "lat"): "fi_pingpong",
    ("fi_pingpong", "ppbw"): "fi_pingpong (ping-pong)",
    ("imb", "lat"): "IMB PingPong",
    ("imb", "bw"): "IMB Uniband",
    ("stream", "bw"): "fi_stream",
}


def ensure_matplotlib():
    """True if matplotlib imports; else re-executes under .venv-exp (creating it), or False."""
    try:
        import matplotlib  # noqa: F401

        return True
    except ImportError:
        pass
    py = os.path.join(VENV, "bin", "python")
    if os.path.abspath(sys.executable) == os.path.abspath(py):
        print("hostbench_report: matplotlib missing in %s" % VENV, file=sys.stderr)
        return False
    try:
        if not os.path.exists(py):
            print("hostbench_report: creating %s with matplotlib" % VENV, file=sys.stderr)
            subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
            subprocess.run([py, "-m", "pip", "install", "-q", "matplotlib"], check=True, timeout=900)
        os.execv(py, [py] + sys.argv)
    except (OSError, subprocess.SubprocessError) as e:
        print("hostbench_report: no matplotlib (%s)" % e, file=sys.stderr)
    return False


def load(path):
    data, meta, fails = {}, [], []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#meta "):
                key, _, value = line[6:].partition(" ")
                meta.append((key, value))
            elif line.startswith("#fail\t"):
                fails.append(line.split("\t")[1:])
            elif line and not line.startswith("#"):
                f7 = line.split("\t")
                if len(f7) != 7 or not f7[6]:
                    continue
                try:
                    mtu, size, rep, value = int(f7[0]), int(f7[4]), int(f7[5]), float(f7[6])
                except ValueError:
                    continue
                data.setdefault((mtu, f7[1], f7[2], f7[3], size), {})[rep] = value
    return data, meta, fails


def meta_get(meta, key, default=""):
    for k, v in meta:
        if k == key:
            return v
    return default


def num(v):
    if v is None:
        return "n/a"
    a = abs(v)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 1 or v == 0:
        return "%.2f" % v
    return "%.3g" % v


def cell(runs):
    """median (min-max) of a repetition -> value dict, or n/a."""
    if not runs:
        return "n/a"
    v = list(runs.values())
    if len(v) == 1:
        return num(v[0])
    return "%s (%s-%s)" % (num(statistics.median(v)), num(min(v)), num(max(v)))


def med(runs):
    return statistics.median(runs.values()) if runs else None


def ratio(a, b):
    return "%.2f" % (a / b) if a is not None and b else "n/a"


def paired(a, b):
    """median (range) of a/b over the repetitions both have."""
    q = [a[r] / b[r] for r in a if r in b and b[r]]
    if not q:
        return "n/a"
    if len(q) == 1:
        return "%.2f" % q[0]
    return "%.2f (%.2f-%.2f)" % (statistics.median(q), min(q), max(q))


def human(s):
    if s >= 1 << 20:
        return "%g MiB" % (s / (1 << 20))
    if s >= 1 << 10:
        return "%g KiB" % (s / (1 << 10))
    return "%d B" % s


def tables(data, meta, fails):
    mtus = [int(m) for m in meta_get(meta, "mtus", "1500").split(",") if m]
    sizes = [int(s) for s in meta_get(meta, "sizes", "").split(",") if s]
    clients = [c for c in meta_get(meta, "clients", "").split(",") if c]
    runs = meta_get(meta, "runs", "1")
    out = []
    w = out.append
    w("# Across hosts: spray against tcp, kernel TCP and raw UDP (%s)" % meta_get(meta, "started"))
    w("")
    w("Two hosts (network namespaces) over a 4-link ECMP fabric (scripts/hosts.sh, offloads on),")
    w("%s; median of %s run(s), repetitions interleaved (spray and tcp back to back, their order" % (meta_get(meta, "machine"), runs))
    w("alternating), `(min-max)` the range over the runs. Load average: %s at the start, %s at the end." % (
        meta_get(meta, "load_start"), meta_get(meta, "load_end")))
    w("spray: %s; FI_SPRAY_* set: %s." % (meta_get(meta, "spray"), meta_get(meta, "spray_env").strip() or "none"))
    w("Command: `%s` (%s s). Generated by scripts/hostbench.sh." % (meta_get(meta, "command"), meta_get(meta, "elapsed")))
    w("")
    w("- Latency: half a round trip, us (lower is better); MB/s = 10^6 B/s (higher is better).")
    w("- fi_pingpong: `-e rdm -m tagged`; its MB/s counts both directions of the ping-pong.")
    w("  osu-*: mpi-tests/src/osu.c, bw = window of 64 Isends + ack, bibw = both ways at once.")
    w("  imb: IMB-MPI1 (Intel MPI) PingPong t[usec] and Uniband. stream: scripts/fi_stream.c, a one-way")
    w("  stream of tagged messages (64 MiB in flight at most, 2..64 messages), receiver's rate.")
    w("- Baselines between the same hosts, same run: kernel TCP and raw UDP with GSO/GRO")
    w("  (scripts/raw_stream.c). Latency rows: their busy-polling ping-pong; ping-pong MB/s rows: the")
    w("  same ping-pong's MB/s; bw/Uniband/stream rows: a one-way stream (send() or GSO sendmmsg of")
    w("  SIZE-byte messages for the stream length); bibw rows: two such streams at once, one each way.")
    w("  Raw UDP has no flow control: its stream rate is what arrived (loss below). It is the ceiling")
    w("  for a UDP transport.")
    w("- spray/tcp: ratio of the medians; paired: median (range) of spray/tcp within each repetition;")
    w("  spray/UDP: spray's median over raw UDP's. On a shared VM a sender's copy into the kernel runs")
    w("  at one of two speeds for seconds to minutes (raw UDP's stream too): read one-off stream rows")
    w("  with their range, and the 1 MiB stream's ratio paired within repetitions.")
    for mtu in mtus:
        w("")
        w("## MTU %d" % mtu)
        w("")
        w(meta_get(meta, "testbed_%d" % mtu, "(testbed not built)") + ", %s s" % meta_get(meta, "elapsed_%d" % mtu, "?"))
        w("")
        w("| MTU | client | metric | size | spray | tcp | kernel TCP | raw UDP | spray/tcp | paired spray/tcp | spray/UDP |")
        w("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        better = {"lat": [0, 0], "bw": [0, 0]}
        for client in CLIENTS:
            if client not in clients:
                continue
            for metric, label in METRICS[client]:
                for size in sizes:
                    sp = data.get((mtu, client, metric, "spray", size), {})
                    tc = data.get((mtu, client, metric, "tcp", size), {})
                    kt = data.get((mtu, "base", metric, "kernel-tcp", size), {})
                    ud = data.get((mtu, "base", metric, "raw-udp", size), {})
                    w("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                        mtu, client, label, human(size), cell(sp), cell(tc), cell(kt) if "base" in clients else "-",
                        cell(ud) if "base" in clients else "-", ratio(med(sp), med(tc)), paired(sp, tc),
                        ratio(med(sp), med(ud)) if "base" in clients else "-"))
                    if sp and tc:
                        kind = "lat" if metric == "lat" else "bw"
                        ok = med(sp) <= med(tc) if kind == "lat" else med(sp) >= med(tc)
                        better[kind][0] += ok
                        better[kind][1] += 1
        w("")
        w("spray's latency at most tcp's in %d of %d rows; its bandwidth at least tcp's in %d of %d rows." % (
            better["lat"][0], better["lat"][1], better["bw"][0], better["bw"][1]))
        spr = data.get((mtu, "stream", "bw", "spray", 1 << 20), {})
        udr = data.get((mtu, "base", "bw", "raw-udp", 1 << 20), {})
        sp, ud = med(spr), med(udr)
        if sp is not None and ud:
            # Paired too: see the legend (the machine's two copy speeds).
            w("1 MiB stream: spray %s MB/s = %.2f x the raw UDP GSO/GRO ceiling (%s MB/s; target >= 0.8);"
              " paired within repetitions: %s." % (num(sp), sp / ud, num(ud), paired(spr, udr)))
        cpu_rows = []
        for size in sizes:
            vals = []
            for client, t in (("stream", "spray"), ("stream", "tcp"), ("base", "kernel-tcp"), ("base", "raw-udp")):
                for side in ("tx", "rx"):
                    v = cell(data.get((mtu, client, "cpu_" + side, t, size), {}))
                    b = med(data.get((mtu, client, "busy_" + side, t, size), {}))
                    vals.append(v if b is None or v == "n/a" else "%s, %.0f%%" % (v, b))
            loss = cell(data.get((mtu, "base", "loss", "raw-udp", size), {}))
            if any(v != "n/a" for v in vals):
                cpu_rows.append("| %d | %s | %s | %s |" % (mtu, human(size), " | ".join(vals), loss))
        if cpu_rows:
            w("")
            w("CPU per packet, ns (user + system time of the process over the timed phase of a stream:")
            w("fi_stream for spray/tcp, raw_stream for the baselines, divided by the packets the bytes need at")
            w("this MTU, ceil(size / (MTU - 28)) per message, whatever the transport really sent; fi_stream")
            w("sleeps 20 us when its queue is empty and raw_stream's receiver blocks, so waiting costs little;")
            w("kernel work the scheduler charges to the process, e.g. forwarding through the routers, counts).")
            w("After the comma: the share of one CPU that side used over the phase (median). Well below 100 %,")
            w("that side was not what limited the rate, and its figure includes polling while it waited")
            w("(fi_stream calls fi_cq_read every 20 us, which also drives the provider's progress).")
            w("")
            w("| MTU | size | spray tx | spray rx | tcp tx | tcp rx | kernel TCP tx | kernel TCP rx | raw UDP tx | raw UDP rx | raw UDP loss % |")
            w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            out.extend(cpu_rows)
    w("")
    w("## Noise and failures")
    w("")
    for k, v in meta:
        if k == "run":
            w("- %s" % v)
    for k, v in meta:
        if k == "left_out":
            w("- left out: %s" % v)
    if fails:
        w("")
        w("%d run(s) failed (their cells say n/a):" % len(fails))
        w("")
        for f in fails:
            mtu, client, t, size, rep, why = (f + [""] * 6)[:6]
            w("- MTU %s %s %s%s run %s: %s" % (mtu, client, t, " " + human(int(size)) if size.isdigit() else "", rep, why))
    else:
        w("")
        w("No run failed.")
    return "\n".join(out) + "\n"


def plot(data, meta, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    mtus = [int(m) for m in meta_get(meta, "mtus", "1500").split(",") if m]
    clients = [c for c in meta_get(meta, "clients", "").split(",") if c]
    colors = plt.get_cmap("tab10")
    panels = [("latency (us, half round trip)", {"lat"}), ("bandwidth (MB/s)", {"bw", "ppbw"})]
    fig, axs = plt.subplots(len(panels), len(mtus), figsize=(7 * len(mtus), 5 * len(panels)), squeeze=False)
    for j, mtu in enumerate(mtus):
        for i, (title, metrics) in enumerate(panels):
            ax = axs[i][j]
            series = []
            for k, client in enumerate(c for c in CLIENTS if c in clients):
                for metric, label in METRICS[client]:
                    if metric not in metrics:
                        continue
                    name = PLOT_NAMES.get((client, metric), client if metric == "lat" else client + " " + metric)
                    for t, style in (("spray", "-"), ("tcp", "--")):
                        series.append(("%s %s" % (name, t), client, metric, t,
                                       dict(color=colors(k % 10), linestyle=style, marker="o", ms=3)))
            if "base" in clients:
                for t, col in (("kernel-tcp", "0.55"), ("raw-udp", "black")):
                    metric = "lat" if "lat" in metrics else "bw"
                    series.append(("%s (%s)" % (t, "ping-pong" if metric == "lat" else "stream"), "base", metric, t,
                                   dict(color=col, linestyle=":", marker="s", ms=3)))
            for label, client, metric, t, kw in series:
                pts = sorted((size, runs) for (m, c, me, tr, size), runs in data.items()
                             if m == mtu and c == client and me == metric and tr == t and runs)
                if not pts:
                    continue
                x = [p[0] for p in pts]
                y = [statistics.median(p[1].values()) for p in pts]
                lo = [yy - min(p[1].values()) for yy, p in zip(y, pts)]
                hi = [max(p[1].values()) - yy for yy, p in zip(y, pts)]
                ax.errorbar(x, y, yerr=[lo, hi], label=label, capsize=2, lw=1, **kw)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            sizes = sorted({k[4] for k in data if k[0] == mtu})
            if sizes:
                ax.set_xticks(sizes)
                ax.set_xticklabels([human(x).replace(" ", "") for x in sizes], fontsize=7)
                ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_title("MTU %d: %s" % (mtu, title))
            ax.set_xlabel("message size (bytes)")
            ax.grid(alpha=0.3, which="both")
            if ax.has_data():
                ax.legend(fontsize=6, ncol=2)
    fig.suptitle("spray vs tcp between two hosts (median, bars: range over %s run(s))" % meta_get(meta, "runs", "1"))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tsv", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--png")
    args = ap.parse_args()
    can_plot = ensure_matplotlib() if args.png else False
    data, meta, fails = load(args.tsv)
    md = tables(data, meta, fails)
    rc = 0
    if args.png:
        if can_plot:
            plot(data, meta, args.png)
            md += "\nPlot: %s\n" % os.path.basename(args.png)
        else:
            md += "\nPlot: not made (no matplotlib; see the messages of hostbench_report.py)\n"
            rc = 1
    with open(args.md, "w") as f:
        f.write(md)
    return rc


if __name__ == "__main__":
    sys.exit(main())
