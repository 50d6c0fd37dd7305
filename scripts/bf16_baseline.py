#!/usr/bin/env python3
"""How close does transformers itself get to the float64 references when it runs in bf16 (weights and
activations, on the GPU)? The baseline for issue 4's bf16 tolerance (top-1 logprob within 2e-2, ids equal up to
the first reference margin < 0.02): if transformers' own bf16 run misses it on a fixture, the tolerance, not our
kernels, is what that fixture cannot meet.

    python3 scripts/bf16_baseline.py [--write] [--only NAME ...]  (on the GPU machine; one line per fixture and
                                                                   a JSON line)

--write also stores transformers' bf16 figures as test/fixtures/<name>/bf16-baseline.json, which the golden check
(test/gpu/golden_cuda.cpp) reads: with bf16 activations a fixture passes when our top-1 logprob error is within
max(2e-2, transformers' own bf16 error on it), i.e. no worse than transformers in the same precision.
It also stores `worst_rel_logit_diff_vs_f32`: max |bf16 logit - fp32 logit| / max |fp32 logit| over every position
of the reference's prompts and greedy continuations, the measure test/gpu/model_cuda.cpp holds the engine's bf16
hybrid model to against its fp32 decoder.
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

args = sys.argv[1:]
write = "--write" in args
only = [args[i + 1] for i, a in enumerate(args) if a == "--only" and i + 1 < len(args)]


def model_class(path):
    """The Qwen3.5 hybrids name their class (AutoModelForCausalLM may map model_type qwen3_5 elsewhere)."""
    cfg = json.load(open(os.path.join(path, "config.json")))
    if cfg.get("model_type", "").startswith("qwen3_5"):
        return getattr(transformers, cfg["architectures"][0])
    return AutoModelForCausalLM


root = os.path.join(os.path.dirname(__file__), "..", "test", "fixtures")
out = {}
for name in sorted(os.listdir(root)):
    ref_path = os.path.join(root, name, "reference.json")
    if not os.path.exists(ref_path) or (only and name not in only):
        continue
    ref = json.load(open(ref_path))
    logits_of = {}
    for dtype in (torch.bfloat16, torch.float32):
        cls = model_class(os.path.join(root, name))
        model = cls.from_pretrained(os.path.join(root, name), dtype=dtype, attn_implementation="eager").cuda().eval()
        worst, mismatches = 0.0, 0
        for i, p in enumerate(ref["prompts"]):
            ids = p["ids"] + p["greedy"]
            with torch.no_grad():
                logits = model(torch.tensor([ids], device="cuda")).logits[0].double()
            logits_of[(dtype, i)] = logits
            lp = torch.log_softmax(logits, dim=-1)
            n = len(p["ids"])
            for s in range(len(p["greedy"])):
                row = lp[n - 1 + s]
                worst = max(worst, abs(row[p["top_ids"][s][0]].item() - p["top_logprobs"][s][0]))
                if p["margins"][s] >= 0.02 and int(row.argmax()) != p["greedy"][s]:
                    mismatches += 1
        key = f"{name}/{str(dtype).split('.')[-1]}"
        out[key] = {"worst_top1_logprob_diff": worst, "id_mismatches_above_margin": mismatches}
        print(f"{key:40s} worst |dlogprob| {worst:.3e}  id mismatches (margin >= 0.02) {mismatches}", flush=True)
        del model
    rel = max((logits_of[(torch.bfloat16, i)] - logits_of[(torch.float32, i)]).abs().max().item() /
              logits_of[(torch.float32, i)].abs().max().item() for i in range(len(ref["prompts"])))
    out[f"{name}/bfloat16"]["worst_rel_logit_diff_vs_f32"] = rel
    print(f"{name + '/bfloat16':40s} max |bf16 - fp32 logit| / max |fp32 logit| {rel:.3e}", flush=True)
    if write:
        b = out[f"{name}/bfloat16"]
        with open(os.path.join(root, name, "bf16-baseline.json"), "w") as f:
            json.dump({"what": "transformers' own bf16 run (weights and activations, GPU, eager attention) against "
                               "this fixture's float64 reference.json, made by scripts/bf16_baseline.py",
                       "transformers": transformers.__version__, "torch": torch.__version__,
                       "device": torch.cuda.get_device_name(0), **b}, f, indent=1)
            f.write("\n")
print(json.dumps(out))
