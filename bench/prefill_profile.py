#!/usr/bin/env python3
"""Where a prefill's time goes, two arms side by side (scripts/gpu-prefill-profile.sh): each Nsight Compute CSV
holds every kernel of a bench_cuda_engine prefill run; its longest step (a step starts at each embedding gather)
is the prompt's prefill. Per kernel name: launches and microseconds in that step for each arm, the GEMMs (ours,
vt_gemm_*, and cuBLASLt's, whatever it names them) also summed as one line, and the totals.

    python3 bench/prefill_profile.py --a NAME=ncu-a.csv --b NAME=ncu-b.csv
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from decode_profile import rows_of  # noqa: E402


def is_gemm(name):
    return name.startswith("vt_gemm_") or not name.startswith("vt_")  # (every kernel not ours is cuBLASLt's)


def prefill_step(rows):
    starts = [i for i, r in enumerate(rows) if r["name"].startswith("vt_embed")] + [len(rows)]
    steps = [rows[a:b] for a, b in zip(starts, starts[1:])]
    if not steps:
        sys.exit("prefill_profile: no step (no embedding gather) in the CSV")
    return max(steps, key=lambda st: sum(r["ns"] for r in st))


def per_kernel(step):
    per = collections.OrderedDict()
    for r in step:
        k = per.setdefault(r["name"], [0, 0.0])
        k[0] += 1
        k[1] += r["ns"]
    return per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    a = ap.parse_args()
    (na, pa), (nb, pb) = (x.split("=", 1) for x in (a.a, a.b))
    ka, kb = per_kernel(prefill_step(rows_of(pa))), per_kernel(prefill_step(rows_of(pb)))
    names = sorted(set(ka) | set(kb), key=lambda n: -max(ka.get(n, [0, 0])[1], kb.get(n, [0, 0])[1]))
    print(f"{'kernel':48s} {na + ' n':>7s} {na + ' us':>10s} {nb + ' n':>7s} {nb + ' us':>10s} {'b - a us':>9s}")
    for n in names:
        ca, ta = ka.get(n, [0, 0.0])
        cb, tb = kb.get(n, [0, 0.0])
        print(f"{n[:48]:48s} {ca:7d} {ta / 1e3:10.1f} {cb:7d} {tb / 1e3:10.1f} {(tb - ta) / 1e3:9.1f}")
    ga = sum(v[1] for k, v in ka.items() if is_gemm(k))
    gb = sum(v[1] for k, v in kb.items() if is_gemm(k))
    sa, sb = sum(v[1] for v in ka.values()), sum(v[1] for v in kb.values())
    print(f"{'GEMMs (vt_gemm_* and cuBLASLt kernels)':48s} {'':7s} {ga / 1e3:10.1f} {'':7s} {gb / 1e3:10.1f} {(gb - ga) / 1e3:9.1f}")
    print(f"{'everything else':48s} {'':7s} {(sa - ga) / 1e3:10.1f} {'':7s} {(sb - gb) / 1e3:10.1f} {((sb - gb) - (sa - ga)) / 1e3:9.1f}")
    print(f"{'the prefill step, kernels serialized':48s} {'':7s} {sa / 1e3:10.1f} {'':7s} {sb / 1e3:10.1f} {(sb - sa) / 1e3:9.1f}")


if __name__ == "__main__":
    main()
