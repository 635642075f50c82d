// A secured stack of one test file's own (infra/stack/secure.ts): its folder under .stack
// (installed artifacts linked from the shared stack), free ports, certificates for the names
// asked for, started and stopped by the stack manager's CLI as `stack:up --secure` runs it. The
// shared stack and .stack/secure are not touched.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { linkInstalled } from '../../infra/stack/link.js';
import {
  ANOTHER_STACKS_SETTINGS,
  ensureSecureFiles,
  type SecureFiles,
  type SecurePorts,
  secureFiles,
  secureStackEnv,
} from '../../infra/stack/secure.js';
import { freeServicePort } from '../../platform/util/free-port.js';
import { ROOT } from './sources.js';

const execFileP = promisify(execFile);

export interface PrivateSecureStack {
  dir: string;
  ports: SecurePorts;
  files: SecureFiles;
  /** The environment of a rods process on this stack (the test's own environment underneath). */
  env: NodeJS.ProcessEnv;
  /** Runs the stack manager's CLI (`up`, `down`, `status --json`) on this stack. */
  stack(args: string[]): Promise<string>;
  stop(): Promise<void>;
}

/** Variables of the test's own (shared) stack that would point a process elsewhere. */
export const ELSEWHERE = ANOTHER_STACKS_SETTINGS;

export async function startPrivateSecureStack(opts: { names?: string[] } = {}): Promise<PrivateSecureStack> {
  const shared = path.join(ROOT, '.stack');
  const dir = path.join(shared, `secure-test-${randomUUID().slice(0, 8)}`);
  linkInstalled(shared, dir);
  const taken = new Set<number>();
  const port = async (): Promise<number> => {
    for (;;) {
      const p = await freeServicePort();
      // The dev server's HTTP and metrics ports are its port + 1 and + 2.
      if (![p, p + 1, p + 2].some((x) => taken.has(x))) {
        for (const x of [p, p + 1, p + 2]) taken.add(x);
        return p;
      }
    }
  };
  const ports: SecurePorts = {
    kafka: await port(),
    kafkaController: await port(),
    postgres: await port(),
    temporal: await port(),
    temporalInternal: await port(),
    executor: await port(),
  };
  ensureSecureFiles(dir, { names: opts.names ?? ['localhost'] });
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ELSEWHERE) delete env[k];
  Object.assign(env, secureStackEnv(dir, ports));
  const stack = async (args: string[]) => {
    const r = await execFileP(
      process.execPath,
      [path.join(ROOT, 'node_modules/tsx/dist/cli.mjs'), path.join(ROOT, 'infra/stack/cli.ts'), ...args],
      { cwd: ROOT, env, maxBuffer: 16 << 20 },
    ).catch((e: Error & { stdout?: string; stderr?: string }) => {
      throw new Error(`stack ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
    });
    return r.stdout;
  };
  await stack(['up']);
  return {
    dir,
    ports,
    files: secureFiles(dir),
    env,
    stack,
    async stop() {
      await stack(['down']).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
