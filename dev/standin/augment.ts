// The stand-in's Augment answer (prompts/augment.v1.md): a deterministic choice the
// transformation accepts (domain/augment.ts checks it, as it checks a real generator's).

import type { AugmentAnswer } from '../../activities/llm/schemas.js';
import { choiceProblem, literalText, type VariantKind } from '../../domain/augment.js';
import { parseCall } from '../../domain/call-parser.js';
import type { TaskRecord } from '../../domain/task.js';

export interface AugmentInput {
  kind: VariantKind;
  candidate: TaskRecord;
}

const turnText = (c: TaskRecord, t: number) => (c.question[t] ?? []).map((m) => m.content).join(' ');

/** Latest turns first: the deferred call then comes late in the conversation, as in BFCL's data. */
function turnsLateFirst(c: TaskRecord): number[] {
  return c.ground_truth.map((_, t) => t).reverse();
}

export function answerAugment(input: AugmentInput): AugmentAnswer {
  const c = input.candidate;
  if (input.kind === 'miss_func') {
    for (const turn of turnsLateFirst(c)) {
      for (const call of c.ground_truth[turn]!) {
        const r = parseCall(call);
        if (!r.ok) continue;
        const a = { turn, function: r.call.name };
        if (!choiceProblem(c, { kind: 'miss_func', ...a })) return a;
      }
    }
    // nothing fits (e.g. the base already withholds a function): an answer the schema re-asks
    return { turn: 0, function: 'none' };
  }
  for (const turn of turnsLateFirst(c)) {
    const text = turnText(c, turn);
    for (const [i, call] of c.ground_truth[turn]!.entries()) {
      const r = parseCall(call);
      if (!r.ok) continue;
      const args = [
        ...r.call.kwargs.map((k) => [k.name, k.value] as const),
        ...r.call.args.map((v, j) => [String(j), v] as const),
      ];
      for (const [parameter, value] of args) {
        const v = literalText(value);
        if (v === null || v.trim().length < 2) continue;
        const request =
          text.split(v).join('the one I have in mind').trim() || 'Do the same with the other one.';
        const a = { turn, call: i, parameter, request, follow_up: `I mean ${v}.` };
        if (!choiceProblem(c, { kind: 'miss_param', ...a, followUp: a.follow_up })) return a;
      }
    }
  }
  return { turn: 0, call: 0, parameter: 'none', request: 'none', follow_up: 'none' };
}
