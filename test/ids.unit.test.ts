// Ids are built in one place, domain/ids.ts: a stream name, workflow id or derived event id
// written out anywhere else could drift from the one recorded data carries. Workflows are started
// by function reference (arguments type-checked), and the product never imports the CLI.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isTestFile, ROOT, relativeImportTargets, sourceFiles } from './support/sources.js';

/** Where `source` (the text of `file`) builds an id itself or names a workflow type by string. */
function adHocIds(file: string, source: string): string[] {
  // Tests and test fixtures spell recorded values out on purpose: they pin them.
  if (
    isTestFile(file) ||
    file.includes('/testing/') ||
    file.startsWith('test/support/') ||
    file === 'domain/ids.ts'
  )
    return [];
  const rules: [string, RegExp][] = [
    ['stream name or workflow id', /`(campaign|synthesis|synth|stats|steps|ingest)-\$\{/],
    ['candidate id', /\}~s\$\{/],
    ['derived id', /\bderivedUuid\(/],
    [
      'workflow type by name',
      /\b(workflow\.(start|execute|signalWithStart)|startChild|executeChild)\(\s*['"`]/,
    ],
  ];
  return rules.filter(([, re]) => re.test(source)).map(([what]) => what);
}

/** Relative imports of the CLI from outside it (the CLI is a composition root, not a library). */
function cliImports(file: string, source: string): string[] {
  // The development commands (dev/commands/) share the CLI's errors and output helpers.
  if (file.startsWith('entry/cli/') || file.startsWith('bin/') || file.startsWith('dev/') || isTestFile(file))
    return [];
  return relativeImportTargets(file, source).filter((target) => target.startsWith('entry/cli/'));
}

/** Source text with `$(name)` standing for a template placeholder. */
const src = (text: string) =>
  text.replace(/\$\((\w+)\)/g, (_m, name: string) => ['$', '{', name, '}'].join(''));

describe('ids in one place', () => {
  it('finds an id built outside domain/ids.ts', () => {
    expect(adHocIds('entry/gateway/x.ts', src('const id = `campaign-$(c)`;'))).toEqual([
      'stream name or workflow id',
    ]);
    expect(adHocIds('workflows/x.ts', src('const c = `$(seed)~s$(step)`;'))).toEqual(['candidate id']);
    expect(adHocIds('stages/aggregator/x.ts', "derivedUuid('StepAggregated', c, s)")).toEqual(['derived id']);
    expect(adHocIds('workflows/x.ts', "await startChild('synthesisWorkflow', {})")).toEqual([
      'workflow type by name',
    ]);
    expect(adHocIds('entry/gateway/x.ts', "client.workflow.start('campaignWorkflow', {})")).toEqual([
      'workflow type by name',
    ]);
    // allowed: the builders themselves, tests, fixtures, start by reference
    expect(adHocIds('domain/ids.ts', src('campaign: (c: string) => `campaign-$(c)`'))).toEqual([]);
    expect(adHocIds('entry/gateway/x.int.test.ts', src('expect(id).toBe(`campaign-$(c)`)'))).toEqual([]);
    expect(adHocIds('entry/gateway/x.ts', 'client.workflow.start(campaignWorkflow, {})')).toEqual([]);
    expect(cliImports('entry/gateway/server.ts', "import { x } from '../cli/commands/campaign.js';")).toEqual(
      ['entry/cli/commands/campaign.js'],
    );
    expect(cliImports('entry/cli/commands/demo.ts', "import { x } from '../output.js';")).toEqual([]);
    expect(cliImports('dev/commands/demo.ts', "import { x } from '../../entry/cli/output.js';")).toEqual([]);
  });

  it('no module builds an id itself, starts a workflow by name or imports the CLI', () => {
    const offenders = sourceFiles()
      .filter((f) => !f.startsWith('clients/'))
      .flatMap((f) => {
        const text = readFileSync(path.join(ROOT, f), 'utf8');
        return [...adHocIds(f, text), ...cliImports(f, text).map((t) => `imports ${t}`)].map(
          (w) => `${f}: ${w}`,
        );
      });
    expect(offenders).toEqual([]);
  });
});
