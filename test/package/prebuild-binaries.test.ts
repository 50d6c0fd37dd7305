// What the package ships, checked from the files themselves:
// - each prebuilt binary (prebuilds/linux-*/, made by `npm run prebuild`) asks the system for glibc <= 2.34 and
//   nothing of the compiler, and is built for its folder's machine (objdump -T, readelf; scripts/check-prebuilds.mjs);
//   the checker is first shown to catch what it is for, on this machine's own libc and on the local build;
// - `npm pack` takes what an install needs (dist, the prebuilds, the default model, the source build's inputs) and
//   leaves out the tests, the benchmarks and build outputs.
// Without prebuilds (CI builds none: nvcc for every target is a release step) their checks are skipped, saying so.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// @ts-expect-error: a plain .mjs script, no types
import { elfRequirements, listPrebuilds, MAX_GLIBC, prebuildProblems } from '../../scripts/check-prebuilds.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LOCAL_BUILD = join(ROOT, 'build/Release/vtengine.node');
const prebuilds = listPrebuilds(ROOT) as Array<{ folder: string; file: string }>;

function systemLibc(): string | null {
  const out = execFileSync('ldd', [LOCAL_BUILD], { encoding: 'utf8' });
  return out.match(/libc\.so\.6 => (\S+)/)?.[1] ?? null;
}

describe('the prebuild checker', () => {
  it.skipIf(!existsSync(LOCAL_BUILD))('reads glibc versions from a real ELF file: this machine\'s libc defines the newest', () => {
    // The local build imports from this machine's libc; that libc's own newest version node is what it was built as.
    const libc = systemLibc();
    expect(libc).not.toBeNull();
    const version = execFileSync(libc!, [], { encoding: 'utf8' }).match(/release version (\d+)\.(\d+)/);
    const local = elfRequirements(LOCAL_BUILD);
    expect(local.glibc.length).toBeGreaterThan(0);
    const newest = local.glibc[0].version as number[];
    // Imports are never newer than the libc they were linked against.
    expect(newest[0] * 1000 + newest[1]).toBeLessThanOrEqual(Number(version![1]) * 1000 + Number(version![2]));
  });

  it.skipIf(!existsSync(LOCAL_BUILD))('flags a binary that needs the compiler\'s runtime (the local build links libstdc++ dynamically)', () => {
    const r = prebuildProblems(LOCAL_BUILD, join(ROOT, 'prebuilds/linux-x64'));
    expect(r.needed).toContain('libstdc++.so.6');
    expect(r.problems.join('\n')).toMatch(/links against libstdc\+\+\.so\.6/);
  });

  it.skipIf(!existsSync(LOCAL_BUILD))('flags a binary in the wrong platform folder', () => {
    const r = prebuildProblems(LOCAL_BUILD, join(ROOT, 'prebuilds/linux-arm64'));
    expect(r.problems.join('\n')).toMatch(/built for Advanced Micro Devices X86-64, not AArch64/);
  });
});

describe.skipIf(!prebuilds.length)(`the prebuilt binaries ${prebuilds.length ? '' : '(none here: npm run prebuild)'}`, () => {
  for (const { folder, file } of prebuilds) {
    it(`${file.slice(ROOT.length)}: glibc <= ${MAX_GLIBC.join('.')}, glibc's libraries only, its folder's machine`, () => {
      const r = prebuildProblems(file, folder);
      expect(r.problems).toEqual([]);
      expect(r.needed).not.toContain('libstdc++.so.6');
      expect(r.needed).not.toContain('libgcc_s.so.1');
    });
  }
  it('each sits in a platform folder that node-gyp-build looks in, one binary per platform', () => {
    const folders = prebuilds.map((p) => p.folder.slice(ROOT.length));
    for (const f of folders) expect(['prebuilds/linux-x64', 'prebuilds/linux-arm64']).toContain(f);
    expect(new Set(folders).size).toBe(folders.length);
  });
});

describe('npm pack', () => {
  const files: string[] = (JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'],
    { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as Array<{ files: Array<{ path: string }> }>)[0]
    .files.map((f) => f.path);

  it.skipIf(!existsSync(join(ROOT, 'dist/index.js')))('takes the built SDK, the default model and the CLI', () => {
    for (const f of ['dist/index.js', 'dist/index.cjs', 'dist/index.d.ts', 'dist/cli/main.js', 'models/default/config.json',
      'models/default/tokenizer.json', 'models/default/model.safetensors.index.json', 'package.json', 'README.md']) {
      expect(files, f).toContain(f);
    }
  });

  it('takes what a source build needs on a platform without a prebuild', () => {
    for (const f of ['binding.gyp', 'scripts/install.mjs', 'scripts/build-cuda.mjs', 'scripts/native-sources.mjs',
      'third_party/nlohmann/include/nlohmann/json.hpp', 'cuda/src/engine.cpp', 'binding/addon.cpp']) {
      expect(files, f).toContain(f);
    }
  });

  it('leaves out tests, benchmarks, build outputs and generated kernels', () => {
    expect(files.filter((f) => /^(test|bench|build|examples|\.ci|\.gpu-carry)\//.test(f))).toEqual([]);
    expect(files).not.toContain('cuda/src/backend/cuda/kernels_fatbin.inc');
  });

  it.skipIf(!prebuilds.length)('takes every prebuild', () => {
    for (const { file } of prebuilds) expect(files).toContain(file.slice(ROOT.length));
  });
});
