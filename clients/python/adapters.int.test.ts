// The trainer adapters of the installed Python client (clients/python/rods_client/{hf,verl,slime}.py)
// against the real gateway with an in-process rods worker: `pip install ./clients/python` into
// .stack/client-venv, then its pytest suite (clients/python/tests) from outside the source tree.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION } from '../../entry/gateway/api-version.js';
import type { Pool } from '../../platform/store/db.js';
import {
  type GatewayWithWorker,
  startGatewayWithWorker,
} from '../../test/support/gateway/gateway-with-worker.js';
import { clientPython, installClientVenv } from '../../test/support/python/venv.js';

const execFileP = promisify(execFile);
const TOKEN = `tok-${randomUUID()}`;
const suffix = randomUUID().slice(0, 8);
const campaigns = {
  HF: `py-hf-${suffix}`,
  VERL: `py-verl-${suffix}`,
  SLIME: `py-slime-${suffix}`,
  REPORTING: `py-reporting-${suffix}`,
  EXAMPLE: `py-example-${suffix}`,
};
let gw: GatewayWithWorker;
let db: Pool;
let base: string;
let outside: string;

beforeAll(async () => {
  await installClientVenv();
  gw = await startGatewayWithWorker({
    application: 'rods-py-adapters-test',
    tokens: [TOKEN],
    name: 'py-adapters',
  });
  ({ db, base } = gw);
  for (const campaignId of Object.values(campaigns)) {
    const created = await fetch(`${base}/v1/campaigns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ campaignId, config: { seeds: { perCategory: 2 } } }),
    });
    expect(created.status).toBe(201);
  }
  outside = mkdtempSync(path.join(tmpdir(), 'rods-py-adapters-'));
}, 900_000);

afterAll(async () => {
  await gw?.close(Object.values(campaigns).map((c) => `campaign-${c}`));
  if (outside) rmSync(outside, { recursive: true, force: true });
});

describe('Python client adapters (pytest in .stack/client-venv against the real gateway)', () => {
  it('the installed package passes its adapter tests and its reports reach the gateway', async () => {
    const tests = fileURLToPath(new URL('./tests', import.meta.url));
    let out: string;
    try {
      const r = await execFileP(
        clientPython(),
        // tests/trl and tests/verl need torch and their framework: trl.e2e.test.ts and verl.e2e.test.ts run them in their venvs.
        [
          '-m',
          'pytest',
          tests,
          '--ignore',
          path.join(tests, 'trl'),
          '--ignore',
          path.join(tests, 'verl'),
          '-q',
          '-p',
          'no:cacheprovider',
          '-rA',
        ],
        {
          // From a folder outside the source tree, so `import rods_client` finds the installed copy.
          cwd: outside,
          env: {
            ...process.env,
            PYTHONDONTWRITEBYTECODE: '1',
            RODS_SPOOL_DIR: path.join(outside, 'spool'),
            RODS_GATEWAY_URL: base,
            RODS_TOKEN: TOKEN,
            RODS_CAMPAIGN_HF: campaigns.HF,
            RODS_CAMPAIGN_VERL: campaigns.VERL,
            RODS_CAMPAIGN_SLIME: campaigns.SLIME,
            RODS_CAMPAIGN_REPORTING: campaigns.REPORTING,
            RODS_CAMPAIGN_EXAMPLE: campaigns.EXAMPLE,
          },
          timeout: 300_000,
          maxBuffer: 16 * 1024 * 1024,
        },
      );
      out = `${r.stdout}${r.stderr}`;
    } catch (e) {
      const err = e as Error & { stdout?: string; stderr?: string };
      throw new Error(`pytest failed:\n${err.stdout ?? ''}${err.stderr ?? err.message}`);
    }
    // every test ran and passed: none skipped (a missing framework would show here)
    const summary = out.match(/^\d+ passed in .*$/m)?.[0];
    expect(summary, out).toBeDefined();
    console.log(`[pytest clients/python/tests] ${summary}`);
    const passed = out.split('\n').filter((l) => l.startsWith('PASSED '));
    for (const name of [
      'test_package.py::test_version_is_the_gateways_api_version',
      'test_hf.py::test_callback_reports_each_step_once_through_the_spool',
      'test_reporting.py::test_reports_survive_a_reporter_that_never_reached_the_gateway',
      'test_reporting.py::test_retries_honour_retry_after_and_a_dropped_connection',
      'test_reporting.py::test_later_reports_go_on_while_a_checkpoint_waits_for_a_step_only_they_can_close',
      'test_reporting.py::test_an_older_gateway_answering_403_for_checkpoints_holds_no_report',
      'test_reporting.py::test_a_parked_checkpoint_survives_a_restart_and_claims_its_retrained_steps_once',
      // The property test of the spool (hypothesis, a model of the gateway's contract): no gateway needed.
      'test_reporting_properties.py::test_the_spool_keeps_its_guarantees_through_kills_outages_and_checkpoints_that_wait',
      'test_verl.py::test_compute_score_is_bfcls_first_turn_check',
      'test_verl.py::test_dataset_serves_distinct_tasks_of_the_live_pool_per_batch_and_keeps_its_draws',
      'test_slime.py::test_prompts_are_the_chat_template_with_the_tasks_tools_as_slimes_rollout_encodes_them',
      'test_slime.py::test_the_rollout_log_hook_reports_the_rollout_as_its_step_once',
      'test_slime.py::test_rollouts_draw_from_the_last_pool_while_the_gateway_is_away',
      'test_slime.py::test_a_multi_turn_episode_runs_its_calls_in_the_executor_and_is_rewarded_turn_by_turn',
      'test_slime.py::test_groups_the_dynamic_filter_drops_are_reported_with_the_rollout',
      'test_bfcl_sessions.py::test_each_tool_call_runs_once_and_a_lost_session_is_rebuilt_from_the_episode',
      'test_package.py::test_slime_example_runs_against_the_gateway',
    ])
      expect(
        passed.some((l) => l.endsWith(name)),
        `${name} passed`,
      ).toBe(true);

    // What each adapter reported is recorded by the gateway as step 1's closing batch.
    const { rows } = await db.query<{ campaign_id: string; step: number; batch_id: string; groups: number }>(
      `select campaign_id, step, batch_id, groups from ingestion_batches
        where campaign_id = any($1) and closes and step = 1 order by campaign_id`,
      [[campaigns.HF, campaigns.SLIME, campaigns.EXAMPLE]],
    );
    const byCampaign = Object.fromEntries(rows.map((r) => [r.campaign_id, r]));
    expect(byCampaign[campaigns.HF]).toMatchObject({ step: 1, batch_id: 'step-1', groups: 3 });
    expect(byCampaign[campaigns.SLIME]).toMatchObject({ step: 1, batch_id: 'step-1' });
    expect(byCampaign[campaigns.SLIME]!.groups).toBeGreaterThanOrEqual(1);
    expect(byCampaign[campaigns.EXAMPLE]).toMatchObject({ step: 1, batch_id: 'step-1' });
    expect(rows).toHaveLength(3);
  }, 600_000);

  it('the package version is the API version the gateway serves', async () => {
    const { stdout } = await execFileP(
      clientPython(),
      ['-c', 'import rods_client; print(rods_client.__version__)'],
      {
        cwd: outside,
      },
    );
    expect(stdout.trim()).toBe(API_VERSION);
    const served = (await (await fetch(`${base}/openapi.json`)).json()) as { info: { version: string } };
    expect(served.info.version).toBe(API_VERSION);
  });
});
