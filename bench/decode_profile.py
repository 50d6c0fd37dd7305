#!/usr/bin/env python3
"""Sums an Nsight Compute CSV of decode kernels (scripts/gpu-profile.sh) by kernel per decode step.

    python3 bench/decode_profile.py --csv ncu.csv [--engine engine.json] [--engine-graphs-off engine-graphs-off.json]

A step starts at each embedding gather that follows an argmax (the step's first and last kernels); only whole
steps inside the profiled window count. Per kernel: launches per step, microseconds per step (the profiler's
gpu__time_duration, kernels serialized), mean per launch, DRAM bytes read per step and the rate over the
kernel's own time. Last: the summed kernel time per step against the inter-token interval bench_cuda_engine
measured without the profiler (graphs on and off); the difference is launch and dependency overhead.
"""
import argparse
import collections
import csv
import json
import sys


def rows_of(path):
    lines = [l for l in open(path, encoding="utf-8", errors="replace") if l.startswith('"')]
    table = list(csv.reader(lines))
    if not table or "Kernel Name" not in table[0]:
        sys.exit(f"decode_profile: no ncu CSV header in {path}")
    head = table[0]
    out = []
    for r in table[1:]:
        if len(r) != len(head):
            continue
        d = dict(zip(head, r))
        try:
            d["ns"] = float(d["gpu__time_duration.sum"].replace(",", ""))
        except ValueError:
            continue  # the units row
        d["read"] = float(d.get("dram__bytes_read.sum", "0").replace(",", "") or 0)
        d["name"] = d["Kernel Name"].split("(")[0]
        out.append(d)
    return out


def steps_of(rows):
    starts = [i for i, r in enumerate(rows) if r["name"].startswith("vt_embed") and i > 0
              and rows[i - 1]["name"].startswith("vt_argmax")]
    return [rows[a:b] for a, b in zip(starts, starts[1:])]


def itl(path):
    if not path:
        return None
    try:
        d = json.load(open(path))
        return next(iter(d["decode"].values()))["itl_ms"]["median"]
    except (OSError, KeyError, StopIteration, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--engine")
    ap.add_argument("--engine-graphs-off")
    a = ap.parse_args()
    rows = rows_of(a.csv)
    steps = steps_of(rows)
    if not steps:
        sys.exit(f"decode_profile: {len(rows)} kernels, no whole decode step (embed after argmax) among them")
    n = len(steps)
    per = collections.OrderedDict()
    for st in steps:
        for r in st:
            k = per.setdefault(r["name"], [0, 0.0, 0.0])
            k[0] += 1
            k[1] += r["ns"]
            k[2] += r["read"]
    total_ns = sum(v[1] for v in per.values()) / n
    print(f"{len(rows)} kernels profiled, {n} whole decode steps of {sum(len(s) for s in steps) / n:.0f} kernels")
    print(f"{'kernel':44s} {'per step':>8s} {'us/step':>9s} {'us/launch':>9s} {'MB read':>8s} {'GB/s':>7s} {'share':>6s}")
    for name, (cnt, ns, rd) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        us = ns / n / 1e3
        print(f"{name[:44]:44s} {cnt / n:8.1f} {us:9.1f} {ns / cnt / 1e3:9.2f} {rd / n / 1e6:8.1f} "
              f"{(rd / ns if ns else 0):7.0f} {100 * ns / n / total_ns:5.1f}%")
    print(f"{'sum of kernel times':44s} {'':8s} {total_ns / 1e3:9.1f}")
    for label, path in (("graphs on", a.engine), ("graphs off", a.engine_graphs_off)):
        t = itl(path)
        if t:
            print(f"inter-token interval, {label}, unprofiled: {t * 1e3:.1f} us; beyond the kernels' own time: "
                  f"{t * 1e3 - total_ns / 1e3:.1f} us ({100 * (1 - total_ns / 1e6 / t):.0f}%)")


if __name__ == "__main__":
    main()
