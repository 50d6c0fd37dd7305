// The procfs parser against files in the kernel's own formats (smaps_rollup, per-mapping smaps, meminfo, as Linux
// 6.x writes them), the smaps fallback for kernels without smaps_rollup, and the null-with-a-reason answers for a
// missing or malformed procfs and for other platforms. The live /proc comparison is in test/golden/memory.test.ts.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

import {
  parseMeminfo,
  parseSmaps,
  readProcessMemory,
  readProcessMemorySync,
  readSystemMemory,
  readSystemMemorySync,
} from '../../lib/memory/procfs.js';
import { removeTempDirs, tempDir } from '../helpers/checkpoints.js';

const KB = 1024;

const ROLLUP = `559da16c1000-7ffd2e80a000 ---p 00000000 00:00 0                          [rollup]
Rss:                1748 kB
Pss:                 349 kB
Pss_Dirty:           112 kB
Pss_Anon:            112 kB
Pss_File:            237 kB
Pss_Shmem:             0 kB
Shared_Clean:       1596 kB
Shared_Dirty:          0 kB
Private_Clean:        40 kB
Private_Dirty:       112 kB
Referenced:         1748 kB
Anonymous:           112 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                 12 kB
SwapPss:              12 kB
Locked:                0 kB
`;

// Two mappings of per-mapping smaps: the figures are the sums.
const SMAPS = `563db1f28000-563db1f2a000 r--p 00000000 fe:00 260386                     /usr/bin/head
Size:                  8 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                   8 kB
Pss:                   8 kB
Pss_Dirty:             0 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         8 kB
Private_Dirty:         0 kB
Referenced:            8 kB
Anonymous:             0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd mr mw me
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Size:               1024 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                 600 kB
Pss:                 300 kB
Pss_Dirty:           300 kB
Shared_Clean:          0 kB
Shared_Dirty:        600 kB
Private_Clean:         0 kB
Private_Dirty:         0 kB
Referenced:          600 kB
Anonymous:           600 kB
Swap:                 40 kB
SwapPss:              20 kB
Locked:                0 kB
THPeligible:           1
ProtectionKey:         0
VmFlags: rd wr mr mw me ac
`;

const MEMINFO = `MemTotal:       24731708 kB
MemFree:        19470404 kB
MemAvailable:   23660464 kB
Buffers:          111716 kB
Cached:          4230120 kB
SwapCached:            0 kB
HugePages_Total:       0
HugePages_Free:        0
Hugepagesize:       2048 kB
DirectMap1G:    23068672 kB
`;

function fakeProc(files: Record<string, string>): string {
  const root = tempDir('vtengine-proc-');
  mkdirSync(join(root, 'self'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(root, name), text);
  return root;
}

afterAll(removeTempDirs);

describe('procfs parsing', () => {
  it('reads RSS, PSS, USS (Private_Clean + Private_Dirty), swap and the PSS split from smaps_rollup', () => {
    expect(parseSmaps(ROLLUP, 'smaps_rollup')).toStrictEqual({
      rssBytes: 1748 * KB,
      pssBytes: 349 * KB,
      ussBytes: (40 + 112) * KB,
      swapBytes: 12 * KB,
      pssAnonBytes: 112 * KB,
      pssFileBytes: 237 * KB,
      source: 'smaps_rollup',
    });
  });

  it('sums every mapping of per-mapping smaps, which has no PSS split', () => {
    expect(parseSmaps(SMAPS, 'smaps')).toStrictEqual({
      rssBytes: 608 * KB,
      pssBytes: 308 * KB,
      ussBytes: 8 * KB,
      swapBytes: 40 * KB,
      pssAnonBytes: null,
      pssFileBytes: null,
      source: 'smaps',
    });
  });

  it('reads MemTotal and MemAvailable from meminfo, skipping lines without kB', () => {
    expect(parseMeminfo(MEMINFO)).toStrictEqual({ totalBytes: 24731708 * KB, availableBytes: 23660464 * KB });
  });

  it('rejects text that is not what it should be', () => {
    expect(() => parseSmaps('Size: 8 kB\n', 'smaps')).toThrow(/Rss/);
    expect(() => parseMeminfo('MemTotal: 1 kB\n')).toThrow(/MemAvailable/);
  });
});

describe('procfs readers', () => {
  const platform = Object.getOwnPropertyDescriptor(process, 'platform')!;
  afterEach(() => Object.defineProperty(process, 'platform', platform));

  it('read smaps_rollup and meminfo, sync and async alike', async () => {
    const procRoot = fakeProc({ 'self/smaps_rollup': ROLLUP, 'self/smaps': SMAPS, meminfo: MEMINFO });
    const proc = readProcessMemorySync({ procRoot });
    expect(proc).toStrictEqual({ value: parseSmaps(ROLLUP, 'smaps_rollup') });
    expect(await readProcessMemory({ procRoot })).toStrictEqual(proc);
    const sys = readSystemMemorySync({ procRoot });
    expect(sys).toStrictEqual({ value: parseMeminfo(MEMINFO) });
    expect(await readSystemMemory({ procRoot })).toStrictEqual(sys);
  });

  it('fall back to summing smaps when smaps_rollup is absent (Linux < 4.14)', async () => {
    const procRoot = fakeProc({ 'self/smaps': SMAPS, meminfo: MEMINFO });
    expect(readProcessMemorySync({ procRoot })).toStrictEqual({ value: parseSmaps(SMAPS, 'smaps') });
    expect(await readProcessMemory({ procRoot })).toStrictEqual({ value: parseSmaps(SMAPS, 'smaps') });
  });

  it('answer null with a reason when the files are missing or malformed', async () => {
    const empty = fakeProc({});
    for (const r of [readProcessMemorySync({ procRoot: empty }), await readProcessMemory({ procRoot: empty })]) {
      expect(r.value).toBeNull();
      expect(r.reason).toMatch(/smaps_rollup.*smaps/);
    }
    for (const r of [readSystemMemorySync({ procRoot: empty }), await readSystemMemory({ procRoot: empty })]) {
      expect(r.value).toBeNull();
      expect(r.reason).toMatch(/meminfo/);
    }
    const bad = fakeProc({ 'self/smaps_rollup': 'nonsense\n', meminfo: 'MemTotal: 1 kB\n' });
    expect(readProcessMemorySync({ procRoot: bad })).toMatchObject({ value: null, reason: expect.stringMatching(/Rss/) });
    expect(readSystemMemorySync({ procRoot: bad })).toMatchObject({ value: null, reason: expect.stringMatching(/MemAvailable/) });
  });

  it('read another process by pid', () => {
    const root = fakeProc({ meminfo: MEMINFO });
    mkdirSync(join(root, '4242'));
    writeFileSync(join(root, '4242/smaps_rollup'), ROLLUP);
    expect(readProcessMemorySync({ procRoot: root, pid: 4242 }).value?.pssBytes).toBe(349 * KB);
  });

  it('answer null with a reason off Linux, without touching the filesystem', async () => {
    Object.defineProperty(process, 'platform', { ...platform, value: 'darwin' });
    const expected = { value: null, reason: 'procfs is Linux-only; this is darwin' };
    expect(readProcessMemorySync()).toStrictEqual(expected);
    expect(await readProcessMemory()).toStrictEqual(expected);
    expect(readSystemMemorySync()).toStrictEqual(expected);
    expect(await readSystemMemory()).toStrictEqual(expected);
  });
});
