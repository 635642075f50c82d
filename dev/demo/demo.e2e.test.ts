// The demo command end to end (shortened): processes start, the simulated trainer runs through the
// gateway, and the report folder holds valid SVG charts and a summary with the per-step figures.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { temporalClient } from '../../platform/temporal/connect.js';
import { ROOT } from '../../test/support/sources.js';

const execFileP = promisify(execFile);

describe('npm run dev -- demo', () => {
  it('runs a short campaign and writes report.md, four valid SVG charts and summary.json', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rods-demo-'));
    const out = path.join(dir, 'report');
    try {
      const run = await execFileP(
        process.execPath,
        [
          path.join(ROOT, 'bin/rods-dev.mjs'),
          'demo',
          '--steps',
          '4',
          '--per-category',
          '5',
          '--checkpoint-every',
          '2',
          '--out',
          out,
          '--json',
        ],
        {
          cwd: ROOT,
          maxBuffer: 16 << 20,
        },
      );
      for (const f of ['report.md', 'summary.json', 'bands.svg', 'variance.svg', 'pool.svg', 'lineage.svg']) {
        expect(existsSync(path.join(out, f)), f).toBe(true);
      }
      for (const f of ['bands.svg', 'variance.svg', 'pool.svg', 'lineage.svg']) {
        const svg = readFileSync(path.join(out, f), 'utf8');
        expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
        expect(svg.trim().endsWith('</svg>')).toBe(true);
        expect(svg).not.toMatch(/NaN|undefined/);
      }
      const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
      expect(summary.steps).toBe(4);
      // How long setup took and when the first step closed, from the demo's start.
      expect(summary.timings.setupSeconds).toBeGreaterThan(0);
      expect(summary.timings.firstStepSeconds).toBeGreaterThan(summary.timings.setupSeconds);
      expect(summary.timings.stepsSeconds).toBeGreaterThan(0);
      expect(summary.bandCountsPerStep).toHaveLength(4);
      const first = summary.bandCountsPerStep[0];
      expect(first.hard + first.boundary + first.mastered).toBe(20);
      expect(summary).toHaveProperty('boundaryToOtherVarianceRatio');
      expect(summary.poolPerStep[3].active).toBeGreaterThan(0);
      // The funnel narrows stage by stage, and every selected run ends validated or rejected.
      const f = summary.synthesisFunnel;
      expect(f.selected).toBeGreaterThan(0);
      expect(f.planned).toBeLessThanOrEqual(f.selected);
      expect(f.executed).toBeLessThanOrEqual(f.planned);
      expect(f.rewritten).toBeLessThanOrEqual(f.executed);
      expect(f.judged).toBeLessThanOrEqual(f.rewritten);
      expect(f.validated + f.rejected).toBeGreaterThanOrEqual(f.selected);
      expect(Object.values(f.rejectedByReason as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(
        f.rejected,
      );
      // Every generated task carries the category its structure gives it.
      expect(summary.generatedCategories.mismatches).toEqual([]);
      // The stand-in reports usage as vLLM does: every model stage's tokens are counted.
      expect(summary.generatorCost.tokens.prompt).toBeGreaterThan(0);
      expect(summary.generatorCost.byStage.map((s: { stage: string }) => s.stage)).toContain('plan');
      expect(summary.generatorCost.perSelected).toBeGreaterThan(0);
      // Every generated task compared with the evaluation set (BFCL past the seeds): none copies one.
      expect(summary.contamination.compared).toBe(summary.generatedCategories.generated);
      expect(summary.contamination.evaluationTasks).toBeGreaterThan(0);
      expect(summary.contamination.contaminated).toBe(0);
      expect(summary.contamination.maxTextOverlap).toBeLessThan(0.5);
      // The simulated trainer reports a checkpoint every 2 steps: the last one's manifest holds
      // every group it posted up to it, and its root recomputed from the log equals the recorded one.
      expect(summary.manifest).toMatchObject({ checkpoints: 2, trainerStep: 4, verified: true });
      expect(summary.manifest.groups).toBe(summary.manifest.groupsPosted);
      expect(summary.manifest.tasks).toBeGreaterThan(0);
      expect(readFileSync(path.join(out, 'report.md'), 'utf8')).toMatch(
        /\| selected \| planned \| executed \|/,
      );
      // The demo completes its campaign: no workflow is left running on the server, and the
      // status of the finished campaign answers from its result, with the worker gone.
      expect(JSON.parse(run.stdout).campaignId).toBe(summary.campaignId);
      const { client, close } = await temporalClient();
      try {
        const d = await client.workflow.getHandle(`campaign-${summary.campaignId}`).describe();
        expect(d.status.name).toBe('COMPLETED');
      } finally {
        await close();
      }
      const status = JSON.parse(
        (
          await execFileP(
            process.execPath,
            [path.join(ROOT, 'bin/rods.mjs'), 'campaign', 'status', summary.campaignId, '--json'],
            { cwd: ROOT, maxBuffer: 16 << 20 },
          )
        ).stdout,
      );
      expect(status).toMatchObject({ status: 'completed', source: 'workflow-result', step: 4 });
      // An existing output folder is refused with exit 2.
      const again = await execFileP(
        process.execPath,
        [path.join(ROOT, 'bin/rods-dev.mjs'), 'demo', '--out', out],
        { cwd: ROOT },
      ).catch((e: { code: number }) => e);
      expect((again as { code: number }).code).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
