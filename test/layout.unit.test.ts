// The product stands apart from its development tools (docs/architecture.md §5): no product module
// imports `dev/` (stand-in generator, simulator, demo, benchmarks, harness) or `test/`. Tests and
// the CLI, the composition root, may.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isTestFile, ROOT, relativeImportTargets, sourceFiles } from './support/sources.js';

/** Folders whose files may import development code. */
// The shipped CLI is product too: development commands live in dev/ (dev/cli.ts, bin/rods-dev.mjs).
const MAY_IMPORT_DEV = ['dev/', 'test/', 'bin/rods-dev.mjs'];
const DEV_FOLDERS = ['dev/', 'test/'];

/** What `file` (relative to the root) imports from development code it must not import. */
function devImports(file: string, source: string): string[] {
  if (isTestFile(file) || MAY_IMPORT_DEV.some((d) => file.startsWith(d))) return [];
  return relativeImportTargets(file, source).filter((t) => DEV_FOLDERS.some((d) => t.startsWith(d)));
}

describe('layout', () => {
  it('finds a product module that imports the development folder or the test harness', () => {
    expect(devImports('activities/synthesis.ts', "import { x } from '../dev/standin/catalog.js';")).toEqual([
      'dev/standin/catalog.js',
    ]);
    expect(
      devImports('stages/aggregator/service.ts', "const m = await import('../../test/support/wait.js');"),
    ).toEqual(['test/support/wait.js']);
    expect(devImports('platform/kafka/x.ts', "export { y } from '../../dev/bench/run.js';")).toEqual([
      'dev/bench/run.js',
    ]);
    expect(
      devImports('entry/cli/commands/demo.ts', "import { runDemo } from '../../../dev/demo/run.js';"),
    ).toEqual(['dev/demo/run.js']);
    // allowed: tests, the development entry point, dev itself, and product-to-product imports
    expect(devImports('workflows/campaign.e2e.test.ts', "import '../dev/harness/loop.js';")).toEqual([]);
    expect(devImports('dev/commands/demo.ts', "import { runDemo } from '../demo/run.js';")).toEqual([]);
    expect(devImports('activities/synthesis.ts', "import { B } from '../domain/bfcl-catalog.js';")).toEqual(
      [],
    );
  });

  it('no product module imports dev/ or test/', () => {
    const files = sourceFiles();
    expect(files).toContain('activities/synthesis.ts');
    const offenders = files.flatMap((f) =>
      devImports(f, readFileSync(path.join(ROOT, f), 'utf8')).map((t) => `${f} -> ${t}`),
    );
    expect(offenders).toEqual([]);
  });

  it('keeps test support in test/support: no product module is imported by tests alone', () => {
    // Modules with no importer but tests that are product all the same, each with its reason.
    const PRODUCT_ALL_THE_SAME: Record<string, string> = {
      'platform/store/projections.ts':
        'the projection runner over the event log (its own int test covers it)',
      'infra/stack/temporal-test-server.ts': 'a script: .ci/run installs the time-skipping server with it',
      'vitest.unit.config.ts': "the unit tier's config (its isolation list is checked by a test)",
    };
    const files = sourceFiles().filter((f) => f.endsWith('.ts'));
    const importers = new Map<string, string[]>();
    for (const f of files)
      for (const t of relativeImportTargets(f, readFileSync(path.join(ROOT, f), 'utf8'))) {
        const target = t.replace(/\.js$/, '.ts');
        importers.set(target, [...(importers.get(target) ?? []), f]);
      }
    const testOnly = files
      .filter((f) => !isTestFile(f) && !f.startsWith('test/') && !f.startsWith('dev/'))
      .filter((f) => (importers.get(f) ?? []).length > 0)
      .filter((f) => importers.get(f)!.every((i) => isTestFile(i) || i.startsWith('test/')))
      .filter((f) => !(f in PRODUCT_ALL_THE_SAME));
    expect(testOnly).toEqual([]);
  });
});
