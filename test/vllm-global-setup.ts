// The global setup of vitest.vllm.config.ts: vLLM alone, started (or a running one reused) by the
// stack manager, as `npm run stack:up -- --services vllm` does.
import { pickServices, up } from '../infra/stack/cli.js';

export default async function setup(): Promise<void> {
  await up(pickServices('vllm'));
}
