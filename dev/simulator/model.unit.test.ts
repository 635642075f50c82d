// The simulated trainer's model: what a GRPO loop would do with a group, task by task.
import { describe, expect, it } from 'vitest';
import {
  aimedDifficulty,
  cloneModel,
  expectedReward,
  learn,
  newModel,
  rolloutGroup,
  type SimTask,
  sampleBatch,
  seedDifficulty,
  successForReward,
  taskSuccess,
  turnSuccess,
} from './model.js';
import { PARAMETERS } from './parameters.js';

const task = (taskId: string, over: Partial<SimTask> = {}): SimTask => ({
  taskId,
  category: 'base',
  classes: ['MathAPI', 'TwitterAPI'],
  turns: 3,
  difficulty: 0.5,
  ...over,
});

function trainedModel() {
  const m = newModel();
  learn(m, task('a'), [0, 1, 0, 1], PARAMETERS);
  learn(m, task('b', { category: 'miss_func', classes: ['TravelAPI'] }), [0, 0.5, 1, 1], PARAMETERS);
  return m;
}

describe('learn', () => {
  it('a zero-variance group changes nothing, whatever its reward', () => {
    const m = trainedModel();
    const before = cloneModel(m);
    for (const rewards of [
      [0, 0, 0, 0],
      [1, 1, 1, 1],
      [0.5, 0.5, 0.5],
    ]) {
      expect(learn(m, task('a'), rewards, PARAMETERS)).toBe(0);
      expect(learn(m, task('new', { classes: ['MessageAPI'] }), rewards, PARAMETERS)).toBe(0);
    }
    expect(m).toEqual(before);
    expect(m.memo.has('new')).toBe(false);
  });

  it('a group with spread raises its own task most, a task sharing a class or category less, others not at all', () => {
    const m = newModel();
    const own = task('own');
    const sibling = task('sibling', { classes: ['MathAPI'] });
    const sameCategory = task('cat', { classes: ['TravelAPI'] });
    const stranger = task('stranger', { classes: ['TravelAPI'], category: 'long_context' });
    const before = [own, sibling, sameCategory, stranger].map((t) => turnSuccess(m, t));
    expect(learn(m, own, [0, 1, 0, 1], PARAMETERS)).toBeCloseTo(PARAMETERS.learningRate * 0.5);
    const gain = [own, sibling, sameCategory, stranger].map((t, i) => turnSuccess(m, t) - before[i]!);
    expect(gain[0]).toBeGreaterThan(10 * gain[1]!);
    expect(gain[1]).toBeGreaterThan(gain[2]!);
    expect(gain[2]).toBeGreaterThan(0);
    expect(gain[3]).toBe(0);
  });

  it('a larger spread teaches more', () => {
    const a = newModel();
    const b = newModel();
    learn(a, task('t'), [0, 0, 0, 1], PARAMETERS);
    learn(b, task('t'), [0, 1, 0, 1], PARAMETERS);
    expect(turnSuccess(b, task('t'))).toBeGreaterThan(turnSuccess(a, task('t')));
  });
});

describe('rollouts', () => {
  it('score the share of turns solved in order, deterministically per seed', () => {
    const m = newModel();
    const t = task('t', { turns: 4, difficulty: 0 });
    const g = rolloutGroup(m, t, 4000, 7);
    expect(g).toEqual(rolloutGroup(m, t, 4000, 7));
    expect(g).not.toEqual(rolloutGroup(m, t, 4000, 8));
    for (const r of g) expect([0, 0.25, 0.5, 0.75, 1]).toContain(r);
    // At per-turn success 1/2 the share solved averages (1/2 + 1/4 + 1/8 + 1/16) / 4.
    const mean = g.reduce((a, b) => a + b, 0) / g.length;
    expect(mean).toBeGreaterThan(0.215);
    expect(mean).toBeLessThan(0.255);
    expect(expectedReward(0.5, 4)).toBeCloseTo(0.234375);
  });

  it('a task is solved when every turn is', () => {
    const m = newModel();
    expect(taskSuccess(m, task('t', { difficulty: 0, turns: 3 }))).toBeCloseTo(0.125);
  });
});

describe('children and seeds', () => {
  it('successForReward inverts expectedReward, clamped to [0.01, 0.99]', () => {
    for (const p of [0.05, 0.3, 0.6, 0.9])
      expect(successForReward(expectedReward(p, 5), 5)).toBeCloseTo(p, 6);
    expect(successForReward(0, 3)).toBe(0.01);
    expect(successForReward(1, 3)).toBe(0.99);
  });

  it("a child without generator noise has its parent's measured mean reward as expected reward", () => {
    const m = trainedModel();
    const shape = { category: 'base', classes: ['MathAPI'], turns: 4 };
    const child = { ...shape, taskId: 'p~s3', difficulty: aimedDifficulty(m, shape, 0.4, 0) };
    expect(expectedReward(turnSuccess(m, child), 4)).toBeCloseTo(0.4, 6);
    const harder = { ...child, difficulty: aimedDifficulty(m, shape, 0.4, -1) };
    expect(turnSuccess(m, harder)).toBeLessThan(turnSuccess(m, child));
  });

  it('seed difficulty is stable per id and spread around its mean', () => {
    const ds = Array.from({ length: 2000 }, (_, i) => seedDifficulty(`multi_turn_base_${i}`, PARAMETERS));
    expect(seedDifficulty('multi_turn_base_3', PARAMETERS)).toBe(ds[3]);
    const mean = ds.reduce((a, b) => a + b, 0) / ds.length;
    expect(Math.abs(mean - PARAMETERS.difficultyMean)).toBeLessThan(0.2);
    const sd = Math.sqrt(ds.reduce((a, d) => a + (d - mean) ** 2, 0) / ds.length);
    expect(Math.abs(sd - PARAMETERS.difficultySd)).toBeLessThan(0.2);
  });
});

describe('sampleBatch', () => {
  it('takes b tasks (all of a smaller pool), and the same ones among the tasks two pools share', () => {
    const small = Array.from({ length: 100 }, (_, i) => ({ taskId: `t${i}` }));
    const large = [...small, ...Array.from({ length: 100 }, (_, i) => ({ taskId: `u${i}` }))];
    const a = sampleBatch(small, 10, 'k');
    const b = sampleBatch(large, 10, 'k');
    expect(a).toHaveLength(10);
    expect(b).toHaveLength(10);
    expect(new Set(a.map((t) => t.taskId)).size).toBe(10);
    const inSmall = new Set(a.map((t) => t.taskId));
    for (const t of b) if (t.taskId.startsWith('t')) expect(inSmall.has(t.taskId)).toBe(true);
    expect(sampleBatch(small, 10, 'other')).not.toEqual(a);
    expect(sampleBatch(small.slice(0, 5), 10, 'k')).toHaveLength(5);
  });
});
