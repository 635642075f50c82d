// The network-namespace plumbing of test/support/netns.ts: a server bound in one namespace answers
// its peer over their veth pair, by the name the peer's /etc/hosts gives it, and neither the
// namespace two links away nor the host's own namespace reaches it.
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createNetnsLab,
  type NetnsLab,
  netnsUnavailable,
  parseListeners,
  removeStaleNamespaces,
} from './netns.js';
import { waitUntil } from './wait.js';

// Connects to host:port and prints `connected <what the server sent>` or `error <code>`; after
// `windowMs` without either, `no connection`.
const CONNECT = `
const [host, port, windowMs] = process.argv.slice(1);
const s = require('node:net').connect(Number(port), host);
const t = setTimeout(() => { console.log('no connection'); process.exit(0); }, Number(windowMs));
s.on('data', (d) => { console.log('connected ' + d); clearTimeout(t); s.destroy(); });
s.on('error', (e) => { console.log('error ' + e.code); clearTimeout(t); });
`;
const SERVE = `
const [host, port] = process.argv.slice(1);
require('node:net').createServer((c) => c.end('hello')).listen(Number(port), host, () => console.log('listening'));
`;

it('parses ss -ltnH lines: IPv4, IPv6 in brackets, interface suffixes and wildcards', () => {
  const l = parseListeners(
    [
      'LISTEN 0      511        10.231.0.1:5533      0.0.0.0:*    users:(("postgres",pid=7,fd=6))',
      'LISTEN 0      4096            [::1]:7334         [::]:*',
      'LISTEN 0      128   127.0.0.53%lo:53        0.0.0.0:*',
      'LISTEN 0      511                 *:8080            *:*',
      'LISTEN 0      511           0.0.0.0:22      0.0.0.0:*',
      'LISTEN 0      50     [::ffff:10.231.0.1]:9193        *:*    users:(("java",pid=9,fd=96))',
    ].join('\n'),
  );
  expect(l.map((x) => [x.host, x.port])).toEqual([
    ['10.231.0.1', 5533],
    ['::1', 7334],
    ['127.0.0.53', 53],
    ['*', 8080],
    ['0.0.0.0', 22],
    ['10.231.0.1', 9193],
  ]);
});

const unavailable = netnsUnavailable();
if (unavailable) console.warn(`SKIPPED test/support/netns.int.test.ts: ${unavailable}`);

describe.skipIf(unavailable !== undefined)('network namespaces (ip netns)', () => {
  let lab: NetnsLab;
  beforeAll(async () => {
    await removeStaleNamespaces();
    lab = await createNetnsLab({
      roles: ['a', 'b', 'c'],
      links: [
        ['a', 'b'],
        ['b', 'c'],
      ],
      hosts: { b: { 'a.rods.test': 'a' }, c: { 'a.rods.test': 'a>b' } },
    });
  });
  afterAll(async () => {
    await lab?.teardown();
  });

  it('a server in one namespace answers its peer, not the namespace beyond it nor the host', async () => {
    const at = lab.addr('a', 'b');
    const server = lab.spawnIn('a', process.execPath, ['-e', SERVE, at, '4555'], { stdio: 'ignore' });
    await waitUntil(async () => (await lab.listening('a')).some((l) => l.host === at && l.port === 4555), {
      what: `a server listening on ${at}:4555 in ${lab.ns('a')}`,
      timeoutMs: 30_000,
    });
    const connect = async (role: string | undefined, host: string) => {
      const args = ['-e', CONNECT, host, '4555', '3000'];
      if (role) return (await lab.exec(role, process.execPath, args)).stdout.trim();
      return execFileSync(process.execPath, args, { encoding: 'utf8' }).trim();
    };
    // The peer reaches it by the name its /etc/hosts carries, and by address.
    expect(await connect('b', 'a.rods.test')).toBe('connected hello');
    expect(await connect('b', at)).toBe('connected hello');
    // The namespace two links away has no route to it (nothing is forwarded).
    expect(await connect('c', at)).toBe('error ENETUNREACH');
    // The host's namespace holds none of the lab's addresses, so nothing it sends arrives there.
    expect(execFileSync('ip', ['-o', 'addr', 'show'], { encoding: 'utf8' })).not.toContain('10.231.');
    expect(await connect(undefined, at)).not.toMatch(/^connected/);
    // localhost is still loopback inside a namespace; the names asked for resolve to the peer.
    const resolve = async (role: string, name: string) =>
      (await lab.exec(role, 'getent', ['ahostsv4', name])).stdout.split(/\s+/)[0];
    expect(await resolve('b', 'localhost')).toBe('127.0.0.1');
    expect(await resolve('c', 'a.rods.test')).toBe(lab.addr('a', 'b'));
    server.kill('SIGTERM');
  });

  it('teardown deletes the namespaces and their /etc/netns folders', async () => {
    const other = await createNetnsLab({ roles: ['x'], links: [] });
    const list = () => execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    expect(list()).toContain(other.ns('x'));
    // A process left running in it is stopped too.
    const sleeper = other.spawnIn('x', 'sleep', ['600'], { stdio: 'ignore' });
    await waitUntil(async () => (await other.exec('x', 'true', [])).code === 0, { what: 'exec in x' });
    await other.teardown();
    expect(list()).not.toContain(other.ns('x'));
    await waitUntil(() => sleeper.exitCode !== null || sleeper.signalCode !== null, {
      what: 'the process in the deleted namespace to end',
    });
  });
});
