// What the oldest open step waits for, from its counts and batches (analysis/status/projections.ts).
import { describe, expect, it } from 'vitest';
import type { StepRowView } from '../../platform/store/steps/view.js';
import { waitingFor } from './projections.js';

const step = (over: Partial<StepRowView> = {}): StepRowView => ({
  step: 4,
  declaredGroups: null,
  appliedGroups: 0,
  rejectedGroups: 0,
  closedAt: null,
  ...over,
});
const batch = (closes: boolean, status: 'accepted' | 'published') => ({ closes, status });

describe('waitingFor', () => {
  it('names the trainer while nothing or no closing batch came', () => {
    expect(waitingFor(step(), [])).toEqual(['trainer-batches']);
    expect(waitingFor(step({ appliedGroups: 2 }), [batch(false, 'published')])).toEqual(['trainer-close']);
  });

  it('names unpublished batches and the aggregator', () => {
    expect(waitingFor(step(), [batch(false, 'accepted'), batch(true, 'accepted')])).toEqual([
      'unpublished-batches',
    ]);
    expect(waitingFor(step(), [batch(true, 'published')])).toEqual(['aggregator-declare']);
    expect(
      waitingFor(step({ declaredGroups: 5, appliedGroups: 2, rejectedGroups: 1 }), [
        batch(false, 'accepted'),
        batch(true, 'published'),
      ]),
    ).toEqual(['unpublished-batches', 'aggregator-groups']);
    expect(
      waitingFor(step({ declaredGroups: 5, appliedGroups: 4, rejectedGroups: 1 }), [
        batch(true, 'published'),
      ]),
    ).toEqual(['aggregator-close']);
  });
});
