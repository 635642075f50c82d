// The CI-sized chaos soak: about 30 steps with every fault kind at least once, on its own private
// stack. It runs after the rest of `npm test`, alone (vitest.soak.config.ts), because it stops
// and kills services and loads the machine.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { faultKindsFor } from './faults.js';
import type { SoakReport } from './run.js';

const STEPS = Number(process.env.RODS_SOAK_STEPS ?? 30);
// Both stacks by default, one after the other: the plaintext one, then the secured one (with a
// certificate rotation among the faults). RODS_SOAK_SECURE=1 runs only the secured soak, =0 only
// the plaintext one.
const VARIANTS =
  process.env.RODS_SOAK_SECURE === '1'
    ? [true]
    : process.env.RODS_SOAK_SECURE === '0'
      ? [false]
      : [false, true];

describe.each(VARIANTS)('chaos soak (secured: %s)', (SECURE) => {
  it(
    `${STEPS} steps${SECURE ? ' on the secured stack' : ''} through kill -9 of every process, outages of PostgreSQL, Kafka and Temporal, and poison: every invariant holds`,
    async () => {
      const out = mkdtempSync(path.join(tmpdir(), 'rods-soak-'));
      let stdout = '';
      const code = await new Promise<number>((resolve) => {
        const child = spawn(
          process.execPath,
          [
            '--import',
            'tsx',
            'dev/soak/cli.ts',
            '--steps',
            String(STEPS),
            '--seed',
            '7',
            '--json',
            '--out',
            out,
            ...(SECURE ? ['--secure'] : []),
          ],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
        child.stdout.on('data', (d) => {
          stdout += d;
        });
        child.on('exit', (c) => resolve(c ?? 1));
      });
      // --json: stdout is the report and nothing else (progress and logs go to stderr).
      expect(JSON.parse(stdout)).toEqual(JSON.parse(readFileSync(path.join(out, 'report.json'), 'utf8')));
      const report = JSON.parse(readFileSync(path.join(out, 'report.json'), 'utf8')) as SoakReport;
      for (const [name, ok] of Object.entries(report.invariants))
        expect({ name, ok, evidence: report.evidence[name] }).toEqual({
          name,
          ok: true,
          evidence: report.evidence[name],
        });
      for (const kind of faultKindsFor({ kafkaNodes: 3, secure: SECURE }))
        expect(report.faults_by_kind[kind], kind).toBeGreaterThanOrEqual(1);
      expect(report.secure).toBe(SECURE);
      expect(report.steps).toBe(STEPS);
      expect(code).toBe(0);
    },
    40 * 60_000,
  );
});
