// The Augment stage in a live campaign with the stand-in generator: children of miss_param seeds
// get a miss_param variant (their category, the default), every child a miss_func variant (the
// switch), built in BFCL's own
// format, validated like any candidate (gates, fresh execution in the real BFCL classes, judge),
// recorded as a candidate of its own whose lineage reaches the seed through its base candidate;
// bfcl-eval's own multi-turn executor and checker accept every variant.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ExecutorClient } from '../activities/executor-client.js';
import { bfclTaskId } from '../domain/ids.js';
import type { TaskRecord } from '../domain/task.js';
import { executorPython } from '../infra/stack/executor.js';
import { paths } from '../infra/stack/paths.js';
import { standinCampaigns } from '../test/support/standin-campaign.js';

const campaigns = standinCampaigns(['--seed', '17']);

interface Row {
  candidate_id: string;
  status: string;
  candidate: TaskRecord;
  lineage: { parents?: string[]; variantKind?: string; variantOf?: string; rootSeedId?: string };
}

describe('the Augment stage', () => {
  it('produces validated miss_func and miss_param variants that run along their ground truth', async () => {
    const loop = await campaigns.start({
      seeds: { perCategory: 4, categories: ['miss_func', 'miss_param'] },
      selection: {
        budgetPerStep: 4,
        perCategoryQuota: { miss_func: 2, miss_param: 2 },
        cooldownSteps: 1,
        minGroups: 1,
      },
      // miss_param by the seed's category (the default); miss_func for every seed's children (the
      // switch): the stand-in's children of miss_func seeds are often near-copies of their seed
      synthesis: { augment: { missingFunction: true } },
    });
    const q = async <T extends object>(sql: string) =>
      (await loop.pool.query<T>(sql, [loop.campaignId])).rows;
    const variantKindsSeen = async () =>
      new Set(
        (
          await q<{ kind: string }>(
            `select lineage->>'variantKind' as kind from candidates
              where campaign_id = $1 and status <> 'rejected' and lineage ? 'variantKind'`,
          )
        ).map((r) => r.kind),
      );
    // The stand-in samples per synthesis (and some children are near-duplicates of their seed):
    // train until both kinds have a validated variant, within a bound.
    for (let step = 1; step <= 10 && (await variantKindsSeen()).size < 2; step++) {
      await loop.trainStep(step);
      await loop.waitPlanned(step);
      await loop.waitSynthesesDone();
    }
    const rows = await q<Row>(
      `select candidate_id, status, candidate, lineage from candidates where campaign_id = $1`,
    );
    const byId = new Map(rows.map((r) => [r.candidate_id, r]));
    const variants = rows.filter((r) => r.status !== 'rejected' && r.lineage.variantKind);
    const funnel = await q<{ kind: string; type: string; code: string | null; n: number }>(
      `select split_part(payload->>'synthesisId', '~', 2) as kind, type, payload->>'reasonCode' as code,
              count(*)::int as n
         from events where payload->>'campaignId' = $1 and type in ('CandidateValidated', 'CandidateRejected')
        group by 1, 2, 3 order by 1, 2, 3`,
    );
    console.log('augment funnel', JSON.stringify(funnel));
    const kinds = new Set(variants.map((v) => v.lineage.variantKind));
    expect(kinds).toEqual(new Set(['miss_func', 'miss_param']));

    const executor = new ExecutorClient();
    for (const v of variants) {
      const task = v.candidate;
      const kind = v.lineage.variantKind!;
      expect(task.category).toBe(kind);
      expect(task.id).toBe(`${v.lineage.variantOf}~${kind}`);
      // Lineage: variant -> base candidate -> seed (a human seed of the campaign).
      const base = byId.get(v.lineage.variantOf!)!;
      expect(base.status).not.toBe('rejected');
      expect(v.lineage.parents).toEqual([base.candidate_id, base.lineage.parents![0]]);
      const seedId = base.lineage.parents![0]!;
      const seed = await loop.pool.query(
        `select 1 from pool_members where campaign_id = $1 and task_id = $2 and origin = 'seed'`,
        [loop.campaignId, seedId],
      );
      expect(seed.rowCount).toBe(1);
      expect(v.lineage.rootSeedId).toBe(base.lineage.rootSeedId);
      // by default a miss_param variant only for the children of miss_param seeds
      if (kind === 'miss_param') expect(seedId).toMatch(/^multi_turn_miss_param_/);

      // BFCL's shape: one turn more than the base, the holding turn without a call, its calls
      // moved unchanged to the next turn.
      const b = base.candidate;
      expect(task.ground_truth.length).toBe(b.ground_truth.length + 1);
      const h = task.ground_truth.findIndex((t) => t.length === 0);
      expect(task.ground_truth[h + 1]).toEqual(b.ground_truth[h]);
      expect([...task.ground_truth.slice(0, h), ...task.ground_truth.slice(h + 1)]).toEqual(b.ground_truth);
      if (kind === 'miss_func') {
        const [arrives, fns] = Object.entries(task.missed_function ?? {})[0]!;
        expect(Number(arrives)).toBe(h + 1);
        expect(task.question[h + 1]).toEqual([]);
        expect(task.question[h]).toEqual(b.question[h]);
        expect(task.ground_truth[h + 1]!.some((c) => c.startsWith(`${fns[0]}(`))).toBe(true);
      } else {
        expect(task.missed_function).toBeUndefined();
        // the stand-in's follow-up states the value (`I mean <value>.`); the request does not
        const value = /^I mean (.+)\.$/.exec(task.question[h + 1]![0]!.content)![1]!;
        expect(task.question[h]![0]!.content).not.toContain(value);
        expect(task.ground_truth[h + 1]!.join(' ')).toContain(value);
      }
      // Fresh execution in the real BFCL classes along its ground truth.
      const run = await executor.execute({
        involved_classes: task.involved_classes,
        initial_config: task.initial_config,
        ground_truth: task.ground_truth,
      });
      expect(run.ok, JSON.stringify(run.failure)).toBe(true);
      expect(run.turns.length).toBe(task.ground_truth.length);
    }

    // bfcl-eval's own multi-turn executor and checker accept every variant (a perfect model).
    const dir = mkdtempSync(path.join(tmpdir(), 'rods-augment-'));
    try {
      const file = path.join(dir, 'variants.jsonl');
      writeFileSync(
        file,
        variants
          .map((v) =>
            JSON.stringify({ ...v.candidate, id: bfclTaskId(v.candidate.id, v.candidate.category) }),
          )
          .join('\n'),
      );
      const r = spawnSync(executorPython(), ['-m', 'executor.bfcl_harness_check', file], {
        cwd: paths.root,
        encoding: 'utf8',
        env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
        timeout: 300_000,
      });
      const summary = JSON.parse(r.stdout) as { tasks: number; passed: number; failed: unknown[] };
      expect(summary.failed, `${r.stdout}${r.stderr}`).toEqual([]);
      expect(summary.passed).toBe(variants.length);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
