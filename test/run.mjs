#!/usr/bin/env node
// `npm test`: runs vitest twice against the real local stack: first every *.unit / *.int / *.e2e
// test (the global setup starts or reuses the stack), then, alone, the chaos soak (*.soak.test.ts,
// on its own private stack, see vitest.soak.config.ts). Ends with one plain summary line over
// both, "tests: N passed, N failed, N skipped", that CI reads. Extra arguments go to vitest (e.g.
// a file filter, applied to both runs); `--config FILE` runs that config only.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';

mkdirSync('.stack', { recursive: true });
const extra = process.argv.slice(2);
const ownConfig = extra.includes('--config');
const runs = ownConfig
  ? [{ name: 'tests', args: [] }]
  : [
      { name: 'tests', args: [] },
      { name: 'soak', args: ['--config', 'vitest.soak.config.ts'] },
    ];

function vitest(name, args) {
  const report = `.stack/vitest-report-${name}.json`;
  rmSync(report, { force: true });
  return new Promise((resolve) => {
    const child = spawn(
      'npx',
      [
        'vitest',
        'run',
        '--reporter=default',
        '--reporter=json',
        `--outputFile.json=${report}`,
        // A file filter matches tests in one run only; the other then has nothing to do.
        ...(extra.length && !ownConfig ? ['--passWithNoTests'] : []),
        ...args,
        ...extra,
      ],
      { stdio: 'inherit' },
    );
    child.on('exit', (code, signal) => {
      let counts = { passed: 0, failed: 1, skipped: 0 };
      try {
        const r = JSON.parse(readFileSync(report, 'utf8'));
        counts = {
          passed: r.numPassedTests,
          failed: r.numFailedTests,
          skipped: (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0),
        };
      } catch {
        /* no report: count the run as one failure */
      }
      resolve({ code: code ?? (signal ? 1 : 0), counts });
    });
  });
}

let exit = 0;
const total = { passed: 0, failed: 0, skipped: 0 };
for (const r of runs) {
  const { code, counts } = await vitest(r.name, r.args);
  if (code !== 0) exit = code;
  for (const k of Object.keys(total)) total[k] += counts[k];
}
console.log(
  `\ntests: ${total.passed} passed, ${total.failed} failed${total.skipped ? `, ${total.skipped} skipped` : ''}`,
);
process.exit(exit);
