"""report.py: turns the trials of run.py into report.md (a table per experiment) and PNG plots."""

import os
import platform

import stats
from stats import fmt, pct

KiB, MiB = 1024, 1024 * 1024


def size_s(b):
    return "%d MiB" % (b // MiB) if b >= MiB and b % MiB == 0 else "%d KiB" % (b // KiB)


def cpu_note(r):
    """Our processes' share of the CPUs / the whole machine's busy share during the trial."""
    c, t = r.get("cpu_busy"), r.get("tool_cpu")
    if c is None or t is None:
        return "–"
    return "%.0f%%/%.0f%%%s" % (100 * t, 100 * c, " (sat)" if c > 0.9 else "")


def rto_s(r):
    """spray's counters of the trial (FI_SPRAY_STATS at close): RTOs / tail probes / retransmissions /
    copies received twice (spurious resends)."""
    s = r.get("spray")
    if not s:
        return "–"
    return "%d/%d/%d/%d" % (s["timeouts"], s["tail_probes"], s["retransmits"], s.get("rx_duplicates", 0))


def burst_row(r):
    f = stats.fcts(r)
    ideal = r["ideal_s"]
    mx = max(f) if f and all(x is not None for x in f) else None
    med = pct(f, 50)
    return [r["transport"], "%d/%d" % (stats.completed(r), r["flows"]), fmt(med), fmt(pct(f, 99)),
            fmt(mx), fmt(ideal), fmt(med / ideal if med else None), fmt(mx / ideal if mx else None),
            fmt(stats.goodput_mbps(r)), rto_s(r), cpu_note(r)]


BURST_HDR = ["transport", "done", "FCT p50 s", "FCT p99 s", "FCT max s", "ideal s", "p50/ideal",
             "max/ideal", "goodput Mbit/s", "RTO/TLP/retx/dup", "CPU"]


def table(hdr, rows):
    out = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def links_s(r):
    v, ratio, used = stats.link_spread(r.get("links") or {})
    return "%s (max/mean %s, %d used)" % ("/".join(str(x) for x in v), fmt(ratio), used)


def write(out, trials, net, p, notes, elapsed, args, plots=True):
    by = lambda e: [r for r in trials if r["exp"] == e]  # noqa: E731
    L = []
    L.append("# spray experiments (%s)\n\n" % ("quick" if args.quick else "full"))
    L.append("Machine: %s, %d CPUs; kernel TCP congestion control: %s; run time %.0f s.\n" % (
        platform.node(), os.cpu_count() or 0, read("/proc/sys/net/ipv4/tcp_congestion_control"),
        elapsed))
    L.append("\nIncast: %d sender hosts -> switch -> receiver, bottleneck %s (%s, %d B buffer) on the "
             "switch egress. ECMP: A -> R1 => %d links x %s (%d B buffer each) => R2 -> B, "
             "fib_multipath_hash_policy=3. Loss by netem where the kernel has it, else nft `numgen "
             "random` (section 5 says which); bad-link drops by nft; offloads off. "
             "Messages of %d B, 4 outstanding per flow; FCT measured at the receiver from the "
             "common start instant. CPU = the traffic processes' share of all CPUs (start-up "
             "included) / the whole machine's busy share during the trial (other work on the 2 "
             "vCPUs included); `(sat)` marks a machine > 90 %% busy, where results may be "
             "CPU-bound rather than network-bound.\n\n" % (
                 net["SENDERS"], net["RATE"], "tbf", net["BUF"], net["LINKS"], net["LINK_RATE"],
                 net["LINK_BUF"], args.msg))
    sat = [r for r in trials if (r.get("cpu_busy") or 0) > 0.9]
    ours = [r["tool_cpu"] for r in trials if r.get("tool_cpu") is not None]
    if trials:
        L.append("CPU: the machine was > 90 %% busy in %d of %d trials; the traffic processes used "
                 "%.0f %% of the CPUs on average (max %.0f %%). A saturated machine (other work on "
                 "the 2 vCPUs) can limit any transport, user-space progress loops most: compare "
                 "transports within one run, not against remembered numbers.\n\n" % (
                     len(sat), len(trials), 100 * sum(ours) / max(1, len(ours)),
                     100 * max(ours, default=0)))
    for t, n in sorted(notes.items()):
        L.append("- **%s**: %s\n" % (t, n))
    L.append("\n## 1. Burst incast\n\nAll flows start together; ideal = total bytes / bottleneck rate. "
             "RTO/TLP/retx/dup: spray's retransmission-timer expiries, tail-loss probes (data copies, "
             "or asks when a sender is held to a packet or two), retransmissions and copies received "
             "twice (spurious resends), summed over all its endpoints in the trial (FI_SPRAY_STATS).\n")
    big = [r for r in by("1") if r["transport"] == "spray" and r["flows"] >= 32 and r.get("spray")]
    if big:
        n_rto = sum(r["spray"]["timeouts"] for r in big)
        with_rto = ["%dx%s: %d" % (r["flows"], size_s(r["bytes"]), r["spray"]["timeouts"])
                    for r in big if r["spray"]["timeouts"]]
        L.append("\nspray at 32–64 flows: %s\n" % (
            "**no retransmission timeouts** in %d trials" % len(big) if n_rto == 0 else
            "**%d retransmission timeouts** (%s)" % (n_rto, ", ".join(with_rto))))
    groups = {}
    for r in by("1"):
        groups.setdefault((r["flows"], r["bytes"]), []).append(r)
    for (flows, size), rs in sorted(groups.items()):
        L.append("\n**%d flows x %s**\n\n" % (flows, size_s(size)) + table(BURST_HDR, [burst_row(r) for r in rs]))

    L.append("\n## 2. Sustained incast\n\nPer-flow throughput sampled every 100 ms at the receiver "
             "(first 200 ms skipped); Jain's index over the per-flow means and mean of per-sample Jain. "
             "libfabric transports are counted in whole received messages (%d B = %.1f Mbit/s "
             "per 100 ms sample), so their per-sample Jain is coarser than kernel TCP's.\n\n"
             % (args.msg, args.msg * 8 / 0.1 / 1e6))
    rows = []
    for r in by("2"):
        s = stats.sustained_stats(r)
        rows.append([r["transport"], r["flows"], fmt(s["total_mbps"]), fmt(s["min_flow_mbps"]),
                     fmt(s["max_flow_mbps"]), fmt(s["jain"]), fmt(s["jain_per_sample"]), cpu_note(r)])
    L.append(table(["transport", "flows", "total Mbit/s", "min flow", "max flow", "Jain (means)",
                    "Jain (per sample)", "CPU"], rows))

    L.append("\n## 3. ECMP imbalance\n\nFlows A -> B over %d links, ideal = total bytes / (links x "
             "link rate). Packets per R1 link in the last column.\n" % net["LINKS"])
    for flows in sorted({r["flows"] for r in by("3")}):
        rs = [r for r in by("3") if r["flows"] == flows]
        L.append("\n**%d flows x %s**\n\n" % (flows, size_s(rs[0]["bytes"])))
        L.append(table(BURST_HDR + ["packets per link"], [burst_row(r) + [links_s(r)] for r in rs]))

    L.append("\n## 4. Bad path\n\nLink 0 of %d drops 30 %% (drop30) or runs 10x slower (slow10x). "
             "One flow (repetitions: a TCP flow lands on the bad link only if its hash says so) and "
             "many flows. `on bad link`: a kernel TCP flow placed on link 0 by its source port "
             "(chosen with `ip route get`). Packets per link count what R1 transmitted: packets "
             "the bad link drops are not in them.\n" % net["LINKS"])
    for work in ("one", "many"):
        rs = [r for r in by("4") if r.get("work") == work]
        rows = []
        for r in rs:
            f = stats.fcts(r)
            rows.append([r["cond"], r["transport"], r.get("rep", "–"), "%d/%d" % (stats.completed(r), r["flows"]),
                         fmt(pct(f, 50)), fmt(max(f) if f and None not in f else None),
                         fmt(stats.goodput_mbps(r)), links_s(r), rto_s(r), cpu_note(r)])
        if rs:
            L.append("\n**%s**\n\n" % ("one flow x %s" % size_s(rs[0]["bytes"]) if work == "one"
                                        else "%d flows x %s" % (rs[0]["flows"], size_s(rs[0]["bytes"]))))
            L.append(table(["link state", "transport", "rep", "done", "FCT p50 s", "FCT max s",
                            "goodput Mbit/s", "packets per link", "RTO/TLP/retx/dup", "CPU"], rows))

    how = sorted({r.get("loss_how", "").split(" via ")[-1] for r in by("5")} - {""})
    L.append("\n## 5. Loss sweep\n\nRandom loss on R2 -> B (data direction; via %s; nft spares the "
             "control port).\n\n" % ("/".join(how) or "?"))
    rows = []
    for r in by("5"):
        f = stats.fcts(r)
        rows.append([fmt(r["loss"]), r["transport"], "%d/%d" % (stats.completed(r), r["flows"]),
                     fmt(stats.goodput_mbps(r)), fmt(pct(f, 50)), fmt(pct(f, 99)), rto_s(r), cpu_note(r)])
    L.append(table(["loss %", "transport", "done", "goodput Mbit/s", "FCT p50 s", "FCT p99 s", "RTO/TLP/retx/dup",
                    "CPU"], rows))

    L.append("\n## 6. Spraying check\n\nOne flow A -> B; packets per R1 link (R1 -> R2 direction). "
             "A flow's paths are its source ports; where they are random ephemeral ports, P ports "
             "miss a given one of L links with probability (1 - 1/L)^P (8 ports, 4 links: 10 % "
             "per link, 38 % that some link stays unused).\n\n")
    rows = [[r["transport"], size_s(r["bytes"]), fmt(stats.goodput_mbps(r)), links_s(r)] for r in by("6")]
    L.append(table(["transport", "bytes", "goodput Mbit/s", "packets per link"], rows))

    if plots:
        L.append("\n## Plots\n\n")
        for name, title in make_plots(out, trials):
            L.append("![%s](%s)\n\n" % (title, name))
    L.append("\nRaw receiver output per trial: `raw/*.jsonl`, stderr `raw/*.err`, all trials `results.json`.\n")
    path = os.path.join(out, "report.md")
    with open(path, "w") as f:
        f.write("".join(L))
    return path


def read(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except OSError:
        return "?"


def make_plots(out, trials):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    transports = sorted({r["transport"] for r in trials})
    # FCT CDF per transport, one panel per burst-incast configuration (FCT / ideal).
    e1 = [r for r in trials if r["exp"] == "1"]
    cfgs = sorted({(r["flows"], r["bytes"]) for r in e1})
    if cfgs:
        n = len(cfgs)
        cols = min(3, n)
        rows = (n + cols - 1) // cols
        fig, axs = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.4 * rows), squeeze=False)
        for i, cfg in enumerate(cfgs):
            ax = axs[i // cols][i % cols]
            for r in e1:
                if (r["flows"], r["bytes"]) != cfg:
                    continue
                v = sorted(x / r["ideal_s"] for x in stats.fcts(r) if x is not None)
                if v:
                    ax.step(v, [(k + 1) / r["flows"] for k in range(len(v))], where="post", label=r["transport"])
            ax.set_title("%d flows x %s" % (cfg[0], size_s(cfg[1])))
            ax.set_xlabel("FCT / ideal")
            ax.set_ylabel("CDF")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        for j in range(n, rows * cols):
            axs[j // cols][j % cols].axis("off")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "fct_cdf.png"), dpi=90)
        plt.close(fig)
        made.append(("fct_cdf.png", "Burst incast FCT CDF"))
    # Per-flow throughput over time (sustained incast), one panel per transport.
    e2 = [r for r in trials if r["exp"] == "2" and r["samples"]]
    if e2:
        fig, axs = plt.subplots(1, len(e2), figsize=(4.5 * len(e2), 3.4), squeeze=False, sharey=True)
        for i, r in enumerate(e2):
            ax = axs[0][i]
            per = {}
            for s in r["samples"]:
                per.setdefault(s["flow"], ([], []))
                per[s["flow"]][0].append(s["t_s"])
                per[s["flow"]][1].append(s["mbps"])
            for fl, (t, v) in sorted(per.items()):
                ax.plot(t, v, lw=0.8)
            ax.set_title("%s (%d flows)" % (r["transport"], r["flows"]))
            ax.set_xlabel("time s")
            ax.set_ylabel("Mbit/s per flow")
            ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "throughput_time.png"), dpi=90)
        plt.close(fig)
        made.append(("throughput_time.png", "Sustained incast per-flow throughput"))
    # Goodput and FCT p99 vs loss.
    e5 = [r for r in trials if r["exp"] == "5"]
    if e5:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
        for t in transports:
            rs = sorted((r for r in e5 if r["transport"] == t), key=lambda r: r["loss"])
            if not rs:
                continue
            x = [r["loss"] for r in rs]
            a1.plot(x, [stats.goodput_mbps(r) or 0 for r in rs], marker="o", label=t)
            a2.plot(x, [pct(stats.fcts(r), 99) or float("nan") for r in rs], marker="o", label=t)
        a1.set_xlabel("loss %")
        a1.set_ylabel("goodput Mbit/s")
        a2.set_xlabel("loss %")
        a2.set_ylabel("FCT p99 s")
        for a in (a1, a2):
            a.grid(alpha=0.3)
            a.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "goodput_loss.png"), dpi=90)
        plt.close(fig)
        made.append(("goodput_loss.png", "Goodput and FCT p99 vs loss"))
    # Packets per link for one flow.
    e6 = [r for r in trials if r["exp"] == "6" and r.get("links")]
    if e6:
        fig, ax = plt.subplots(figsize=(5.5, 3.4))
        w = 0.8 / len(e6)
        for i, r in enumerate(e6):
            names = sorted(r["links"])
            tot = sum(r["links"].values()) or 1
            ax.bar([k + i * w for k in range(len(names))], [r["links"][n] / tot for n in names], w,
                   label=r["transport"])
        ax.set_xticks([k + 0.4 - w / 2 for k in range(len(names))])
        ax.set_xticklabels(names)
        ax.set_ylabel("share of packets")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "links.png"), dpi=90)
        plt.close(fig)
        made.append(("links.png", "Packets per ECMP link, one flow"))
    return made
