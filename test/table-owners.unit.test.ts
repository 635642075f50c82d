// Every table has one owner (platform/store/tables.ts): SQL that names a table appears only in its owner
// module. Tests may read tables directly (they assert on rows); product code, analysis and the
// development tools go through the owners.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { TABLE_OWNERS } from '../platform/store/tables.js';
import { isTestFile, ROOT, sourceFiles } from './support/sources.js';

const TABLES = Object.keys(TABLE_OWNERS) as (keyof typeof TABLE_OWNERS)[];

/** Source text without comments, so prose about a table does not count as SQL. */
const withoutComments = (s: string) => s.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

/** The tables the SQL in `source` names (after from, into, update, join, table or exists). */
function tablesNamed(source: string): string[] {
  const re = new RegExp(
    `\\b(?:from|into|update|join|table|exists)\\s+"?(${TABLES.join('|')})\\b(?![.'/-])`,
    'gi',
  );
  return [...new Set([...withoutComments(source).matchAll(re)].map((m) => m[1]!.toLowerCase()))].sort();
}

/** Whether `file` is `owner`, or sits in it when the owner is a folder (ending in `/`). */
const owns = (owner: string, file: string) => (owner.endsWith('/') ? file.startsWith(owner) : file === owner);

/** `table file` for each table a file names that it does not own. */
function violations(file: string, source: string): string[] {
  return tablesNamed(source)
    .filter((t) => !owns(TABLE_OWNERS[t as keyof typeof TABLE_OWNERS], file))
    .map((t) => `${t} ${file}`);
}

// Known violations, each to move into its owner; the list only shrinks (a fixed one must leave
// it, a new one fails).
const KNOWN: string[] = [
  'candidates dev/bench/loop-latency.ts',
  'events dev/bench/event-store.ts',
  'events dev/bench/loop-latency.ts',
  'events dev/bench/scale.ts',
  'step_progress dev/bench/scale.ts',
  'steps dev/bench/aggregator.ts',
  'steps dev/bench/scale.ts',
];

// SQL outside platform/store/: none in the product. The stack manager (infra/stack/) creates the database,
// its roles and owner before any owner can connect; Temporal handles have a `.query` of their own.
const SQL_OUTSIDE_STORE_ALLOWED = (file: string) =>
  file.startsWith('platform/store/') || file.startsWith('infra/stack/') || file.startsWith('dev/');

/** The `.query(` calls in a source text that are not a Temporal workflow handle's. */
const sqlCalls = (source: string) =>
  [...withoutComments(source).matchAll(/(\w+)\s*\.query\s*[<(]/g)].filter((m) => m[1] !== 'handle').length;

describe('table owners', () => {
  it('finds SQL naming a table outside its owner, and not prose or imports', () => {
    expect(
      violations('analysis/status/x.ts', 'await db.query(`select n from steps where campaign_id = $1`)'),
    ).toEqual(['steps analysis/status/x.ts']);
    expect(
      violations('entry/gateway/x.ts', "await c.query('insert into claim_checks (id) values ($1)')"),
    ).toEqual(['claim_checks entry/gateway/x.ts']);
    expect(violations('x.ts', "await c.query('UPDATE Campaigns set status = $2')")).toEqual([
      'campaigns x.ts',
    ]);
    expect(
      violations(
        'platform/store/steps/close.ts',
        'select 1 from steps join step_progress using (campaign_id)',
      ),
    ).toEqual([]);
    expect(violations('platform/store/stepsx.ts', 'select 1 from steps')).toEqual([
      'steps platform/store/stepsx.ts',
    ]);
    expect(violations('x.ts', "import { a } from './steps.js';\n// reads from steps, in prose\n")).toEqual(
      [],
    );
    expect(violations('x.ts', '/* select * from events */ const steps = 1;')).toEqual([]);
  });

  it('gives every table the migrations create an owner that exists', () => {
    const dir = path.join(ROOT, 'platform/store/migrations');
    const created = readdirSync(dir)
      .filter((f) => f.endsWith('.sql'))
      .flatMap((f) => [
        ...readFileSync(path.join(dir, f), 'utf8').matchAll(/create table (?:if not exists )?(\w+)/gi),
      ])
      .map((m) => m[1]!.toLowerCase());
    expect([...new Set(created)].sort()).toEqual([...TABLES].sort());
    const files = sourceFiles();
    for (const owner of new Set(Object.values(TABLE_OWNERS)))
      expect(
        files.some((f) => owns(owner, f)),
        owner,
      ).toBe(true);
  });

  it('keeps SQL on each table in its owner (known violations only shrink)', () => {
    const found = sourceFiles()
      .filter((f) => f.endsWith('.ts') && !isTestFile(f) && !f.startsWith('test/'))
      .flatMap((f) => violations(f, readFileSync(path.join(ROOT, f), 'utf8')))
      .sort();
    expect(
      found.filter((v) => !KNOWN.includes(v)),
      'new SQL outside the owner',
    ).toEqual([]);
    expect(
      KNOWN.filter((v) => !found.includes(v)),
      'fixed: remove from KNOWN',
    ).toEqual([]);
  });

  it('finds SQL calls, and not a workflow handle query or prose', () => {
    expect(sqlCalls("await c.query('begin');\nconst r = await pool.query<{ n: number }>(sql);")).toBe(2);
    expect(sqlCalls('await handle.query(statusQuery);\n// c.query(x) in prose')).toBe(0);
  });

  it('runs no SQL in product code outside platform/store/', () => {
    const found = sourceFiles()
      .filter((f) => f.endsWith('.ts') && !isTestFile(f) && !f.startsWith('test/'))
      .filter((f) => !SQL_OUTSIDE_STORE_ALLOWED(f))
      .filter((f) => sqlCalls(readFileSync(path.join(ROOT, f), 'utf8')) > 0);
    expect(found).toEqual([]);
  });
});
