# Sourced by the GPU scripts (gpu-bench, gpu-decode-ab, gpu-memory, gpu-profile, gpu-prefill-profile, ...): the
# random checkpoint they measure, the check of its shape argument, and where Nsight Compute is.
#
#   require_shape SHAPE USAGE                  returns when SHAPE is one random_checkpoint.py makes, else prints
#                                              "usage: USAGE" and exits 2
#   bench_checkpoint SHAPE DIR LOG TIMEOUT_S   makes DIR with scripts/random_checkpoint.py unless a finished one
#                                              is there (its marker file is written last, so a folder that has it
#                                              is complete), then syncs, so the writeback does not land in a
#                                              measured run (the pages stay in the page cache). Prints one line;
#                                              returns non-zero (with the log's tail) when it fails.
#   find_ncu                                   prints the path of ncu (PATH, /opt/nvidia/nsight-compute, the CUDA
#                                              toolkit's bin), or nothing
require_shape() {
  case "${1:-}" in
    qwen3-0.6b | qwen3-8b) ;;
    *) echo "usage: $2"; exit 2 ;;
  esac
}

find_ncu() {
  command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1
}

bench_checkpoint() {
  local shape=$1 dir=$2 log=$3 limit=$4
  if grep -qs "\"shape\": \"$shape\"" "$dir/random_checkpoint.json"; then
    echo "checkpoint: reusing $dir"
    return 0
  fi
  timeout "$limit" python3 scripts/random_checkpoint.py --shape "$shape" --out "$dir" > "$log" 2>&1
  local rc=$?
  if [ "$rc" != 0 ]; then
    tail -20 "$log"
    echo "checkpoint FAILED (exit $rc)"
    return 1
  fi
  tail -1 "$log"
  timeout 60 sync
}
