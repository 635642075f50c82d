// The global setup of vitest.vllm.config.ts (npm test's third run): the whole local stack, as the
// first run's global setup brings it up (reused when it runs), plus vLLM, started by the stack
// manager (`npm run stack:up -- --services vllm`) or reused. The stack is needed by the tests that
// put vLLM in the loop: a synthesis through it, a TRL checkpoint served by it and evaluated.
import type { TestProject } from 'vitest/node';
import { pickServices, up } from '../infra/stack/cli.js';
import { loadEndpoints } from '../platform/config/endpoints.js';
import { migrate } from '../platform/store/migrate.js';

export default async function setup(project: TestProject): Promise<void> {
  await up([...pickServices(undefined), ...pickServices('vllm')]);
  await migrate();
  project.provide('endpoints', loadEndpoints());
}
