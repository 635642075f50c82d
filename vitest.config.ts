import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Temporal's native bridge does not survive worker threads: run test files in forks.
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
    // The Temporal SDK's log goes to .stack/logs/tests/, printed for a failing test only.
    setupFiles: ['test/support/temporal-log.ts'],
    include: ['**/*.{unit,int,e2e}.test.ts'],
    // The real-vLLM tests run on their own (vitest.vllm.config.ts), npm test's third run.
    exclude: ['node_modules/**', '.stack/**', 'infra/stack/vllm.int.test.ts', '**/*.vllm.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    fileParallelism: true,
    maxWorkers: 2,
    // One line a file: what a test prints is shown only when it fails (console output of passing
    // tests is dropped), and no per-test timing lines (test/run.mjs ends with the slowest files).
    silent: 'passed-only',
    slowTestThreshold: 3_600_000,
  },
});
