#!/usr/bin/env python3
"""The compact table scripts/gpu-bench.sh prints last: our engine (bench/cuda-engine.cpp's JSON, CUDA graphs on,
and the graphs-off null control) against HF transformers eager and static cache + torch.compile (bench/cuda_hf.py's
JSON), with the batch-1 bandwidth limit. Standard library only: the GPU machine has Python but no Node
(bench/cuda-report.mjs turns the same JSON into bench/RESULTS.md rows on the development machine).

    python3 bench/cuda_table.py --engine engine.json [--graphs-off engine-graphs-off.json] [--hf hf.json]

A missing or unreadable file leaves its columns empty. Ratio columns are speed-ups, > 1 when ours is faster:
ours / peer for rates (tok/s), peer / ours for times (ms).
"""
import argparse
import json


def load(path):
    if not path:
        return {}
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def med(d, *keys):
    """d[k0][k1]...['median'], or None."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d.get("median") if isinstance(d, dict) else None


def fmt(x, digits=1):
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def ratio(ours, peer, time_like):
    if not ours or not peer:
        return "-"
    return f"{(peer / ours if time_like else ours / peer):.2f}x"


def rows(e, g, h):
    """(label, ours, HF eager, HF compiled, time_like)."""
    out = []
    batches = sorted({int(b) for b in list(e.get("decode", {})) + list(h.get("decode", {}).get("eager", {}))})
    for b in batches:
        out.append((f"decode b{b} (tok/s)", med(e, "decode", str(b), "tok_s"), med(h, "decode", "eager", str(b), "tok_s"),
                    med(h, "decode", "compiled", str(b), "tok_s"), False))
        if b == 1:
            out.append(("  b1 graphs off (null control)", med(g, "decode", "1", "tok_s"), None, None, False))
            out.append(("  b1 inter-token (ms)", med(e, "decode", "1", "itl_ms"), None, None, True))
    prefills = sorted({int(p) for p in list(e.get("prefill", {})) + list(h.get("prefill", {}))})
    for p in prefills:
        out.append((f"prefill {p} (tok/s)", med(e, "prefill", str(p), "tok_s"), med(h, "prefill", str(p), "tok_s"), None, False))
    for p in prefills:
        out.append((f"TTFT {p} (ms)", med(e, "prefill", str(p), "ttft_ms"), med(h, "prefill", str(p), "ttft_ms"), None, True))
    out.append(("load -> first token (ms)", med(e, "load", "to_first_token_ms"), med(h, "load", "to_first_token_ms"), None, True))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="")
    ap.add_argument("--graphs-off", default="")
    ap.add_argument("--hf", default="")
    a = ap.parse_args()
    e, g, h = load(a.engine), load(a.graphs_off), load(a.hf)
    meta = e.get("meta") or h.get("meta") or {}
    model = e.get("model", {})
    print(f"==== gpu-bench {meta.get('VT_BENCH_SHAPE', '?')}: {meta.get('VT_BENCH_GPU', h.get('gpu', '?'))}; "
          f"commit {meta.get('VT_BENCH_COMMIT', '?')} ====")
    runs_e = e.get("workload", {}).get("runs", "?")
    runs_h = h.get("workload", {}).get("runs", "?")
    print(f"ours: {e.get('dtype', '?')} activations, median of {runs_e} run(s)"
          + (f"; {model.get('weight_bytes', 0) / 1e9:.2f} GB of weights" if model else "")
          + (f"; HF: transformers {h.get('transformers')}, torch {h.get('torch')}, median of {runs_h} run(s)" if h else "; HF: no result"))
    hp, ep = h.get("workload", {}).get("prompt0_head"), e.get("workload", {}).get("prompt0_head")
    if hp and ep and hp != ep:
        print(f"WARNING: the two sides' prompt ids differ ({ep} vs {hp})")
    comp = h.get("decode", {}).get("compiled", {}).get("1", {})
    print(f"decode: 128-token prompts, 256 new tokens, greedy; HF compiled at batch 1 only"
          + (f" (compile ~{comp['compile_s']:.0f} s, {comp.get('compile_method', '')})" if "compile_s" in comp else ""))
    print()
    head = f"{'workload':32s} {'ours':>11s} {'HF eager':>11s} {'HF compiled':>11s} {'x eager':>8s} {'x compiled':>10s}"
    print(head)
    print("-" * len(head))
    for label, ours, eager, compiled, time_like in rows(e, g, h):
        d = 2 if time_like and (ours or 0) < 100 else 1
        print(f"{label:32s} {fmt(ours, d):>11s} {fmt(eager, d):>11s} {fmt(compiled, d):>11s} "
              f"{ratio(ours, eager, time_like):>8s} {ratio(ours, compiled, time_like):>10s}")
    limit = h.get("bandwidth_limit_tok_s")
    if limit:
        b1 = med(e, "decode", "1", "tok_s")
        c1 = med(h, "decode", "compiled", "1", "tok_s")
        parts = [f"ours {100 * b1 / limit:.0f}%" if b1 else None, f"HF compiled {100 * c1 / limit:.0f}%" if c1 else None]
        print(f"{'bandwidth limit b1 (tok/s)':32s} {fmt(limit):>11s}   = {h['copy_gbps']:,.0f} GB/s copy / "
              f"{h['weight_bytes_per_token'] / 1e9:.3f} GB per step; of it: {', '.join(p for p in parts if p) or '-'}")
    else:
        print("bandwidth limit: no HF result (the copy rate is measured there)")
    print("x = speed-up of ours over the peer (ours/peer for tok/s, peer/ours for ms); > 1: ours faster")
    errors = [f"ours: {x}" for x in e.get("errors", [])] + [f"graphs off: {x}" for x in g.get("errors", [])] + \
             [f"HF: {x}" for x in h.get("errors", [])]
    for n in h.get("notes", []):
        print(f"HF note: {n}")
    for x in errors:
        print(f"ERROR {x}")


if __name__ == "__main__":
    main()
