#!/usr/bin/env python3
"""Scale table from bench/scale.sh's JSON lines: median (min-max) per
partition count over the runs, and the produce ratio to 8 partitions.

Usage: bench/scale-report.py scale-STAMP.jsonl...
"""
import json
import statistics
import sys


def load(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rows.append(json.loads(line))
    return rows


def fmt(values, digits):
    if not values:
        return "-"
    med = statistics.median(values)
    f = "{:,.%df}" % digits
    if len(values) == 1:
        return f.format(med)
    return "%s (%s-%s)" % (f.format(med), f.format(min(values)), f.format(max(values)))


def case(row):
    return row.get("case", "")


def pick(rows, p, pred, field):
    return [r[field] for r in rows
            if r.get("partitions") == p and r.get("ok") and pred(r) and field in r]


def main():
    rows = load(sys.argv[1:])
    suite = [r for r in rows if not case(r).startswith("data")]
    counts = sorted({r["partitions"] for r in suite if isinstance(r.get("partitions"), int)})
    create = lambda r: case(r).startswith("create-")
    produce = lambda r: case(r).startswith("produce-")
    consume = lambda r: case(r).startswith("consume-")
    idle = lambda r: r.get("mode") == "idle"
    kill = lambda r: r.get("mode") == "restart" and r.get("kind") == "kill"
    metrics = [
        ("topic create ms", create, "create_ms", 0),
        ("RSS idle after create, MB", idle, "broker_rss_mb", 0),
        ("produce MB/s", produce, "mb_per_sec", 0),
        ("produce broker CPU s/GB", produce, "broker_cpu_sec_per_gb", 2),
        ("RSS peak in produce, MB", produce, "broker_peak_rss_mb", 0),
        ("consume MB/s", consume, "mb_per_sec", 0),
        ("consume broker CPU s/GB", consume, "broker_cpu_sec_per_gb", 2),
        ("RSS peak in consume, MB", consume, "broker_peak_rss_mb", 0),
        ("restart after SIGKILL, ms to first produce", kill, "restart_ms", 0),
        ("recovery ms (broker log)", kill, "recovery_ms", 0),
        ("RSS after restart, MB", kill, "broker_rss_mb", 0),
    ]
    if counts:
        print("| metric | " + " | ".join("%d partitions" % p for p in counts) + " |")
        print("|---|" + "---:|" * len(counts))
    for name, pred, field, digits in metrics if counts else []:
        print("| %s | %s |" % (name, " | ".join(fmt(pick(suite, p, pred, field), digits) for p in counts)))
    base = statistics.median(pick(suite, 8, produce, "mb_per_sec") or [0])
    if base:
        print("| produce / 8-partition median | %s |" % " | ".join(
            "%.2f" % (statistics.median(pick(suite, p, produce, "mb_per_sec") or [0]) / base) for p in counts))

    data = [r for r in rows if case(r).startswith("data")]
    if not data:
        return
    print()
    print("| stored data | value |")
    print("|---|---:|")
    dp = [r for r in data if case(r).startswith("data-produce")]
    dc = [r for r in data if case(r).startswith("data-consume")]
    di = [r for r in data if r.get("mode") == "idle"]
    rk = [r for r in data if r.get("mode") == "restart" and r.get("kind") == "kill"]
    rt = [r for r in data if r.get("mode") == "restart" and r.get("kind") == "term"]
    gib = lambda r: r["data_bytes"] / 2**30
    for r in di:
        for src, dst in (("wal_bytes", "wal_mb"), ("memtable_bytes", "memtable_mb")):
            if src in r:
                r[dst] = r[src] / 2**20
    for name, rs, field, digits in [
        ("records produced, millions", dp, "records", 2),
        ("produce MB/s", dp, "mb_per_sec", 0),
        ("RSS peak in produce, MB", dp, "broker_peak_rss_mb", 0),
        ("data directory, GiB (du)", di, None, 1),
        ("RSS idle with the data, MB", di, "broker_rss_mb", 0),
        ("live WAL before the SIGKILL, MB", di, "wal_mb", 0),
        ("memtables before the SIGKILL, MB", di, "memtable_mb", 0),
        ("L0 files before the SIGKILL", di, "l0_files", 0),
        ("restart after SIGKILL, ms to first produce", rk, "restart_ms", 0),
        ("recovery ms after SIGKILL (broker log)", rk, "recovery_ms", 0),
        ("of which store open (WAL replay), ms", rk, "store_open_ms", 0),
        ("RSS after restart, MB", rk, "broker_rss_mb", 0),
        ("consume MB/s (all of it, verified)", dc, "mb_per_sec", 0),
        ("RSS peak in consume, MB", dc, "broker_peak_rss_mb", 0),
        ("restart after SIGTERM, ms to first produce", rt, "restart_ms", 0),
    ]:
        ok = [r for r in rs if r.get("ok")]
        if field is None:
            values = [gib(r) for r in ok]
        elif field == "records":
            values = [r[field] / 1e6 for r in ok]
        else:
            values = [r[field] for r in ok if field in r]
        print("| %s | %s |" % (name, fmt(values, digits)))


if __name__ == "__main__":
    main()
