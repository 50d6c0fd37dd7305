// bench/memory.py, the benchmark's external sampler, against allocations of known size made by a child in known
// phases: each phase's peak PSS must show what was held in it, and a grandchild's memory must count (the sampler
// sums the process tree). Skipped where python3 is missing.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MiB = 2 ** 20;
const python = spawnSync('python3', ['--version']).status === 0;

// load: 64 MiB; serve: +96 MiB in a grandchild process; idle: both freed. Each mark waits for the sampler's answer.
const CHILD = `
import json, os, subprocess, sys, time
def mark(p):
    print(json.dumps({"phase": p}), flush=True)
    if p != "end": sys.stdin.readline()
mark("load"); a = bytearray(64 << 20); time.sleep(0.4)
mark("serve")
g = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(96 << 20); time.sleep(0.6)"], stdin=subprocess.DEVNULL)
time.sleep(0.45); g.wait()
print("not a mark")
mark("idle"); del a; time.sleep(0.4)
print(json.dumps({"phase": "end", "info": {"ok": True}}), flush=True)
`;

describe.skipIf(!python)('bench/memory.py', () => {
  it('splits peaks by phase and sums the process tree', () => {
    const r = spawnSync('python3', [join(ROOT, 'bench/memory.py'), '--interval-ms', '50', '--label', 't', '--', 'python3', '-c', CHILD], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('not a mark'); // other lines of the child pass through
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect(out.info).toStrictEqual({ ok: true });
    expect(out.exitCode).toBe(0);
    const { load, serve, idle } = out.phases;
    for (const p of [load, serve, idle]) expect(p.samples).toBeGreaterThanOrEqual(2);
    expect(load.pssBytes).toBeGreaterThan(64 * MiB);
    expect(load.pssBytes).toBeLessThan(64 * MiB + 48 * MiB); // the runtime is small; no serve allocation leaked in
    expect(serve.pssBytes - load.pssBytes).toBeGreaterThan(0.9 * 96 * MiB); // the grandchild counts
    expect(idle.pssBytes).toBeLessThan(load.pssBytes); // freed
    expect(out.whole.pssBytes).toBe(Math.max(load.pssBytes, serve.pssBytes, idle.pssBytes));
    expect(out.whole.rssBytes).toBeGreaterThanOrEqual(out.whole.pssBytes);
    expect(out.whole.gpuBytes).toBeNull();
    expect(out.marksMs.serve).toBeGreaterThan(out.marksMs.load);
    expect(out.marksMs.idle).toBeGreaterThan(out.marksMs.serve);
  });
});
