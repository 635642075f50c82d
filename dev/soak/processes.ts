// The rods processes of a soak run, kept alive like a service manager would (restart on exit):
// a kill -9 from the fault injector is followed by a restart after a pause; an exit nobody asked
// for is counted, because every process is meant to ride out an outage without exiting.
import { type ChildProcess, spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import path from 'node:path';

export interface ProcessSpec {
  name: string;
  args: string[];
  /** The entry point: `rods` (bin/rods.mjs, the default) or the development commands (bin/rods-dev.mjs). */
  bin?: 'rods' | 'rods-dev';
  env?: Record<string, string>;
}

export interface ExitRecord {
  name: string;
  at: number;
  code: number | null;
  signal: string | null;
}

/** Every supervisor of this process, so an interrupted soak can take its processes down. */
export const supervisors = new Set<Supervisor>();

export class Supervisor {
  private readonly children = new Map<string, ChildProcess>();
  private readonly specs = new Map<string, ProcessSpec>();
  /** Processes we killed on purpose and have not restarted yet. */
  private readonly held = new Set<string>();
  private stopping = false;
  readonly unexpectedExits: ExitRecord[] = [];
  readonly starts = new Map<string, number>();

  constructor(
    private readonly root: string,
    private readonly logDir: string,
    private readonly env: Record<string, string>,
  ) {
    supervisors.add(this);
  }

  /** SIGKILL to every child, at once (an interrupted soak). */
  killAll(): void {
    this.stopping = true;
    for (const c of this.children.values()) if (c.exitCode === null) c.kill('SIGKILL');
  }

  start(spec: ProcessSpec): void {
    this.specs.set(spec.name, spec);
    this.held.delete(spec.name);
    const fd = openSync(path.join(this.logDir, `${spec.name}.log`), 'a');
    const child = spawn(
      process.execPath,
      [path.join(this.root, `bin/${spec.bin ?? 'rods'}.mjs`), ...spec.args],
      {
        cwd: this.root,
        stdio: ['ignore', fd, fd],
        env: { ...process.env, RODS_LOG_LEVEL: 'warn', ...this.env, ...spec.env },
      },
    );
    this.children.set(spec.name, child);
    this.starts.set(spec.name, (this.starts.get(spec.name) ?? 0) + 1);
    child.once('exit', (code, signal) => {
      if (this.children.get(spec.name) !== child) return;
      this.children.delete(spec.name);
      if (this.stopping || this.held.has(spec.name)) return;
      this.unexpectedExits.push({ name: spec.name, at: Date.now(), code, signal });
      // Restart like a service manager would, after a pause so a crash loop does not spin.
      setTimeout(() => {
        if (!this.stopping && !this.held.has(spec.name) && !this.children.has(spec.name)) this.start(spec);
      }, 2000);
    });
  }

  alive(name: string): boolean {
    const c = this.children.get(name);
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  }

  /** kill -9 and keep it down until restart(). */
  async kill9(name: string): Promise<boolean> {
    const c = this.children.get(name);
    this.held.add(name);
    if (!c || c.exitCode !== null) return false;
    const gone = new Promise<void>((r) => c.once('exit', () => r()));
    c.kill('SIGKILL');
    await gone;
    return true;
  }

  /** The OS pid of a running child. */
  pid(name: string): number | undefined {
    const c = this.children.get(name);
    return c && c.exitCode === null ? c.pid : undefined;
  }

  /** Sends a signal (SIGSTOP, SIGCONT) to a running child; false when it does not run. */
  signal(name: string, sig: NodeJS.Signals): boolean {
    const c = this.children.get(name);
    if (!c || c.exitCode !== null) return false;
    return c.kill(sig);
  }

  restart(name: string): void {
    const spec = this.specs.get(name);
    if (!spec) throw new Error(`no process named ${name}`);
    if (!this.alive(name)) this.start(spec);
  }

  names(): string[] {
    return [...this.specs.keys()];
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    const all = [...this.children.values()].filter((c) => c.exitCode === null);
    await Promise.all(
      all.map(
        (c) =>
          new Promise<void>((r) => {
            const t = setTimeout(() => c.kill('SIGKILL'), 15_000);
            c.once('exit', () => {
              clearTimeout(t);
              r();
            });
            c.kill('SIGTERM');
          }),
      ),
    );
  }
}
