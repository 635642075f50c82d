import { describe, expect, it } from 'vitest';
import { augmentChoice, augmentSchema } from '../../activities/llm/schemas.js';
import { buildVariant } from '../../domain/augment.js';
import type { TaskRecord } from '../../domain/task.js';
import { answerAugment } from './augment.js';

const user = (content: string) => [{ role: 'user' as const, content }];

const base: TaskRecord = {
  id: 'multi_turn_miss_param_0~s2',
  category: 'miss_param',
  involved_classes: ['GorillaFileSystem'],
  initial_config: { GorillaFileSystem: { root: {} } },
  question: [user("Go to the document folder and make a folder 'temp'."), user("Sort 'final_report.pdf'.")],
  ground_truth: [["cd(folder='document')", "mkdir(dir_name='temp')"], ["sort(file_name='final_report.pdf')"]],
};

describe('the stand-in Augment answer', () => {
  it('answers choices the schema and the transformation accept, for both kinds', () => {
    const mf = answerAugment({ kind: 'miss_func', candidate: base });
    expect(mf).toEqual({ turn: 1, function: 'sort' });
    expect(augmentSchema(base, 'miss_func').safeParse(mf).success).toBe(true);
    expect(buildVariant(base, augmentChoice('miss_func', mf)).missed_function).toEqual({ '2': ['sort'] });

    const mp = answerAugment({ kind: 'miss_param', candidate: base });
    expect(mp).toMatchObject({
      turn: 1,
      call: 0,
      parameter: 'file_name',
      follow_up: 'I mean final_report.pdf.',
    });
    expect((mp as { request: string }).request).not.toContain('final_report.pdf');
    expect(augmentSchema(base, 'miss_param').safeParse(mp).success).toBe(true);
  });

  it('the schema re-asks a choice the transformation refuses', () => {
    const r = augmentSchema(base, 'miss_func').safeParse({ turn: 1, function: 'mv' });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.message).toBe('the base never calls mv');
    const call = augmentSchema(base, 'miss_param').safeParse({
      turn: 1,
      call: 0,
      parameter: 'file_name',
      request: 'Sort it.',
      follow_up: "sort(file_name='final_report.pdf')",
    });
    expect(call.error?.issues.map((i) => i.message)).toContain('writes a call of sort');
  });
});
