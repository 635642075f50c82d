// Machines of their own for a test: Linux network namespaces (`ip netns`), joined by veth pairs
// whose addresses exist inside those namespaces only (the host's namespace gets no address and no
// route). A link joins two namespaces and nothing is routed further, so two namespaces without a
// link of their own cannot reach each other. Inside each namespace `/etc/hosts` is the host's
// with the names asked for added (`ip netns exec` bind-mounts /etc/netns/<ns>/hosts over it).
// Needs root; `netnsUnavailable()` says why it cannot run here.
import { type ChildProcess, execFile, type SpawnOptions, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

/** Every namespace of ours is named `rods-<lab id>-<role>`. */
const PREFIX = 'rods-';
/** Which process made each namespace (a namespace whose maker is gone is stale). */
const OWNERS = '/run/rods-netns';

const ip = (args: string[]) => execFileP('ip', args, { maxBuffer: 16 << 20 });

/** Why namespaces cannot be made here (not root, `ip netns add` refused), or undefined when they can. */
export function netnsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root (ip netns needs root)';
  const probe = `${PREFIX}probe-${randomBytes(3).toString('hex')}`;
  const r = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' });
  if (r.error) return `\`ip\` (iproute2) cannot be run: ${r.error.message}`;
  if (r.status !== 0) return `\`ip netns add\` is not permitted here: ${r.stderr.trim()}`;
  spawnSync('ip', ['netns', 'del', probe]);
  return undefined;
}

/** A listening socket as `ss -ltnH` shows it. */
export interface Listener {
  /** The local address without brackets or `%interface` (`*` for any). */
  host: string;
  port: number;
  /** The line as ss printed it (with the process, when ss knows it). */
  line: string;
}

/** Parses `ss -ltnH` / `ss -ltnpH` output. */
export function parseListeners(out: string): Listener[] {
  return out
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((line) => {
      // State Recv-Q Send-Q Local Peer [Process]
      const local = line.split(/\s+/)[3] ?? '';
      const i = local.lastIndexOf(':');
      const host = local
        .slice(0, i)
        .replace(/^\[(.*)\]$/, '$1')
        .replace(/%.*$/, '')
        // An IPv4 address on an IPv6 socket (Java's): ::ffff:10.0.0.1.
        .replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, '$1');
      return { host, port: Number(local.slice(i + 1)), line };
    });
}

/** Whether a listening address is loopback (127.0.0.0/8, ::1; parseListeners unmaps ::ffff:). */
export const loopbackAddress = (host: string) => /^127\./.test(host) || host === '::1';

/** Whether a listening address is every address (0.0.0.0, ::, *). */
export const wildcardAddress = (host: string) => ['0.0.0.0', '::', '*', ''].includes(host);

export interface NetnsLabOptions {
  /** The namespaces, by role (e.g. services, rods, trainer). */
  roles: string[];
  /** Pairs of roles joined by a veth pair (link i: 10.231.i.1 on the first, .2 on the second). */
  links: [string, string][];
  /** Names in each role's /etc/hosts: role -> name -> whose address the name is: `peer` (the
   *  peer's address on its link with this role) or `owner>peer` (owner's address on its link to
   *  peer, e.g. the role's own address facing a given peer). */
  hosts?: Record<string, Record<string, string>>;
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface NetnsLab {
  id: string;
  /** The namespace of a role. */
  ns(role: string): string;
  /** The address `role` has on its link to `peer`. */
  addr(role: string, peer: string): string;
  /** Every address of `role` (one per link). */
  addresses(role: string): string[];
  /** Starts a process in the role's namespace (`ip netns exec`); stopped by teardown at the latest. */
  spawnIn(role: string, cmd: string, args: string[], opts?: SpawnOptions): ChildProcess;
  /** Runs a command to its end in the role's namespace; never throws for a non-zero exit. */
  exec(
    role: string,
    cmd: string,
    args: string[],
    opts?: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string },
  ): Promise<ExecResult>;
  /** The TCP sockets listening in the role's namespace. */
  listening(role: string): Promise<Listener[]>;
  /** Stops every process in the namespaces, deletes them and their /etc/netns folders. */
  teardown(): Promise<void>;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function pidsIn(ns: string): Promise<number[]> {
  const r = await ip(['netns', 'pids', ns]).catch(() => ({ stdout: '' }));
  return r.stdout
    .split('\n')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
}

/** Stops the processes in a namespace (TERM, then KILL after a grace period) and deletes it. */
async function removeNamespace(ns: string, graceMs = 20_000): Promise<void> {
  let pids = await pidsIn(ns);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      /* gone */
    }
  }
  const deadline = Date.now() + graceMs;
  while (pids.length > 0 && Date.now() < deadline) {
    await sleep(100);
    pids = (await pidsIn(ns)).filter(alive);
  }
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await ip(['netns', 'del', ns]).catch(() => {});
  rmSync(path.join('/etc/netns', ns), { recursive: true, force: true });
  rmSync(path.join(OWNERS, ns), { force: true });
}

/**
 * Deletes the `rods-*` namespaces earlier runs left behind: those whose maker (recorded at
 * creation) no longer runs. A namespace of a run still going on is left alone.
 */
export async function removeStaleNamespaces(): Promise<string[]> {
  const { stdout } = await ip(['netns', 'list']);
  const ours = stdout
    .split('\n')
    .map((l) => l.split(/\s+/)[0] ?? '')
    .filter((n) => n.startsWith(PREFIX));
  const stale = ours.filter((ns) => {
    const f = path.join(OWNERS, ns);
    const owner = existsSync(f) ? Number(readFileSync(f, 'utf8').trim()) : 0;
    return !(owner > 0 && alive(owner));
  });
  for (const ns of stale) await removeNamespace(ns, 5_000);
  // Folders of namespaces gone already.
  if (existsSync('/etc/netns'))
    for (const d of readdirSync('/etc/netns'))
      if (d.startsWith(PREFIX) && !ours.includes(d)) rmSync(path.join('/etc/netns', d), { recursive: true });
  return stale;
}

export async function createNetnsLab(opts: NetnsLabOptions): Promise<NetnsLab> {
  const id = randomBytes(3).toString('hex');
  const ns = (role: string) => {
    if (!opts.roles.includes(role)) throw new Error(`no namespace for role ${role}`);
    return `${PREFIX}${id}-${role}`;
  };
  const addrs = new Map<string, string>(); // `${role}>${peer}` -> address
  const children = new Set<ChildProcess>();
  const made: string[] = [];
  const lab: NetnsLab = {
    id,
    ns,
    addr(role, peer) {
      const a = addrs.get(`${role}>${peer}`);
      if (!a) throw new Error(`${role} has no link to ${peer}`);
      return a;
    },
    addresses: (role) => [...addrs].filter(([k]) => k.startsWith(`${role}>`)).map(([, a]) => a),
    spawnIn(role, cmd, args, o = {}) {
      const child = spawn('ip', ['netns', 'exec', ns(role), cmd, ...args], o);
      children.add(child);
      child.once('exit', () => children.delete(child));
      return child;
    },
    exec(role, cmd, args, o = {}) {
      return new Promise((resolve, reject) => {
        const child = spawn('ip', ['netns', 'exec', ns(role), cmd, ...args], {
          env: o.env ?? process.env,
          cwd: o.cwd,
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d: Buffer) => {
          stdout += d.toString();
        });
        child.stderr.on('data', (d: Buffer) => {
          stderr += d.toString();
        });
        child.once('error', reject);
        child.once('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
        // A command that exits without reading its input makes this write fail with EPIPE; its
        // exit code and stderr say what happened, the pipe's error adds nothing.
        child.stdin.once('error', () => undefined);
        child.stdin.end(o.input ?? '');
      });
    },
    async listening(role) {
      const r = await lab.exec(role, 'ss', ['-ltnpH']);
      if (r.code !== 0) throw new Error(`ss in ${ns(role)} failed: ${r.stderr}`);
      return parseListeners(r.stdout);
    },
    async teardown() {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
      for (const n of made) await removeNamespace(n);
    },
  };
  try {
    mkdirSync(OWNERS, { recursive: true });
    const hostsBase = readFileSync('/etc/hosts', 'utf8');
    for (const role of opts.roles) {
      const n = ns(role);
      await ip(['netns', 'add', n]);
      made.push(n);
      writeFileSync(path.join(OWNERS, n), `${process.pid}\n`);
      await ip(['-n', n, 'link', 'set', 'lo', 'up']);
    }
    for (const [i, [a, b]] of opts.links.entries()) {
      // Interface names: at most 15 characters; made in the host's namespace, moved at once.
      const [va, vb] = [`rv${id}${i}a`, `rv${id}${i}b`];
      await ip(['link', 'add', va, 'type', 'veth', 'peer', 'name', vb]);
      await ip(['link', 'set', va, 'netns', ns(a)]);
      await ip(['link', 'set', vb, 'netns', ns(b)]);
      const [aa, ab] = [`10.231.${i}.1`, `10.231.${i}.2`];
      await ip(['-n', ns(a), 'addr', 'add', `${aa}/30`, 'dev', va]);
      await ip(['-n', ns(b), 'addr', 'add', `${ab}/30`, 'dev', vb]);
      await ip(['-n', ns(a), 'link', 'set', va, 'up']);
      await ip(['-n', ns(b), 'link', 'set', vb, 'up']);
      addrs.set(`${a}>${b}`, aa);
      addrs.set(`${b}>${a}`, ab);
    }
    for (const role of opts.roles) {
      const names = Object.entries(opts.hosts?.[role] ?? {}).map(([name, of]) => {
        const [owner, peer] = of.includes('>') ? of.split('>') : [of, role];
        return `${lab.addr(owner!, peer!)} ${name}`;
      });
      const dir = path.join('/etc/netns', ns(role));
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        path.join(dir, 'hosts'),
        `${hostsBase.trimEnd()}\n# added by test/support/netns.ts\n${names.join('\n')}\n`,
      );
    }
  } catch (e) {
    await lab.teardown();
    throw e;
  }
  return lab;
}
