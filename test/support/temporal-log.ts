// A vitest setup file: the Temporal SDK's log (webpack's bundle report, the worker's INFO lines,
// Core's WARN lines forwarded from the native side) goes to .stack/logs/tests/<test file>.log
// instead of between the results, and the lines a failing test logged are printed with it.
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, type LogEntry, Runtime } from '@temporalio/worker';
import { afterEach, expect } from 'vitest';

const LOG_DIR = path.resolve('.stack', 'logs', 'tests');
/** Lines since the current test began (printed if it fails). */
let lines: string[] = [];
let file: string | undefined;

function logFile(): string {
  if (!file) {
    const testPath = expect.getState().testPath ?? `pid-${process.pid}`;
    mkdirSync(LOG_DIR, { recursive: true });
    file = path.join(LOG_DIR, `${path.relative(process.cwd(), testPath).replaceAll(path.sep, '__')}.log`);
  }
  return file;
}

function record(entry: LogEntry): void {
  const at = new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString();
  const meta = entry.meta && Object.keys(entry.meta).length ? ` ${JSON.stringify(entry.meta)}` : '';
  const line = `${at} [${entry.level}] ${entry.message}${meta}`;
  lines.push(line);
  if (lines.length > 500) lines = lines.slice(-400);
  try {
    appendFileSync(logFile(), `${line}\n`);
  } catch {
    /* a log that cannot be written must not fail the test */
  }
}

try {
  Runtime.install({
    logger: new DefaultLogger('INFO', record),
    telemetryOptions: { logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} } },
  });
} catch {
  // Installed already in this process (a file before this one): its logger stays.
}

afterEach((ctx) => {
  if (ctx.task.result?.state === 'fail' && lines.length > 0) {
    process.stderr.write(
      `\n--- Temporal SDK log of "${ctx.task.name}" (last ${Math.min(lines.length, 60)} lines; all in ${logFile()}) ---\n${lines.slice(-60).join('\n')}\n`,
    );
  }
  lines = [];
});
