import { defineConfig } from 'vitest/config';

// `npm run test:unit`: the pure tests only (*.unit.test.ts), with no global setup, so they run in
// seconds with no PostgreSQL, Kafka or Temporal (CI runs them with those endpoints on closed ports).
export default defineConfig({
  test: {
    // Temporal's native bridge (the workflow-sandbox unit test bundles code) prefers forks.
    pool: 'forks',
    include: ['**/*.unit.test.ts'],
    exclude: ['node_modules/**', '.stack/**'],
    testTimeout: 60_000,
  },
});
