// The report of `npm run dev -- experiment`: markdown tables, SVG charts (dev/demo/charts.ts) and the JSON.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { barChart, lineChart } from '../demo/charts.js';
import type { ExperimentResult, SweepResult } from './experiment.js';
import { PARAMETERS, REASONS, type SimParameters } from './parameters.js';
import type { Interval } from './stats.js';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** `21.5% ± 1.2` (points), or the bare mean for a single run. */
export function fmtInterval(i: Interval): string {
  return i.half === null ? pct(i.mean) : `${pct(i.mean)} ± ${(100 * i.half).toFixed(1)}`;
}

function fmtDiff(i: Interval | null): string {
  if (!i) return '-';
  const sign = i.mean >= 0 ? '+' : '';
  // Two decimals: paired differences are often narrower than the intervals of the means.
  return i.half === null
    ? `${sign}${(100 * i.mean).toFixed(2)}`
    : `${sign}${(100 * i.mean).toFixed(2)} ± ${(100 * i.half).toFixed(2)}`;
}

/** The main table: one row per policy. */
export function resultTable(r: ExperimentResult): string {
  const rows = r.policies.map(
    (p) =>
      `| ${p.policy} | ${fmtInterval(p.heldOut)} | ${fmtDiff(p.vsStatic)} | ${p.rollouts} | ${fmtInterval(p.zeroVarianceShare)} | ${pct(avgLast(p.boundaryShare))} | ${p.injected.toFixed(0)} | ${p.retired.toFixed(0)} | ${fmtInterval(p.trainSuccess)} |`,
  );
  return [
    '| policy | held-out success (95% CI) | vs static, points (paired 95% CI) | rollouts | zero-variance groups | boundary share, last 10 steps | injected | retired | seed-task success |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

function avgLast(xs: readonly number[], n = 10): number {
  const tail = xs.slice(-n);
  return tail.length ? tail.reduce((a, b) => a + b, 0) / tail.length : 0;
}

/** The sweep table: one row per (parameter value, policy). */
export function sweepTable(sweep: readonly SweepResult[]): string {
  const rows: string[] = [];
  for (const s of sweep)
    for (const p of s.result.policies)
      rows.push(
        `| ${s.point.parameter} = ${s.point.value} | ${p.policy} | ${fmtInterval(p.heldOut)} | ${fmtDiff(p.vsStatic)} | ${fmtInterval(p.zeroVarianceShare)} |`,
      );
  return [
    '| parameter | policy | held-out success (95% CI) | vs static, points | zero-variance groups |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

export function parameterTable(p: SimParameters): string {
  return [
    '| parameter | value | why |',
    '| --- | --- | --- |',
    ...(Object.keys(PARAMETERS) as (keyof SimParameters)[]).map(
      (k) =>
        `| ${k} | ${p[k]}${p[k] !== PARAMETERS[k] ? ` (default ${PARAMETERS[k]})` : ''} | ${REASONS[k]} |`,
    ),
  ].join('\n');
}

/** Writes report.md, held-out.svg, boundary.svg, zero-variance.svg and result.json into `dir`. */
export function writeReport(dir: string, r: ExperimentResult, sweep?: readonly SweepResult[]): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'held-out.svg'),
    lineChart(
      `Held-out success (mean of ${r.seeds.length} seeds), every ${r.params.evalEvery} steps from step 0`,
      `evaluation (step 0, then every ${r.params.evalEvery} steps)`,
      'held-out task success',
      r.policies.map((p) => ({ name: p.policy, values: p.heldOutCurve.map((c) => c.success) })),
    ),
  );
  writeFileSync(
    path.join(dir, 'boundary.svg'),
    lineChart(
      'Boundary share of the observed pool',
      'training step',
      'share in the boundary band',
      r.policies.map((p) => ({ name: p.policy, values: p.boundaryShare })),
    ),
  );
  writeFileSync(
    path.join(dir, 'zero-variance.svg'),
    barChart(
      'Share of zero-variance groups (no GRPO update)',
      'policy',
      'share of groups',
      r.policies.map((p) => ({ label: p.policy, value: p.zeroVarianceShare.mean })),
    ),
  );
  writeFileSync(path.join(dir, 'result.json'), `${JSON.stringify({ ...r, sweep }, null, 2)}\n`);
  const md = `# SIMULATED experiment: pool policies at equal rollouts

The simulated GRPO trainer (dev/simulator/model.ts), not a model: the figures test the method's
logic under the stated assumptions (dev/simulator/README.md), not its effect on a real model.

${r.steps} steps, ${r.params.batchTasks} tasks x K=${r.k} rollouts per step, seeds ${r.seeds[0]}-${r.seeds[r.seeds.length - 1]}
(${r.seeds.length} runs per policy; 95% intervals by Student's t over runs; "vs static" is the
paired difference on the same seeds). Held-out success: the mean chance of solving every turn of
the ${4 * r.params.heldOutPerCategory} held-out tasks (never trained on), after the last step.

${resultTable(r)}

| policy | campaign config ablation | synthesis |
| --- | --- | --- |
${r.policies.map((p) => `| ${p.policy} | \`${JSON.stringify(p.ablation)}\` | ${p.synthesis ? 'yes' : 'no'} |`).join('\n')}

![held-out success](held-out.svg)
![boundary share](boundary.svg)
![zero-variance share](zero-variance.svg)
${sweep?.length ? `\n## Sensitivity sweep\n\n${sweepTable(sweep)}\n` : ''}
## Parameters

${parameterTable(r.params)}
`;
  writeFileSync(path.join(dir, 'report.md'), md);
}
