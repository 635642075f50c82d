// Property: over random training histories (runs that train, see reports refused, save, die and
// resume from any saved checkpoint, with the gateway away for a while and the campaign passing over
// missing steps), no checkpoint waits for ever, each manifest lists exactly what the checkpoint was
// trained on (bar the steps the campaign refused and passed over), and every root recorded is the
// one recomputed after everything recorded later (test/support/checkpoints/model.ts).
// RODS_PROPERTY_RUNS sets the number of histories (the chaos soak runs thousands).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  actionsArb,
  ModelCampaign,
  script,
  summariesInOnePass,
  type Truth,
} from '../test/support/checkpoints/model.js';
import {
  buildManifest,
  type CheckpointRecord,
  type ManifestSummary,
  recordedUpTo,
  trainedSteps,
  trainingChain,
} from './manifest.js';

const RUNS = Number(process.env.RODS_PROPERTY_RUNS ?? 300);
const identity = (taskId: string) => ({ contentHash: `h-${taskId}`, lineageRoot: taskId });

/** The manifest of `target` as buildManifest gives it from the checkpoints recorded up to it. */
function manifestOf(target: CheckpointRecord, recorded: readonly CheckpointRecord[], m: ModelCampaign) {
  const upTo = recordedUpTo(recorded, target);
  const chain = trainingChain(target, new Map(upTo.map((c) => [c.checkpointId, c])));
  return buildManifest(
    target,
    chain,
    trainedSteps(chain, upTo, (s) => m.record.get(s)),
    identity,
  );
}

const truthEntries = (t: Truth) =>
  [...t]
    .filter(([, e]) => e.steps.length > 0)
    .map(([taskId, e]) => ({ taskId, steps: e.steps, groups: e.groups, rollouts: e.rollouts }))
    .sort((a, b) => (a.taskId < b.taskId ? -1 : 1));

describe('checkpoint manifests over random training histories', () => {
  it(`${RUNS} histories: none held for ever, each manifest what was trained, roots stable as later reports arrive`, () => {
    fc.assert(
      fc.property(actionsArb, (actions) => {
        const m = new ModelCampaign();
        const atRecord = new Map<string, ManifestSummary>();
        const deliver = (c: CheckpointRecord) => {
          // What the gateway records: the root from the checkpoints recorded so far and this one.
          atRecord.set(
            c.checkpointId,
            summariesInOnePass([c], m.recorded, (s) => m.record.get(s), identity).get(c.checkpointId)!,
          );
          return 'recorded' as const;
        };
        for (const e of script(actions)) m.apply(e, deliver);
        // The trainer stops; the campaign's policy and the spool's retries go on until nothing is left.
        for (let i = 0; i < 200 && m.queue.length > 0; i++) {
          m.apply({ kind: 'tick' });
          m.apply({ kind: 'deliver' }, deliver);
        }
        expect(m.queue.map((q) => q.record.checkpointId)).toEqual([]);

        // The audit, after everything: one pass over the record for every checkpoint.
        const audit = summariesInOnePass(m.recorded, m.recorded, (s) => m.record.get(s), identity);
        for (const c of m.recorded) {
          const reference = manifestOf(c, m.recorded, m);
          expect(audit.get(c.checkpointId)).toEqual(atRecord.get(c.checkpointId));
          expect(audit.get(c.checkpointId)).toEqual({
            checkpointId: c.checkpointId,
            root: reference.root,
            tasks: reference.entries.length,
            groups: reference.groups,
          });
          const truth = m.truths.get(c.checkpointId);
          if (truth)
            expect(
              reference.entries.map(({ taskId, steps, groups, rollouts }) => ({
                taskId,
                steps,
                groups,
                rollouts,
              })),
              c.checkpointId,
            ).toEqual(truthEntries(truth));
        }
      }),
      { numRuns: RUNS },
    );
  });
});
