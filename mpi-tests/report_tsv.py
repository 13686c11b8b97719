"""report_tsv.py: what faults_report.py and faultbench_report.py share: reading a results
TSV of faults.sh / faultbench.sh (its `#meta`, `#stage`, `#evidence`, `#stage_secs` header
lines and its tab-separated rows) and the `key=N` lists of spray's statistics in a row.
"""


def kv(s):
    """`a=1 b=2 x` -> {"a": 1, "b": 2}: the integer `key=value` words of `s`."""
    out = {}
    for w in s.split():
        if "=" in w:
            k, v = w.split("=", 1)
            try:
                out[k] = int(v)
            except ValueError:
                pass
    return out


def read(path):
    """The TSV at `path` as (head, other, rows): head maps "meta", "stage", "evidence" and
    "stage_secs" to {first word: rest of the line}; other holds every other `#` line whole;
    rows the data lines split at tabs. Empty lines are skipped."""
    head = {"meta": {}, "stage": {}, "evidence": {}, "stage_secs": {}}
    other, rows = [], []
    for ln in open(path, errors="replace"):
        ln = ln.rstrip("\n")
        if not ln:
            continue
        if ln.startswith("#"):
            tag, _, rest = ln.partition(" ")
            if tag[1:] in head:
                k, _, v = rest.partition(" ")
                head[tag[1:]][k] = v
            else:
                other.append(ln)
            continue
        rows.append(ln.split("\t"))
    return head, other, rows
