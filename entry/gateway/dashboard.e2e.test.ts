// The dashboard in a real browser: Debian's Chromium (headless, driven by playwright-core) opens
// the page the real gateway serves while a campaign runs (stand-in generator, in-process worker
// and aggregator, the simulated trainer posting its reward groups through the same gateway). The
// page must load without console errors, its charts must draw their data (coloured pixels on
// the canvases, not just canvases), the lineage explorer must find a generated task and show its
// human seed, and the token must never appear in a URL. Screenshots go to reports/screenshots/.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoopHarness } from '../../dev/harness/loop.js';
import { SimulatedTrainer } from '../../dev/simulator/trainer.js';
import { ROOT } from '../../test/support/sources.js';
import { ONE_SEED_PER_CATEGORY, standinCampaigns } from '../../test/support/standin-campaign.js';
import { waitUntil } from '../../test/support/wait.js';
import { TokenSet } from './auth.js';
import { DASHBOARD_DIST } from './dashboard.js';
import { buildGateway } from './server.js';

const CHROMIUM = process.env.RODS_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = path.join(
  ROOT,
  'reports',
  'screenshots',
  `dashboard-${new Date().toISOString().replace(/[:.]/g, '-')}`,
);
const ADMIN = `admin-${Math.random().toString(36).slice(2)}`;
const READER = `reader-${Math.random().toString(36).slice(2)}`;
const TRAINER = `trainer-${Math.random().toString(36).slice(2)}`;
// The chart colours of entry/dashboard/src/charts.ts.
const COLORS = {
  hard: '#d62728',
  boundary: '#2ca02c',
  mastered: '#1f77b4',
  seeds: '#8c564b',
  generated: '#9467bd',
  reward: '#e377c2',
};

const sc = standinCampaigns(['--seed', '23']);
let loop: LoopHarness;
let gateway: FastifyInstance;
let base = '';
let context: BrowserContext;
let userDataDir = '';
let generatedTask = '';
const consoleErrors: string[] = [];
const requestUrls: string[] = [];

beforeAll(async () => {
  // CI and `npm run demo` build the page first; a bare `npm test` builds it here.
  if (!existsSync(path.join(DASHBOARD_DIST, 'index.html')))
    execFileSync('npm', ['run', '--silent', 'build:dashboard'], { cwd: ROOT, stdio: 'inherit' });
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: infra/bootstrap.sh installs chromium`);
  loop = await sc.start({
    seeds: { perCategory: 3 },
    detector: { low: 0.2, high: 0.85 },
    selection: { ...ONE_SEED_PER_CATEGORY, maxConcurrentSyntheses: 4 },
    pool: { injectionCadence: 'steps:2' },
    // The generations chart draws active tasks: a generated task retired (burn-in or mastered) by
    // the step after its injection left it empty in one CI run. Retirement is not what this draws.
    ablation: { retirement: false },
  });
  const id = loop.campaignId;
  gateway = buildGateway({
    db: loop.pool,
    temporal: loop.client,
    tokens: new TokenSet([
      { token: ADMIN, scopes: ['admin'], label: 'admin' },
      { token: READER, scopes: [`campaign:${id}`], label: 'reader' },
      { token: TRAINER, scopes: [`campaign:${id}`], label: 'trainer' },
    ]),
    taskQueue: loop.taskQueue,
    rewardsTopic: loop.topic,
    status: { aggregatorGroup: `agg-${id}` },
    dashboard: { temporalUiUrl: 'http://127.0.0.1:8233' },
  });
  base = await gateway.listen({ host: '127.0.0.1', port: 0 });
  // The simulated trainer posts its groups through the gateway (ingestion workflows on the
  // harness's worker publish them to the harness's topic) until a generated task is injected.
  const trainer = new SimulatedTrainer({
    gatewayUrl: base,
    token: TRAINER,
    campaignId: id,
    retryForMs: 60_000,
  });
  await waitUntil(async () => (await trainer.fetchPool()).length > 0, {
    what: `campaign ${id} to seed its pool`,
    timeoutMs: 60_000,
    intervalMs: 200,
  });
  let injectedAt = 0;
  for (let step = 1; step <= 14; step++) {
    await trainer.step(step);
    await loop.waitPlanned(step);
    await loop.waitSynthesesDone();
    if (injectedAt > 0 && step >= injectedAt + 1) break;
    const r = await loop.pool.query<{ task_id: string }>(
      `select task_id from pool_members where campaign_id = $1 and origin = 'generated' order by depth desc, task_id limit 1`,
      [id],
    );
    if (r.rows[0] && injectedAt === 0) {
      injectedAt = step;
      generatedTask = r.rows[0].task_id;
    }
  }
  expect(generatedTask).not.toBe('');
  // The campaign keeps running: one more batch of the next step, not closed, so a step is open.
  await trainer.call(`/v1/campaigns/${id}/steps/${(await loop.status()).step + 1}/rollouts`, {
    method: 'POST',
    body: JSON.stringify({
      batchId: 'open-step',
      policyVersion: 'sim-open',
      groups: [{ taskId: generatedTask.split('~')[0], rewards: [0.5, 1, 0, 0.5] }],
      close: false,
    }),
  });

  mkdirSync(SHOTS, { recursive: true });
  userDataDir = mkdtempSync(path.join(tmpdir(), 'rods-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  context.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  context.on('weberror', (e) => consoleErrors.push(String(e.error())));
  context.on('request', (r) => requestUrls.push(r.url()));
}, 900_000);

afterAll(async () => {
  await context?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  await gateway?.close();
});

// Functions run in the page are strings: this project's TypeScript has no DOM library.
/** Pixels of each colour (within a tolerance, for antialiasing and bar fills) on a chart's canvas. */
async function colouredPixels<K extends string>(
  page: Page,
  chart: string,
  colors: Record<K, string>,
): Promise<Record<K, number>> {
  const out = await page.evaluate(`(() => {
    const colors = ${JSON.stringify(colors)};
    const canvas = document.querySelector('[data-chart="${chart}"] canvas');
    if (!canvas) return null;
    const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
    const want = Object.entries(colors).map(([k, hex]) => [k, [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16))]);
    const out = Object.fromEntries(want.map(([k]) => [k, 0]));
    for (let i = 0; i < data.length; i += 4) {
      if (data[i + 3] < 128) continue;
      for (const [k, [r, g, b]] of want)
        if (Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) <= 90) out[k]++;
    }
    return out;
  })()`);
  if (!out) throw new Error(`chart ${chart} has no canvas`);
  return out as Record<K, number>;
}

/** How many data points a chart says it drew. */
const points = (page: Page, chart: string) =>
  page.evaluate(
    `Number(document.querySelector('[data-chart="${chart}"]')?.dataset.points ?? 0)`,
  ) as Promise<number>;

/**
 * Polls an expression in the page until it is truthy. Not page.waitForFunction: that evaluates
 * its predicate with eval, which the page's Content-Security-Policy refuses (as it should).
 */
const waitIn = (page: Page, expr: string, what: string, timeoutMs = 30_000) =>
  waitUntil(async () => Boolean(await page.evaluate(expr)), { what, timeoutMs, intervalMs: 200 });

const waitPoints = (page: Page, chart: string, atLeast = 1) =>
  waitIn(
    page,
    `Number(document.querySelector('[data-chart="${chart}"]')?.dataset.points ?? 0) >= ${atLeast}`,
    `chart ${chart} to draw ${atLeast} point(s)`,
  );

describe('the dashboard in Chromium', () => {
  it('asks for a token, lists only the campaigns the token may read, and keeps the token out of URLs', async () => {
    const page = await context.newPage();
    await page.goto(`${base}/dashboard/`);
    await page.waitForSelector('#token-form');
    await page.fill('#token', READER);
    await page.click('#token-form button[type=submit]');
    await page.waitForSelector('#campaigns table');
    const ids = await page.$$eval('#campaigns tbody tr td:first-child', (tds) =>
      tds.map((t) => t.textContent),
    );
    expect(ids).toEqual([loop.campaignId]);
    expect(await page.getAttribute('#temporal-ui', 'href')).toBe('http://127.0.0.1:8233');
    const shot = path.join(SHOTS, '1-campaigns.png');
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot: ${shot}`);
    await page.close();
  });

  it('draws the live campaign: bands, variance, pool, generations, latency, funnel, what holds it', async () => {
    const page = await context.newPage();
    // The token in the fragment (never sent to the server); the page moves it to sessionStorage.
    await page.goto(`${base}/dashboard/#token=${ADMIN}&campaign=${loop.campaignId}`);
    await waitIn(page, `!location.hash.includes('token=')`, 'the page to take the token out of its URL');
    for (const chart of ['bands', 'variance', 'pool', 'generations', 'latency'])
      await waitPoints(page, chart);
    const planned = (await loop.status()).step;
    // One point per closed step and band.
    expect(await points(page, 'bands')).toBeGreaterThanOrEqual(3 * Math.min(planned, 2));
    const bands = await colouredPixels(page, 'bands', {
      hard: COLORS.hard,
      boundary: COLORS.boundary,
      mastered: COLORS.mastered,
    });
    expect(bands.hard + bands.boundary + bands.mastered).toBeGreaterThan(200);
    const pool = await colouredPixels(page, 'pool', { seeds: COLORS.seeds, generated: COLORS.generated });
    expect(pool.seeds).toBeGreaterThan(100);
    expect(pool.generated).toBeGreaterThan(20);
    const gens = await colouredPixels(page, 'generations', {
      seeds: COLORS.seeds,
      generated: COLORS.generated,
    });
    expect(gens.seeds).toBeGreaterThan(100);
    expect(gens.generated).toBeGreaterThan(20);
    const variance = await colouredPixels(page, 'variance', {
      hard: COLORS.hard,
      boundary: COLORS.boundary,
      mastered: COLORS.mastered,
    });
    expect(variance.hard + variance.boundary + variance.mastered).toBeGreaterThan(100);
    const latency = await colouredPixels(page, 'latency', {
      validated: COLORS.boundary,
      rejected: COLORS.hard,
    });
    expect(latency.validated + latency.rejected).toBeGreaterThan(20);

    // The funnel, and what the open step waits for (the trainer has not closed it).
    const selected = await page.$eval('[data-stage="selected"] .num', (e) => Number(e.textContent));
    const injected = await page.$eval('[data-stage="injected"] .num', (e) => Number(e.textContent));
    expect(selected).toBeGreaterThan(0);
    expect(injected).toBeGreaterThan(0);
    await page.waitForSelector('#waiting');
    await waitIn(
      page,
      `document.querySelector('#waiting')?.textContent?.includes('the trainer')`,
      'the open step to wait for the trainer',
    );
    await page.waitForSelector('#dead-letter-table');
    expect(await page.getAttribute('#workflow-link', 'href')).toBe(
      `http://127.0.0.1:8233/namespaces/default/workflows/campaign-${loop.campaignId}`,
    );
    await waitPoints(page, 'lag');
    const shot = path.join(SHOTS, '2-campaign.png');
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot: ${shot}`);

    // Lineage explorer: find the generated task, see its ancestry down to its human seed.
    await page.fill('#task-search', generatedTask);
    await page.click('#task-form button[type=submit]');
    const hit = page.locator(`#task-results button[data-task="${generatedTask}"]`);
    await hit.click();
    await page.waitForSelector(`#lineage-detail .lineage-node[data-task="${generatedTask}"]`);
    const seed = page.locator('#lineage-detail .lineage-node[data-origin="seed"]');
    await seed.first().waitFor();
    const seedId = await seed.first().getAttribute('data-task');
    expect(seedId).toBe(generatedTask.split('~')[0]);
    expect(await page.getAttribute('#lineage-detail .lineage', 'data-complete')).toBe('true');
    // The derivations show each stage's model and prompt hash (the task's own: an Augment
    // variant's augment and critique; its base's plan further up) and the judge.
    const rows = (sel: string) =>
      page.$$eval(sel, (trs) =>
        trs.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent ?? '')),
      );
    const own = await rows(
      `#lineage-detail .lineage-node[data-task="${generatedTask}"] > .derivation .stages tbody tr`,
    );
    expect(own.some((s) => s[2] === 'rods-standin-generator' && /^[0-9a-f]{12}$/.test(s[3] ?? ''))).toBe(
      true,
    );
    const all = await rows('#lineage-detail .stages tbody tr');
    expect(all.some((s) => s[0] === 'plan' && s[2] === 'rods-standin-generator')).toBe(true);
    expect(
      await page.textContent(`#lineage-detail .lineage-node[data-task="${generatedTask}"] .judge`),
    ).toContain('rods-standin-generator');
    // Its seed's reward history is drawn.
    await waitPoints(page, 'rewards');
    const rewards = await colouredPixels(page, 'rewards', { task: COLORS.reward, seed: COLORS.seeds });
    expect(rewards.task + rewards.seed).toBeGreaterThan(20);
    await page.locator('#lineage').scrollIntoViewIfNeeded();
    const shot2 = path.join(SHOTS, '3-lineage.png');
    await page.locator('#lineage').screenshot({ path: shot2 });
    console.log(`screenshot: ${shot2}`);
    await page.close();
  });

  it('logged no console error and sent the token in no URL', () => {
    expect(consoleErrors).toEqual([]);
    expect(requestUrls.length).toBeGreaterThan(5);
    for (const t of [ADMIN, READER])
      expect(requestUrls.filter((u) => u.split('#')[0]!.includes(t))).toEqual([]);
  });
});
