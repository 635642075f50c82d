// The soak's fault plan: which fault strikes at which step, for how long. Pure and seeded, so a
// soak run can be repeated fault for fault; the injector (run.ts) carries it out.
import { xorshift32 } from '../../platform/util/xorshift.js';

export const FAULT_KINDS = [
  'kill-worker',
  'kill-aggregator',
  'kill-relay',
  'kill-gateway',
  'kill-executor',
  'postgres-outage',
  'kafka-outage',
  'temporal-outage',
  'poison',
  // Records that declare 2^31 - 1 items or bytes: an array, a string and a map bomb.
  'bomb',
  // The worker and every Kafka broker down past the gateway's send timeout while a step is sent;
  // the broker back, the trainer three steps on, then the worker: that step's batches are
  // published after the later steps' (past the stale window).
  'late-publish',
  // SIGSTOP of an aggregator while its transaction is open (longer than the soak's
  // idle-in-transaction timeout), then SIGCONT.
  'freeze',
  // kill -9 of one broker of the three-node cluster that is not the controller, and of the
  // active controller.
  'kill-broker',
  'kill-controller',
  // A step whose closing batch the gateway refuses (422): the campaign passes over it at once
  // (missing-step policy), and the checkpoint saved after it waits for that, then is recorded.
  'refused-step',
  // The secured stack only: a new server certificate mid-campaign, taken without a restart by
  // Kafka's brokers, PostgreSQL, nginx (Temporal) and the running gateway.
  'rotate-certs',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Kinds that need the three-node Kafka cluster. */
export const CLUSTER_FAULT_KINDS: readonly FaultKind[] = ['kill-broker', 'kill-controller'];
/** Kinds that need the secured stack. */
export const SECURE_FAULT_KINDS: readonly FaultKind[] = ['rotate-certs'];

/** The kinds a soak strikes with this stack. */
export function faultKindsFor(stack: { kafkaNodes: number; secure: boolean }): FaultKind[] {
  return FAULT_KINDS.filter(
    (k) =>
      // Killing a broker of a one-broker "cluster" is the Kafka outage already.
      (stack.kafkaNodes >= 3 || !CLUSTER_FAULT_KINDS.includes(k)) &&
      (stack.secure || !SECURE_FAULT_KINDS.includes(k)),
  );
}

export interface Fault {
  kind: FaultKind;
  /** Strikes once the trainer has started this step, after delayMs. */
  atStep: number;
  delayMs: number;
  /** How long the process or service stays down (0 for poison). */
  downMs: number;
  /** kill -9 rather than a clean stop (outages of Kafka and Temporal). */
  hard: boolean;
  /** kill-aggregator: which of the two instances. */
  instance: number;
}

export interface FaultPlanOptions {
  steps: number;
  seed: number;
  /** Faults of each kind; default one per 60 steps, at least one. */
  perKind?: number;
  /** The first PostgreSQL outage lasts this long (the issue asks for one of 60 s or more). */
  longOutageMs?: number;
  /** The kinds to strike (default all). */
  kinds?: readonly FaultKind[];
}

/** Each kind perKind times at seeded random steps in [2, steps - 1], ordered by step. */
export function planFaults(opts: FaultPlanOptions): Fault[] {
  if (opts.steps < 8) throw new Error(`a soak needs at least 8 steps, got ${opts.steps}`);
  const rand = xorshift32(opts.seed);
  const between = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const perKind = opts.perKind ?? Math.max(1, Math.round(opts.steps / 60));
  const faults: Fault[] = [];
  let longOutage = true;
  for (let i = 0; i < perKind; i++) {
    for (const kind of opts.kinds ?? FAULT_KINDS) {
      let downMs = 0;
      let hard = true;
      switch (kind) {
        case 'postgres-outage':
          downMs = longOutage ? (opts.longOutageMs ?? 62_000) : between(5_000, 30_000);
          longOutage = false;
          hard = false;
          break;
        case 'kafka-outage':
        case 'temporal-outage':
          downMs = between(5_000, 25_000);
          hard = rand() < 0.5;
          break;
        case 'poison':
        case 'bomb':
          break;
        case 'late-publish':
          // How long the broker stays down after the step's batches fell back (past the 5 s send).
          downMs = between(8_000, 15_000);
          break;
        case 'freeze':
          downMs = between(12_000, 25_000);
          break;
        case 'kill-broker':
        case 'kill-controller':
          downMs = between(5_000, 20_000);
          break;
        default:
          downMs = between(500, 6_000);
      }
      faults.push({
        kind,
        // A late publish needs three steps after its own.
        atStep: kind === 'late-publish' ? between(2, opts.steps - 4) : between(2, opts.steps - 1),
        delayMs: between(0, 1500),
        downMs,
        hard,
        instance: between(0, 1),
      });
    }
  }
  return faults.sort((a, b) => a.atStep - b.atStep || a.delayMs - b.delayMs);
}

export function countByKind(faults: { kind: FaultKind }[]): Record<FaultKind, number> {
  const out = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  for (const f of faults) out[f.kind]++;
  return out;
}
