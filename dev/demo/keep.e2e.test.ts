// `npm run dev -- demo --keep`: after the report, the gateway stays up serving the dashboard of the demo
// campaign with the read-only token the demo wrote, the printed URL and hint lead there, and the
// stop script it wrote stops exactly that gateway.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../infra/stack/proc.js';
import { ROOT } from '../../test/support/sources.js';
import { waitUntil } from '../../test/support/wait.js';

const execFileP = promisify(execFile);
const dir = mkdtempSync(path.join(tmpdir(), 'rods-demo-keep-'));
let pid: number | undefined;

afterAll(() => {
  // The test stops the gateway through the script; if it failed before, stop it here.
  if (pid && isAlive(pid)) process.kill(pid, 'SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

describe('npm run dev -- demo --keep', () => {
  it('leaves the gateway serving the dashboard, says how to open it and how to stop it', async () => {
    const out = path.join(dir, 'report');
    const run = await execFileP(
      process.execPath,
      [
        path.join(ROOT, 'bin/rods-dev.mjs'),
        'demo',
        '--steps',
        '2',
        '--per-category',
        '3',
        '--out',
        out,
        '--keep',
        '--json',
      ],
      { cwd: ROOT, maxBuffer: 16 << 20 },
    );
    const r = JSON.parse(run.stdout) as {
      campaignId: string;
      dashboard: { url: string; tokenFile: string; gatewayPid: number; stopScript: string };
    };
    pid = r.dashboard.gatewayPid;
    expect(r.dashboard.url).toMatch(
      new RegExp(`^http://127\\.0\\.0\\.1:\\d+/dashboard/#campaign=${r.campaignId}$`),
    );
    expect(statSync(r.dashboard.tokenFile).mode & 0o077).toBe(0);
    const token = readFileSync(r.dashboard.tokenFile, 'utf8').trim();
    const origin = new URL(r.dashboard.url).origin;

    // The demo is over and its gateway still answers: the page, and the campaign's data.
    expect(isAlive(pid)).toBe(true);
    const page = await fetch(`${origin}/dashboard/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<title>rods dashboard</title>');
    const auth = { authorization: `Bearer ${token}` };
    const list = (await (await fetch(`${origin}/v1/dashboard/campaigns`, { headers: auth })).json()) as {
      campaigns: { campaignId: string }[];
    };
    expect(list.campaigns.map((c) => c.campaignId)).toContain(r.campaignId);
    const series = (await (
      await fetch(`${origin}/v1/campaigns/${r.campaignId}/dashboard/series`, { headers: auth })
    ).json()) as { steps: unknown[] };
    expect(series.steps).toHaveLength(2);
    // The token reads and changes nothing.
    const write = await fetch(`${origin}/v1/campaigns`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(write.status).toBe(403);

    // The stop script stops that gateway.
    expect(existsSync(r.dashboard.stopScript)).toBe(true);
    await execFileP('sh', [r.dashboard.stopScript]);
    await waitUntil(() => !isAlive(pid!), {
      what: `gateway ${pid} to stop`,
      timeoutMs: 20_000,
      intervalMs: 100,
    });
  });
});
