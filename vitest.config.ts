import { defineConfig } from 'vitest/config';

// One test file at a time, in child processes: the golden and batching tests load native engines that use
// every core, so running files in parallel on a 2-core machine only adds noise and memory.
export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts', 'test/package/**/*.test.ts', 'test/golden/**/*.test.ts', 'test/gpu/**/*.test.ts', 'test/examples/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
