#!/usr/bin/env python3
"""The external memory sampler of the memory benchmark (bench/memory.mjs). Standard library only, so the same
code measures vtengine and HF transformers, here and on the GPU machine (where there may be no Node).

    python3 bench/memory.py [--interval-ms 100] [--label NAME] [--out result.json] -- COMMAND [ARGS...]

It starts COMMAND and, every interval, sums over COMMAND's process tree (the child and all its descendants, found
through /proc/*/stat) the PSS and RSS from /proc/<pid>/smaps_rollup, reads MemAvailable from /proc/meminfo, and
the GPU bytes of those pids from NVML (libnvidia-ml.so.1 through ctypes; null with the reason when it is absent
or does not answer), and the growth of the devices' used memory since the start (all processes). COMMAND announces its phases by printing JSON lines on stdout, {"phase": "load"},
{"phase": "serve"}, {"phase": "idle"}, and finally {"phase": "end", "info": {...}}, and (when the environment
holds MEMORY_SAMPLER_ACK=1, as this sets it) waits after each but "end" for a line on stdin, which this writes once
it has taken the sample that closes the phase; each sample belongs to the
phase announced last before it (samples before the first announcement belong to "load": runtime start-up is
part of loading), and an announcement triggers a sample at once, counted in the phase it ends. Other stdout lines are passed through to stderr.

It prints (and writes to --out) one JSON object: per phase ("load", "serve", "idle", and "whole") the peak PSS,
peak RSS, peak GPU bytes and peak MemAvailable drop against the baseline (the median of 5 readings in the 0.5 s
before COMMAND starts), with the sample counts and times; and COMMAND's own "info" and exit code.
RSS over a tree counts pages shared between its processes once per process; PSS does not.
"""
import ctypes
import json
import os
import statistics
import subprocess
import sys
import threading
import time

PHASES = ("load", "serve", "idle")


def kb_fields(path, keys):
    out = {}
    with open(path, "rb") as f:
        for line in f.read().decode().splitlines():
            name, _, rest = line.partition(":")
            if name in keys and rest.strip().endswith("kB"):
                out[name] = int(rest.split()[0]) * 1024
    return out


def mem_available():
    return kb_fields("/proc/meminfo", ("MemAvailable",))["MemAvailable"]


def tree(root):
    """root and its descendants, from the ppid field of every /proc/<pid>/stat."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])  # the name may hold spaces and parentheses
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def tree_memory(pids):
    pss = rss = 0
    for pid in pids:
        try:
            f = kb_fields(f"/proc/{pid}/smaps_rollup", ("Pss", "Rss"))
        except OSError:
            continue  # it exited between the listing and the read
        pss += f.get("Pss", 0)
        rss += f.get("Rss", 0)
    return pss, rss


class Nvml:
    """Per-process GPU bytes from NVML, loaded at run time; `reason` says why not when it cannot."""

    class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_v2_t, what the _v3 query fills
        _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                    ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]

    def __init__(self):
        self.reason = None
        self.handles = []
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as e:
            self.reason = f"NVML is not available ({e})"
            return
        if self.lib.nvmlInit_v2() != 0:
            self.reason = "nvmlInit_v2 failed"
            return
        count = ctypes.c_uint(0)
        if self.lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            self.reason = "nvmlDeviceGetCount_v2 failed"
            return
        for i in range(count.value):
            h = ctypes.c_void_p()
            if self.lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0:
                self.handles.append(h)
        if not self.handles:
            self.reason = "NVML sees no GPU"

    class MemoryInfo(ctypes.Structure):  # nvmlMemory_t
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    def device_used(self):
        """Bytes used on all devices, by every process: the fallback where per-process figures are missing."""
        if not self.handles:
            return None
        used = 0
        for h in self.handles:
            m = self.MemoryInfo()
            if self.lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) != 0:
                return None
            used += m.used
        return used

    def bytes_of(self, pids):
        """GPU bytes held by any of pids over all devices, or None (and self.reason) when NVML cannot say."""
        if self.reason:
            return None
        wanted, total, seen = set(pids), 0, False
        for h in self.handles:
            n = ctypes.c_uint(64)
            while True:
                buf = (self.ProcessInfo * n.value)()
                rc = self.lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), buf)
                if rc != 7:  # NVML_ERROR_INSUFFICIENT_SIZE: n now holds the count needed
                    break
                n = ctypes.c_uint(n.value + 16)
            if rc != 0:
                self.reason = f"nvmlDeviceGetComputeRunningProcesses_v3 returned {rc}"
                return None
            for p in buf[: n.value]:
                if p.pid in wanted:
                    seen = True
                    if p.usedGpuMemory != 0xFFFFFFFFFFFFFFFF:  # NVML_VALUE_NOT_AVAILABLE (unified memory)
                        total += p.usedGpuMemory
        return total if seen else 0


def main():
    args = sys.argv[1:]
    if "--" not in args:
        sys.exit(__doc__)
    split = args.index("--")
    opts, command = args[:split], args[split + 1 :]
    interval = int(opts[opts.index("--interval-ms") + 1]) if "--interval-ms" in opts else 100
    label = opts[opts.index("--label") + 1] if "--label" in opts else os.path.basename(command[0])
    out_path = opts[opts.index("--out") + 1] if "--out" in opts else None

    nvml = Nvml()
    readings = []
    for _ in range(5):
        readings.append(mem_available())
        time.sleep(0.1)
    baseline = int(statistics.median(readings))
    gpu_baseline = nvml.device_used()

    started = time.monotonic()
    # MEMORY_SAMPLER_ACK: the child waits for a line on stdin after each phase mark, so the sample that closes a
    # phase is taken before the next phase starts.
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "MEMORY_SAMPLER_ACK": "1"})
    state = {"phase": "load", "info": None, "marks": {"load": 0.0}}
    pending, lock, wake = [], threading.Lock(), threading.Event()

    def read_markers():
        for line in child.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            if isinstance(msg, dict) and "phase" in msg:
                with lock:
                    pending.append((msg, (time.monotonic() - started) * 1000))
                wake.set()  # sample now: the state at the end of the phase that just ended
            else:
                sys.stderr.write(line)

    reader = threading.Thread(target=read_markers, daemon=True)
    reader.start()

    samples = []
    while True:
        t = (time.monotonic() - started) * 1000
        phase = state["phase"]
        with lock:
            arrived, pending[:] = list(pending), []
        pids = tree(child.pid)
        pss, rss = tree_memory(pids)
        gpu = nvml.bytes_of(pids)
        used = nvml.device_used()
        gpu_delta = used - gpu_baseline if used is not None and gpu_baseline is not None else None
        drop = baseline - mem_available()
        alive = child.poll() is None
        if alive and (pss or rss):
            samples.append({"t": round(t, 1), "phase": phase, "pss": pss, "rss": rss, "gpu": gpu, "gpuDelta": gpu_delta, "drop": drop})
        for i, (msg, at) in enumerate(arrived):  # this sample closed the old phase; the next ones belong to the new one
            if msg["phase"] == "end":
                state["info"] = msg.get("info")
                continue
            try:
                child.stdin.write("\n")
                child.stdin.flush()
            except OSError:
                pass  # it exited
            if i > 0 and samples and samples[-1]["t"] == round(t, 1):  # phases shorter than one sample: this one is theirs too
                samples.append({**samples[-1], "phase": state["phase"], "dup": True})
            state["phase"] = msg["phase"]
            state["marks"][msg["phase"]] = at
        if not alive:
            break
        wake.wait(max(0.0, interval / 1000 - ((time.monotonic() - started) * 1000 - t) / 1000))
        wake.clear()
    reader.join(timeout=5)

    def peaks(rows):
        if not rows:
            return None
        gpus = [r["gpu"] for r in rows if r["gpu"] is not None]
        deltas = [r["gpuDelta"] for r in rows if r["gpuDelta"] is not None]
        return {
            "samples": len(rows),
            "fromMs": rows[0]["t"],
            "toMs": rows[-1]["t"],
            "pssBytes": max(r["pss"] for r in rows),
            "rssBytes": max(r["rss"] for r in rows),
            "gpuBytes": max(gpus) if gpus else None,
            # Device memory used by everyone, less what was used before the start: on a GPU no one else uses, the
            # process's own bytes; shown where NVML does not list the process (containers with their own pids).
            "gpuDeviceDeltaBytes": max(deltas) if deltas else None,
            "availableDropBytes": max(r["drop"] for r in rows),
        }

    result = {
        "label": label,
        "command": command,
        "intervalMs": interval,
        "baselineAvailableBytes": baseline,
        "exitCode": child.returncode,
        "gpuReason": nvml.reason,
        "marksMs": state["marks"],
        "phases": {p: peaks([s for s in samples if s["phase"] == p]) for p in PHASES},
        "whole": peaks([s for s in samples if not s.get("dup")]),
        "info": state["info"],
    }
    text = json.dumps(result)
    if out_path:
        with open(out_path, "w") as f:
            f.write(text + "\n")
    print(text)
    sys.exit(0 if child.returncode == 0 else 1)


if __name__ == "__main__":
    main()
