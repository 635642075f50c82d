import { defineConfig } from 'vitest/config';

// `npm run test:unit`: the pure tests only (*.unit.test.ts), with no global setup, so they run in
// seconds with no PostgreSQL, Kafka or Temporal (CI runs them with those endpoints on closed ports).
// Test files share their worker processes (isolate: false): starting a fresh process per file
// was half of the tier's time. A test that mocks a module needs the module loaded fresh, so the
// files that call vi.mock run isolated (test/unit-isolation.unit.test.ts keeps the list true).
export const MOCKING_UNIT_TESTS = [
  'domain/step-plan-callers.unit.test.ts',
  'activities/synthesis-tokens.unit.test.ts',
  'activities/campaign-settle.unit.test.ts',
];
const EXCLUDE = ['node_modules/**', '.stack/**'];

export default defineConfig({
  test: {
    // Temporal's native bridge (the workflow-sandbox unit test bundles code) prefers forks.
    pool: 'forks',
    testTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['**/*.unit.test.ts'],
          exclude: [...EXCLUDE, ...MOCKING_UNIT_TESTS],
          isolate: false,
        },
      },
      { extends: true, test: { name: 'unit-isolated', include: MOCKING_UNIT_TESTS, exclude: EXCLUDE } },
    ],
  },
});
