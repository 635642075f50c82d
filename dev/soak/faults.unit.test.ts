import { describe, expect, it } from 'vitest';
import { CLUSTER_FAULT_KINDS, countByKind, FAULT_KINDS, faultKindsFor, planFaults } from './faults.js';

describe('the soak fault plan', () => {
  it('strikes every kind the asked number of times, inside the run, in step order', () => {
    const plan = planFaults({ steps: 300, seed: 1 });
    expect(Object.values(countByKind(plan))).toEqual(FAULT_KINDS.map(() => 5));
    for (const f of plan) {
      expect(f.atStep).toBeGreaterThanOrEqual(2);
      expect(f.atStep).toBeLessThanOrEqual(299);
    }
    expect(plan.map((f) => f.atStep)).toEqual([...plan.map((f) => f.atStep)].sort((a, b) => a - b));
  });

  it('has one PostgreSQL outage of the long length, the others shorter', () => {
    const pg = planFaults({ steps: 300, seed: 9, longOutageMs: 65_000 }).filter(
      (f) => f.kind === 'postgres-outage',
    );
    expect(pg.filter((f) => f.downMs === 65_000)).toHaveLength(1);
    expect(pg.filter((f) => f.downMs < 65_000)).toHaveLength(4);
  });

  it('is the same plan for the same seed and another for another seed', () => {
    expect(planFaults({ steps: 30, seed: 4 })).toEqual(planFaults({ steps: 30, seed: 4 }));
    expect(planFaults({ steps: 30, seed: 4 })).not.toEqual(planFaults({ steps: 30, seed: 5 }));
    expect(countByKind(planFaults({ steps: 30, seed: 4 }))).toEqual(
      Object.fromEntries(FAULT_KINDS.map((k) => [k, 1])),
    );
  });

  it('strikes only the kinds asked for (a one-broker run has no broker to kill), a late publish three steps before the end', () => {
    const kinds = FAULT_KINDS.filter((k) => !CLUSTER_FAULT_KINDS.includes(k));
    const plan = planFaults({ steps: 30, seed: 2, kinds });
    expect(new Set(plan.map((f) => f.kind))).toEqual(new Set(kinds));
    for (const f of planFaults({ steps: 12, seed: 3, perKind: 20 }).filter((x) => x.kind === 'late-publish'))
      expect(f.atStep).toBeLessThanOrEqual(8);
  });

  it('strikes cluster kinds only on three nodes and a certificate rotation only on the secured stack', () => {
    expect(faultKindsFor({ kafkaNodes: 3, secure: true })).toEqual([...FAULT_KINDS]);
    expect(faultKindsFor({ kafkaNodes: 3, secure: false })).not.toContain('rotate-certs');
    expect(faultKindsFor({ kafkaNodes: 1, secure: true })).toEqual(
      FAULT_KINDS.filter((k) => !CLUSTER_FAULT_KINDS.includes(k)),
    );
    // A kind added for the secured stack leaves a plain run's plan as it was for the same seed.
    const plain = faultKindsFor({ kafkaNodes: 3, secure: false });
    expect(
      planFaults({ steps: 30, seed: 7, kinds: FAULT_KINDS }).filter((f) => f.kind !== 'rotate-certs'),
    ).toEqual(planFaults({ steps: 30, seed: 7, kinds: plain }));
  });

  it('refuses a run too short to hold a fault', () => {
    expect(() => planFaults({ steps: 7, seed: 1 })).toThrow(/at least 8 steps/);
  });
});
