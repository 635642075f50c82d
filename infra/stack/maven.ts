// Jars the stack runs (Kafka, Temporal's test server) come from Maven Central through a pom
// that is only a dependency list: `mvn dependency:copy-dependencies` into a cache folder.
import { mkdirSync } from 'node:fs';
import { run, which } from './proc.js';

/** Copies the runtime dependencies of `pom` into `dir`; `what` names them in errors. */
export async function copyMavenDependencies(pom: string, dir: string, what: string): Promise<void> {
  for (const tool of ['java', 'mvn']) {
    if (!(await which(tool))) {
      throw new Error(
        `\`${tool}\` is not on PATH (${what} runs on Java); install it with \`apt-get install -y ${tool === 'java' ? 'openjdk-17-jre-headless' : 'maven'}\``,
      );
    }
  }
  mkdirSync(dir, { recursive: true });
  await run('mvn', [
    '-B',
    '-q',
    '-f',
    pom,
    'dependency:copy-dependencies',
    `-DoutputDirectory=${dir}`,
    '-DincludeScope=runtime',
  ]).catch((e: Error & { stdout?: string; stderr?: string }) => {
    throw new Error(
      `Maven could not resolve ${what} (is Maven Central reachable?):\n${(e.stdout ?? '') + (e.stderr ?? '')}`.slice(
        0,
        4000,
      ),
    );
  });
}
