// Starts the real stack once for the whole test run (reusing a running one) and hands the
// endpoints to tests through vitest's provide/inject.
import type { TestProject } from 'vitest/node';
import { up } from '../infra/stack/cli.js';
import { type Endpoints, loadEndpoints } from '../platform/config/endpoints.js';
import { migrate } from '../platform/store/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    endpoints: Endpoints;
  }
}

export default async function setup(project: TestProject): Promise<void> {
  await up();
  await migrate();
  // With the owner role's URL (ownerDatabaseUrl) for tests that play an attacker owning the tables.
  project.provide('endpoints', loadEndpoints());
}
