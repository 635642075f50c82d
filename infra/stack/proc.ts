// Process plumbing for the local stack: detached spawns with pid files, ownership checks by
// command line (so `down` never signals a process that is not ours), port owners, log tails.
import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { promisify } from 'node:util';
import { paths } from './paths.js';

const execFileP = promisify(execFile);

export class StackError extends Error {
  override name = 'StackError';
  constructor(
    message: string,
    readonly service?: string,
    /** False when the service's log has nothing to do with the failure (e.g. a port conflict). */
    readonly logRelevant = true,
  ) {
    super(message);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export function cmdline(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return undefined;
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    // A zombie still answers kill(0); treat it as gone.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

/** The pid recorded for a service, if that process is alive and its command line carries all our markers. */
export function ourPid(service: string, ...markers: string[]): number | undefined {
  const file = paths.pid(service);
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').trim().split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (!isAlive(pid)) return undefined;
  const cl = cmdline(pid);
  return cl && markers.every((m) => cl.includes(m)) ? pid : undefined;
}

export function writePid(service: string, pid: number): void {
  writeFileSync(paths.pid(service), `${pid}\n`);
}

export function clearPid(service: string): void {
  rmSync(paths.pid(service), { force: true });
}

export interface SpawnOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  uid?: number;
  gid?: number;
}

/** Starts a long-running process detached from us, output appended to the service log. */
export function spawnDetached(service: string, cmd: string, args: string[], opts: SpawnOptions = {}): number {
  const fd = openSync(paths.log(service), 'a');
  try {
    const child = spawn(cmd, args, {
      detached: true,
      stdio: ['ignore', fd, fd],
      env: opts.env ?? process.env,
      cwd: opts.cwd ?? paths.root,
      ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
      ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
    });
    if (child.pid === undefined) throw new StackError(`could not spawn ${cmd}`, service);
    child.unref();
    writePid(service, child.pid);
    return child.pid;
  } finally {
    closeSync(fd);
  }
}

/** Sends SIGTERM, waits, then SIGKILL; only to a pid the caller has verified as ours. */
export async function terminate(pid: number, graceMs = 20_000): Promise<void> {
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return;
    await sleep(100);
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    /* already gone */
  }
  while (isAlive(pid)) await sleep(50);
}

export function portOpen(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Describes whoever listens on a TCP port ("pid 123 (java ...)"), for conflict messages. */
export async function portOwner(port: number): Promise<string> {
  try {
    const { stdout } = await execFileP('ss', ['-ltnpH', `sport = :${port}`]);
    const m = /pid=(\d+)/.exec(stdout);
    if (m) {
      const pid = Number(m[1]);
      return `pid ${pid} (${(cmdline(pid) ?? 'unknown').slice(0, 160)})`;
    }
    return stdout.trim() ? stdout.trim() : 'an unknown process';
  } catch {
    return 'an unknown process (ss is not available to tell which)';
  }
}

export function tail(file: string, lines = 30): string {
  if (!existsSync(file)) return `(no log at ${file})`;
  const text = readFileSync(file, 'utf8');
  return text
    .split('\n')
    .slice(-lines - 1)
    .join('\n');
}

export async function run(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; uid?: number; gid?: number } = {},
): Promise<{ stdout: string; stderr: string }> {
  return execFileP(cmd, args, { maxBuffer: 64 * 1024 * 1024, ...opts });
}

/** Finds an executable on PATH. */
export async function which(cmd: string): Promise<string | undefined> {
  try {
    const { stdout } = await execFileP('bash', ['-c', `command -v ${cmd}`]);
    return stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  alive?: () => boolean,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    if (alive && !alive()) throw new StackError(`${what}: the process exited during start-up`);
    await sleep(250);
  }
  throw new StackError(`${what}: not answering after ${Math.round(timeoutMs / 1000)} s`);
}

/** Stops the service's process, if one of ours runs, and forgets its pid file; false when none ran. */
export async function stopOurs(
  service: string,
  pid: number | null | undefined,
  graceMs: number,
): Promise<boolean> {
  if (pid) await terminate(pid, graceMs);
  clearPid(service);
  return Boolean(pid);
}
