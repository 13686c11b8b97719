#!/usr/bin/env python3
"""run.py: the SRD-paper style experiments over spray, libfabric tcp and kernel TCP in the sprx-
network namespaces; writes results/experiments-<date>/report.md with tables and PNG plots.

Usage (root): python3 experiments/run.py [--quick] [--transports spray,tcp,kernel-tcp]
              [--prov-path DIR] [--out DIR] [--only 1,3,6]
Experiments: 1 burst incast, 2 sustained incast, 3 ECMP imbalance, 4 bad path, 5 loss sweep,
6 spraying check. --quick runs a subset in a few minutes (CI); the full suite stays well under
30 minutes. Needs: root, ip/tc/nft/ethtool, gcc + libfabric-dev (the traffic tool is built with
make), matplotlib (a venv in <repo>/.venv-exp is made on first use unless --no-plots).
"""

import argparse
import datetime
import fcntl
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.path.join(ROOT, ".venv-exp")


def ensure_matplotlib(no_plots):
    """Re-executes under the repo's .venv-exp (creating it) when matplotlib is missing."""
    if no_plots:
        return
    try:
        import matplotlib  # noqa: F401

        return
    except ImportError:
        pass
    py = os.path.join(VENV, "bin", "python")
    if os.path.abspath(sys.executable) == os.path.abspath(py):
        sys.exit("run.py: matplotlib missing in %s (pip install matplotlib there)" % VENV)
    if not os.path.exists(py):
        print("run.py: creating %s with matplotlib" % VENV, file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "matplotlib"], check=True)
    os.execv(py, [py] + sys.argv)


sys.path.insert(0, HERE)
import runner  # noqa: E402
import stats  # noqa: E402
from stats import rate_bps  # noqa: E402

KiB, MiB = 1024, 1024 * 1024

# Testbed shape (passed to testbed.sh up).
NET = {"SENDERS": 4, "RATE": "200mbit", "BUF": 65536, "LINKS": 4, "LINK_RATE": "100mbit",
       "LINK_BUF": 65536}

FULL = {
    "incast_flows": [8, 32, 64], "incast_sizes": [64 * KiB, 1 * MiB, 8 * MiB],
    "sustained_flows": 16, "sustained_ms": 5000,
    "ecmp_flows": [4, 8, 16], "ecmp_size": 4 * MiB,
    "bad_single_size": 8 * MiB, "bad_single_reps": 3, "bad_many": (8, 2 * MiB),
    "loss": [0, 0.1, 0.5, 1, 2, 5], "loss_work": (16, 1 * MiB),
    "spray_size": 8 * MiB,
}
QUICK = {
    "incast_flows": [8, 32], "incast_sizes": [256 * KiB],
    "sustained_flows": 8, "sustained_ms": 2000,
    "ecmp_flows": [8], "ecmp_size": 1 * MiB,
    "bad_single_size": 2 * MiB, "bad_single_reps": 1, "bad_many": (8, 512 * KiB),
    "loss": [0, 1, 5], "loss_work": (8, 512 * KiB),
    "spray_size": 2 * MiB,
}


class Ctx:
    def __init__(self, args, transports, out):
        self.args = args
        self.p = dict(QUICK if args.quick else FULL)
        if getattr(args, "incast_flows", None):
            self.p["incast_flows"] = [int(x) for x in args.incast_flows.split(",")]
        if getattr(args, "incast_sizes", None):
            self.p["incast_sizes"] = [int(x) for x in args.incast_sizes.split(",")]
        if getattr(args, "reps", None):
            self.p["bad_single_reps"] = args.reps
        self.transports = transports
        self.out = out
        self.raw = os.path.join(out, "raw")
        os.makedirs(self.raw, exist_ok=True)
        self.trials = []
        self.n = 0

    def trial(self, exp, topo, tr, mode, flows, ideal_s=1.0, **kw):
        self.n += 1
        tag = "%03d-e%s-%s-%s-%df" % (self.n, exp, tr.name, mode, flows)
        timeout = int(min(90, 3 * ideal_s + 10)) if mode == "burst" else int(kw.get("duration_ms", 2000) / 1000 + 15)
        t0 = time.time()
        r = runner.trial(topo, tr, mode, flows, timeout_s=timeout, logdir=self.raw, tag=tag,
                         msg=self.args.msg, **kw)
        r["exp"] = exp
        r["ideal_s"] = ideal_s
        s = r["summary"] or {}
        print("  [%5.1fs] %-40s ok=%s completed=%s/%d goodput=%s Mbit/s cpu ours/machine=%s/%s" % (
            time.time() - t0, tag, r["ok"], stats.completed(r) if mode == "burst" else "-", flows,
            stats.fmt(stats.goodput_mbps(r) if mode == "burst" else s.get("goodput_mbps")),
            stats.fmt(r["tool_cpu"], 2), stats.fmt(r["cpu_busy"], 2)), file=sys.stderr, flush=True)
        self.trials.append(r)
        return r


def exp1_incast_burst(ctx):
    rate = rate_bps(NET["RATE"])
    for flows in ctx.p["incast_flows"]:
        for size in ctx.p["incast_sizes"]:
            ideal = flows * size * 8 / rate
            for tr in ctx.transports:
                ctx.trial("1", "incast", tr, "burst", flows, hosts=NET["SENDERS"], bytes_=size,
                          ideal_s=ideal)


def exp2_incast_sustained(ctx):
    for tr in ctx.transports:
        ctx.trial("2", "incast", tr, "sustained", ctx.p["sustained_flows"], hosts=NET["SENDERS"],
                  duration_ms=ctx.p["sustained_ms"])


def ecmp_capacity(links_ok=None):
    k = NET["LINKS"] if links_ok is None else links_ok
    return k * rate_bps(NET["LINK_RATE"])


def exp3_ecmp(ctx):
    size = ctx.p["ecmp_size"]
    for flows in ctx.p["ecmp_flows"]:
        for tr in ctx.transports:
            ctx.trial("3", "ecmp", tr, "burst", flows, bytes_=size,
                      ideal_s=flows * size * 8 / ecmp_capacity())


def exp4_bad_path(ctx):
    conds = [("healthy", None), ("drop30", ("drop", 0, 30)), ("slow10x", ("slow", 0, 10))]
    n_many, s_many = ctx.p["bad_many"]
    s_one = ctx.p["bad_single_size"]
    try:
        for name, bad in conds:
            runner.testbed("bad", "clear", env=NET)
            if bad:
                runner.testbed("bad", *bad, env=NET)
            for tr in ctx.transports:
                for rep in range(ctx.p["bad_single_reps"]):
                    r = ctx.trial("4", "ecmp", tr, "burst", 1, bytes_=s_one,
                                  ideal_s=s_one * 8 / ecmp_capacity())
                    r["cond"], r["work"], r["rep"] = name, "one", rep
                if tr.name == "kernel-tcp" and bad:
                    # Where the hash decides, 1 in K TCP flows meets the bad link: show that case.
                    port = runner.sport_on_link(0, first=41000 + 1000 * len(name))
                    if port:
                        r = ctx.trial("4", "ecmp", tr, "burst", 1, bytes_=s_one, sport=port,
                                      ideal_s=s_one * 8 / ecmp_capacity())
                        r["cond"], r["work"], r["rep"] = name, "one", "on bad link"
                r = ctx.trial("4", "ecmp", tr, "burst", n_many, bytes_=s_many,
                              ideal_s=n_many * s_many * 8 / ecmp_capacity())
                r["cond"], r["work"] = name, "many"
    finally:
        runner.testbed("bad", "clear", env=NET)


def exp5_loss(ctx):
    n, size = ctx.p["loss_work"]
    try:
        for p in ctx.p["loss"]:
            how = runner.testbed("loss", "ecmp", p, env=NET).strip()
            for tr in ctx.transports:
                r = ctx.trial("5", "ecmp", tr, "burst", n, bytes_=size,
                              ideal_s=n * size * 8 / ecmp_capacity())
                r["loss"], r["loss_how"] = p, how
    finally:
        runner.testbed("loss", "ecmp", 0, env=NET)


def exp6_spraying(ctx):
    size = ctx.p["spray_size"]
    for tr in ctx.transports:
        ctx.trial("6", "ecmp", tr, "burst", 1, bytes_=size, ideal_s=size * 8 / ecmp_capacity())


EXPS = {"1": exp1_incast_burst, "2": exp2_incast_sustained, "3": exp3_ecmp, "4": exp4_bad_path,
        "5": exp5_loss, "6": exp6_spraying}


def preflight(ctx, transports):
    """One small flow per transport: a transport that cannot move 64 KiB is left out (with the
    reason in the report) instead of timing out in every trial."""
    ok, notes = [], {}
    for tr in transports:
        if tr.name == "spray" and not os.path.exists(os.path.join(tr.prov_path or "", "libspray-fi.so")):
            notes[tr.name] = "not run: no libspray-fi.so in %s" % tr.prov_path
            continue
        r = runner.trial("incast", tr, "burst", 1, hosts=1, bytes_=64 * KiB, timeout_s=10,
                         logdir=ctx.raw, tag="000-preflight-" + tr.name)
        if r["ok"] and stats.completed(r) == 1:
            ok.append(tr)
        else:
            err = open(os.path.join(ctx.raw, "000-preflight-%s.err" % tr.name)).read()[-600:]
            notes[tr.name] = "not run: preflight failed: " + err.replace("\n", " | ")
        print("preflight %s: %s" % (tr.name, "ok" if tr in ok else notes[tr.name]), file=sys.stderr)
    return ok, notes


def lock():
    f = open("/run/lock/sprx-experiments.lock", "w")
    end = time.time() + 900
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except OSError:
            if time.time() > end:
                sys.exit("run.py: another experiment run holds the lock for 15 min")
            time.sleep(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="CI subset (a few minutes)")
    ap.add_argument("--transports", default="spray,tcp,kernel-tcp")
    ap.add_argument("--prov-path", default=os.path.join(ROOT, "build"),
                    help="directory with libspray-fi.so (default <repo>/build)")
    ap.add_argument("--out", help="output directory (default results/experiments-<date>[-quick])")
    ap.add_argument("--only", help="comma-separated experiment numbers")
    ap.add_argument("--msg", type=int, default=64 * KiB, help="message size, bytes")
    ap.add_argument("--incast-flows", help="comma-separated flow counts of experiment 1 (default 8,32,64)")
    ap.add_argument("--incast-sizes", help="comma-separated flow sizes of experiment 1, bytes (default 64 KiB, 1 MiB, 8 MiB)")
    ap.add_argument("--reps", type=int, help="repetitions of the one-flow bad-path trials (default 3, quick 1)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--keep-up", action="store_true", help="leave the testbed up afterwards")
    ap.add_argument("--report-only", metavar="DIR", help="rewrite DIR/report.md from DIR/results.json")
    args = ap.parse_args()
    ensure_matplotlib(args.no_plots)
    if args.report_only:
        import report

        with open(os.path.join(args.report_only, "results.json")) as f:
            d = json.load(f)
        args.quick = d["quick"]
        print(report.write(args.report_only, d["trials"], d["net"], d["params"], d["notes"],
                           d["elapsed_s"], args, plots=not args.no_plots))
        return 0
    if os.geteuid() != 0:
        sys.exit("run.py: needs root (network namespaces)")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    out = args.out or os.path.join(ROOT, "results", "experiments-%s%s" % (date, "-quick" if args.quick else ""))
    os.makedirs(out, exist_ok=True)
    subprocess.run(["make", "-s", "-C", os.path.join(HERE, "traffic")], check=True)
    held = lock()
    prov_path = os.path.abspath(args.prov_path)
    trs = [runner.Transport(n.strip(), prov_path) for n in args.transports.split(",") if n.strip()]
    ctx = Ctx(args, [], out)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt("signal %d" % sig)

    signal.signal(signal.SIGTERM, on_signal)
    t0 = time.time()
    only = args.only.split(",") if args.only else list(EXPS)
    try:
        print("testbed: %s" % runner.testbed("up", "all", env=NET).strip(), file=sys.stderr)
        ctx.transports, notes = preflight(ctx, trs)
        for k in only:
            if not ctx.transports:
                break
            print("experiment %s (%.0f s so far)" % (k, time.time() - t0), file=sys.stderr)
            EXPS[k](ctx)
    finally:
        if not args.keep_up:
            runner.testbed("down")
        held.close()
    elapsed = time.time() - t0
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"net": NET, "params": ctx.p, "quick": args.quick, "elapsed_s": elapsed,
                   "notes": notes, "trials": ctx.trials}, f, indent=1)
    import report

    path = report.write(out, ctx.trials, NET, ctx.p, notes, elapsed, args, plots=not args.no_plots)
    print("report: %s (%.0f s)" % (path, elapsed), file=sys.stderr)
    return 0 if ctx.transports and all(r["ok"] for r in ctx.trials) else 1


if __name__ == "__main__":
    sys.exit(main())
