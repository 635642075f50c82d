// The repository's own source files, for the tests that guard the architecture (layout, the Kafka
// boundary, the step-plan boundary, ids in one place): one walker, one import scanner.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SKIP_DIRS = new Set(['node_modules', '.stack', '.git', '.venv', 'dist', 'reports']);

/** Source files (TypeScript and JavaScript) under the root, relative with forward slashes. */
export function sourceFiles(dir = ROOT): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP_DIRS.has(e.name)) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(?:[cm]?ts|[cm]?js)$/.test(e.name) && !e.name.endsWith('.d.ts'))
      out.push(path.relative(ROOT, p).split(path.sep).join('/'));
  }
  return out;
}

export const isTestFile = (file: string) => /\.test\.ts$/.test(file);

/** Module specifiers of a source text: static and dynamic imports, re-exports, require. */
export function importSpecifiers(source: string): string[] {
  const re = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|\bimport\s+)['"]([^'"]+)['"]/g;
  return [...source.matchAll(re)].map((m) => m[1]!);
}

/** The root-relative targets of the relative imports of `file`. */
export function relativeImportTargets(file: string, source: string): string[] {
  return importSpecifiers(source)
    .filter((s) => s.startsWith('./') || s.startsWith('../'))
    .map((s) => path.posix.normalize(path.posix.join(path.posix.dirname(file), s)));
}
