#!/usr/bin/env python3
"""Reference token ids and chat-template renderings for test/fixtures/tokenizers/<name>/reference.json.

For every tokenizer folder (tokenizer.json + tokenizer_config.json) under test/fixtures/tokenizers/ and every string
of corpus.json it records what the HF `tokenizers` library (Rust) and transformers' AutoTokenizer compute:

  ids             tokenizers: encode(text, add_special_tokens=False).ids
  ids_special     tokenizers: encode(text, add_special_tokens=True).ids
  ids_split       tokenizers with encode_special_tokens=True (special-token strings split as plain text), no added
                  specials: transformers' split_special_tokens=True
  hf_ids          transformers: tokenizer(text, add_special_tokens=False).input_ids
  hf_ids_special  transformers: tokenizer(text, add_special_tokens=True).input_ids
  decoded         tokenizers: decode(ids, skip_special_tokens=False)
  decoded_skip    tokenizers: decode(ids_special, skip_special_tokens=True)
  hf_decoded      transformers: decode(ids, skip_special_tokens=False) (applies clean_up_tokenization_spaces if
                  the config asks for it)

and, for every case of chat_cases.json, transformers' apply_chat_template(messages, tokenize=False, **options)
(`rendered`), the ids transformers feeds the model for it (`ids`: tokenizer(rendered, add_special_tokens=False),
which is what apply_chat_template(tokenize=True) does) and the ids `tokenizers` computes for it (`ids_tokenizers`:
encode(rendered, add_special_tokens=False)), or the error it raised (`error`).

`transformers_rebuilt` lists the parts of the pipeline (normalizer, pre_tokenizer, post_processor, decoder) where
transformers' backend tokenizer differs from tokenizer.json: transformers 5 rebuilds them from the tokenizer class
named in tokenizer_config.json for some classes (LlamaTokenizer from legacy/add_prefix_space; GPT2Tokenizer with
GPT-2's ByteLevel regex instead of the file's Split), and then its ids differ from the file's on some strings.

Needs tokenizers + transformers (the GPU machine has them; no network needed: everything is read from the folders).

    python3 scripts/make_tokenizer_refs.py --dir test/fixtures/tokenizers [--out DIR]
"""

import argparse
import json
import os
import sys
import time
import traceback

import tokenizers
import transformers
from tokenizers import Tokenizer
from transformers import AutoTokenizer


def log(*a):
    print(*a, flush=True)


def hf_encode(tok, text, add_special_tokens):
    return list(tok(text, add_special_tokens=add_special_tokens)["input_ids"])


def chat_ids(tok, rendered):
    return list(tok(rendered, add_special_tokens=False)["input_ids"])


def rebuilt_parts(rust, hf):
    """The pipeline parts where transformers' backend tokenizer differs from tokenizer.json (None: no backend)."""
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        return None
    file_json, hf_json = json.loads(rust.to_str()), json.loads(backend.to_str())
    return [k for k in ("normalizer", "pre_tokenizer", "post_processor", "decoder") if file_json.get(k) != hf_json.get(k)]


def speed(rust, texts, reps):
    """Single-thread encode throughput of the Rust library over `texts`, `reps` times (MB/s of UTF-8)."""
    total = sum(len(t.encode("utf-8")) for t in texts) * reps
    t0 = time.perf_counter()
    for _ in range(reps):
        for t in texts:
            rust.encode(t, add_special_tokens=False)
    dt = time.perf_counter() - t0
    return {"bytes": total, "seconds": dt, "mb_per_s": total / dt / 1e6}


def one(name, d, corpus, cases, out_dir):
    t0 = time.time()
    rust = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    split = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    split.encode_special_tokens = True
    hf = AutoTokenizer.from_pretrained(d)
    log(f"== {name}: transformers class {type(hf).__name__}, vocab {rust.get_vocab_size(with_added_tokens=True)}")
    rebuilt = rebuilt_parts(rust, hf)
    log(f"  parts of tokenizer.json transformers rebuilt: {rebuilt}")
    ref = {
        "tokenizer": name,
        "tokenizers": tokenizers.__version__,
        "transformers": transformers.__version__,
        "generated_by": "scripts/make_tokenizer_refs.py",
        "transformers_class": type(hf).__name__,
        "transformers_rebuilt": rebuilt,
        "special_tokens": {k: (v if isinstance(v, (str, list)) else str(v))
                           for k, v in (getattr(hf, "special_tokens_map", None) or {}).items()},
        "eos_token_id": getattr(hf, "eos_token_id", None),
        "bos_token_id": getattr(hf, "bos_token_id", None),
        "cases": [],
        "chat": [],
    }
    mism = 0
    for text in corpus:
        ids = rust.encode(text, add_special_tokens=False).ids
        ids_special = rust.encode(text, add_special_tokens=True).ids
        ids_split = split.encode(text, add_special_tokens=False).ids
        case = {
            "text": text,
            "ids": ids,
            "ids_special": ids_special,
            "ids_split": ids_split,
            "hf_ids": hf_encode(hf, text, False),
            "hf_ids_special": hf_encode(hf, text, True),
            "decoded": rust.decode(ids, skip_special_tokens=False),
            "decoded_skip": rust.decode(ids_special, skip_special_tokens=True),
            "hf_decoded": hf.decode(ids, skip_special_tokens=False),
        }
        if case["hf_ids"] != ids or case["hf_ids_special"] != ids_special:
            mism += 1
            log(f"  transformers differs from tokenizers on {text[:40]!r}: {case['hf_ids'][:12]} vs {ids[:12]},"
                f" special {case['hf_ids_special'][:12]} vs {ids_special[:12]}")
        ref["cases"].append(case)
    log(f"  {len(corpus)} strings, {mism} where transformers and tokenizers differ")
    for c in cases:
        entry = {"name": c["name"]}
        try:
            rendered = hf.apply_chat_template(c["messages"], tokenize=False, **c["options"])
            entry["rendered"] = rendered
            entry["ids"] = chat_ids(hf, rendered)
            entry["ids_tokenizers"] = rust.encode(rendered, add_special_tokens=False).ids
            if entry["ids_tokenizers"] != entry["ids"]:
                log(f"  chat {c['name']}: transformers' ids differ from tokenizers' ids of the rendering")
            try:
                direct = hf.apply_chat_template(c["messages"], tokenize=True, return_dict=False, **c["options"])
                if hasattr(direct, "tolist"):
                    direct = direct.tolist()
                if direct and isinstance(direct[0], list):
                    direct = direct[0]
                entry["ids_tokenize_true"] = list(direct)
                if list(direct) != entry["ids"]:
                    log(f"  chat {c['name']}: apply_chat_template(tokenize=True) differs from tokenizing the string")
            except Exception as e:  # informational only
                entry["ids_tokenize_true_error"] = f"{type(e).__name__}: {e}"
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
        log(f"  chat {c['name']}: {('error ' + entry['error']) if 'error' in entry else repr(entry['rendered'][:80])}")
        ref["chat"].append(entry)
    long_texts = [t for t in corpus if t] * 1
    ref["speed_rust_single_thread"] = speed(rust, long_texts, 50)
    log(f"  rust encode speed {ref['speed_rust_single_thread']}")
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    with open(os.path.join(out_dir, name, "reference.json"), "w") as f:
        json.dump(ref, f, ensure_ascii=False, indent=1)
        f.write("\n")
    log(f"  done in {time.time() - t0:.1f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="test/fixtures/tokenizers")
    ap.add_argument("--out", default=None, help="where to write <name>/reference.json (default: --dir)")
    args = ap.parse_args()
    out = args.out or args.dir
    log(f"python {sys.version.split()[0]} tokenizers {tokenizers.__version__} transformers {transformers.__version__}")
    with open(os.path.join(args.dir, "corpus.json")) as f:
        corpus = json.load(f)
    with open(os.path.join(args.dir, "chat_cases.json")) as f:
        cases = json.load(f)
    failed = []
    for name in sorted(os.listdir(args.dir)):
        d = os.path.join(args.dir, name)
        if not os.path.isfile(os.path.join(d, "tokenizer.json")):
            continue
        try:
            one(name, d, corpus, cases, out)
        except Exception:
            traceback.print_exc()
            failed.append(name)
    if failed:
        log(f"FAILED: {failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
