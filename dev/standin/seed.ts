// A seed task's calls as the stand-in sees them: parsed, owned by a class, grouped into units of
// at most N calls that become the turns of a plan.

import { classOf, isReadOnly, paramNames } from '../../domain/bfcl-catalog.js';
import type { TaskRecord } from '../../domain/task.js';
import { type PyCall, type PyValue, tryParseCall } from './pycall.js';

export interface SeedCall {
  /** Seed turn index (0-based, empty turns counted). */
  turn: number;
  index: number;
  text: string;
  call: PyCall | null;
  name: string;
  cls: string | null;
  readOnly: boolean;
}

export interface Unit {
  /** Seed turn number (1-based), with a letter when the turn was split: "3", "4a", "4b". */
  label: string;
  seedTurn: number;
  calls: SeedCall[];
  readOnly: boolean;
}

export function seedCalls(task: Pick<TaskRecord, 'ground_truth' | 'involved_classes'>): SeedCall[][] {
  return task.ground_truth.map((turn, t) =>
    turn.map((text, index) => {
      const call = tryParseCall(text);
      const name = call?.name ?? /^\s*([A-Za-z_]\w*)/.exec(text)?.[1] ?? '';
      const cls = classOf(name, task.involved_classes);
      return { turn: t, index, text, call, name, cls, readOnly: call !== null && isReadOnly(cls, name) };
    }),
  );
}

/** Splits n items into ceil(n / max) chunks of near-equal size (larger ones first). */
export function balancedChunks<T>(items: readonly T[], max: number, minChunks = 1): T[][] {
  const k = Math.min(items.length, Math.max(minChunks, Math.ceil(items.length / max)));
  const out: T[][] = [];
  let at = 0;
  for (let i = 0; i < k; i++) {
    const size = Math.floor(items.length / k) + (i < items.length % k ? 1 : 0);
    out.push(items.slice(at, at + size));
    at += size;
  }
  return out;
}

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

/** The seed's non-empty turns as units of at most `maxCalls` calls; at least `minUnits` when the calls allow. */
export function unitsOf(
  task: Pick<TaskRecord, 'ground_truth' | 'involved_classes'>,
  maxCalls: number,
  minUnits = 2,
) {
  const turns = seedCalls(task).filter((t) => t.length > 0);
  const nonEmpty = turns.length;
  const total = turns.reduce((n, t) => n + t.length, 0);
  // Split further only when the seed has fewer non-empty turns than a plan needs.
  const extra = nonEmpty < minUnits ? Math.min(minUnits, total) : 0;
  const units: Unit[] = [];
  for (const calls of turns) {
    const chunks = balancedChunks(
      calls,
      maxCalls,
      extra && calls.length > 1 ? Math.min(calls.length, extra) : 1,
    );
    chunks.forEach((chunk, i) => {
      units.push({
        label: chunks.length > 1 ? `${calls[0]!.turn + 1}${LETTERS[i] ?? i}` : `${calls[0]!.turn + 1}`,
        seedTurn: calls[0]!.turn,
        calls: chunk,
        readOnly: chunk.every((c) => c.readOnly),
      });
    });
  }
  return units;
}

/** The value of a call's parameter (keyword, or positional by the method's parameter order). */
export function argOf(call: PyCall, cls: string | null, param: string): PyValue | undefined {
  const kw = call.kwargs.find(([k]) => k === param);
  if (kw) return kw[1];
  const i = paramNames(cls, call.name).indexOf(param);
  return i >= 0 ? call.args[i] : undefined;
}

/** The call with one parameter's value replaced (where it was given). */
export function withArg(call: PyCall, cls: string | null, param: string, value: PyValue): PyCall {
  const kw = call.kwargs.findIndex(([k]) => k === param);
  if (kw >= 0) {
    const kwargs = call.kwargs.map((e, i) => (i === kw ? ([param, value] as [string, PyValue]) : e));
    return { ...call, kwargs };
  }
  const i = paramNames(cls, call.name).indexOf(param);
  if (i >= 0 && i < call.args.length)
    return { ...call, args: call.args.map((a, j) => (j === i ? value : a)) };
  return call;
}

/** Every (parameter, value) of a call, positional ones named by the catalog (or `#i`). */
export function namedArgs(call: PyCall, cls: string | null): [string, PyValue][] {
  const names = paramNames(cls, call.name);
  return [...call.args.map((v, i) => [names[i] ?? `#${i}`, v] as [string, PyValue]), ...call.kwargs];
}
