#!/usr/bin/env python3
"""The table scripts/gpu-memory.sh prints last: issue 5's memory benchmark, our engine (bench/memory-engine.cpp)
against HF transformers (bench/memory_hf.py), each as bench/memory.py wrote it, with the ratio peer / ours and the
issue's targets checked. Standard library only: the GPU machine has Python but no Node.

    python3 bench/memory_table.py --ours vtengine.json --peer hf.json
                                  [--ours-control vtengine-control.json] [--peer-control hf-control.json] [--markdown]

--markdown prints the same figures as a bench/RESULTS.md entry (heading, command, table, targets) instead: the one
place that reads these files, so the terminal table and the RESULTS rows cannot disagree. A missing or unreadable
file leaves its column "-".

Targets (issue 5, declared before measuring): our peak PSS over the whole window <= 0.25x HF's; while serving
<= 0.6x HF's; our GPU memory <= weights + KV + 1 GiB; no host copy of the weights resident after load; the
estimate (vt_engine_estimate) within 10% of the measured steady GPU usage (the peak of the idle phase).
"""
import argparse
import json

PHASES = (("load", "load"), ("serve", "serving"), ("idle", "idle"), ("whole", "whole"))
AXES = (("peak PSS", "pssBytes"), ("peak RSS", "rssBytes"), ("peak GPU memory", "gpuBytes"),
        ("peak MemAvailable drop", "availableDropBytes"))
GIB = 1 << 30
TARGETS = ("peak PSS over the whole window <= 0.25x HF's", "peak PSS while serving <= 0.6x HF's",
           "our GPU peak <= weights + KV + 1 GiB", "no host copy of the weights after load",
           "estimate within 10% of steady GPU usage")
HOST_COPY_LIMIT = 0.01  # "no host copy": this process's mappings of the checkpoint hold < 1% of the weights


def load(path):
    if not path:
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(b):
    if b is None:
        return "-"
    a = abs(b)
    if a >= GIB:
        return f"{b / GIB:.2f} GiB"
    if a >= 1 << 20:
        return f"{b / (1 << 20):.1f} MiB"
    return f"{b / 1024:.0f} KiB"


def gpu_source(run):
    """'process' (NVML lists the process) or 'device' (its pids are not listed, as in a container with its own pid
    namespace: the growth of the device's used memory since the start stands in)."""
    w = (run or {}).get("whole") or {}
    if not w.get("gpuBytes") and w.get("gpuDeviceDeltaBytes"):
        return "device"
    return "process"


def peak(run, phase, key):
    if not run:
        return None
    p = run.get("whole") if phase == "whole" else (run.get("phases") or {}).get(phase)
    if not p:
        return None
    if key == "gpuBytes" and gpu_source(run) == "device":
        return p.get("gpuDeviceDeltaBytes")
    return p.get(key)


def ratio(ours, peer):
    # Only between two growths: a negative MemAvailable drop (memory others freed) has no meaningful ratio.
    return f"{peer / ours:.2f}x" if ours and peer and ours > 0 and peer > 0 else "-"


def rows(ours, peer, ours_c, peer_c):
    """(axis, phase, ours bytes, peer bytes)."""
    out = [(axis, label, peak(ours, phase, key), peak(peer, phase, key)) for axis, key in AXES for phase, label in PHASES]
    if ours_c or peer_c:
        for axis, key in AXES[:3]:
            out.append((f"null control: {axis}", "whole", peak(ours_c, "whole", key), peak(peer_c, "whole", key)))
    return out


def checks(ours, peer):
    """(target, PASS | FAIL | n/a, the numbers)."""
    info = (ours or {}).get("info") or {}
    cuda = info.get("device") == "cuda"
    after_load = (info.get("memory") or {}).get("afterLoad") or {}
    after_serve = (info.get("memory") or {}).get("afterServe") or {}
    est = info.get("estimate") or {}
    weights = (info.get("model") or {}).get("weight_bytes") or est.get("weight_bytes")
    failed = [name for name, run in (("ours", ours), ("HF", peer)) if run and run.get("exitCode")]
    if failed:  # a run cut short has peaks that describe part of the workload: no verdict from them
        return [(target, "n/a", f"{' and '.join(failed)} failed (see the notes)") for target in TARGETS]
    out = []

    for target, phase, limit in ((TARGETS[0], "whole", 0.25), (TARGETS[1], "serve", 0.6)):
        a, b = peak(ours, phase, "pssBytes"), peak(peer, phase, "pssBytes")
        if not a or not b:
            out.append((target, "n/a", "not measured on both sides"))
        else:
            out.append((target, "PASS" if a / b <= limit else "FAIL",
                        f"ours {fmt(a)} / HF {fmt(b)} = {a / b:.3f}x"))

    gpu = peak(ours, "whole", "gpuBytes")
    w_dev, kv = after_load.get("weight_device_bytes"), after_load.get("kv_cache_bytes")
    if not cuda or gpu is None or w_dev is None:
        out.append((TARGETS[2], "n/a", f"device {info.get('device')}, GPU peak {fmt(gpu)}"))
    else:
        limit = w_dev + kv + GIB
        configured = (info.get("params") or {}).get("kv_cache_bytes")
        note = f"; configured kv_cache_bytes {fmt(configured)}" if configured and configured != kv else ""
        out.append((TARGETS[2], "PASS" if gpu <= limit else "FAIL",
                    f"{fmt(gpu)} vs {fmt(w_dev)} + {fmt(kv)} (the pool{note}) + 1 GiB = {fmt(limit)}; "
                    f"beyond weights + KV: {fmt(gpu - w_dev - kv)}"))

    maps_l = after_load.get("checkpointMappings") or {}
    maps_s = after_serve.get("checkpointMappings") or {}
    serve_pss = peak(ours, "serve", "pssBytes")
    if not cuda or not weights or "rssBytes" not in maps_l:
        out.append((TARGETS[3], "n/a",
                    f"device {info.get('device')}: the CPU backend uses the weights in place" if not cuda else "no figures"))
    else:
        worst = max(maps_l["rssBytes"], maps_s.get("rssBytes", 0))
        host = after_load.get("weight_host_bytes") or 0
        ok = worst <= HOST_COPY_LIMIT * weights and host <= HOST_COPY_LIMIT * weights
        out.append((TARGETS[3], "PASS" if ok else "FAIL",
                    f"checkpoint mappings resident in our process {fmt(maps_l['rssBytes'])} after load, "
                    f"{fmt(maps_s.get('rssBytes'))} after serving (limit {HOST_COPY_LIMIT:.0%} of {fmt(weights)}); "
                    f"host weight copies {fmt(host)}; our peak PSS while serving {fmt(serve_pss)}; "
                    f"page cache of the checkpoint (mincore, warm by design, not ours) {fmt(after_load.get('weight_mapped_resident_bytes'))}"))

    steady = peak(ours, "idle", "gpuBytes")
    if not cuda or not steady:
        out.append((TARGETS[4], "n/a", f"device {info.get('device')}, idle GPU peak {fmt(steady)}"))
    else:
        est_gpu = (est.get("weight_device_bytes") or 0) + (est.get("kv_cache_bytes") or 0) + (est.get("workspace_bytes") or 0)
        acct = sum(after_serve.get(k) or 0 for k in ("weight_device_bytes", "kv_cache_bytes", "workspace_bytes")) + \
            max(after_serve.get("graphs_bytes") or 0, 0)
        detail = (f"estimate {fmt(est_gpu)} (weights on device {fmt(est.get('weight_device_bytes'))} + KV "
                  f"{fmt(est.get('kv_cache_bytes'))} + workspace {fmt(est.get('workspace_bytes'))}) / steady {fmt(steady)} "
                  f"(idle-phase GPU peak) = {est_gpu / steady:.3f}; the engine's own accounting after serving "
                  f"{fmt(acct)} (CUDA context, allocator and the rest: {fmt(steady - acct)})")
        if not est.get("weight_device_bytes"):
            # An estimate that puts no weights on the device does not describe a cuda load, whatever its ratio.
            as_if = (est.get("weight_bytes") or 0) + (est.get("kv_cache_bytes") or 0) + (est.get("workspace_bytes") or 0)
            out.append((TARGETS[4], "FAIL",
                        f"the estimate reports no weights on the device; {detail}; with its weight_bytes as device "
                        f"bytes it would be {fmt(as_if)} = {as_if / steady:.3f}"))
        else:
            out.append((TARGETS[4], "PASS" if abs(est_gpu / steady - 1) <= 0.10 else "FAIL", detail))
    return out


def notes(ours, peer):
    out = []
    oi, pi = (ours or {}).get("info") or {}, (peer or {}).get("info") or {}
    ow, pw = oi.get("workload"), pi.get("workload")
    if ow and pw and ow != pw:
        out.append(f"WARNING: the workloads differ: ours {ow}, HF {pw}")
    oc, pc = oi.get("promptChecksum"), pi.get("promptChecksum")
    if oc is not None and pc is not None:
        out.append(f"prompt ids: {'the same on both sides' if oc == pc else 'WARNING: they DIFFER'} "
                   f"(checksum ours {oc}, HF {pc}; request 0 starts {oi.get('prompt0Head')})")
    for name, run in (("ours", ours), ("HF", peer)):
        if run is None:
            out.append(f"{name}: no result")
        elif run.get("exitCode"):
            out.append(f"{name}: exit code {run['exitCode']}")
        if run and gpu_source(run) == "device":
            out.append(f"{name}: NVML does not list the process; its GPU figures are the device's growth since its start")
    if "loadSeconds" in oi:
        p = oi.get("params") or {}
        out.append(f"ours: load {oi.get('loadSeconds', 0):.2f} s, serving {oi.get('serveSeconds', 0):.2f} s, "
                   f"{oi.get('generatedTokens')} tokens, {(oi.get('stats') or {}).get('preemptions')} preemptions; "
                   f"{p.get('dtype')} activations, max_context {p.get('max_context')}, max_seqs {p.get('max_seqs')}, "
                   f"KV pool {fmt((((oi.get('memory') or {}).get('afterLoad')) or {}).get('kv_cache_bytes'))} "
                   f"({(oi.get('kvSizing') or {}).get('rule')})")
    if "loadSeconds" in pi:
        out.append(f"HF: transformers {pi.get('transformers')}, torch {pi.get('torch')} on {pi.get('device')}; "
                   f"load {pi.get('loadSeconds', 0):.2f} s, serving {pi.get('serveSeconds', 0):.2f} s, "
                   f"{pi.get('generatedTokens')} tokens; torch.cuda.max_memory_allocated "
                   f"{fmt(pi.get('cudaMaxAllocatedBytes'))}, reserved {fmt(pi.get('cudaMaxReservedBytes'))}")
    out += [f"ours ERROR: {e}" for e in oi.get("errors", [])]
    out.append("PSS and RSS are summed over each side's process tree; MemAvailable is machine-wide; "
               "the checkpoint was warm in the page cache for both sides (nothing dropped)")
    return out


def run_info(ours):
    """Our side's info block and, from it, the run's meta (commit, GPU, shape) and workload."""
    info = (ours or {}).get("info") or {}
    return info, info.get("meta") or {}, info.get("workload") or {}


def text(ours, peer, ours_c, peer_c):
    info, meta, w = run_info(ours)
    print(f"==== memory benchmark {meta.get('VT_BENCH_SHAPE', '?')}: {meta.get('VT_BENCH_GPU', '?')}; "
          f"commit {meta.get('VT_BENCH_COMMIT', '?')} ====")
    print(f"{w.get('requests')} concurrent requests x {w.get('prompt')} prompt + {w.get('new')} new tokens, greedy, then "
          f"{w.get('idleMs')} ms idle; {fmt((info.get('model') or {}).get('weight_bytes'))} of weights; sampled every "
          f"{(ours or peer or {}).get('intervalMs')} ms")
    head = f"{'axis':34s} {'phase':8s} {'vtengine':>11s} {'HF':>11s} {'HF/ours':>8s}"
    print(head)
    print("-" * len(head))
    for axis, phase, a, b in rows(ours, peer, ours_c, peer_c):
        print(f"{axis:34s} {phase:8s} {fmt(a):>11s} {fmt(b):>11s} {ratio(a, b):>8s}")
    print()
    for target, verdict, numbers in checks(ours, peer):
        print(f"{verdict:4s}  {target}: {numbers}")
    for n in notes(ours, peer):
        print(f"- {n}")


def markdown(ours, peer, ours_c, peer_c):
    info, meta, w = run_info(ours)
    shape = {"qwen3-8b": "Qwen3-8B", "qwen3-0.6b": "Qwen3-0.6B"}.get(meta.get("VT_BENCH_SHAPE"), meta.get("VT_BENCH_SHAPE", "?"))
    print(f"### {info.get('date', '????-??-??')[:10]} — {meta.get('VT_BENCH_GPU', 'GPU ?')}; commit "
          f"{meta.get('VT_BENCH_COMMIT', '?')}; {shape} shape (memory)")
    print()
    print(f"`scripts/gpu-check.sh prepare --arch sm_90a` here, then on the GPU machine `bash scripts/gpu-memory.sh`: "
          f"{w.get('requests')} concurrent requests × {w.get('prompt')} prompt + {w.get('new')} new tokens (greedy, "
          f"exactly {w.get('new')} each), then {w.get('idleMs')} ms idle; both sides in one run, each under "
          f"bench/memory.py (every {(ours or peer or {}).get('intervalMs')} ms over the process tree); the checkpoint "
          f"warm in the page cache for both.")
    print()
    print("| axis | phase | vtengine | HF transformers | HF / vtengine |")
    print("| --- | --- | --- | --- | --- |")
    for axis, phase, a, b in rows(ours, peer, ours_c, peer_c):
        print(f"| {axis} | {phase} | {fmt(a)} | {fmt(b)} | {ratio(a, b).replace('x', '×')} |")
    print()
    for target, verdict, numbers in checks(ours, peer):
        print(f"- {target}: **{'MET' if verdict == 'PASS' else 'NOT MET' if verdict == 'FAIL' else verdict}** ({numbers})")
    for n in notes(ours, peer):
        print(f"- {n}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", default="")
    ap.add_argument("--peer", default="")
    ap.add_argument("--ours-control", default="")
    ap.add_argument("--peer-control", default="")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    runs = [load(p) for p in (a.ours, a.peer, a.ours_control, a.peer_control)]
    (markdown if a.markdown else text)(*runs)


if __name__ == "__main__":
    main()
