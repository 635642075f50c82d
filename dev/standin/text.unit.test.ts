import { describe, expect, it } from 'vitest';
import { rewriteSchema, turnQuerySchema } from '../../activities/llm/schemas.js';
import type { TaskRecord } from '../../domain/task.js';
import { Rng } from './rng.js';
import { answerPatch } from './synth.js';
import { answerJudge, answerRefine, answerRewrite, answerTurnQuery } from './text.js';

const seed: TaskRecord = {
  id: 'seed-1',
  category: 'base',
  involved_classes: ['GorillaFileSystem'],
  initial_config: {
    GorillaFileSystem: {
      root: {
        alex: {
          type: 'directory',
          contents: {
            reports: { type: 'directory', contents: { 'q1.txt': { type: 'file', content: 'one\ntwo' } } },
          },
        },
      },
    },
  },
  question: [
    [{ role: 'user', content: "Go into the reports folder and show the last 2 lines of 'q1.txt'." }],
    [{ role: 'user', content: 'Now make a folder called archive there.' }],
  ],
  ground_truth: [
    ["cd(folder='reports')", "tail(file_name='q1.txt', lines=2)"],
    ["mkdir(dir_name='archive')"],
  ],
};

// The seed with its names and the line count changed, as the parameter stage would.
const candidate: TaskRecord = {
  ...seed,
  id: 'cand-1',
  initial_config: {
    GorillaFileSystem: {
      root: {
        alex: {
          type: 'directory',
          contents: {
            summaries: { type: 'directory', contents: { 'q1.txt': { type: 'file', content: 'one\ntwo' } } },
          },
        },
      },
    },
  },
  question: [[], []],
  ground_truth: [
    ["cd(folder='summaries')", "tail(file_name='q1.txt', lines=5)"],
    ["mkdir(dir_name='vault')"],
  ],
};

const withQ = (c: TaskRecord, texts: string[]): TaskRecord => ({
  ...c,
  question: texts.map((content) => [{ role: 'user', content }]),
});

describe('stand-in rewrite', () => {
  it("reuses the seed's wording with the candidate's renames and values carried in", () => {
    const r = answerRewrite({ candidate, seed }, new Rng('r'));
    expect(r.question.map((t) => t[0]!.content)).toEqual([
      "Go into the summaries folder and show the last 5 lines of 'q1.txt'.",
      'Now make a folder called vault there.',
    ]);
    expect(rewriteSchema(candidate).safeParse(r).success).toBe(true);
  });

  it('writes template sentences from the calls without naming functions when there is no seed', () => {
    const r = answerRewrite({ candidate }, new Rng('r'));
    const texts = r.question.map((t) => t[0]!.content);
    expect(texts[0]).toMatch(/'summaries'.*last 5 lines of 'q1.txt'/);
    expect(texts[1]).toMatch(/folder called 'vault'/);
    expect(rewriteSchema(candidate).safeParse(r).success).toBe(true);
  });
});

describe('stand-in turn query (the rewrite-off ablation)', () => {
  it("writes one turn from its calls alone, without the seed's wording or function names", () => {
    const calls = candidate.ground_truth[1]!;
    const r = answerTurnQuery({ involved_classes: candidate.involved_classes, calls }, new Rng('t'));
    expect(r.content).toMatch(/folder called 'vault'/);
    expect(r.content).not.toMatch(/there/);
    expect(turnQuerySchema(calls).safeParse(r).success).toBe(true);
  });

  it('the schema refuses a message that names a call of the turn', () => {
    const calls = candidate.ground_truth[0]!;
    const r = turnQuerySchema(calls).safeParse({ content: "please run tail(file_name='q1.txt')" });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.message).toMatch(/names the function tail/);
    expect(turnQuerySchema(calls).safeParse({ content: 'show the end of q1.txt' }).success).toBe(true);
  });
});

describe('stand-in judge and refine', () => {
  it('accepts an aligned, natural conversation', () => {
    const j = answerJudge({ candidate: withQ(candidate, answerRewriteTexts()) }, new Rng('j'), false);
    expect(j.verdict).toBe('accept');
    expect(j.reasons).toEqual([]);
  });

  it('rejects unrelated questions (alignment) and code in questions (naturalness)', () => {
    const unrelated = answerJudge(
      { candidate: withQ(candidate, ['Nice weather today.', 'Thanks!']) },
      new Rng('j'),
      false,
    );
    expect(unrelated.verdict).toBe('reject');
    expect(unrelated.scores.alignment).toBeLessThan(0.5);
    const code = answerJudge(
      {
        candidate: withQ(candidate, [
          "cd(folder='summaries') then tail it, 5 lines",
          "mkdir(dir_name='vault')",
        ]),
      },
      new Rng('j'),
      false,
    );
    expect(code.verdict).toBe('reject');
    expect(code.scores.naturalness).toBeLessThan(0.5);
  });

  it('rejects on request with a low score and a reason, deterministically', () => {
    const c = withQ(candidate, answerRewriteTexts());
    const a = answerJudge({ candidate: c }, new Rng('same'), true);
    expect(a.verdict).toBe('reject');
    expect(a.reasons[0]).toMatch(/injected by the stand-in/);
    expect(answerJudge({ candidate: c }, new Rng('same'), true)).toEqual(a);
  });

  it('refine classifies by the weakest score and rewrites the questions', () => {
    const c = withQ(candidate, ["cd(folder='summaries')", 'mkdir']);
    const j = answerJudge({ candidate: c }, new Rng('j'), false);
    const r = answerRefine({ candidate: c, judgement: j }, new Rng('f'));
    expect(r.classification).toBe('unnatural');
    expect(r.candidate.ground_truth).toEqual(c.ground_truth);
    expect(answerJudge({ candidate: r.candidate }, new Rng('j'), false).verdict).toBe('accept');
  });
});

describe('stand-in config patch', () => {
  it('creates a missing file in the folder the calls were in', () => {
    const broken: TaskRecord = {
      ...candidate,
      ground_truth: [["cd(folder='summaries')", "cat(file_name='notes.txt')"], ['ls()']],
    };
    const out = answerPatch({
      candidate: broken,
      failure: {
        turn: 0,
        index: 1,
        call: "cat(file_name='notes.txt')",
        reason: "cat returned an error: cat: 'notes.txt': No such file or directory",
        kind: 'execution',
      },
    });
    const fs = out.initial_config.GorillaFileSystem as {
      root: { alex: { contents: Record<string, { contents: object }> } };
    };
    expect(Object.keys(fs.root.alex.contents.summaries!.contents)).toEqual(['q1.txt', 'notes.txt']);
  });

  it('leaves a failure it does not recognise alone', () => {
    const out = answerPatch({
      candidate,
      failure: {
        turn: 1,
        index: 0,
        call: "mkdir(dir_name='vault')",
        reason: 'something else',
        kind: 'execution',
      },
    });
    expect(out.initial_config).toEqual(candidate.initial_config);
  });
});

function answerRewriteTexts(): string[] {
  return answerRewrite({ candidate, seed }, new Rng('r')).question.map((t) => t[0]!.content);
}
