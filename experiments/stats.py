"""stats.py: small statistics over trial results (FCT percentiles, ideal times, Jain's index)."""

import math
import re


def rate_bps(s):
    """'200mbit' -> 200e6."""
    m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", s)
    if not m:
        raise ValueError("rate like 200mbit expected: %s" % s)
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def pct(xs, p):
    """Nearest-rank percentile of the finite values; None when empty."""
    v = sorted(x for x in xs if x is not None)
    if not v:
        return None
    k = max(0, min(len(v) - 1, math.ceil(p / 100 * len(v)) - 1))
    return v[k]


def fcts(res):
    return [x.get("fct_s") for x in res["flow_lines"]]


def completed(res):
    return sum(1 for x in fcts(res) if x is not None)


def goodput_mbps(res):
    """Received bytes over the time the last flow needed (or the whole run if some timed out)."""
    s = res.get("summary") or {}
    total = s.get("bytes", 0)
    f = fcts(res)
    if f and all(x is not None for x in f):
        span = max(f)
    else:
        span = s.get("elapsed_s") or 0
    return total * 8 / span / 1e6 if span else None


def jain(xs):
    xs = [x for x in xs if x is not None]
    if not xs or sum(x * x for x in xs) == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def sustained_stats(res, skip_s=0.2):
    """Per-flow mean Mbit/s (after skip_s of start-up), Jain over flows, mean per-sample Jain."""
    per_flow, per_t = {}, {}
    for s in res["samples"]:
        if s["t_s"] <= skip_s:
            continue
        per_flow.setdefault(s["flow"], []).append(s["mbps"])
        per_t.setdefault(s["t_s"], []).append(s["mbps"])
    means = [sum(v) / len(v) for v in per_flow.values()] if per_flow else []
    sample_j = [jain(v) for v in per_t.values()]
    sample_j = [j for j in sample_j if j is not None]
    return {
        "flow_mbps": means,
        "total_mbps": sum(means) if means else None,
        "jain": jain(means),
        "jain_per_sample": sum(sample_j) / len(sample_j) if sample_j else None,
        "min_flow_mbps": min(means) if means else None,
        "max_flow_mbps": max(means) if means else None,
    }


def link_spread(links):
    """(packets per link in name order, max/mean ratio, links carrying >= 5 % of packets)."""
    names = sorted(links)
    v = [links[n] for n in names]
    tot = sum(v)
    if not tot:
        return v, None, 0
    mean = tot / len(v)
    return v, max(v) / mean, sum(1 for x in v if x >= 0.05 * tot)


def fmt(x, nd=3):
    if x is None:
        return "–"
    if isinstance(x, float):
        return ("%." + str(nd) + "g") % x
    return str(x)
