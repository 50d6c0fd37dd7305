#!/usr/bin/env python3
"""Random-weight bf16 checkpoints with the real Qwen3-0.6B and Qwen3-8B shapes, made on the GPU machine for the
CUDA benchmark (scripts/gpu-bench.sh): config.json through transformers' Qwen3Config (so transformers loads the
folder as it would the real model), generation_config.json, and safetensors shards of at most 5 GB with
model.safetensors.index.json (a single file, model.safetensors, when everything fits in one, as transformers
writes it). No tokenizer: both engines are fed token ids.

    python3 scripts/random_checkpoint.py --shape qwen3-0.6b|qwen3-8b --out DIR [--seed N] [--device cuda|cpu]

Weights are drawn on the GPU in bf16 (normal, std 0.02; RMSNorm weights 1), tensor by tensor, and copied to the
host one shard at a time, so the 16.4 GB of the 8B shape take seconds to draw and the disk sets the pace. The
folder also gets random_checkpoint.json (shape, seed, bytes), which gpu-bench.sh reads to reuse a finished folder.
Speed does not depend on the values, only on the shapes and dtype; the values need only be finite and not zero.
"""
import argparse
import json
import os
import sys
import time

SHAPES = {
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True),
    "qwen3-8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=False),
}
COMMON = dict(rms_norm_eps=1e-6, max_position_embeddings=40960, hidden_act="silu", attention_bias=False,
              bos_token_id=151643, eos_token_id=151645)
ROPE_THETA = 1000000.0
GEN_EOS = [151645, 151643]  # Qwen3's generation_config.json
SHARD_BYTES = 5 * 10**9     # transformers' default max_shard_size ("5GB")
STD = 0.02


def tensor_list(s):
    """(name, shape) of every tensor a Qwen3ForCausalLM of shape s holds, in transformers' names."""
    H, I, V, D = s["hidden_size"], s["intermediate_size"], s["vocab_size"], s["head_dim"]
    q, kv = s["num_attention_heads"] * D, s["num_key_value_heads"] * D
    out = [("model.embed_tokens.weight", (V, H))]
    for l in range(s["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (H,)),
                (p + "self_attn.q_proj.weight", (q, H)), (p + "self_attn.k_proj.weight", (kv, H)),
                (p + "self_attn.v_proj.weight", (kv, H)), (p + "self_attn.o_proj.weight", (H, q)),
                (p + "self_attn.q_norm.weight", (D,)), (p + "self_attn.k_norm.weight", (D,)),
                (p + "post_attention_layernorm.weight", (H,)),
                (p + "mlp.gate_proj.weight", (I, H)), (p + "mlp.up_proj.weight", (I, H)),
                (p + "mlp.down_proj.weight", (H, I))]
    out.append(("model.norm.weight", (H,)))
    if not s["tie_word_embeddings"]:
        out.append(("lm_head.weight", (V, H)))
    return out


def make_config(s):
    import transformers
    from transformers import Qwen3Config

    kw = dict(COMMON, **s)
    try:  # transformers 5 keeps rope settings in rope_parameters
        cfg = Qwen3Config(**kw, rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA})
    except TypeError:
        cfg = Qwen3Config(**kw, rope_theta=ROPE_THETA)
    rp = getattr(cfg, "rope_parameters", None) or {"rope_theta": getattr(cfg, "rope_theta", None)}
    if float(rp.get("rope_theta") or 0) != ROPE_THETA:
        raise SystemExit(f"Qwen3Config did not keep rope_theta {ROPE_THETA}: {rp}")
    cfg.architectures = ["Qwen3ForCausalLM"]
    if int(transformers.__version__.split(".")[0]) >= 5:
        cfg.dtype = "bfloat16"  # written as "dtype"; transformers 4 called it torch_dtype
    else:
        cfg.torch_dtype = "bfloat16"
    return cfg


def check_names(cfg, tensors):
    """Our tensor list must be exactly the parameters transformers builds for this config (on the meta device:
    no memory), so that from_pretrained finds every weight and warns about none."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(cfg)
    except Exception as e:  # the check is a safeguard; the checkpoint itself does not depend on it
        print(f"warning: tensor names not checked: building the model on the meta device failed: {e}", flush=True)
        return
    want = {n: tuple(p.shape) for n, p in model.named_parameters()}  # a tied lm_head is listed once, as embed
    if cfg.tie_word_embeddings:
        want.pop("lm_head.weight", None)  # in case this version ties only at load time
    got = dict(tensors)
    if want != got:
        missing = sorted(set(want) - set(got))[:5]
        extra = sorted(set(got) - set(want))[:5]
        shapes = sorted(n for n in set(want) & set(got) if want[n] != got[n])[:5]
        raise SystemExit(f"tensor list differs from transformers' Qwen3: missing {missing}, extra {extra}, shapes {shapes}")


def shards(tensors, elem_bytes):
    """Consecutive groups of at most SHARD_BYTES (a larger tensor gets a shard of its own)."""
    groups, cur, cur_bytes = [], [], 0
    for name, shape in tensors:
        n = elem_bytes
        for d in shape:
            n *= d
        if cur and cur_bytes + n > SHARD_BYTES:
            groups.append(cur)
            cur, cur_bytes = [], 0
        cur.append((name, shape))
        cur_bytes += n
    if cur:
        groups.append(cur)
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = ap.parse_args()

    t0 = time.monotonic()
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import GenerationConfig

    t_import = time.monotonic() - t0
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: pass --device cpu (slow for the 8B shape)")
    s = SHAPES[a.shape]
    os.makedirs(a.out, exist_ok=True)
    marker = os.path.join(a.out, "random_checkpoint.json")
    if os.path.exists(marker):
        os.remove(marker)  # a folder without the marker is unfinished
    for f in os.listdir(a.out):  # shards of an earlier, different run must not linger in the folder
        if f.endswith(".safetensors") or f == "model.safetensors.index.json":
            os.remove(os.path.join(a.out, f))

    cfg = make_config(s)
    tensors = tensor_list(s)
    check_names(cfg, tensors)
    cfg.save_pretrained(a.out)
    GenerationConfig(bos_token_id=COMMON["bos_token_id"], eos_token_id=GEN_EOS, do_sample=False).save_pretrained(a.out)

    gen = torch.Generator(device=a.device)
    gen.manual_seed(a.seed)
    groups = shards(tensors, 2)
    names = ["model.safetensors"] if len(groups) == 1 else [
        f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors" for i in range(len(groups))]
    weight_map, total, t_draw, t_write = {}, 0, 0.0, 0.0
    for fname, group in zip(names, groups):
        t1 = time.monotonic()
        host = {}
        for name, shape in group:
            if len(shape) == 1:
                t = torch.ones(shape, dtype=torch.bfloat16, device=a.device)
            else:
                t = torch.empty(shape, dtype=torch.bfloat16, device=a.device).normal_(0.0, STD, generator=gen)
            host[name] = t.cpu()
            weight_map[name] = fname
            total += t.numel() * 2
        t2 = time.monotonic()
        save_file(host, os.path.join(a.out, fname), metadata={"format": "pt"})
        del host
        t3 = time.monotonic()
        t_draw += t2 - t1
        t_write += t3 - t2
        print(f"  {fname}: {len(group)} tensors, draw {t2 - t1:.1f} s, write {t3 - t2:.1f} s", flush=True)
    if len(groups) > 1:
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)

    written = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out))
    elapsed = time.monotonic() - t0
    with open(marker, "w") as f:
        json.dump({"shape": a.shape, "seed": a.seed, "std": STD, "tensor_bytes": total, "files_bytes": written,
                   "shards": len(groups), "transformers": transformers.__version__, "torch": torch.__version__,
                   "seconds": round(elapsed, 1)}, f, indent=2)
    print(f"random_checkpoint {a.shape} -> {a.out}: {total:,} B of bf16 tensors ({total / 1e9:.2f} GB) in "
          f"{len(groups)} file(s), {written:,} B written; {elapsed:.1f} s (imports {t_import:.1f}, draw {t_draw:.1f}, "
          f"write {t_write:.1f}; {written / max(t_write, 1e-9) / 1e9:.2f} GB/s)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
