// The layer rules (.dependency-cruiser.cjs) catch what they name: dependency-cruiser runs with the
// project's rules file on a small tree written for the test, once with one import of each kind
// the rules forbid and once with only allowed imports. (`npm run lint:layers` runs the same rules
// on the real tree; this test shows the rules themselves are not empty.)
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './support/sources.js';

const execFileP = promisify(execFile);
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Writes the files into a fresh folder and returns the violated rules, `from → to` each. */
async function violations(files: Record<string, string>): Promise<string[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rods-layers-'));
  dirs.push(dir);
  writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }),
  );
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  const bin = path.join(ROOT, 'node_modules', '.bin', 'depcruise');
  const args = [
    '--config',
    path.join(ROOT, '.dependency-cruiser.cjs'),
    '--output-type',
    'json',
    ...Object.keys(files),
  ];
  const { stdout } = await execFileP(bin, args, { cwd: dir, maxBuffer: 16 << 20 }).catch(
    (e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }), // exits non-zero on a violation
  );
  const result = JSON.parse(stdout) as {
    summary: { violations: { rule: { name: string }; from: string; to: string }[] };
  };
  return result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`).sort();
}

describe('the layer rules', () => {
  it('name each forbidden import: I/O or a stage in the core, a stage in the platform, stage to stage, a cycle, the stack manager', async () => {
    const found = await violations({
      'domain/band.ts':
        "import { readFileSync } from 'node:fs';\nimport { q } from '../platform/store/q.js';\nexport const b = [readFileSync, q];\n",
      'platform/store/q.ts':
        "import { fold } from '../../stages/aggregator/fold.js';\nexport const q = fold;\n",
      'stages/aggregator/fold.ts':
        "import { plan } from '../../activities/plan.js';\nexport const fold = plan;\n",
      'activities/plan.ts': 'export const plan = 1;\n',
      'workflows/campaign.ts': "import { plan } from '../activities/plan.js';\nexport const w = plan;\n",
      'analysis/status/report.ts':
        "import { fold } from '../../stages/aggregator/fold.js';\nexport const r = fold;\n",
      'platform/config/endpoints.ts': "import { up } from '../../infra/stack/up.js';\nexport const e = up;\n",
      'infra/stack/up.ts': 'export const up = 1;\n',
      'workflows/synthesis.ts':
        "import pg from 'pg';\nimport { startCampaign } from './start-campaign.js';\nexport const s = [pg, startCampaign];\n",
      'workflows/start-campaign.ts': "import pg from 'pg';\nexport const startCampaign = pg;\n",
      'platform/kafka/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
      'platform/kafka/b.ts': "import { a } from './a.js';\nexport const b = () => a;\n",
    });
    expect(found).toEqual(
      [
        'domain-does-no-io: domain/band.ts → fs',
        'domain-is-pure: domain/band.ts → platform/store/q.ts',
        'platform-imports-no-stage: platform/store/q.ts → stages/aggregator/fold.ts',
        'stage-aggregator-imports-no-other-stage: stages/aggregator/fold.ts → activities/plan.ts',
        'workflows-import-activity-types-only: workflows/campaign.ts → activities/plan.ts',
        'analysis-imports-no-stage: analysis/status/report.ts → stages/aggregator/fold.ts',
        'platform-imports-no-stage: platform/config/endpoints.ts → infra/stack/up.ts',
        'product-imports-no-operations: platform/config/endpoints.ts → infra/stack/up.ts',
        'no-cycle: platform/kafka/a.ts → platform/kafka/b.ts',
        'workflow-code-does-no-io: workflows/synthesis.ts → pg',
        'workflow-code-does-no-io: workflows/synthesis.ts → workflows/start-campaign.ts',
      ].sort(),
    );
  }, 60_000);

  it('let the allowed ones pass: core to core, stage to core and platform, a workflow to its activities by type, an entry point to anything', async () => {
    const found = await violations({
      'domain/band.ts': "import { w } from './window.js';\nexport const b = w;\n",
      'domain/window.ts': 'export const w = 1;\n',
      'platform/store/q.ts': "import { b } from '../../domain/band.js';\nexport const q = b;\n",
      'stages/aggregator/fold.ts':
        "import { q } from '../../platform/store/q.js';\nimport { b } from '../../domain/band.js';\nexport const fold = [q, b];\n",
      'activities/plan.ts': 'export interface Plan { step: number }\n',
      'workflows/campaign.ts':
        "import type { Plan } from '../activities/plan.js';\nexport const w = (p: Plan) => p.step;\n",
      'entry/cli/main.ts':
        "import { fold } from '../../stages/aggregator/fold.js';\nimport { up } from '../../infra/stack/up.js';\nexport const m = [fold, up];\n",
      'infra/stack/up.ts': 'export const up = 1;\n',
    });
    expect(found).toEqual([]);
  }, 60_000);
});
