import { describe, expect, it } from 'vitest';
import { summariesInOnePass } from '../test/support/checkpoints/model.js';
import {
  buildManifest,
  type CheckpointRecord,
  diffManifests,
  ManifestError,
  ReportedTotals,
  type StepTask,
  trainedSteps,
  trainingChain,
} from './manifest.js';
import { merkleRoot } from './merkle.js';
import { mulberry32 } from './random.js';

const task = (taskId: string, rollouts = 4): StepTask => ({ taskId, groups: 1, rollouts });
// The campaign's record: step s trained tasks T<s> and U (the first run's reports).
const reported = (step: number) => [task(`T${step}`), task('U')];
const identity = (taskId: string) => ({ contentHash: `h-${taskId}`, lineageRoot: `seed-of-${taskId}` });

// Run 1 saved at 5 and 10 and was killed after step 13; run 2 resumed from run 1's step 5,
// trained 6..13 again (on other tasks at 6 and 7) and saved at 10 and 15.
const c = (
  checkpointId: string,
  runId: string,
  trainerStep: number,
  resumedFrom: string | null,
  retrained: CheckpointRecord['retrainedSteps'] = [],
): CheckpointRecord => ({ checkpointId, runId, trainerStep, resumedFrom, retrainedSteps: retrained });
const r1s5 = c('r1-5', 'r1', 5, null);
const r1s10 = c('r1-10', 'r1', 10, null);
const r2s10 = c('r2-10', 'r2', 10, 'r1-5', [
  { step: 6, tasks: [task('X6')] },
  { step: 7, tasks: [task('T7'), task('U', 2)] },
  { step: 8, tasks: reported(8) },
  { step: 9, tasks: reported(9) },
  { step: 10, tasks: reported(10) },
]);
const r2s15 = c('r2-15', 'r2', 15, 'r1-5', [
  { step: 11, tasks: reported(11) },
  { step: 12, tasks: reported(12) },
  { step: 13, tasks: reported(13) },
]);
const all = [r1s5, r1s10, r2s10, r2s15];
const byId = new Map(all.map((x) => [x.checkpointId, x]));
const manifestOf = (x: CheckpointRecord) => {
  const chain = trainingChain(x, byId);
  return buildManifest(x, chain, trainedSteps(chain, all, reported), identity);
};

describe('a checkpoint manifest', () => {
  it("takes a resumed run's steps after its parent checkpoint from the run itself and the steps before from the parent", () => {
    expect(trainingChain(r2s15, byId)).toEqual([
      { runId: 'r1', checkpointId: 'r1-5', from: 0, to: 5 },
      { runId: 'r2', checkpointId: 'r2-15', from: 5, to: 15 },
    ]);
    const steps = trainedSteps(trainingChain(r2s15, byId), all, reported);
    expect(steps.map((s) => [s.step, s.runId, s.source])).toEqual([
      ...[1, 2, 3, 4, 5].map((s) => [s, 'r1', 'reported']),
      ...[6, 7, 8, 9, 10, 11, 12, 13].map((s) => [s, 'r2', 'retrained']),
      [14, 'r2', 'reported'],
      [15, 'r2', 'reported'],
    ]);
    const m = manifestOf(r2s15);
    // X6 replaced T6 at step 6: T6 was trained only by run 1's discarded steps.
    expect(m.entries.map((e) => e.taskId)).toContain('X6');
    expect(m.entries.map((e) => e.taskId)).not.toContain('T6');
    const u = m.entries.find((e) => e.taskId === 'U')!;
    expect(u.steps).toEqual(Array.from({ length: 15 }, (_, i) => i + 1).filter((s) => s !== 6));
    expect(u.rollouts).toBe(13 * 4 + 2);
    expect(m.groups).toBe(m.steps.reduce((n, s) => n + s.tasks.length, 0));
    expect(m.root).toBe(
      merkleRoot(
        m.entries.map(({ taskId, contentHash, lineageRoot, steps, groups, rollouts }) => ({
          taskId,
          contentHash,
          lineageRoot,
          steps,
          groups,
          rollouts,
        })),
      ),
    );
  });

  it('changes its root when a task content hash changes, and not when nothing does', () => {
    const chain = trainingChain(r1s10, byId);
    const steps = trainedSteps(chain, all, reported);
    const a = buildManifest(r1s10, chain, steps, identity);
    expect(buildManifest(r1s10, chain, steps, identity).root).toBe(a.root);
    const altered = buildManifest(r1s10, chain, steps, (t) =>
      t === 'T3' ? { ...identity(t), contentHash: 'h-T3-edited' } : identity(t),
    );
    expect(altered.root).not.toBe(a.root);
  });

  it('refuses an unknown parent, a parent ahead of its child, and a task with no recorded identity', () => {
    expect(() => trainingChain(c('x', 'r3', 8, 'nope'), byId)).toThrow(ManifestError);
    expect(() => trainingChain(c('x', 'r3', 3, 'r1-5'), byId)).toThrow(/later step 5/);
    const chain = trainingChain(r1s5, byId);
    expect(() =>
      buildManifest(r1s5, chain, trainedSteps(chain, all, reported), (t) =>
        t === 'T2' ? undefined : identity(t),
      ),
    ).toThrow(/task T2, trained at step 2/);
  });

  it('diff names the replayed steps of two checkpoints at one step, and the steps one holds beyond the other', () => {
    const d = diffManifests(manifestOf(r1s10), manifestOf(r2s10), true);
    expect(d.steps.map((s) => [s.step, s.status])).toEqual([6, 7, 8, 9, 10].map((s) => [s, 'replayed']));
    expect(d.steps[0]).toMatchObject({
      onlyA: ['T6', 'U'],
      onlyB: ['X6'],
      a: { runId: 'r1' },
      b: { runId: 'r2' },
    });
    expect(d.steps[1]).toMatchObject({ onlyA: ['U'], onlyB: ['U'] }); // U with 2 rollouts, not 4
    expect(d.steps[2]).toMatchObject({ onlyA: [], onlyB: [] }); // trained again on the same tasks
    expect(d.counts).toMatchObject({ same: 5, replayed: 5, 'only-a': 0, 'only-b': 0 });
    expect(d.tasksOnlyA).toEqual(['T6']);
    expect(d.tasksOnlyB).toEqual(['X6']);
    const later = diffManifests(manifestOf(r2s10), manifestOf(r2s15), true);
    expect(later.steps.map((s) => [s.step, s.status])).toEqual(
      [11, 12, 13, 14, 15].map((s) => [s, 'only-b']),
    );
    expect(diffManifests(manifestOf(r1s10), manifestOf(r1s10), true)).toMatchObject({
      sameRoot: true,
      steps: [],
    });
    // Across campaigns the runs differ by nature: steps compare by their tasks.
    const across = diffManifests(manifestOf(r1s10), manifestOf(r2s10), false);
    expect(across.steps.map((s) => s.status)).toEqual([
      ...Array(5).fill('same-tasks'),
      'differs',
      'differs',
      ...Array(3).fill('same-tasks'),
    ]);
  });
});

describe('roots of many checkpoints in one pass', () => {
  /** Every checkpoint's root through ReportedTotals, steps added in order, as the audit reads them. */
  const onePass = (checkpoints: CheckpointRecord[], record: (s: number) => StepTask[] | undefined) =>
    summariesInOnePass(checkpoints, checkpoints, record, identity);

  it('equal buildManifest for the resumed runs above', () => {
    const roots = onePass(all, reported);
    for (const x of all) {
      const m = manifestOf(x);
      expect(roots.get(x.checkpointId)).toEqual({
        checkpointId: x.checkpointId,
        root: m.root,
        tasks: m.entries.length,
        groups: m.groups,
      });
    }
  });

  it('equal buildManifest over random campaigns: resumes from any earlier checkpoint, steps trained again on other tasks, empty steps', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const r = mulberry32(seed);
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
      const record = new Map<number, StepTask[]>();
      const stepTasks = () =>
        Array.from({ length: Math.floor(r() * 5) }, (_, i) =>
          task(`t${Math.floor(r() * 12)}-${i}`, 1 + Math.floor(r() * 8)),
        );
      const checkpoints: CheckpointRecord[] = [];
      let reportedUpTo = 0;
      for (let run = 1; run <= 1 + Math.floor(r() * 4); run++) {
        const parent = checkpoints.length > 0 && r() < 0.8 ? pick(checkpoints) : null;
        let at = parent?.trainerStep ?? 0;
        let retrained: CheckpointRecord['retrainedSteps'] = [];
        for (let saves = 1 + Math.floor(r() * 4); saves > 0; saves--) {
          const to = at + 1 + Math.floor(r() * 6);
          for (let s = at + 1; s <= to; s++) {
            // The first report of a step is the record; a step reported already is trained again.
            if (s > reportedUpTo) {
              if (r() < 0.85) record.set(s, stepTasks());
              reportedUpTo = s;
            } else retrained.push({ step: s, tasks: r() < 0.3 ? (record.get(s) ?? []) : stepTasks() });
          }
          checkpoints.push(c(`r${run}-${to}`, `r${run}`, to, parent?.checkpointId ?? null, retrained));
          retrained = [];
          at = to;
        }
      }
      const ids = new Map(checkpoints.map((x) => [x.checkpointId, x]));
      const roots = onePass(checkpoints, (s) => record.get(s));
      for (const x of checkpoints) {
        const chain = trainingChain(x, ids);
        const m = buildManifest(
          x,
          chain,
          trainedSteps(chain, checkpoints, (s) => record.get(s)),
          identity,
        );
        expect(roots.get(x.checkpointId), `seed ${seed}, ${x.checkpointId}`).toEqual({
          checkpointId: x.checkpointId,
          root: m.root,
          tasks: m.entries.length,
          groups: m.groups,
        });
      }
    }
  });

  it('names a trained task the log has no identity for, and refuses steps out of order', () => {
    const totals = new ReportedTotals();
    totals.add(1, [task('known'), task('ghost')]);
    expect(() => totals.summary('x', new Map(), (id) => (id === 'ghost' ? undefined : identity(id)))).toThrow(
      /task ghost, trained at step 1, has no seeding or injection/,
    );
    expect(() => totals.add(1, [task('known')])).toThrow(ManifestError);
  });
});
