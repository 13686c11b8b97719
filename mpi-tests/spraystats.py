#!/usr/bin/env python3
"""spraystats.py: sums spray's FI_SPRAY_STATS dumps (JSON lines) of one MPI launch.

usage: spraystats.py [--json] FILE...

Every rank writes its endpoints' counters (README "Statistics on demand"): one line at
close and, with FI_SPRAY_STATS_MS, periodic ones. An endpoint counts once, with its last
line (its close line if it has one: a rank killed or exiting without closing leaves only
periodic ones). Prints one line of totals, e.g.
    eps=8 closed=8 rto=0 tlp=3 retx=41 lost=39 data=523311 dup=2 stall=0 unreach=0 cuts=0
    peers_rto=0 max_rto=0
with --json the same as a JSON object. Exit 1 if no file held a line.
"""
import json
import sys

KEYS = [("rto", "timeouts"), ("tlp", "tail_probes"), ("retx", "retransmits"), ("lost", "lost"),
        ("data", "tx_data"), ("dup", "rx_duplicates"), ("stall", "stall_probes"),
        ("unreach", "unreachable"), ("cuts", "budget_cuts")]


def main(argv):
    as_json = "--json" in argv
    files = [a for a in argv if a != "--json"]
    last = {}
    for fn in files:
        try:
            with open(fn, encoding="utf-8", errors="replace") as f:
                for ln in f:
                    try:
                        r = json.loads(ln)
                    except ValueError:
                        continue
                    key = (r.get("pid"), r.get("ep"))
                    old = last.get(key)
                    # the close line wins; otherwise the latest periodic one
                    if old is None or r.get("event") == "close" or (
                            old.get("event") != "close" and r.get("mono_ns", 0) >= old.get("mono_ns", 0)):
                        last[key] = r
        except OSError:
            continue
    if not last:
        print("no spray statistics", file=sys.stderr)
        return 1
    tot = {"eps": len(last), "closed": sum(1 for r in last.values() if r.get("event") == "close")}
    for short, _ in KEYS:
        tot[short] = 0
    tot["peers_rto"] = 0
    tot["max_rto"] = 0
    for r in last.values():
        s = r.get("srd", {})
        for short, name in KEYS:
            tot[short] += int(s.get(name, 0))
        for p in r.get("peers", []):
            n = int(p.get("rtos", 0))
            tot["peers_rto"] += 1 if n else 0
            tot["max_rto"] = max(tot["max_rto"], n)
    if as_json:
        print(json.dumps(tot, sort_keys=True))
    else:
        print(" ".join("%s=%d" % (k, v) for k, v in tot.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
