// Outside domain/, a step is planned only through planStep (domain/step-plan.ts): no other code
// imports or calls the policy functions it sequences, so the live planner, what-if and the
// experiment cannot drift into their own order of decisions.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isTestFile, ROOT, sourceFiles } from '../test/support/sources.js';

const SEQUENCED = ['retire', 'selectSeeds', 'planInjection', 'planDecisions', 'queueCandidate'];

/** Non-test TypeScript sources outside domain/, relative to the repository root. */
const sources = () =>
  sourceFiles().filter((f) => f.endsWith('.ts') && !isTestFile(f) && !f.startsWith('domain/'));

/** Uses of the sequenced functions in a source: named imports or re-exports, policy namespaces, calls. */
function policyUses(text: string): string[] {
  const hits: string[] = [];
  for (const m of text.matchAll(/\b(?:import|export)\s+(?:type\s+)?\{([^}]*)\}\s*from\s*['"][^'"]+['"]/g)) {
    for (const spec of m[1]!.split(',')) {
      const name = spec
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)[0]!
        .trim();
      if (SEQUENCED.includes(name)) hits.push(`imports ${name}`);
    }
  }
  for (const m of text.matchAll(/\bimport\s+\*\s+as\s+\w+\s+from\s*['"]([^'"]*pool\/policy(?:\.js)?)['"]/g)) {
    hits.push(`imports ${m[1]} as a namespace`);
  }
  for (const m of text.matchAll(new RegExp(`(?<![\\w$])(${SEQUENCED.join('|')})\\s*\\(`, 'g'))) {
    hits.push(`calls ${m[1]}`);
  }
  return hits;
}

describe('the step-plan boundary', () => {
  it('finds imports and calls of the sequenced policy functions', () => {
    expect(
      policyUses(
        [
          "import { applyDecisions, retire, type SelectOptions, selectSeeds as pick } from '../domain/pool/policy.js';",
          "import * as policy from '../domain/pool/policy.js';",
          'const r = retire(pool, stats, step, cfg); planInjection(pool, step, cfg);',
          "export { queueCandidate } from './x.js';",
        ].join('\n'),
      ),
    ).toEqual([
      'imports retire',
      'imports selectSeeds',
      'imports queueCandidate',
      'imports ../domain/pool/policy.js as a namespace',
      'calls retire',
      'calls planInjection',
    ]);
    // options and fields named retire are not uses
    expect(
      policyUses(
        "if (o.retire !== undefined) x = o.retire; const c = { retire: 1 }; .option('--retire <x>')",
      ),
    ).toEqual([]);
  });

  it('no source outside domain/ imports or calls them; the planners go through planStep', () => {
    const files = sources();
    for (const f of ['domain/step-events.ts', 'analysis/replay/whatif.ts', 'dev/simulator/experiment.ts']) {
      if (!f.startsWith('domain/')) expect(files).toContain(f);
      expect(readFileSync(join(ROOT, f), 'utf8')).toMatch(
        /import\s*\{[^}]*\bplanStep\b[^}]*\}\s*from\s*'[./]*(domain\/)?step-plan\.js'/,
      );
    }
    // The live planner decides through the decider that also turns the decisions into events.
    expect(readFileSync(join(ROOT, 'activities/curriculum.ts'), 'utf8')).toMatch(
      /import\s*\{[^}]*\bdecideStep\b[^}]*\}\s*from\s*'\.\.\/domain\/step-events\.js'/,
    );
    const hits = files.flatMap((f) =>
      policyUses(readFileSync(join(ROOT, f), 'utf8')).map((h) => `${f}: ${h}`),
    );
    expect(hits).toEqual([]);
  });
});
