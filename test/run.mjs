#!/usr/bin/env node
// `npm test`: runs vitest three times against the real local stack: first every *.unit / *.int / *.e2e
// test (the global setup starts or reuses the stack), then, alone, the chaos soak (*.soak.test.ts,
// on its own private stack, see vitest.soak.config.ts), then the real-vLLM tests
// (vitest.vllm.config.ts). Ends with one plain summary line over
// both, "tests: N passed, N failed, N skipped", that CI reads. Extra arguments go to vitest (e.g.
// a file filter, applied to both runs); `--config FILE` runs that config only.
//
// A test file of the first run that fails is run once more, alone. When it passes then, it is a
// flake: counted by its second outcome, listed under FLAKY with both outcomes (and the first one's
// failures) in the summary and in .stack/flaky.json. A flake is a bug to fix with a test of its
// own; the list makes it visible instead of failing a whole green change on it. Files that fail
// twice fail the run. RODS_TEST_RERUN=0 turns the second run off.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

mkdirSync('.stack', { recursive: true });
const extra = process.argv.slice(2);
const ownConfig = extra.includes('--config');
const rerun = process.env.RODS_TEST_RERUN !== '0';
// A rerun keeps the config asked for (--config FILE), not the file filters.
const configArgs = ownConfig ? extra.slice(extra.indexOf('--config'), extra.indexOf('--config') + 2) : [];
const runs = ownConfig
  ? [{ name: 'tests', args: [], rerun }]
  : [
      { name: 'tests', args: [], rerun },
      // The soak is minutes long and its failures are its invariants: not run twice.
      { name: 'soak', args: ['--config', 'vitest.soak.config.ts'], rerun: false },
      // A real vLLM as the generator (its global setup builds the cached venv once per machine
      // and starts the server, 1 to 2 minutes): last, so its 4 GB are not held during the rest.
      { name: 'vllm', args: ['--config', 'vitest.vllm.config.ts'], rerun },
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
      ],
      { stdio: 'inherit' },
    );
    child.on('exit', (code, signal) => {
      let counts = { passed: 0, failed: 1, skipped: 0 };
      let files = [];
      try {
        const r = JSON.parse(readFileSync(report, 'utf8'));
        counts = {
          passed: r.numPassedTests,
          failed: r.numFailedTests,
          skipped: (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0),
        };
        files = r.testResults.map((t) => ({
          file: path.relative(process.cwd(), t.name),
          status: t.status,
          passed: t.assertionResults.filter((a) => a.status === 'passed').length,
          failed: t.assertionResults.filter((a) => a.status === 'failed').length,
          failures: t.assertionResults
            .filter((a) => a.status === 'failed')
            .map((a) => ({ test: a.fullName, message: (a.failureMessages ?? []).join('\n').slice(0, 2000) })),
          message: t.message ? String(t.message).slice(0, 2000) : undefined,
          seconds: (t.endTime - t.startTime) / 1000,
        }));
      } catch {
        /* no report: count the run as one failure */
      }
      resolve({ code: code ?? (signal ? 1 : 0), counts, files });
    });
  });
}

let exit = 0;
const total = { passed: 0, failed: 0, skipped: 0 };
const flaky = [];
const timed = [];
for (const r of runs) {
  const first = await vitest(r.name, [...r.args, ...extra]);
  let { code, counts } = first;
  const failedFiles = first.files.filter((f) => f.status === 'failed');
  // Only a run that produced its report and failed in some files (not one that could not start).
  if (r.rerun && code !== 0 && failedFiles.length > 0 && failedFiles.length <= 5) {
    console.log(
      `\n[test] ${failedFiles.length} file(s) failed; running each once more: ${failedFiles.map((f) => f.file).join(', ')}`,
    );
    const again = await vitest(`${r.name}-rerun`, [
      ...r.args,
      ...configArgs,
      ...failedFiles.map((f) => f.file),
    ]);
    const byFile = new Map(again.files.map((f) => [f.file, f]));
    const stillFailing = failedFiles.filter((f) => byFile.get(f.file)?.status !== 'passed');
    if (again.code === 0 || stillFailing.length === 0) {
      // Each failed file passed alone: the run counts its second outcome, and lists the flake.
      for (const f of failedFiles) {
        const second = byFile.get(f.file);
        counts.failed -= f.failed;
        counts.passed += (second?.passed ?? 0) - f.passed;
        flaky.push({
          file: f.file,
          first: { passed: f.passed, failed: f.failed, failures: f.failures, message: f.message },
          second: { passed: second?.passed ?? 0, failed: 0 },
        });
      }
      counts.failed = Math.max(0, counts.failed);
      code = 0;
    } else {
      console.log(`[test] failing again: ${stillFailing.map((f) => f.file).join(', ')}`);
    }
  }
  if (code !== 0) exit = code;
  for (const k of Object.keys(total)) total[k] += counts[k];
  timed.push(...first.files);
}
writeFileSync('.stack/flaky.json', `${JSON.stringify(flaky, null, 2)}\n`);
if (flaky.length > 0) {
  console.log('\nFLAKY (failed, then passed when run again alone; each is a bug to fix):');
  for (const f of flaky) {
    console.log(
      `  ${f.file}: first ${f.first.passed} passed, ${f.first.failed} failed; then ${f.second.passed} passed`,
    );
    for (const x of f.first.failures)
      console.log(`    x ${x.test}: ${x.message.split('\n')[0].slice(0, 300)}`);
  }
}
const slowest = timed.sort((a, b) => b.seconds - a.seconds).slice(0, 8);
if (slowest.length > 1) {
  console.log(`\nslowest files (of ${timed.length}):`);
  for (const f of slowest) console.log(`  ${f.seconds.toFixed(1).padStart(7)} s  ${f.file}`);
}
console.log(
  `\ntests: ${total.passed} passed, ${total.failed} failed${total.skipped ? `, ${total.skipped} skipped` : ''}${flaky.length ? `, ${flaky.length} flaky file(s) (.stack/flaky.json)` : ''}`,
);
process.exit(exit);
