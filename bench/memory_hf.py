#!/usr/bin/env python3
"""The HF transformers peer of the memory benchmark: the same workload as vtengine's side of bench/memory.mjs,
run under the same external sampler (bench/memory.py), which reads the phases this script prints on stdout.

    python3 bench/memory_hf.py --checkpoint DIR [--requests 4] [--prompt 512] [--new 128] [--device cpu|cuda]
                               [--threads N] [--idle-ms 1000] [--control]

Workload: import torch + transformers; AutoModelForCausalLM.from_pretrained(DIR, dtype=torch.bfloat16) (with
device_map=DEVICE for cuda, so the weights go straight to the GPU as transformers does it); then ONE generate()
over the N requests as a batch (same length, so no padding) with greedy decoding and exactly NEW tokens each
(min_new_tokens = max_new_tokens: EOS cannot end one early); then IDLE ms of idle. The prompts are the ids
bench/memory.mjs gives vtengine. --control imports torch + transformers and idles, loading nothing: the null
control, the runtime's own footprint.

Run it through the sampler (this is what bench/memory.mjs does; on a machine without Node run it by hand):

    python3 bench/memory.py --label hf --out hf.json -- python3 bench/memory_hf.py --checkpoint DIR --device cpu

--make (alone, before measuring) writes random bf16 weights into DIR for the DIR/config.json found there, when DIR
has no *.safetensors: how to get the 1.2 GB checkpoint onto a machine where only its config.json was carried.
"""
import argparse
import json
import os
import sys
import time


def mark(phase, info=None):
    msg = {"phase": phase}
    if info is not None:
        msg["info"] = info
    print(json.dumps(msg), flush=True)
    if phase != "end" and os.environ.get("MEMORY_SAMPLER_ACK") == "1":
        sys.stdin.readline()  # the sampler has taken the sample that closes the phase before this one


def prompt(n, vocab, salt):
    # The same ids as bench/memory.mjs's prompt().
    return [((i + salt) * 7919 + salt * 104729) % (vocab - 10) + 5 for i in range(n)]


def prompt_checksum(total, ids):
    # The same fold as bench/memory-engine.cpp's, so the table can show both sides were fed the same ids.
    for i in ids:
        total = (total * 31 + i) % 1000000007
    return total


def make(folder):
    """Random bf16 weights for folder/config.json (carried from the machine that made the checkpoint; the weights,
    GBs, are not carried): the same shape and config, other random values, which memory does not care about."""
    import glob
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if glob.glob(os.path.join(folder, "*.safetensors")):
        print(f"{folder} already has weights", file=sys.stderr)
        return
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), dtype=torch.bfloat16)
    model.save_pretrained(folder)
    print(f"wrote random weights into {folder}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--idle-ms", type=int, default=1000)
    ap.add_argument("--control", action="store_true")
    ap.add_argument("--make", action="store_true")
    a = ap.parse_args()
    if a.make:
        return make(a.checkpoint)

    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    info = {"engine": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
            "device": a.device, "threads": torch.get_num_threads(), "control": a.control,
            "workload": {"requests": a.requests, "prompt": a.prompt, "new": a.new, "idleMs": a.idle_ms}}
    if a.control:
        mark("serve")
        mark("idle")
        time.sleep(a.idle_ms / 1000)
        mark("end", info)
        return

    mark("load")
    t0 = time.monotonic()
    kwargs = {"dtype": torch.bfloat16}
    if a.device == "cuda":
        kwargs["device_map"] = "cuda"
    model = AutoModelForCausalLM.from_pretrained(a.checkpoint, **kwargs)
    model.eval()
    if a.device == "cuda":
        torch.cuda.synchronize()
    info["loadSeconds"] = time.monotonic() - t0

    mark("serve")
    t1 = time.monotonic()
    vocab = AutoConfig.from_pretrained(a.checkpoint).vocab_size
    prompts = [prompt(a.prompt, vocab, r) for r in range(a.requests)]
    info["prompt0Head"] = prompts[0][:8]
    info["promptChecksum"] = 0
    for p in prompts:
        info["promptChecksum"] = prompt_checksum(info["promptChecksum"], p)
    ids = torch.tensor(prompts, device=model.device)
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=a.new, min_new_tokens=a.new, pad_token_id=0)
    if a.device == "cuda":
        torch.cuda.synchronize()
        info["cudaMaxAllocatedBytes"] = torch.cuda.max_memory_allocated()
        info["cudaMaxReservedBytes"] = torch.cuda.max_memory_reserved()
    info["serveSeconds"] = time.monotonic() - t1
    info["generatedTokens"] = int(out.shape[0] * (out.shape[1] - a.prompt))

    mark("idle")
    time.sleep(a.idle_ms / 1000)
    mark("end", info)


if __name__ == "__main__":
    main()
