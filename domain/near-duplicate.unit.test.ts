import { describe, expect, it } from 'vitest';
import { nearestTask, similarity, taskFeatures } from './near-duplicate.js';

const task = (turns: string[], calls: string[][]) => ({
  question: turns.map((content) => [{ role: 'user', content }]),
  ground_truth: calls,
});

describe('near-duplicate similarity', () => {
  const a = task(
    ['Go to the docs folder, and create notes.txt!'],
    [["cd(folder='docs')", "touch(file_name='notes.txt')"]],
  );

  it('is 1 for the same task, whatever the case, punctuation or call arguments', () => {
    const b = task(
      ['go to THE docs folder and create notes txt'],
      [["cd(folder='other')", "touch(file_name='b')"]],
    );
    expect(similarity(taskFeatures(a), taskFeatures(b))).toEqual({ score: 1, text: 1, calls: 1 });
  });

  it('counts question trigrams and the call sequence, each as a Jaccard similarity', () => {
    // one word of nine changed: 4 of 7 trigrams each side shared, 10 distinct -> 0.4; same calls
    const b = task(['Go to the docs folder, and make notes.txt!'], a.ground_truth);
    const s = similarity(taskFeatures(a), taskFeatures(b));
    expect(s.calls).toBe(1);
    expect(s.text).toBeCloseTo(0.4, 12);
    expect(s.score).toBeCloseTo(0.7, 12);
  });

  it('sees the order of calls', () => {
    const swapped = task(
      a.question.map((t) => t[0]!.content),
      [["touch(file_name='notes.txt')", "cd(folder='docs')"]],
    );
    expect(similarity(taskFeatures(a), taskFeatures(swapped)).calls).toBe(0);
  });

  it('reads only user turns and ignores non-string calls', () => {
    const f = taskFeatures({
      question: [
        [
          { role: 'system', content: 'secret words here' },
          { role: 'user', content: 'hi' },
        ],
      ],
      ground_truth: [['ls()', 42 as unknown as string]],
    });
    expect([...f.text]).toEqual(['hi']);
    expect([...f.calls]).toEqual(['0:ls']);
  });

  it('finds the nearest task, or none among none', () => {
    const others = [
      { id: 'far', features: taskFeatures(task(['list all files'], [['ls()']])) },
      { id: 'near', features: taskFeatures(a) },
    ];
    expect(nearestTask(taskFeatures(a), others)?.task.id).toBe('near');
    expect(nearestTask(taskFeatures(a), [])).toBeUndefined();
  });
});
