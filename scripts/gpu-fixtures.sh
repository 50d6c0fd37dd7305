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
#   DUMP_SOURCES=1  also save transformers' rope/llama/qwen3/qwen3_5 sources read there, with the hub-kernel,
#                   cache and checkpoint-conversion modules the Qwen3.5 reference goes through
#                   ($OUT/transformers-sources.tar.gz; a module this transformers lacks is listed and skipped)
#   ONLY=names      make only those fixtures (one name, or several separated by spaces or commas), e.g.
#                   ONLY=qwen3_5-f32  or  ONLY="qwen3_5-f32 qwen3_5-bf16-vl"
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
import importlib, inspect, os, sys, tarfile, io
import transformers
names = [
    "transformers.modeling_rope_utils",
    "transformers.models.llama.modeling_llama",
    "transformers.models.llama.configuration_llama",
    "transformers.models.qwen3.modeling_qwen3",
    "transformers.models.qwen3.configuration_qwen3",
    "transformers.models.qwen2.modeling_qwen2",
    "transformers.configuration_utils",
    # Qwen3.5: the model, its configs, and what decides its kernels, its hybrid cache and its saved tensor names
    "transformers.models.qwen3_5.modeling_qwen3_5",
    "transformers.models.qwen3_5.configuration_qwen3_5",
    "transformers.integrations.hub_kernels",
    "transformers.cache_utils",
    "transformers.conversion_mapping",
    "transformers.core_model_loading",
]
saved, missing = [], []
with tarfile.open(os.path.join(sys.argv[1], "transformers-sources.tar.gz"), "w:gz") as t:
    for name in names:
        try:
            m = importlib.import_module(name)
            data = inspect.getsource(m).encode()
        except Exception as e:  # not in this transformers version
            missing.append(f"{name} ({type(e).__name__}: {e})")
            continue
        info = tarfile.TarInfo(m.__name__ + ".py"); info.size = len(data)
        t.addfile(info, io.BytesIO(data))
        saved.append(name)
print(f"sources saved (transformers {transformers.__version__}): {len(saved)} modules")
for x in missing:
    print(f"  not saved: {x}")
EOF
fi

if [ -n "${CALIBRATE:-}" ]; then
  python3 scripts/make_fixtures.py --calibrate 2>&1 | tee "$OUT/calibrate.log"
fi

args=(--out "$WORK")
only="${ONLY:-}"
for name in ${only//,/ }; do args+=(--only "$name"); done
python3 scripts/make_fixtures.py "${args[@]}" 2>&1 | tee "$OUT/make_fixtures.log"
rc=${PIPESTATUS[0]}
if [ -d "$WORK" ]; then
  tar -C "$WORK" --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01' -czf "$OUT/fixtures.tar.gz" .
  du -ab "$WORK" | sort -k2
fi
echo "make_fixtures.py exit status $rc"
exit "$rc"
