// The product stands apart from its development tools (docs/architecture.md §5): no product module
// imports `dev/` (stand-in generator, simulator, demo, benchmarks, harness) or `test/`. Tests and
// the CLI, the composition root, may.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SKIP_DIRS = new Set(['node_modules', '.stack', '.git', 'reports']);
/** Folders whose files may import development code. */
const MAY_IMPORT_DEV = ['dev/', 'test/', 'cli/', 'bin/'];
const DEV_FOLDERS = ['dev/', 'test/'];

function sourceFiles(dir = ROOT): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP_DIRS.has(e.name)) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|mts|mjs)$/.test(e.name)) out.push(path.relative(ROOT, p).split(path.sep).join('/'));
  }
  return out;
}

const isTest = (file: string) => /\.test\.ts$/.test(file);

/** Relative module specifiers of a source text: static and dynamic imports and re-exports. */
export function relativeImports(source: string): string[] {
  const re = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]/g;
  return [...source.matchAll(re)].map((m) => m[1]!);
}

/** `file` (relative to the root) importing development code it must not import. */
export function devImports(file: string, source: string): string[] {
  if (isTest(file) || MAY_IMPORT_DEV.some((d) => file.startsWith(d))) return [];
  return relativeImports(source)
    .map((spec) => path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)))
    .filter((target) => DEV_FOLDERS.some((d) => target.startsWith(d)));
}

describe('layout', () => {
  it('finds a product module that imports the development folder or the test harness', () => {
    expect(devImports('activities/synthesis.ts', "import { x } from '../dev/standin/catalog.js';")).toEqual([
      'dev/standin/catalog.js',
    ]);
    expect(devImports('aggregator/service.ts', "const m = await import('../test/harness/loop.js');")).toEqual([
      'test/harness/loop.js',
    ]);
    expect(devImports('kafka/x.ts', "export { y } from '../dev/bench/run.js';")).toEqual(['dev/bench/run.js']);
    // allowed: tests, the CLI (composition root), dev itself, and product-to-product imports
    expect(devImports('workflows/campaign.e2e.test.ts', "import '../dev/harness/loop.js';")).toEqual([]);
    expect(devImports('cli/commands/demo.ts', "import { runDemo } from '../../dev/demo/run.js';")).toEqual([]);
    expect(devImports('activities/synthesis.ts', "import { B } from '../domain/bfcl-catalog.js';")).toEqual([]);
  });

  it('no product module imports dev/ or test/', () => {
    const offenders = sourceFiles().flatMap((f) =>
      devImports(f, readFileSync(path.join(ROOT, f), 'utf8')).map((t) => `${f} -> ${t}`),
    );
    expect(offenders).toEqual([]);
  });
});
