// A batch's counts per campaign and step, gathered while it folds and written with its offsets
// (platform/store/steps/progress.ts); the steps they moved are the ones to try closing.
import type { Band } from '../../domain/band.js';
import { addToTally, emptyTally } from '../../domain/step-tally.js';
import type { StepCount } from '../../platform/store/steps/progress.js';
import type { Closing } from './decode.js';

export interface StepRef {
  campaignId: string;
  step: number;
}

const stepKey = (s: StepRef) => `${s.campaignId}\u0000${s.step}`;

/** The batch's counts per campaign and step. */
export class StepTallies {
  private readonly counts = new Map<string, StepCount>();

  private of(campaignId: string, step: number): StepCount {
    const k = stepKey({ campaignId, step });
    let t = this.counts.get(k);
    if (!t) {
      t = { campaignId, step, tally: emptyTally(), rejected: 0 };
      this.counts.set(k, t);
    }
    return t;
  }

  applied(campaignId: string, step: number, band: Band, groupVariance: number): void {
    const t = this.of(campaignId, step);
    t.tally = addToTally(t.tally, band, groupVariance);
  }

  rejected(campaignId: string, step: number): void {
    this.of(campaignId, step).rejected++;
  }

  get size(): number {
    return this.counts.size;
  }

  /** In the order the batch first counted each step. */
  all(): StepCount[] {
    return [...this.counts.values()];
  }
}

/** The steps whose progress moved (candidates for closing), each once. */
export function movedSteps(tallies: StepTallies, closings: readonly Closing[]): StepRef[] {
  return [
    ...new Map(
      [...tallies.all(), ...closings].map((t) => [stepKey(t), { campaignId: t.campaignId, step: t.step }]),
    ).values(),
  ];
}
