#!/usr/bin/env bash
# Tokenizer references (test/fixtures/tokenizers/*/reference.json) and the qwen3-tok fixture, on the GPU machine
# (it has tokenizers + transformers + torch; everything runs on its CPU). Through the device tool, from the repo root:
#
#   run  command: "bash scripts/gpu-tokenizer-refs.sh"  timeout_s: 300
#
# It writes $OUT/tokenizer-refs.tar.gz (tokenizers/<name>/reference.json for every folder of test/fixtures/tokenizers
# with a tokenizer.json — qwen3, cl100k, mistral — and qwen3-tok/) and the logs. Unpack here, then turn qwen3-tok's
# copies of the Qwen3 tokenizer files back into links (they are byte-identical):
#
#   tar -xzf <files_at>/tokenizer-refs.tar.gz -C test/fixtures && cd test/fixtures/qwen3-tok && chmod 644 * &&
#   for f in tokenizer.json tokenizer_config.json; do cmp $f ../tokenizers/qwen3/$f && ln -sf ../tokenizers/qwen3/$f $f; done
#
# Made on 2026-11-30 with tokenizers 0.23.2, transformers 5.17.0, torch 2.11.0, Python 3.12.3: 36 s of wall time.
# On 2026-12-02 cl100k/ replaced llama3/ (licence) and make_tokenizer_refs.py gained `ids_tokenizers` and
# `transformers_rebuilt`: cl100k/reference.json was made on the development VM with the same library versions
# (make_tokenizer_refs.py alone needs no torch); the next run here rewrites qwen3's and mistral's references with the
# same ids (the speed figures and the two new fields aside).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/tokenizer-refs-out}"
mkdir -p "$OUT"
WORK=/tmp/tokenizer-refs
rm -rf "$WORK" && mkdir -p "$WORK/tokenizers" "$WORK/fixtures"
python3 scripts/make_tokenizer_refs.py --dir test/fixtures/tokenizers --out "$WORK/tokenizers" 2>&1 | tee "$OUT/make_tokenizer_refs.log"
rc1=${PIPESTATUS[0]}
python3 scripts/make_fixtures.py --out "$WORK/fixtures" --only qwen3-tok --tokenizers test/fixtures/tokenizers 2>&1 | tee "$OUT/make_fixtures.log"
rc2=${PIPESTATUS[0]}
mv "$WORK/fixtures/qwen3-tok" "$WORK/qwen3-tok" 2>/dev/null
rmdir "$WORK/fixtures" 2>/dev/null
tar -C "$WORK" --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01' -czf "$OUT/tokenizer-refs.tar.gz" .
du -ab "$WORK" | sort -k2
echo "references made: $(cd "$WORK/tokenizers" && ls -d */ | tr -d / | tr '\n' ' ')"
echo "make_tokenizer_refs.py exit $rc1, make_fixtures.py exit $rc2"
[ "$rc1" = 0 ] && [ "$rc2" = 0 ]
