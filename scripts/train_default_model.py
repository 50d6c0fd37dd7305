#!/usr/bin/env python3
"""Train the default model that ships in models/default/ (issue 6): a byte-level BPE tokenizer and a small
Qwen3ForCausalLM, both trained on the Python standard library's own sources (PSF licence), in one GPU run.

It writes, under --out (laid out like the repository, so the result unpacks over the checkout):
  models/default/                   config.json, generation_config.json, model-0000N-of-0000M.safetensors (bf16,
                                    shards of at most 15 MB) + index, tokenizer.json, tokenizer_config.json,
                                    training_log.csv, training_files.txt, README.md, LICENSE-DATA.md, LICENSE-PSF.txt
  test/fixtures/default-model/      heldout.py (a held-out stdlib file, not trained on), transformers-reference.json
                                    (float64 transformers figures the engine's test compares against), README.md

Needs torch, transformers, tokenizers, safetensors and a GPU (the device machine has them); run it through
scripts/gpu-train.sh. The reference part runs on the CPU in float64 from the saved bf16 files.

    python3 scripts/train_default_model.py --out /tmp/train-out                 # the shipped run
    python3 scripts/train_default_model.py --out /tmp/smoke --max-seconds 45    # a short smoke run

Training is seeded, but GPU kernels and the time cap make reruns close, not bit-identical.
"""

import argparse
import copy
import csv
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import time

import torch
import torch.nn.functional as F

import tokenizers
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

EOT = "<|endoftext|>"
# Held out entirely (not in the tokenizer's or the model's training data). The first is the NLL fixture.
HELDOUT = ["graphlib.py", "sched.py", "fnmatch.py", "colorsys.py", "shlex.py", "queue.py"]
# Test suites, and anything that is not the standard library proper.
EXCLUDE_DIRS = {"test", "tests", "idle_test", "__pycache__", "site-packages", "dist-packages", "_bundled"}
PROMPT = "def fibonacci(n):"
README_PROMPTS = ["def fibonacci(n):", "class Stack:\n", "import os\n\n\ndef main():\n"]
GREEDY_STEPS = 48
ROUNDTRIP_STRINGS = [
    "def f(x):\n\treturn x\t# tab\n",
    "if a:\n        b = 1    \n\n\n    c  =  2\r\n",
    "s = 'naïve café — ünïcödé ✓ 日本語 🐍'\n",
    "   leading spaces and trailing   ",
    "\n\n\t\t  \t\n",
    "x = 1_000_000 + 0x1F + 3.14e-10j\n",
    "",
]
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ---------------------------------------------------------------------------------------------------- corpus

def collect_corpus():
    stdlib = sysconfig.get_paths()["stdlib"]
    train, held, skipped, test_bytes = [], {}, [], 0
    for root, dirs, files in os.walk(stdlib):
        rel_root = os.path.relpath(root, stdlib)
        if any(p in EXCLUDE_DIRS for p in rel_root.split(os.sep)):
            dirs[:] = []
            if "test" in rel_root.split(os.sep) or "tests" in rel_root.split(os.sep):
                test_bytes += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".py"))
            continue
        dirs.sort()
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(root, f)
            rel = os.path.normpath(os.path.join(rel_root, f))
            try:
                with open(path, "rb") as fh:
                    text = fh.read().decode("utf-8")
            except UnicodeDecodeError:
                skipped.append(rel)
                continue
            if rel in HELDOUT:
                held[rel] = text
            elif text.strip():
                train.append((rel, text))
    missing = [h for h in HELDOUT if h not in held]
    if missing:
        raise SystemExit(f"held-out files not found in {stdlib}: {missing}")
    return stdlib, train, [(h, held[h]) for h in HELDOUT], skipped, test_bytes


def find_psf_license(stdlib):
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    for p in [os.path.join(stdlib, "LICENSE.txt"), os.path.join(sys.base_prefix, "LICENSE.txt"),
              f"/usr/share/doc/python{ver}/copyright", f"/usr/share/doc/libpython{ver}-stdlib/copyright",
              f"/usr/share/doc/libpython{ver}-minimal/copyright"]:
        if os.path.isfile(p):
            return p
    return None


# ---------------------------------------------------------------------------------------------------- tokenizer

def train_tokenizer(texts, vocab_size):
    # GPT-2 style byte-level BPE: no normalizer, GPT-2 split regex, no prefix space, ByteLevel decoder. Every byte
    # is in the initial alphabet, so any text encodes and decode(encode(s)) == s exactly.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    assert tok.token_to_id(EOT) == 0, tok.token_to_id(EOT)
    assert tok.get_vocab_size() == vocab_size, tok.get_vocab_size()
    return tok


def save_tokenizer(tok, d, max_len):
    tok.save(os.path.join(d, "tokenizer.json"))
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": EOT, "eos_token": EOT, "pad_token": EOT,
        "add_bos_token": False, "add_eos_token": False, "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_len,
        "added_tokens_decoder": {"0": {"content": EOT, "lstrip": False, "normalized": False, "rstrip": False,
                                       "single_word": False, "special": True}},
    }
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")


def check_roundtrip(tok, d, texts):
    """decode(encode(s)) == s with the raw tokenizer and with transformers' AutoTokenizer, which must agree."""
    hf = AutoTokenizer.from_pretrained(d)
    assert hf.eos_token_id == 0 and hf.bos_token_id == 0 and hf.pad_token_id == 0, (hf.bos_token_id, hf.eos_token_id)
    assert hf.model_max_length == json.load(open(os.path.join(d, "tokenizer_config.json")))["model_max_length"]
    bad = 0
    for name, s in texts:
        ids = tok.encode(s, add_special_tokens=False).ids
        hids = hf.encode(s, add_special_tokens=False)
        back = tok.decode(ids, skip_special_tokens=False)
        hback = hf.decode(hids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if ids != hids or back != s or hback != s:
            bad += 1
            log(f"  ROUND-TRIP FAIL {name!r}: ids equal {ids == hids}, raw {back == s}, transformers {hback == s}")
    with_special = hf.encode("x = 1", add_special_tokens=True)
    log(f"  round-trip: {len(texts) - bad}/{len(texts)} exact; encode(add_special_tokens=True) of 'x = 1' -> "
        f"{with_special} (tokenizer class {type(hf).__name__})")
    if bad:
        raise SystemExit("tokenizer does not round-trip")
    return type(hf).__name__


# ---------------------------------------------------------------------------------------------------- model

def make_config(a, vocab):
    kw = dict(vocab_size=vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
              num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
              head_dim=a.head_dim, hidden_act="silu", max_position_embeddings=a.seq, initializer_range=0.02,
              rms_norm_eps=1e-6, use_cache=True, tie_word_embeddings=True, attention_bias=False,
              attention_dropout=0.0, use_sliding_window=False, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    rp = {"rope_type": "default", "rope_theta": a.rope_theta}
    cls = AutoConfig.for_model("qwen3").__class__
    try:
        cfg = cls(**kw, rope_parameters=copy.deepcopy(rp))
    except TypeError:
        cfg = cls(**kw, rope_theta=a.rope_theta)
    got = getattr(cfg, "rope_parameters", None) or {"rope_theta": getattr(cfg, "rope_theta", None)}
    assert float(got["rope_theta"]) == a.rope_theta, got
    cfg.architectures = ["Qwen3ForCausalLM"]
    return cfg


def lr_at(p, a):
    if p < a.warmup:
        return a.lr * p / a.warmup
    q = min(1.0, (p - a.warmup) / (1 - a.warmup))
    return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * q)))


@torch.no_grad()
def mean_loss(model, seqs, T, batch):
    """Token-weighted mean next-token loss over a list of 1-D id tensors (on the GPU), windows of T tokens."""
    model.eval()
    windows = []
    for s in seqs:
        for i in range(0, max(1, len(s) - 1), T):
            w = s[i:i + T + 1]
            if len(w) >= 2:
                windows.append(w)
    tot, n = 0.0, 0
    for i in range(0, len(windows), batch):
        for w in windows[i:i + batch]:  # ragged: one at a time is fine for a few dozen windows
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=w[None, :-1], use_cache=False).logits
            loss = F.cross_entropy(logits[0].float(), w[1:], reduction="sum")
            tot += loss.item()
            n += len(w) - 1
    model.train()
    return tot / n


def train(a, cfg, train_ids, val_seqs, csv_path):
    dev = "cuda"
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params:,} parameters ({type(model).__name__}), tied embeddings "
        f"{model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()}")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = torch.compile(model) if a.compile else model
    data = train_ids.to(dev)
    N, T, B = len(data), a.seq, a.batch
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    ar = torch.arange(T + 1, device=dev)
    # a fixed sample of training windows, for a train-loss figure measured the same way as the held-out one
    fixed = torch.randint(0, N - T - 1, (32,), generator=torch.Generator().manual_seed(1)).tolist()
    train_probe = [data[o:o + T + 1] for o in fixed]

    rows, best = [], (float("inf"), None, -1)
    f = open(csv_path, "w", newline="")
    w = csv.writer(f)
    w.writerow(["step", "tokens", "epochs", "lr", "train_loss", "heldout_loss", "elapsed_s"])
    step, run_loss, run_n, t_start = 0, 0.0, 0, time.time()
    model.train()
    while True:
        elapsed = time.time() - t_start
        p = max(step / a.steps, elapsed / a.max_seconds)
        done = p >= 1.0
        if step % a.eval_every == 0 or done:
            vl = mean_loss(model, val_seqs, T, 16)
            tl = run_loss / run_n if run_n else float("nan")
            toks = step * B * T
            row = [step, toks, round(toks / N, 3), f"{lr_at(min(p, 1.0), a):.3e}", f"{tl:.4f}", f"{vl:.4f}",
                   f"{time.time() - t_start:.1f}"]
            w.writerow(row)
            f.flush()
            rows.append(row)
            log(f"step {step:5d}  epochs {toks / N:6.2f}  lr {lr_at(min(p, 1.0), a):.2e}  train {tl:.4f}  "
                f"heldout {vl:.4f}  {toks / max(elapsed, 1e-9) / 1e6:.2f} Mtok/s")
            run_loss, run_n = 0.0, 0
            if vl < best[0]:
                best = (vl, {k: v.detach().clone() for k, v in model.state_dict().items()}, step)
        if done:
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(p, a)
        offs = torch.randint(0, N - T - 1, (B,), device=dev, generator=gen)
        batch = data[offs[:, None] + ar]  # (B, T+1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(input_ids=batch[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        run_loss += loss.item()
        run_n += 1
        step += 1
    f.close()
    train_secs = time.time() - t_start
    final_val = float(rows[-1][5])
    if best[2] != step:
        log(f"restoring the best held-out checkpoint: step {best[2]} ({best[0]:.4f}) instead of the last "
            f"({final_val:.4f})")
        model.load_state_dict(best[1])
    train_probe_loss = mean_loss(model, train_probe, T, 16)
    val_loss = mean_loss(model, val_seqs, T, 16)
    log(f"trained {step} steps in {train_secs:.1f}s; shipped weights: train {train_probe_loss:.4f}, "
        f"held-out {val_loss:.4f} (bf16 autocast, nats/token)")
    return model, dict(steps=step, train_seconds=round(train_secs, 1), params=n_params,
                       tokens_seen=step * B * T, epochs=round(step * B * T / N, 2), best_step=best[2],
                       last_step=step, train_loss=round(train_probe_loss, 4), heldout_loss=round(val_loss, 4),
                       last_heldout_loss=final_val)


# ---------------------------------------------------------------------------------------------------- save + reference

def save_model(model, d, max_len):
    model = model.to(torch.bfloat16)
    try:
        model.config.dtype = torch.bfloat16
    except Exception:
        model.config.torch_dtype = torch.bfloat16
    model.generation_config = GenerationConfig(bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model.save_pretrained(d, max_shard_size="15MB")
    # written by us so its contents do not depend on save_pretrained's choices
    GenerationConfig(bos_token_id=0, eos_token_id=0, pad_token_id=0, max_length=max_len).save_pretrained(d)
    cfg = json.load(open(os.path.join(d, "config.json")))
    assert cfg.get("dtype", cfg.get("torch_dtype")) == "bfloat16", cfg
    for fn in os.listdir(d):
        size = os.path.getsize(os.path.join(d, fn))
        assert not fn.endswith(".safetensors") or size <= 15_000_000, (fn, size)


@torch.no_grad()
def reference(d, heldout_text):
    torch.set_num_threads(os.cpu_count() or 4)
    model, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64, attn_implementation="eager",
                                                       output_loading_info=True)
    for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(k):
            raise SystemExit(f"from_pretrained {k}: {info[k]}")
    model.eval()
    assert next(model.parameters()).dtype == torch.float64
    tok = AutoTokenizer.from_pretrained(d)
    max_pos = model.config.max_position_embeddings

    ids_full = tok.encode(heldout_text, add_special_tokens=False)
    raw = Tokenizer.from_file(os.path.join(d, "tokenizer.json")).encode(heldout_text, add_special_tokens=False).ids
    assert ids_full == raw, f"AutoTokenizer ({type(tok).__name__}) and tokenizer.json disagree"
    ids = ids_full[:max_pos]
    logits = model(torch.tensor([ids]), use_cache=False).logits[0]  # (T, V) float64
    lp = torch.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    mean_nll = float(-lp.mean())

    def greedy(prompt_ids, steps):
        seq, margins = list(prompt_ids), []
        for _ in range(steps):
            last = torch.log_softmax(model(torch.tensor([seq]), use_cache=False).logits[0, -1], dim=-1)
            top = torch.topk(last, 2)
            margins.append(float(top.values[0] - top.values[1]))
            seq.append(int(top.indices[0]))
        return seq[len(prompt_ids):], margins

    p_ids = tok.encode(PROMPT, add_special_tokens=False)
    g_ids, margins = greedy(p_ids, GREEDY_STEPS)
    # cross-check against transformers' own generate() (KV cache) up to its first EOS
    gen = model.generate(torch.tensor([p_ids]), attention_mask=torch.ones(1, len(p_ids), dtype=torch.long),
                         generation_config=GenerationConfig(bos_token_id=0, eos_token_id=0, pad_token_id=0,
                                                            do_sample=False, max_new_tokens=GREEDY_STEPS))
    gen = gen[0, len(p_ids):].tolist()
    cut = gen.index(0) + 1 if 0 in gen else len(gen)
    assert gen[:cut] == g_ids[:cut], (gen, g_ids)

    samples = []
    for pr in README_PROMPTS:
        pi = tok.encode(pr, add_special_tokens=False)
        gi, _ = greedy(pi, 64)
        samples.append((pr, tok.decode(pi + gi, skip_special_tokens=False)))
    ref = {
        "file": "heldout.py",
        "source": "Python standard library " + HELDOUT[0],
        "ids": ids,
        "n_tokens_file": len(ids_full),
        "truncated_to": max_pos if len(ids_full) > max_pos else None,
        "mean_nll": mean_nll,
        "n_predicted": len(ids) - 1,
        "logprobs": [float(x) for x in lp],
        "greedy": {"prompt": PROMPT, "prompt_ids": p_ids, "max_tokens": GREEDY_STEPS, "eos_ignored": True,
                   "ids": g_ids, "margins": margins,
                   "text": tok.decode(p_ids + g_ids, skip_special_tokens=False)},
        "roundtrip_strings": [{"text": s, "ids": tok.encode(s, add_special_tokens=False)} for s in ROUNDTRIP_STRINGS],
        "computed_with": "transformers AutoModelForCausalLM.from_pretrained(models/default, dtype=torch.float64, "
                         "attn_implementation='eager') on the CPU; ids = tokenizer.encode(text, "
                         "add_special_tokens=False); no BOS; logprobs[i] = log p(ids[i+1] | ids[:i+1])",
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
        "tokenizers": tokenizers.__version__,
    }
    log(f"reference: {len(ids_full)} tokens in the file, {len(ids)} used, mean NLL {mean_nll:.6f} nats/token")
    log(f"greedy continuation of {PROMPT!r}:\n{ref['greedy']['text']}\n(min margin {min(margins):.4f})")
    return ref, samples


# ---------------------------------------------------------------------------------------------------- docs

def write_docs(a, out, mdir, fdir, stats, ref, samples, corpus, tok_class, license_src, cmd):
    stdlib, train_files, held, skipped, test_bytes, n_train_tokens, train_bytes = corpus
    notice = "Copyright (c) 2001 Python Software Foundation; All Rights Reserved"
    if license_src:
        m = re.search(r"Copyright \(c\) 2001[^\"]*?Python Software Foundation;\s*All\s+Rights\s+Reserved",
                      open(license_src, encoding="utf-8", errors="replace").read())
        if m:
            notice = " ".join(m.group(0).split())
    lic = f"""# Licence of the training data

The model weights (`*.safetensors`) and the tokenizer (`tokenizer.json`) in this folder were produced by training
on the source code of the Python standard library, Python {platform.python_version()}, which is distributed under
the PSF License Agreement (the Python Software Foundation License Version 2). The weights and the tokenizer's
vocabulary are therefore a derived work of PSF-licensed text:

    {notice}

The licence text that came with that Python is reproduced in `LICENSE-PSF.txt` (copied from `{license_src}`),
as its clause 2 requires for derivative works.

Summary of the changes made (clause 3 of the PSF License Agreement): the `.py` files listed in
`training_files.txt` were tokenized and used as training data for a small neural language model; nothing of
them is distributed in source form here, but the model can reproduce fragments of them. The tokenizer's
vocabulary consists of character sequences frequent in those files. This model and its training code are part
of vtengine (Apache-2.0); PSF makes the Python sources available "AS IS", without warranties (clause 4).
"""
    with open(os.path.join(mdir, "LICENSE-DATA.md"), "w") as f:
        f.write(lic)
    files = sorted(os.listdir(mdir))
    sizes = {fn: os.path.getsize(os.path.join(mdir, fn)) for fn in files}
    weights = sum(v for k, v in sizes.items() if k.endswith(".safetensors"))
    hp = (f"| vocab | {a.vocab} (byte-level BPE, `{EOT}` = id 0 is BOS, EOS and PAD) |\n"
          f"| hidden / intermediate | {a.hidden} / {a.intermediate} (SiLU MLP) |\n"
          f"| layers · heads / kv heads · head_dim | {a.layers} · {a.heads} / {a.kv_heads} · {a.head_dim} |\n"
          f"| context (max_position_embeddings = training length) | {a.seq} |\n"
          f"| RoPE θ · RMSNorm ε · embeddings | {a.rope_theta:g} · 1e-6 · tied |\n"
          f"| parameters | {stats['params']:,} |\n"
          f"| batch | {a.batch} × {a.seq} = {a.batch * a.seq:,} tokens, random windows of the packed corpus |\n"
          f"| optimizer | AdamW (fused), lr {a.lr:g}, betas 0.9/0.95, weight decay {a.wd:g} (matrices only), "
          f"grad clip {a.clip:g} |\n"
          f"| schedule | linear warm-up over {a.warmup:.0%}, cosine to {a.min_lr_frac:g}× lr; "
          f"{stats['steps']} steps (cap {a.steps} steps / {a.max_seconds:g} s) |\n"
          f"| precision | fp32 master weights, bf16 autocast, shipped as bf16 |\n"
          f"| seed | {a.seed} |\n")
    trunc = ("" if ref["truncated_to"] is None
             else f", the first {ref['truncated_to']} of its {ref['n_tokens_file']} tokens")
    shipped = ("The shipped weights are those of the last step." if stats["best_step"] == stats["last_step"]
               else f"The shipped weights are those of step {stats['best_step']}, the best held-out loss; the last "
                    f"step ({stats['last_step']}) had {stats['last_heldout_loss']:.4f}.")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "GPU"
    sample_md = "\n".join(f"Prompt `{json.dumps(p)}`:\n\n```python\n{t}\n```\n" for p, t in samples)
    readme = f"""# vtengine default model (a toy)

A tiny `Qwen3ForCausalLM` ({stats['params'] / 1e6:.1f} M parameters, bf16) and byte-level BPE tokenizer, trained by
this project from scratch on the Python standard library's sources so that vtengine runs out of the box with no
model of your own and no network. It continues Python code in a way that *looks like* Python; it is for demos
and tests, not for real work. It knows nothing but (some of) the stdlib.

## Files

| file | bytes |
| --- | --- |
""" + "".join(f"| `{fn}` | {sizes[fn]:,} |\n" for fn in files) + f"""
Plus this README; {sum(sizes.values()):,} bytes without it ({weights:,} of weights). A standard Hugging Face
checkpoint: transformers loads it with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained`
(tokenizer class `{tok_class}` under transformers {transformers.__version__}).

## Data and licence

All `.py` files under the standard library of Python {platform.python_version()} on the training machine
(`{stdlib}`), except test suites (`test/`, `tests/`, `idle_test/`), `site-packages`, and {len(held)} files held
out entirely: {', '.join('`' + h + '`' for h, _ in held)}. {len(train_files)} files, {train_bytes / 1e6:.1f} MB,
{n_train_tokens / 1e6:.2f} M tokens; the list is in `training_files.txt`. Files are packed into one stream, each
followed by `{EOT}`.

The weights and the tokenizer are a derived work of that PSF-licensed text: see `LICENSE-DATA.md` and
`LICENSE-PSF.txt` (the licence that came with that Python).

## Training

One run on one {gpu}, through the project's device tool:

```
{cmd}
```

(`bash scripts/gpu-train.sh` runs exactly that and packs the results; see its header.)

| hyper-parameter | value |
| --- | --- |
{hp}
Loss (mean next-token negative log-likelihood, nats/token, bf16 autocast, measured after training):
train **{stats['train_loss']:.3f}** (32 fixed windows of the training stream), held-out **{stats['heldout_loss']:.3f}**
(the {len(held)} held-out files). {stats['tokens_seen'] / 1e6:.0f} M tokens seen = {stats['epochs']:.1f} passes over the
training data, in {stats['train_seconds']:.0f} s of training ({stats['wall_seconds']:.0f} s for the whole script,
tokenizer and reference included). {shipped}
The loss curve is in `training_log.csv` (train loss averaged over the steps since the previous row).

Why the run is short: the corpus, not the GPU, is the limit. An earlier run with the same model, batch and peak
lr but 2700 steps (warm-up 4%, 121 passes over the data, 331 s) had its best held-out loss, 3.16, at step 300
(13 passes), and then memorized the corpus: train 0.025 and held-out 7.26 at its end. So the shipped run makes
about 22 passes. The held-out files (the NLL fixture among them) also picked the shipped step, which makes the
held-out figure slightly optimistic; that file is still never trained on.

transformers in float64 on these bf16 files gives a mean NLL of **{ref['mean_nll']:.4f}** nats/token on
`{HELDOUT[0]}` ({ref['n_predicted']} predicted tokens{trunc}); vtengine's test
`test/golden/default-model.test.ts` checks the engine against that figure.

Made with torch {torch.__version__.split('+')[0]}, transformers {transformers.__version__}, tokenizers
{tokenizers.__version__}, Python {platform.python_version()}.

## Sample output

Greedy continuations by transformers (float64) of these weights, 64 new tokens:

{sample_md}"""
    with open(os.path.join(mdir, "README.md"), "w") as f:
        f.write(readme)
    trunc_f = ("" if ref["truncated_to"] is None
               else f"and cut to the first {ref['truncated_to']} (the context) of its {ref['n_tokens_file']} tokens")
    with open(os.path.join(fdir, "README.md"), "w") as f:
        f.write(f"""# default-model fixtures

Generated by `scripts/train_default_model.py` (via `scripts/gpu-train.sh`) together with `models/default/`; do
not hand-edit.

* `heldout.py`: the standard library's `{HELDOUT[0]}` (Python {platform.python_version()}), held out of the
  tokenizer's and the model's training data. PSF licence: see `models/default/LICENSE-PSF.txt`.
* `transformers-reference.json`: transformers {transformers.__version__} / torch {torch.__version__.split('+')[0]}
  in float64 on the shipped bf16 checkpoint: `ids` (heldout.py tokenized without special tokens
  {trunc_f}), `mean_nll` over
  `n_predicted` teacher-forced tokens and each `logprobs[i]` = log p(ids[i+1] | ids[..i]); `greedy`: the greedy
  continuation (EOS ignored) of `{PROMPT}` with top-1/top-2 margins; `roundtrip_strings`: ids of tricky strings.
""")


# ---------------------------------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--seq", type=int, default=2048, help="training length = max_position_embeddings")
    ap.add_argument("--batch", type=int, default=64)
    # The corpus (2.9 M tokens) is the limit, not the GPU: a 2700-step run (warm-up 0.04, 121 passes, 331 s) had
    # its best held-out loss, 3.16, at step 300 (13 passes), then memorized the corpus (train 0.025, held-out 7.26
    # at the end).
    # So the shipped run is ~22 passes, with the warm-up that worked there (~100 steps) and a cosine decay after it.
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--max-seconds", type=float, default=150.0, help="the schedule runs by time once past this")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=float, default=0.2, help="fraction of the run")
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    cmd = "python3 scripts/train_default_model.py " + " ".join(sys.argv[1:])

    log(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"tokenizers {tokenizers.__version__}, GPU {torch.cuda.get_device_name(0)}")
    mdir = os.path.join(a.out, "models", "default")
    fdir = os.path.join(a.out, "test", "fixtures", "default-model")
    for d in (mdir, fdir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)

    stdlib, train_files, held, skipped, test_bytes = collect_corpus()
    train_bytes = sum(len(t.encode()) for _, t in train_files)
    log(f"corpus: {stdlib}: {len(train_files)} training files ({train_bytes / 1e6:.2f} MB), held out "
        f"{[h for h, _ in held]}, skipped (not UTF-8) {skipped}, test-suite bytes left out {test_bytes / 1e6:.2f} MB")

    tok = train_tokenizer([t for _, t in train_files], a.vocab)
    save_tokenizer(tok, mdir, a.seq)
    rng = random.Random(0)
    sample = rng.sample(train_files, min(200, len(train_files)))
    tok_class = check_roundtrip(tok, mdir, held + sample + [(f"s{i}", s) for i, s in enumerate(ROUNDTRIP_STRINGS)])
    log(f"tokenizer: {a.vocab} tokens")

    enc = tok.encode_batch([t for _, t in train_files], add_special_tokens=False)
    stream = []
    for e in enc:
        stream.extend(e.ids)
        stream.append(0)
    train_ids = torch.tensor(stream, dtype=torch.long)
    val_seqs = [torch.tensor(tok.encode(t, add_special_tokens=False).ids, device="cuda") for _, t in held]
    log(f"training stream: {len(train_ids):,} tokens ({train_bytes / len(train_ids):.2f} bytes/token); held-out "
        f"{sum(len(v) for v in val_seqs):,} tokens")
    with open(os.path.join(mdir, "training_files.txt"), "w") as f:
        f.write("".join(n + "\n" for n, _ in train_files))

    cfg = make_config(a, a.vocab)
    model, stats = train(a, cfg, train_ids, val_seqs, os.path.join(mdir, "training_log.csv"))
    save_model(model, mdir, a.seq)
    del model
    torch.cuda.empty_cache()

    with open(os.path.join(fdir, "heldout.py"), "w", encoding="utf-8", newline="") as f:
        f.write(held[0][1])
    ref, samples = reference(mdir, held[0][1])
    with open(os.path.join(fdir, "transformers-reference.json"), "w") as f:
        json.dump(ref, f)
        f.write("\n")

    lsrc = find_psf_license(stdlib)
    if lsrc:
        shutil.copyfile(lsrc, os.path.join(mdir, "LICENSE-PSF.txt"))
    else:
        log("WARNING: no LICENSE.txt found for this Python; add LICENSE-PSF.txt by hand")
    stats["wall_seconds"] = time.time() - T0
    corpus = (stdlib, train_files, held, skipped, test_bytes, len(train_ids), train_bytes)
    write_docs(a, a.out, mdir, fdir, stats, ref, samples, corpus, tok_class, lsrc, cmd)
    with open(os.path.join(a.out, "stats.json"), "w") as f:
        json.dump(dict(stats, mean_nll=ref["mean_nll"], greedy_text=ref["greedy"]["text"]), f, indent=2)
    total = sum(os.path.getsize(os.path.join(mdir, fn)) for fn in os.listdir(mdir))
    log(f"models/default: {total:,} bytes: {sorted(os.listdir(mdir))}")
    if total > 25_000_000:
        raise SystemExit(f"models/default is {total:,} bytes, over 25 MB")
    log("done")


if __name__ == "__main__":
    main()
