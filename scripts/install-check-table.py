#!/usr/bin/env python3
"""The summary of scripts/gpu-install-check.sh: per shape, bench_cuda_engine's tok/s with cuBLASLt (toolkit present)
and as installed (driver only), their ratio (issue 30: >= 0.95 at every point); then the Node API and the server
with default load options through the installed package against the cuBLASLt figure at the same N (>= 0.9).

    python3 scripts/install-check-table.py DIR SHAPE...   (DIR: SHAPE-{cublaslt,driver}.json, SHAPE-{node,serve}.json)
"""
import json
import os
import sys


def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"missing {os.path.basename(path)}: {e}")
        return None


def tok(engine, kind, key):
    try:
        return engine[kind][key]["tok_s"]["median"]
    except (KeyError, TypeError):
        return float("nan")


d, shapes = sys.argv[1], sys.argv[2:]
worst = {"engine": float("inf"), "node": float("inf"), "serve": float("inf")}
for shape in shapes:
    lt, drv = load(f"{d}/{shape}-cublaslt.json"), load(f"{d}/{shape}-driver.json")
    node, serve = load(f"{d}/{shape}-node.json"), load(f"{d}/{shape}-serve.json")
    print(f"\n{shape}: tok/s (bench_cuda_engine medians); driver only = the shipped engine, toolkit hidden")
    print(f"{'point':<14}{'cuBLASLt':>12}{'driver only':>13}{'ratio':>8}")
    for kind in ("decode", "prefill"):
        keys = sorted({k for e in (lt, drv) if e for k in e.get(kind, {})}, key=int)
        for k in keys:
            a, b = tok(lt, kind, k), tok(drv, kind, k)
            worst["engine"] = min(worst["engine"], b / a) if a == a and b == b else worst["engine"]
            print(f"{kind + ' ' + k:<14}{a:>12.1f}{b:>13.1f}{b / a:>8.3f}")
    print(f"{'N':<6}{'cuBLASLt':>12}{'Node API':>12}{'ratio':>8}{'serve (HTTP)':>14}{'ratio':>8}   (defaults, installed package)")
    for n in (8, 32, 128):
        ref = tok(lt, "decode", str(n))
        nr = next((r for r in (node or {}).get("rows", []) if r["batch"] == n), None)
        sr = next((r for r in (serve or {}).get("rows", []) if r["batch"] == n), None)
        nt = nr["tokS"] if nr else float("nan")
        st = sr["http"]["steadyTokS"] if sr else float("nan")
        for k, v in (("node", nt), ("serve", st)):
            if v == v and ref == ref:
                worst[k] = min(worst[k], v / ref)
        print(f"{n:<6}{ref:>12.1f}{nt:>12.1f}{nt / ref:>8.3f}{st:>14.1f}{st / ref:>8.3f}")
w = {k: "not measured" if v == float("inf") else f"{v:.3f}" for k, v in worst.items()}
print(f"\nworst: driver only / cuBLASLt {w['engine']} (>= 0.95); Node API / cuBLASLt {w['node']}, "
      f"serve / cuBLASLt {w['serve']} (>= 0.9)")
