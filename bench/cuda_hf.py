#!/usr/bin/env python3
"""The HF transformers peer of bench/cuda-engine.cpp (issue 4): the same workloads, on the same GPU, checkpoint
and prompt ids, with transformers in bf16 (sdpa attention), in the same run (scripts/gpu-bench.sh runs both).

    python3 bench/cuda_hf.py --model DIR [--runs 3] [--modes eager,compiled] [--json FILE] [--budget-s S]
                             [--batches 1,8,32,128] [--prefill 512,2048,8192]

Workloads (greedy; min_new_tokens = max_new_tokens, so EOS never ends a request early):
  decode, eager        batch B of 128-token prompts, 256 new tokens each, one generate() per run. Decode tok/s =
                       B x 255 / (generate(256) time - generate(1) time), both timed with the same inputs in the
                       same run: generate(1) is the prompt's prefill, its first token and generate's own set-up,
                       so the difference is the 255 decode steps after the first token, as on our side.
  decode, compiled     batch 1 only (compiling takes ~45 s a shape): static cache (cache_implementation='static')
                       with the decode step compiled as transformers 5 does it inside generate() (a torch.compile of
                       the model call, mode 'reduce-overhead', CompileConfig's defaults; prefill runs uncompiled);
                       if this version does not compile on its own, model.forward is compiled as transformers'
                       llm_optims guide shows. The first generate (compile + warm-up) is excluded from the runs;
                       its time is reported, and compile_s = that time minus the median run.
  prefill              one forward of P prompt ids (logits of the last position only, as generate computes them),
                       synchronized around, P = 512, 2048, 8192: tok/s = P / time. TTFT = generate(1) time.
  load                 the checkpoint's files read through once (page cache warm), then from_pretrained(DIR,
                       dtype=bfloat16, device_map='cuda') -> generate(1) of a 128-token prompt -> its token.
  bandwidth limit      a 1 GiB device-to-device copy (bytes read + written / time, median of 20) and the weight
                       bytes one decode step reads at batch 1 (every matrix incl. lm_head; the embedding row is
                       negligible, so an untied embedding is left out): limit tok/s = copy rate / those bytes.
--budget-s: the workloads run in the order above (eager b1, b8, b32, compiled b1, then eager at larger batches,
then the remaining load runs); one that would not fit in what is left is skipped, or run fewer times, with a note.
The JSON is rewritten after each workload, so a run cut short still leaves what it measured.
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time

MASK = (1 << 64) - 1
PROMPT, NEW, SEED = 128, 256, 1


def mix(x):
    """splitmix64, as bench/cuda-engine.cpp's mix()."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def prompt_ids(seed, r, n):
    """Request r's prompt, the ids bench/cuda-engine.cpp gives the engine: n ids in [0, 1000)."""
    return [mix(((seed << 32) + (r << 16) + i) & MASK) % 1000 for i in range(n)]


def stat(xs):
    xs = list(xs)
    if not xs:
        return {"runs": []}
    return {"runs": xs, "median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def int_list(s):
    return [int(x) for x in s.split(",") if x]


def warm_page_cache(folder):
    t0, total = time.monotonic(), 0
    buf = bytearray(16 << 20)
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb", buffering=0) as f:
                while True:
                    n = f.readinto(buf)
                    if not n:
                        break
                    total += n
    return total, time.monotonic() - t0


class Budget:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds if seconds > 0 else float("inf")

    def left(self):
        return self.end - time.monotonic()


class Peer:
    def __init__(self, a):
        import torch
        import transformers

        self.a, self.torch = a, torch
        self.budget = Budget(a.budget_s)
        self.model = None
        meta = {k: os.environ[k] for k in ("VT_BENCH_COMMIT", "VT_BENCH_GPU", "VT_BENCH_SHAPE") if k in os.environ}
        self.out = {"tool": "cuda_hf", "engine": "transformers", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "transformers": transformers.__version__,
                    "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "meta": meta,
                    "model_dir": a.model, "attn_implementation": "sdpa", "dtype": "bfloat16",
                    "workload": {"prompt": PROMPT, "new_tokens": NEW, "seed": SEED, "ids_below": 1000,
                                 "runs": a.runs, "batches": a.batches, "prefill": a.prefill,
                                 "prompt0_head": prompt_ids(SEED, 0, PROMPT)[:8]},
                    "decode": {"eager": {}, "compiled": {}}, "prefill": {}, "load": {}, "notes": [], "errors": []}

    # ---- helpers ----
    def save(self):
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump(self.out, f, indent=2)
                f.write("\n")

    def note(self, text):
        self.out["notes"].append(text)
        print(f"note: {text}", flush=True)

    def error(self, where, e):
        self.out["errors"].append(f"{where}: {type(e).__name__}: {e}")
        print(f"FAIL {where}: {type(e).__name__}: {e}", flush=True)
        self.torch.cuda.empty_cache()

    def timed(self, fn):
        torch = self.torch
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        r = fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t0, r

    def fits(self, what, seconds):
        if self.budget.left() >= seconds:
            return True
        self.note(f"{what} skipped: needs ~{seconds:.1f} s, {max(self.budget.left(), 0):.1f} s of the time budget left")
        return False

    def runs_left(self, what, done, one_run_s):
        """How many of the remaining runs fit; notes a shortfall."""
        left = self.budget.left()
        n = self.a.runs - done
        if left != float("inf"):
            n = min(n, int(max(left, 0) // max(one_run_s * 1.1, 1e-3)))
        if n < self.a.runs - done:
            self.note(f"{what}: {done + n} of {self.a.runs} runs (time budget)")
        return n

    def batch(self, B, P=PROMPT):
        torch = self.torch
        ids = torch.tensor([prompt_ids(SEED, r, P) for r in range(B)], dtype=torch.long, device="cuda")
        return ids, torch.ones_like(ids)

    def generate(self, ids, mask, n, **kw):
        return self.model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=n,
                                   min_new_tokens=n, pad_token_id=0, **kw)

    # ---- workloads ----
    def copy_rate(self):
        torch = self.torch
        n = 1 << 30
        a = torch.full((n,), 0x5A, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        for _ in range(3):
            b.copy_(a)
        times = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            b.copy_(a)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
        del a, b
        x = torch.ones(256, 256, dtype=torch.bfloat16, device="cuda")
        (x @ x).sum().item()  # cuBLAS's first-use set-up, outside every timed load
        gbps = 2 * n / statistics.median(times) / 1e9
        self.out["copy_gbps"] = gbps
        print(f"device copy (read + write), 1 GiB: {gbps:.0f} GB/s", flush=True)

    def load_once(self):
        """page cache warm -> from_pretrained -> generate(1): returns (to first token s, from_pretrained s)."""
        from transformers import AutoModelForCausalLM

        torch = self.torch
        warm_page_cache(self.a.model)
        ids, mask = self.batch(1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        self.model = AutoModelForCausalLM.from_pretrained(self.a.model, dtype=torch.bfloat16, device_map="cuda",
                                                          attn_implementation="sdpa")
        self.model.eval()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        with torch.inference_mode():
            self.generate(ids, mask, 1)
        torch.cuda.synchronize()
        return time.perf_counter() - t0, t1 - t0

    def first_load(self):
        from transformers import AutoConfig, AutoModelForCausalLM  # noqa: F401  (imports outside the timed load)

        AutoConfig.from_pretrained(self.a.model)
        nbytes, secs = warm_page_cache(self.a.model)
        self.out["page_cache"] = {"bytes": nbytes, "seconds": secs}
        first, fp = self.load_once()
        self.load_runs = [(first, fp)]
        m = self.model
        total = sum(p.numel() * p.element_size() for p in m.parameters())  # a tied lm_head is counted once
        emb = m.get_input_embeddings().weight
        tied = m.get_output_embeddings().weight.data_ptr() == emb.data_ptr()
        per_token = total - (0 if tied else emb.numel() * emb.element_size())
        self.out["weight_bytes"] = total
        self.out["weight_bytes_per_token"] = per_token
        self.out["tie_word_embeddings"] = tied
        self.out["bandwidth_limit_tok_s"] = self.out["copy_gbps"] * 1e9 / per_token
        print(f"weights {total / 1e9:.3f} GB, read per decode step at batch 1 {per_token / 1e9:.3f} GB: bandwidth "
              f"limit {self.out['bandwidth_limit_tok_s']:.1f} tok/s", flush=True)
        print(f"load -> first token (run 1) {first * 1e3:.0f} ms (from_pretrained {fp * 1e3:.0f} ms)", flush=True)
        self.record_load()

    def record_load(self):
        self.out["load"] = {"to_first_token_ms": stat([1e3 * x for x, _ in self.load_runs]),
                            "from_pretrained_ms": stat([1e3 * y for _, y in self.load_runs])}
        self.save()

    def prefill(self, P):
        torch = self.torch
        ids, mask = self.batch(1, P)
        fwd = lambda: self.model(input_ids=ids, attention_mask=mask, logits_to_keep=1).logits.argmax(-1)
        with torch.inference_mode():
            one, _ = self.timed(fwd)  # warm-up
            self.timed(lambda: self.generate(ids, mask, 1))
            n = self.runs_left(f"prefill {P}", 0, 2 * one)
            fwd_s = [self.timed(fwd)[0] for _ in range(max(n, 1))]
            ttft_s = [self.timed(lambda: self.generate(ids, mask, 1))[0] for _ in range(max(n, 1))]
        r = {"tokens": P, "forward_ms": stat([1e3 * s for s in fwd_s]), "tok_s": stat([P / s for s in fwd_s]),
             "ttft_ms": stat([1e3 * s for s in ttft_s])}
        self.out["prefill"][str(P)] = r
        print(f"prefill {P:<5d} {r['tok_s']['median']:9.1f} tok/s (forward {r['forward_ms']['median']:.2f} ms), "
              f"TTFT {r['ttft_ms']['median']:.2f} ms", flush=True)
        self.save()

    def decode(self, B, mode):
        torch = self.torch
        ids, mask = self.batch(B)
        kw = {"cache_implementation": "static"} if mode == "compiled" else {}
        r = {"batch": B, "prompt": PROMPT, "new_tokens": NEW}
        with torch.inference_mode():
            if mode == "eager":
                eight, _ = self.timed(lambda: self.generate(ids, mask, 8))  # warm-up
            # Every generate(1) before the first generate(256): with a static cache, switching lengths would
            # make a new cache and recompile.
            first_s = [self.timed(lambda: self.generate(ids, mask, 1, **kw))[0] for _ in range(self.a.runs)]
            if mode == "eager":
                t1 = statistics.median(first_s)
                one_run = t1 + max(eight - t1, 0) * (NEW - 1) / 7
                if not self.fits(f"eager decode b{B}", 1.2 * one_run):
                    return
            if mode == "compiled":
                r.update(self.compile_decode(ids, mask, kw))
            gen_s = []
            while len(gen_s) < self.a.runs:
                t, out = self.timed(lambda: self.generate(ids, mask, NEW, **kw))
                if tuple(out.shape) != (B, PROMPT + NEW):
                    raise RuntimeError(f"generate returned shape {tuple(out.shape)}, want {(B, PROMPT + NEW)}")
                gen_s.append(t)
                if len(gen_s) < self.a.runs and self.budget.left() < 1.1 * t:
                    self.note(f"{mode} decode b{B}: {len(gen_s)} of {self.a.runs} runs (time budget)")
                    break
        t1 = statistics.median(first_s)
        r["generate_s"] = stat(gen_s)
        r["generate1_s"] = stat(first_s)
        r["tok_s"] = stat([B * (NEW - 1) / (t - t1) for t in gen_s])
        r["e2e_tok_s"] = stat([B * NEW / t for t in gen_s])
        self.out["decode"][mode][str(B)] = r
        extra = f", compile ~{r['compile_s']:.0f} s ({r['compile_method']})" if mode == "compiled" else ""
        print(f"decode {mode:8s} b{B:<4d} {r['tok_s']['median']:9.1f} tok/s (min {r['tok_s']['min']:.1f}, "
              f"max {r['tok_s']['max']:.1f}; generate(256) {r['generate_s']['median']:.2f} s, generate(1) "
              f"{t1 * 1e3:.1f} ms){extra}", flush=True)
        self.save()

    def compile_decode(self, ids, mask, kw):
        """Warm-up generates of the compiled decode step; returns what to record about compiling."""
        torch = self.torch
        t_first, _ = self.timed(lambda: self.generate(ids, mask, NEW, **kw))
        method = "generate() auto-compile, CompileConfig defaults"
        if not hasattr(self.model, "_compiled_call"):
            method = "model.forward = torch.compile(mode='reduce-overhead', fullgraph=True)"
            self.note("generate() did not compile the decode step by itself; compiling model.forward instead")
            self.model.forward = torch.compile(self.model.forward, mode="reduce-overhead", fullgraph=True)
            t_more, _ = self.timed(lambda: self.generate(ids, mask, NEW, **kw))
            t_first += t_more
        t_second, _ = self.timed(lambda: self.generate(ids, mask, NEW, **kw))  # cudagraph recording settles
        return {"first_generate_s": t_first, "second_generate_s": t_second, "compile_s": t_first - t_second,
                "compile_method": method}

    def more_loads(self):
        torch = self.torch
        self.model = None
        try:
            torch._dynamo.reset()  # compiled code holds the first model
        except Exception:
            pass
        gc.collect()
        torch.cuda.empty_cache()
        while len(self.load_runs) < self.a.runs:
            one = max(x for x, _ in self.load_runs) + 5  # + re-reading the files
            if not self.fits(f"load run {len(self.load_runs) + 1}", 1.2 * one):
                break
            self.load_runs.append(self.load_once())
            self.model = None
            gc.collect()
            torch.cuda.empty_cache()
            self.record_load()
        s = self.out["load"]["to_first_token_ms"]
        print(f"load -> first token {s['median']:.0f} ms (min {s['min']:.0f}, max {s['max']:.0f}; "
              f"{len(self.load_runs)} run(s))", flush=True)

    def run(self):
        a = self.a
        print(f"cuda_hf: transformers {self.out['transformers']}, torch {self.out['torch']}, {self.out['gpu']}, "
              f"{a.model}, {a.runs} run(s) each, modes {','.join(a.modes)}", flush=True)
        try:
            self.copy_rate()
            self.first_load()
        except Exception as e:  # nothing else can run
            self.error("load", e)
            self.save()
            return 1
        for P in a.prefill:
            self.guard(f"prefill {P}", lambda: self.prefill(P))
        small = [B for B in a.batches if B <= 32]
        if "eager" in a.modes:
            for B in small:
                self.guard(f"eager decode b{B}", lambda: self.decode(B, "eager"))
        if "compiled" in a.modes and self.fits("compiled decode b1", 120):
            self.guard("compiled decode b1", lambda: self.decode(1, "compiled"))
        if "eager" in a.modes:
            for B in a.batches:
                if B not in small:
                    self.guard(f"eager decode b{B}", lambda: self.decode(B, "eager"))
        self.guard("load", self.more_loads)
        self.save()
        return 1 if self.out["errors"] else 0

    def guard(self, where, fn):
        try:
            fn()
        except Exception as e:  # one workload failing (an OOM at batch 128) must not lose the others
            self.error(where, e)
        self.save()


def main():
    ap = argparse.ArgumentParser(description="HF transformers peer of bench/cuda-engine.cpp")
    ap.add_argument("--model", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="eager,compiled")
    ap.add_argument("--json", default="")
    ap.add_argument("--budget-s", type=float, default=0, help="time budget for the whole run; 0 = none")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--prefill", default="512,2048,8192")
    a = ap.parse_args()
    a.runs = max(1, a.runs)
    a.modes = [m for m in a.modes.split(",") if m]
    if any(m not in ("eager", "compiled") for m in a.modes):
        ap.error("--modes takes eager and/or compiled")
    a.batches, a.prefill = int_list(a.batches), int_list(a.prefill)
    return Peer(a).run()


if __name__ == "__main__":
    sys.exit(main())
