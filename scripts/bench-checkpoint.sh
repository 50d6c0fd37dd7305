# Sourced by scripts/gpu-bench.sh and scripts/gpu-memory.sh: the random checkpoint both benchmarks measure.
#
#   bench_checkpoint SHAPE DIR LOG TIMEOUT_S   makes DIR with scripts/random_checkpoint.py unless a finished one
#                                              is there (its marker file is written last, so a folder that has it
#                                              is complete), then syncs, so the writeback does not land in a
#                                              measured run (the pages stay in the page cache). Prints one line;
#                                              returns non-zero (with the log's tail) when it fails.
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
