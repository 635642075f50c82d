// What the judge sees of a candidate's execution: per turn, each ground-truth call with what it
// returned, and the environment's state after the turn (the attributes bfcl's state checker
// compares). Without it the judge scores state_consistency from the calls alone. Long values are
// cut so the prompt stays within a budget whatever the environment holds.
import type { ExecuteResponse } from '../executor-client.js';

export interface ExecutionSummary {
  ok: boolean;
  turns: { turn: number; calls: { call: string; ok: boolean; returned: string }[]; state: string }[];
  /** Set when values were cut to fit the budget. */
  truncated?: true;
}

const cut = (s: string, max: number) => (s.length <= max ? s : `${s.slice(0, max)}… (${s.length} chars)`);

/** The execution as the judge's prompt carries it, at most about `budget` characters of values. */
export function executionSummary(r: ExecuteResponse, budget = 12_000): ExecutionSummary {
  const turns = Math.max(1, r.turns.length);
  // Half of a turn's share for its state, the rest split among its calls' results.
  const statePer = Math.floor(budget / turns / 2);
  let truncated = false;
  const out: ExecutionSummary = {
    ok: r.ok,
    turns: r.turns.map((t) => {
      const callPer = Math.max(80, Math.floor(statePer / Math.max(1, t.results.length)));
      const state = JSON.stringify(t.state);
      if (state.length > statePer) truncated = true;
      return {
        turn: t.turn,
        calls: t.results.map((c) => {
          const returned = c.ok
            ? JSON.stringify(c.result ?? null)
            : `error: ${c.error ?? c.kind ?? 'failed'}`;
          if (returned.length > callPer) truncated = true;
          return { call: c.call, ok: c.ok, returned: cut(returned, callPer) };
        }),
        state: cut(state, statePer),
      };
    }),
  };
  return truncated ? { ...out, truncated: true } : out;
}
