// The CUDA op checks (test/native/test_cuda_ops.cpp: every CUDA op against the CPU op) as part of the GPU test
// run. They need an NVIDIA GPU and a test binary built with the kernels embedded (`scripts/gpu-check.sh prepare`
// puts one in .gpu-out/; `node scripts/native-tests.mjs` builds test/native/build/test_cuda_ops); without
// either the test is skipped, which is what CI sees. scripts/gpu-check.sh runs the same binary directly.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

const binary = ['.gpu-out/test_cuda_ops', 'test/native/build/test_cuda_ops'].find((p) => existsSync(p));
const hasGpu = existsSync('/dev/nvidiactl');

describe('CUDA ops against the CPU ops', () => {
  it.skipIf(!hasGpu || !binary)('every check passes', () => {
    // exits non-zero (and execFileSync throws with its output) when a check fails
    const out = execFileSync(binary as string, { encoding: 'utf8', timeout: 300_000 });
    expect(out).not.toMatch(/^skipped:/m);
    expect(out).toMatch(/^\d+ passed, 0 failed$/m);
  });
});
