#!/usr/bin/env bash
# A/B timing of the decode step on the GPU machine: bench_cuda_engine's decode workload (128-token prompts, 256
# new tokens, greedy; median of --runs) under environment variants, our engine only, one table at the end.
# For iterating on kernels; a bench/RESULTS.md row needs scripts/gpu-bench.sh (the peer in the same run).
#
#   scripts/gpu-decode-ab.sh qwen3-0.6b|qwen3-8b [BATCHES] [VARIANT ...]   there, after `gpu-check.sh prepare` here
#
# BATCHES: comma list (default 1,8). VT_AB_ONLY=decode,prefill adds the prefill workload (VT_AB_PREFILL: its
# prompt lengths, default 2048) as columns pN (prefill tok/s); VT_AB_RUNS: runs per median (default 3). VARIANT: "label" or "label:VAR=value,VAR=value" (e.g. "no-norm:VT_CUDA_SKIP=norm"
# or "no-small:VT_CUDA_SKIP=norm+rope+attn": what those launches cost in the step; "BIN=path" runs another build of
# bench_cuda_engine, e.g. "base:BIN=.gpu-out/base/bench_cuda_engine" to time a kernel change against the commit
# before it in the same call; default: the product, an experiment (256-key attention splits), graphs captured at
# first use, graphs off and graph dedup on. (The null controls of settled A/B tests went with their switches: a
# kernel change is timed against the build before it, with BIN=.) JSON per variant in $OUT (else .gpu-out/ab/SHAPE).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shape=${1:-}
. scripts/bench-checkpoint.sh
require_shape "$shape" "scripts/gpu-decode-ab.sh qwen3-0.6b|qwen3-8b [BATCHES] [VARIANT ...]"
batches=${2:-1,8}
shift $(($# >= 2 ? 2 : 1))
variants=("$@")
[ ${#variants[@]} = 0 ] && variants=(product "split256:VT_CUDA_SPLIT_KEYS=256" "graphs-lazy:--capture=first-use" "graphs-off:--graphs=off" "dedup:--dedup=on")
out=${OUT:-$root/.gpu-out/ab/$shape}
mkdir -p "$out"
ckpt=${VT_BENCH_DIR:-/tmp/vt-bench}/$shape-bf16
bin=$root/.gpu-out/bench_cuda_engine
bench_checkpoint "$shape" "$ckpt" "$out/checkpoint.log" 150 || exit 1
# The GPU's clocks, power and temperature before the variants (the same build has run ~1.3% apart at batch 1 on two
# instances of the machine: bench/RESULTS.md, session 10).
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv 2>/dev/null \
  | sed 's/^/clocks: /'
for v in "${variants[@]}"; do
  label=${v%%:*}
  envs=() args=() vbin=$bin
  if [ "$v" != "$label" ]; then
    IFS=, read -ra kv <<< "${v#*:}"
    for e in "${kv[@]}"; do
      case "$e" in --*=*) args+=("${e%%=*}" "${e#*=}") ;; BIN=*) vbin=${e#BIN=} ;; *) envs+=("$e") ;; esac
    done
  fi
  env "${envs[@]}" timeout 150 "$vbin" --model "$ckpt" --only "${VT_AB_ONLY:-decode}" --prefill "${VT_AB_PREFILL:-2048}" \
    --batches "$batches" --runs "${VT_AB_RUNS:-3}" \
    "${args[@]}" --json "$out/$label.json" > "$out/$label.log" 2>&1
  echo "$label: exit $?"
done
python3 - "$out" "${variants[@]}" <<'PY'
import json, sys
out, labels = sys.argv[1], [v.split(":")[0] for v in sys.argv[2:]]
rows, graphs = {}, {}
for l in labels:
    try:
        d = json.load(open(f"{out}/{l}.json"))
        rows[l] = {b: v["tok_s"]["median"] for b, v in d.get("decode", {}).items()}
        # (VT_AB_ONLY=decode,prefill: prefill tok/s as columns "pP")
        rows[l].update({"p" + p: float(p) / (v["ttft_ms"]["median"] / 1000.0) for p, v in d.get("prefill", {}).items()})
        g = d.get("memory", {})
        graphs[l] = f"{g.get('graphs_count', '-')} graphs, {g.get('graphs_bytes', 0) / 2**20:.1f} MiB"
    except (OSError, ValueError, KeyError):
        rows[l] = {}
bs = sorted({b for r in rows.values() for b in r}, key=lambda b: (b[0] == "p", int(b.lstrip("p"))))
base = rows.get(labels[0], {})
print(f"{'variant':24s}" + "".join(f"{('' if b[0] == 'p' else 'b') + b + ' tok/s':>14s}{'vs ' + labels[0]:>12s}" for b in bs))
for l in labels:
    r = rows[l]
    print(f"{l:24s}" + "".join(f"{r.get(b, 0):14.1f}{(r.get(b, 0) / base[b] if base.get(b) else 0):12.3f}" for b in bs)
          + f"  {graphs.get(l, '')}")
PY
