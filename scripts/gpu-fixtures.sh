#!/usr/bin/env bash
# Regenerate the reference fixtures (test/fixtures/*) on the GPU machine, which has torch + transformers.
#
# The computation runs on that machine's CPU in float64 (no GPU needed); it only needs the Python stack there.
# Through the device tool (`run`), from the repo root, e.g.:
#
#   run  command: "bash scripts/gpu-fixtures.sh"   timeout_s: 300
#
# It writes $OUT/fixtures.tar.gz and $OUT/make_fixtures.log, which come back to this machine under the run's
# files_at folder. Unpack here (replacing the old fixtures):
#
#   rm -rf test/fixtures/*/ && tar -xzf <files_at>/fixtures.tar.gz -C test/fixtures && chmod 644 test/fixtures/*/*
#
# Options (environment):
#   CALIBRATE=1     also print margin statistics for a grid of init stds ($OUT/calibrate.log)
#   DUMP_SOURCES=1  also save transformers' rope/llama/qwen3 sources read there ($OUT/transformers-sources.tar.gz)
#   ONLY=name       make only that fixture
# Without $OUT (run by hand anywhere with torch + transformers) it writes into ./fixtures-out/.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/fixtures-out}"
mkdir -p "$OUT"
WORK=/tmp/fixtures
rm -rf "$WORK"
python3 -c 'import sys, torch, transformers, safetensors; print(sys.version.split()[0], torch.__version__, transformers.__version__, safetensors.__version__)'

if [ -n "${DUMP_SOURCES:-}" ]; then
  python3 - "$OUT" <<'EOF'
import inspect, os, sys, tarfile, io
import transformers, transformers.modeling_rope_utils as r
import transformers.models.llama.modeling_llama as ml
import transformers.models.llama.configuration_llama as cl
import transformers.models.qwen3.modeling_qwen3 as mq
import transformers.models.qwen3.configuration_qwen3 as cq
import transformers.models.qwen2.modeling_qwen2 as mq2
import transformers.configuration_utils as cu
mods = [r, ml, cl, mq, cq, mq2, cu]
with tarfile.open(os.path.join(sys.argv[1], "transformers-sources.tar.gz"), "w:gz") as t:
    for m in mods:
        data = inspect.getsource(m).encode()
        info = tarfile.TarInfo(m.__name__ + ".py"); info.size = len(data)
        t.addfile(info, io.BytesIO(data))
print("sources saved")
EOF
fi

if [ -n "${CALIBRATE:-}" ]; then
  python3 scripts/make_fixtures.py --calibrate 2>&1 | tee "$OUT/calibrate.log"
fi

args=(--out "$WORK")
[ -n "${ONLY:-}" ] && args+=(--only "$ONLY")
python3 scripts/make_fixtures.py "${args[@]}" 2>&1 | tee "$OUT/make_fixtures.log"
rc=${PIPESTATUS[0]}
if [ -d "$WORK" ]; then
  tar -C "$WORK" --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01' -czf "$OUT/fixtures.tar.gz" .
  du -ab "$WORK" | sort -k2
fi
echo "make_fixtures.py exit status $rc"
exit "$rc"
