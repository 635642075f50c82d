import { describe, expect, it } from 'vitest';
import type { TaskRecord } from '../../domain/task.js';
import {
  BFCL_ADDED_FUNCTIONS_PROMPT,
  drawnCorrect,
  POLICY_TURN_DONE,
  POLICY_WRONG_ANSWER,
  Policy,
  PolicyError,
  toToolCall,
} from './policy.js';

const fs = ['GorillaFileSystem'];
function task(id: string, question: (string | null)[], ground_truth: string[][], extra = {}): TaskRecord {
  const category = id.replace(/^multi_turn_/, '').replace(/_\d+$/, '') as TaskRecord['category'];
  return {
    id,
    category,
    involved_classes: fs,
    initial_config: {},
    question: question.map((q) => (q === null ? [] : [{ role: 'user', content: q }])),
    ground_truth,
    ...extra,
  };
}

const Q0 = 'Move final_report.pdf into the temp folder.';
const Q1 = 'Now show me what is in it.';
const base0 = task(
  'multi_turn_base_0',
  [Q0, Q1],
  [
    ["cd(folder='document')", "mv(source='final_report.pdf', destination='temp')"],
    ["cd('temp')", 'ls(a=True)'],
  ],
);
const long0 = task(
  'multi_turn_long_context_0',
  [Q0, Q1],
  [
    ["cd(folder='document')", "mv(source='final_report.pdf', destination='temp')"],
    ["cd('temp')", 'ls(a=True)'],
  ],
);
const missFunc0 = task('multi_turn_miss_func_0', [Q0, null], [[], ["cd(folder='document')"]], {
  missed_function: { '1': ['cd'] },
});
const other = task('multi_turn_base_1', ['Something else entirely.'], [["touch(file_name='a.txt')"]]);

const user = (content: string) => ({ role: 'user', content });
const assistantCalls = { role: 'assistant', content: null, tool_calls: [] };
const tool = (content: string) => ({ role: 'tool', content, tool_call_id: 'call_0_0' });

describe('ground-truth calls as OpenAI tool calls', () => {
  it('names positional arguments from the catalog and keeps keyword arguments', () => {
    const c = toToolCall("cd('temp')", fs, 'call_1_0');
    expect(c).toEqual({
      id: 'call_1_0',
      type: 'function',
      function: { name: 'cd', arguments: '{"folder": "temp"}' },
    });
    const mv = toToolCall("mv(source='final_report.pdf', destination='temp')", fs, 'x');
    expect(JSON.parse(mv.function.arguments)).toEqual({ source: 'final_report.pdf', destination: 'temp' });
  });

  it('keeps floats floats, and nested literals as JSON', () => {
    const c = toToolCall(
      "place_order(order_type='Buy', symbol='AAPL', price=150.0, amount=100)",
      ['TradingBot'],
      'x',
    );
    expect(c.function.arguments).toBe(
      '{"order_type": "Buy", "symbol": "AAPL", "price": 150.0, "amount": 100}',
    );
    const n = toToolCall("f(a=[1, (2, 'x')], b={'k': None, 3: True}, c=-.5, d=1_000, e=2.)", fs, 'x');
    expect(JSON.parse(n.function.arguments)).toEqual({
      a: [1, [2, 'x']],
      b: { k: null, '3': true },
      c: -0.5,
      d: 1000,
      e: 2,
    });
    expect(n.function.arguments).toContain('"e": 2.0');
  });

  it('parses, never runs: anything but a literal call is refused', () => {
    expect(() => toToolCall("__import__('os').system('x')", fs, 'x')).toThrow();
    expect(() => toToolCall('cd(folder=x)', fs, 'x')).toThrow();
    expect(() => toToolCall("unknown_fn('a')", fs, 'x')).toThrow(PolicyError);
  });
});

describe('which task and turn a request of bfcl-eval is for', () => {
  const policy = new Policy({
    tasks: [base0, long0, missFunc0, other],
    correct: ['multi_turn_base_0', 'multi_turn_long_context_0'],
  });

  it('the user turns so far name the task, their count the turn', () => {
    expect(policy.recognise([user(Q0)], 'base')).toMatchObject({
      task: { id: 'multi_turn_base_0' },
      turn: 0,
      afterTools: false,
    });
    const second = [user(Q0), assistantCalls, tool('ok'), { role: 'assistant', content: 'Done.' }, user(Q1)];
    expect(policy.recognise(second, 'base')).toMatchObject({ turn: 1, afterTools: false });
    expect(policy.recognise([...second, assistantCalls, tool('ok')], 'base')).toMatchObject({
      turn: 1,
      afterTools: true,
    });
  });

  it('answers ground truth, then text after the tool results', () => {
    const a = policy.answer([user(Q0)], 'long_context');
    expect(a).toMatchObject({ kind: 'calls', taskId: 'multi_turn_long_context_0', turn: 0 });
    expect(a.kind === 'calls' && a.toolCalls.map((c) => c.function.name)).toEqual(['cd', 'mv']);
    expect(policy.answer([user(Q0), assistantCalls, tool('ok')], 'base')).toMatchObject({
      kind: 'text',
      content: POLICY_TURN_DONE,
      why: 'turn-done',
    });
  });

  it("a miss_func turn that brings functions carries bfcl's own prompt", () => {
    const msgs = [user(Q0), { role: 'assistant', content: 'no' }, user(BFCL_ADDED_FUNCTIONS_PROMPT)];
    expect(policy.recognise(msgs, 'miss_func')).toMatchObject({
      task: { id: 'multi_turn_miss_func_0' },
      turn: 1,
    });
    // a wrong task: text, no calls
    expect(policy.answer(msgs, 'miss_func')).toMatchObject({
      kind: 'text',
      content: POLICY_WRONG_ANSWER,
      why: 'wrong',
    });
  });

  it('the same opening in several categories: the category decides, or the answers must agree', () => {
    // base_0 and long_context_0 answer the same at turn 0; miss_func_0 (wrong) does not
    expect(() => policy.recognise([user(Q0)])).toThrow(/ambiguous: .*multi_turn_miss_func_0/);
    const narrowed = new Policy({
      tasks: [base0, long0],
      correct: ['multi_turn_base_0', 'multi_turn_long_context_0'],
    });
    expect(narrowed.answer([user(Q0)])).toMatchObject({ kind: 'calls', turn: 0 });
    const split = new Policy({ tasks: [base0, long0], correct: ['multi_turn_base_0'] });
    expect(() => split.answer([user(Q0)])).toThrow(/ambiguous/);
  });

  it('an unknown conversation is an error, not an answer', () => {
    expect(() => policy.recognise([user('hello')])).toThrow(/no task among the policy's 4/);
    expect(() => policy.recognise([user(Q0), user(Q1), user('a third')], 'base')).toThrow(PolicyError);
    expect(() => policy.recognise([{ role: 'system', content: 'x' }])).toThrow(/no user message/);
    expect(() => new Policy({ tasks: [base0], correct: ['multi_turn_base_9'] })).toThrow(/not among/);
  });
});

describe('the correct subset', () => {
  it('by a fraction drawn per id with a seed: stable, and close to the fraction', () => {
    const ids = Array.from({ length: 400 }, (_, i) => `multi_turn_base_${i}`);
    const drawn = ids.filter((id) => drawnCorrect(id, 0.3, 7));
    expect(drawn.length).toBeGreaterThan(90);
    expect(drawn.length).toBeLessThan(150);
    expect(ids.filter((id) => drawnCorrect(id, 0.3, 7))).toEqual(drawn);
    expect(ids.filter((id) => drawnCorrect(id, 0, 7))).toEqual([]);
    const tasks = ids.slice(0, 20).map((id, i) => task(id, [`q${i}`], [['pwd()']]));
    const p = new Policy({ tasks, correctFraction: 1, correct: [] });
    expect(p.correctIds()).toHaveLength(20);
  });
});
