// `rods gateway` as operators start it: tokens from RODS_GATEWAY_TOKENS (admin, with one warning
// at startup that never shows a token) or from a tokens file with scopes, and a limit variable
// that is not a number refused at startup naming it. Temporal points at a closed port (no
// workflow is started); PostgreSQL is the shared one.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../../platform/util/free-port.js';
import { ROOT } from '../../../test/support/sources.js';
import { waitUntil } from '../../../test/support/wait.js';

const children: ChildProcess[] = [];

async function gateway(env: Record<string, string>) {
  const port = await freePort();
  let out = '';
  const rest = { ...process.env };
  delete rest.RODS_GATEWAY_TOKENS;
  delete rest.RODS_GATEWAY_TOKENS_FILE;
  const child = spawn(
    process.execPath,
    [path.join(ROOT, 'bin/rods.mjs'), 'gateway', '--port', String(port)],
    {
      cwd: ROOT,
      env: { ...rest, RODS_LOG_LEVEL: 'warn', TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout?.on('data', (d) => {
    out += d;
  });
  child.stderr?.on('data', (d) => {
    out += d;
  });
  children.push(child);
  const base = `http://127.0.0.1:${port}`;
  const up = async () =>
    waitUntil(
      async () => {
        if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode}): ${out}`);
        return (await fetch(`${base}/healthz`).catch(() => undefined))?.ok;
      },
      { what: 'the gateway to answer /healthz', timeoutMs: 90_000, intervalMs: 250 },
    );
  return { child, base, up, output: () => out };
}

const call = (base: string, token: string, method: string, p: string, body?: unknown) =>
  fetch(`${base}${p}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

describe('rods gateway tokens', () => {
  it('RODS_GATEWAY_TOKENS still works, as admin, and warns once without showing the token', async () => {
    const token = randomBytes(16).toString('hex');
    const g = await gateway({ RODS_GATEWAY_TOKENS: token });
    await g.up();
    // Admin passes the scope check of campaign creation and meets validation (422, not 403).
    const r = await call(g.base, token, 'POST', '/v1/campaigns', { campaignId: 'x' });
    expect(r.status).toBe(422);
    expect(g.output().match(/warning: RODS_GATEWAY_TOKENS gives 1 admin token/g)).toHaveLength(1);
    expect(g.output()).not.toContain(token);
  });

  it('a tokens file gives each token its scopes', async () => {
    const [admin, trainer] = [randomBytes(16).toString('hex'), randomBytes(16).toString('hex')];
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'rods-gw-tokens-')), 'tokens');
    writeFileSync(file, `${admin} admin\n${trainer} campaign:cli-a # trainer\n`, { mode: 0o600 });
    const g = await gateway({ RODS_GATEWAY_TOKENS_FILE: file });
    await g.up();
    const refused = await call(g.base, trainer, 'POST', '/v1/campaigns', { campaignId: 'x' });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/^requires scope admin/);
    const other = await call(g.base, trainer, 'GET', '/v1/campaigns/cli-b/pool');
    expect(((await other.json()) as { detail: string }).detail).toMatch(
      /^requires scope read, campaign:cli-b or admin/,
    );
    expect((await call(g.base, admin, 'POST', '/v1/campaigns', { campaignId: 'x' })).status).toBe(422);
    expect(g.output()).not.toMatch(/warning/);
    expect(g.output()).not.toContain(trainer);
  });

  it('refuses a bad tokens file or limit at startup, naming the line or the variable', async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'rods-gw-tokens-')), 'tokens');
    writeFileSync(file, 'hunter2hunter2 writer\n', { mode: 0o600 });
    const bad = await gateway({ RODS_GATEWAY_TOKENS_FILE: file });
    await waitUntil(() => bad.child.exitCode !== null, { what: 'the gateway to exit', timeoutMs: 60_000 });
    expect(bad.child.exitCode).not.toBe(0);
    expect(bad.output()).toMatch(/tokens file line 1: unknown scope "writer"/);
    expect(bad.output()).not.toContain('hunter2');
    const limit = await gateway({ RODS_GATEWAY_TOKENS: 'x', RODS_GATEWAY_RATE_LIMIT: 'lots' });
    await waitUntil(() => limit.child.exitCode !== null, { what: 'the gateway to exit', timeoutMs: 60_000 });
    expect(limit.output()).toMatch(/RODS_GATEWAY_RATE_LIMIT must be an integer/);
  });
});
