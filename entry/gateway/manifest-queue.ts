// Manifest computations in one gateway: each reads the campaign's step records up to its
// checkpoint and holds per-task totals, so they run a few at a time whatever arrives at once
// (memory bounded by `concurrency` computations, not by requests), one at a time per campaign (the
// store's checkpoint lock serialises them across gateways too, platform/store/checkpoints/
// records.ts), and past `maxQueued` waiting requests the route answers 503 with Retry-After.

export class ManifestBusy extends Error {
  override name = 'ManifestBusy';
}

export const MANIFEST_CONCURRENCY_ENV = 'RODS_GATEWAY_MANIFEST_CONCURRENCY';

/** RODS_GATEWAY_MANIFEST_CONCURRENCY (1-64, default 2); throws naming it when it is not one. */
export function manifestConcurrencyFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[MANIFEST_CONCURRENCY_ENV]?.trim();
  if (!raw) return 2;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 64)
    throw new Error(`${MANIFEST_CONCURRENCY_ENV} must be an integer in [1, 64], got ${JSON.stringify(raw)}`);
  return n;
}

export class ManifestQueue {
  private running = 0;
  private queued = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly tails = new Map<string, Promise<unknown>>();

  constructor(
    readonly concurrency = 2,
    readonly maxQueued = 64,
  ) {}

  /** Computations running and waiting now. */
  get load(): { running: number; queued: number } {
    return { running: this.running, queued: this.queued };
  }

  /** Runs `fn` after the campaign's earlier computations, within the process-wide limit; ManifestBusy past maxQueued. */
  async run<T>(campaignId: string, fn: () => Promise<T>): Promise<T> {
    if (this.queued >= this.maxQueued)
      throw new ManifestBusy(
        `${this.queued} checkpoint manifests are waiting to be computed in this gateway`,
      );
    this.queued++;
    // The campaign's chain of computations: each waits for the one before (which never rejects).
    const before = this.tails.get(campaignId) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((r) => {
      done = r;
    });
    const tail = before.then(() => mine);
    this.tails.set(campaignId, tail);
    await before;
    await this.slot();
    this.queued--;
    try {
      return await fn();
    } finally {
      this.release();
      done();
      if (this.tails.get(campaignId) === tail) this.tails.delete(campaignId);
    }
  }

  private async slot(): Promise<void> {
    if (this.running < this.concurrency) {
      this.running++;
      return;
    }
    await new Promise<void>((r) => this.waiting.push(r));
    this.running++;
  }

  private release(): void {
    this.running--;
    this.waiting.shift()?.();
  }
}
