// Temporal's time-skipping test server for the workflow unit tests: the Java SDK's TestServer,
// resolved with Maven from infra/temporal-test-server/pom.xml into .stack/cache (once), and a
// launcher script that @temporalio/testing runs as an existing executable (it passes the port).
// `npx tsx infra/stack/temporal-test-server.ts` installs it and prints the launcher's path.
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { copyMavenDependencies } from './maven.js';
import { paths } from './paths.js';

const POM = path.join(paths.root, 'infra', 'temporal-test-server', 'pom.xml');
const DIR = path.join(paths.cache, 'temporal-test-server');
const LIBS = path.join(DIR, 'lib');
const STAMP = path.join(DIR, '.resolved');
export const TEST_SERVER_LAUNCHER = path.join(DIR, 'temporal-test-server');

/** Installs the test server if missing; returns the launcher to give @temporalio/testing. */
export async function ensureTemporalTestServer(): Promise<string> {
  if (existsSync(STAMP) && existsSync(TEST_SERVER_LAUNCHER)) return TEST_SERVER_LAUNCHER;
  await copyMavenDependencies(POM, LIBS, "Temporal's test server");
  writeFileSync(
    TEST_SERVER_LAUNCHER,
    `#!/bin/sh\n# Temporal's time-skipping test server; the first argument is the port.\nexec java -Xmx256m -cp '${LIBS}/*' io.temporal.testserver.TestServer "$@"\n`,
  );
  chmodSync(TEST_SERVER_LAUNCHER, 0o755);
  writeFileSync(STAMP, `${new Date().toISOString()}\n`);
  return TEST_SERVER_LAUNCHER;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  ensureTemporalTestServer().then(
    (p) => console.log(`[temporal-test-server] ready: ${p}`),
    (e: Error) => {
      console.error(`[temporal-test-server] ${e.message}`);
      process.exit(1);
    },
  );
}
