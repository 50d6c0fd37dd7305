#!/usr/bin/env bash
# Train the default model (models/default/) and its test fixtures (test/fixtures/default-model/) on the GPU machine.
#
# Through the device tool (`run`), from the repo root:
#
#   run  command: "bash scripts/gpu-train.sh"            timeout_s: 300    # the shipped run (~90 s on the machine)
#   run  command: "SMOKE=1 bash scripts/gpu-train.sh"    timeout_s: 300    # 60 s of training, same pipeline
#
# It writes $OUT/default-model.tar.gz.part-* (the repo-relative files, split under the 16 MiB transfer limit),
# $OUT/train.log and $OUT/stats.json. Unpack here, from the repo root (replacing the old model and fixtures):
#
#   rm -rf models/default test/fixtures/default-model
#   cat <files_at>/default-model.tar.gz.part-* | tar -xz && chmod 644 models/default/* test/fixtures/default-model/*
#
# Extra arguments go to scripts/train_default_model.py (e.g. `bash scripts/gpu-train.sh --steps 1500`).
# Without $OUT (by hand anywhere with a GPU, torch, transformers, tokenizers) it writes into ./train-out/.
set -uo pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
OUT="${OUT:-$PWD/train-out}"
mkdir -p "$OUT"
WORK=/tmp/default-model
rm -rf "$WORK"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

args=(--out "$WORK")
if [ -n "${SMOKE:-}" ]; then
  args+=(--max-seconds 60 --steps 100000 --eval-every 25)
fi
python3 scripts/train_default_model.py "${args[@]}" "$@" 2>&1 | tee "$OUT/train.log"
rc=${PIPESTATUS[0]}
if [ -d "$WORK/models" ]; then
  cp "$WORK/stats.json" "$OUT/" 2>/dev/null
  tar -C "$WORK" --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01' \
    -czf - models test | split -b 15m -d -a 1 - "$OUT/default-model.tar.gz.part-"
  du -ab "$WORK/models" "$WORK/test" | sort -k2
  ls -l "$OUT"
fi
echo "train_default_model.py exit status $rc"
exit "$rc"
