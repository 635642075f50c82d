#!/usr/bin/env node
// `npm test`: runs vitest (all *.unit / *.int / *.e2e tests against the real local stack, which
// the global setup starts or reuses) and ends with one plain summary line, "tests: N passed,
// N failed, N skipped", that CI reads. Extra arguments go to vitest (e.g. a file filter).
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';

mkdirSync('.stack', { recursive: true });
const report = '.stack/vitest-report.json';
const args = [
  'vitest',
  'run',
  '--reporter=default',
  '--reporter=json',
  `--outputFile.json=${report}`,
  ...process.argv.slice(2),
];
const child = spawn('npx', args, { stdio: 'inherit' });
child.on('exit', (code, signal) => {
  let line = 'tests: 0 passed, 0 failed';
  try {
    const r = JSON.parse(readFileSync(report, 'utf8'));
    const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
    line = `tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed${skipped ? `, ${skipped} skipped` : ''}`;
  } catch {
    line = 'tests: 0 passed, 1 failed';
  }
  console.log(`\n${line}`);
  process.exit(code ?? (signal ? 1 : 0));
});
