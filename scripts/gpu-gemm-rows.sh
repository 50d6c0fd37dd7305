#!/usr/bin/env bash
# Re-measure some of the GEMM table's rows and time them end to end, on the GPU machine, in one call: bench_cuda_gemm
# (chained) at the given row counts picks each product's fastest tile, those picks replace the committed table's
# entries for the same row counts (the others kept), and scripts/gpu-gemm-ab.sh runs cuBLASLt, ours (the committed
# table) and ours-alt (the re-picked one) in turns on SHAPE's workloads that use those rows.
#
#   scripts/gpu-gemm-rows.sh qwen3-0.6b|qwen3-8b 512,2048 [--decode B,B] [--prefill P,P]   there, after
#                                                       `scripts/gpu-check.sh prepare` here (carry .gpu-out)
# The decode batches and prompt lengths default to the row counts (a prefill of M tokens runs M-row products; a
# decode batch of B, B rows). Logs, the bench JSON and alt-shapes.txt in $OUT when set, else .gpu-out/rows/SHAPE; the
# entries to paste into gemm_table.cpp are alt-shapes.txt's lines for those row counts.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shape=${1:-} rows=${2:-}
[ -n "$shape" ] && [ -n "$rows" ] || { echo "usage: scripts/gpu-gemm-rows.sh SHAPE M,M [--decode B,B] [--prefill P,P]"; exit 2; }
shift 2
decode="" prefill=""
while [ $# -gt 0 ]; do
  case "$1" in
    --decode) decode=$2; shift 2 ;;
    --prefill) prefill=$2; shift 2 ;;
    *) echo "gpu-gemm-rows: unknown option $1"; exit 2 ;;
  esac
done
out=${OUT:-$root/.gpu-out/rows/$shape}
mkdir -p "$out"
# By default: the row counts up to 256 as decode batches, those from 512 as prompt lengths.
if [ -z "$decode$prefill" ]; then
  for m in ${rows//,/ }; do
    if [ "$m" -le 256 ]; then decode+="${decode:+,}$m"; else prefill+="${prefill:+,}$m"; fi
  done
fi
.gpu-out/bench_cuda_gemm --m "$rows" --reps 10 --json "$out/gemm.json" > "$out/gemm.log" 2>&1 || { tail -5 "$out/gemm.log"; exit 1; }
grep -E '^(0.6B|8B)' "$out/gemm.log" | cut -c1-150
pattern="^\s+\{(${rows//,/|}),"
{ grep -E '^\s+\{[0-9]+, [0-9]+, [0-9]+, [0-9], "' cuda/src/backend/cuda/gemm_table.cpp | grep -vE "$pattern"
  grep -E "$pattern" "$out/gemm.log"; } > "$out/alt-shapes.txt"
echo "re-picked entries ($(grep -cE "$pattern" "$out/alt-shapes.txt")):"
grep -E "$pattern" "$out/alt-shapes.txt"
VT_AB_ALT_SHAPES="$out/alt-shapes.txt" VT_AB_ARMS="cublaslt ours ours-alt" VT_AB_BATCHES=${decode:-1} \
  VT_AB_PREFILL=${prefill:-512} VT_AB_ROUNDS=${VT_AB_ROUNDS:-2} OUT="$out/ab" scripts/gpu-gemm-ab.sh "$shape" | tail -12
