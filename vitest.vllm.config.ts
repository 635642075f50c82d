import { defineConfig } from 'vitest/config';

// The real-vLLM tests (infra/stack/vllm.int.test.ts and every *.vllm.test.ts, which vitest.config.ts
// excludes): `npm test`'s third run, after the soak (vLLM is a 6.3 GB install built once per machine into the shared venv
// cache, and takes one to two minutes to start on two cores). Alone:
//   npx vitest run --config vitest.vllm.config.ts
// Its global setup brings up the stack and vLLM (as `npm run stack:up` and
// `npm run stack:up -- --services vllm`), or reuses running ones. `npm run stack:down` stops them.
export default defineConfig({
  test: {
    pool: 'forks',
    globalSetup: ['test/vllm-global-setup.ts'],
    include: ['infra/stack/vllm.int.test.ts', '**/*.vllm.test.ts'],
    setupFiles: ['test/support/temporal-log.ts'],
    exclude: ['node_modules/**', '.stack/**'],
    testTimeout: 300_000,
    // The first run builds the venv (about 5 minutes) and the server starts (up to 10).
    hookTimeout: 30 * 60_000,
    fileParallelism: false,
  },
});
