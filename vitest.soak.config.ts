import { defineConfig } from 'vitest/config';

// The chaos soak (`*.soak.test.ts`): run by `npm test` after the other tests, alone, on its own
// private stack (dev/soak/private-stack.ts), so its faults never reach the shared services.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['**/*.soak.test.ts'],
    exclude: ['node_modules/**', '.stack/**'],
    testTimeout: 40 * 60_000,
    fileParallelism: false,
  },
});
