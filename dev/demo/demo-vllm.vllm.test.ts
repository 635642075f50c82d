// Synthesis end to end through the stack's real vLLM: `rods-dev demo --generator vllm` runs a short
// campaign whose worker's generator is vLLM serving the tiny random model. Every model stage's
// event names the served model, the candidates are rejected with the reasons the report prints,
// and the tokens vLLM reported, the refused answers' (StageFailed) included, are the cost ledger.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { vllmService, vllmSettings } from '../../infra/stack/vllm.js';
import { createPool } from '../../platform/store/db.js';
import { ROOT } from '../../test/support/sources.js';

const execFileP = promisify(execFile);

/** vLLM's own token counters (Prometheus), summed over its label sets. */
async function vllmTokens(): Promise<{ prompt: number; generation: number }> {
  const text = await (await fetch(`${new URL(vllmService().endpoint).origin}/metrics`)).text();
  const sum = (name: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
      .reduce((a, l) => a + Number(l.split(' ').at(-1)), 0);
  return { prompt: sum('vllm:prompt_tokens_total'), generation: sum('vllm:generation_tokens_total') };
}

interface StageEvent {
  type: string;
  model: string | null;
  prompt: number | null;
  completion: number | null;
}

describe('npm run demo -- --generator vllm', () => {
  it('synthesizes through vLLM: its model in every stage event, rejections by reason, its tokens in the ledger', async () => {
    const served = vllmSettings().servedName;
    const dir = mkdtempSync(path.join(tmpdir(), 'rods-demo-vllm-'));
    const out = path.join(dir, 'report');
    const db = createPool({ application: 'rods-demo-vllm-test', max: 2 });
    try {
      const before = await vllmTokens();
      const run = await execFileP(
        process.execPath,
        [
          path.join(ROOT, 'bin/rods-dev.mjs'),
          'demo',
          '--generator',
          'vllm',
          '--steps',
          '6',
          '--per-category',
          '5',
          '--out',
          out,
          '--json',
        ],
        { cwd: ROOT, maxBuffer: 16 << 20 },
      );
      const after = await vllmTokens();
      const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
      expect(JSON.parse(run.stdout).campaignId).toBe(summary.campaignId);
      expect(summary.generator).toEqual({ kind: 'vllm', baseUrl: vllmService().endpoint, model: served });

      // Every model stage (completed or failed) was answered by vLLM under its served name.
      const { rows } = await db.query<StageEvent>(
        `select type, payload->>'model' as model, (payload->>'promptTokens')::float8 as prompt,
                (payload->>'completionTokens')::float8 as completion
           from events where payload->>'campaignId' = $1 and type in ('StageCompleted', 'StageFailed')`,
        [summary.campaignId],
      );
      const model = rows.filter((r) => r.type === 'StageFailed' || r.model !== null);
      expect(model.length).toBeGreaterThan(0);
      expect(new Set(model.map((r) => r.model))).toEqual(new Set([served]));
      // vLLM reports usage for every answer.
      for (const r of model) expect(r.prompt, JSON.stringify(r)).toBeGreaterThan(0);

      // Its noise is rejected, and the report says why: each reason with its count.
      const f = summary.synthesisFunnel;
      expect(f.selected).toBeGreaterThan(0);
      expect(f.rejected).toBeGreaterThan(0);
      expect(f.validated + f.rejected).toBeGreaterThanOrEqual(f.selected);
      const reasons = Object.entries(f.rejectedByReason as Record<string, number>);
      expect(reasons.reduce((a, [, n]) => a + n, 0)).toBe(f.rejected);
      const report = readFileSync(path.join(out, 'report.md'), 'utf8');
      for (const [reason, n] of reasons) expect(report).toContain(`${reason} ${n}`);
      const failed = rows.filter((r) => r.type === 'StageFailed');
      expect(failed.length).toBeGreaterThan(0);
      for (const s of summary.stageFailures as { stage: string; reason: string; runs: number }[])
        expect(report).toContain(`| ${s.stage} | ${served} | ${s.runs} |`);

      // The ledger is the tokens vLLM reported: the stage events' usage, failed stages included,
      // and no more than vLLM counted for itself over the run.
      const sum = (rs: StageEvent[], k: 'prompt' | 'completion') => rs.reduce((a, r) => a + (r[k] ?? 0), 0);
      const cost = summary.generatorCost;
      expect(cost.tokens.prompt).toBe(sum(model, 'prompt'));
      expect(cost.tokens.completion).toBe(sum(model, 'completion'));
      expect(summary.failedStages).toEqual({
        runs: failed.length,
        promptTokens: sum(failed, 'prompt'),
        completionTokens: sum(failed, 'completion'),
      });
      expect(summary.failedStages.promptTokens + summary.failedStages.completionTokens).toBeGreaterThan(0);
      expect(after.prompt - before.prompt).toBeGreaterThanOrEqual(cost.tokens.prompt);
      expect(after.generation - before.generation).toBeGreaterThanOrEqual(cost.tokens.completion);
      // Per-outcome costs divide that ledger, the refused answers' tokens included.
      expect(cost.perSelected).toBe(Math.round(cost.tokens.total / f.selected));
      expect(cost.perUseful).toBe(cost.useful > 0 ? Math.round(cost.tokens.total / cost.useful) : null);
      expect(report).toContain(
        `refused answers (${failed.length} model stages whose every answer was refused, StageFailed): ${
          summary.failedStages.promptTokens + summary.failedStages.completionTokens
        }`,
      );
    } finally {
      await db.end();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 900_000);
});
