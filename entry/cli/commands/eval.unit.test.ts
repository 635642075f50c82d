import { describe, expect, it } from 'vitest';
import { endpointFor } from '../../../activities/evaluation.js';
import { UsageError } from '../errors.js';
import { parseTaskList } from './eval.js';

describe('rods eval --tasks', () => {
  it('takes BFCL multi-turn ids and their category from the id', () => {
    expect(parseTaskList(' multi_turn_base_150, multi_turn_long_context_3 ,multi_turn_miss_param_0')).toEqual(
      [
        { taskId: 'multi_turn_base_150', category: 'base' },
        { taskId: 'multi_turn_long_context_3', category: 'long_context' },
        { taskId: 'multi_turn_miss_param_0', category: 'miss_param' },
      ],
    );
  });

  it('refuses what is not one, by name', () => {
    expect(() => parseTaskList('multi_turn_base_1,simple_python_4')).toThrow(
      new UsageError(
        '--tasks: "simple_python_4" is not a BFCL multi-turn task id (multi_turn_<category>_<n>)',
      ),
    );
    expect(() => parseTaskList(' , ')).toThrow(UsageError);
    expect(() => parseTaskList('multi_turn_composite_1')).toThrow(/not a BFCL multi-turn task id/);
  });
});

describe('the endpoint of a task', () => {
  it('replaces every {category} by the task category and leaves other URLs alone', () => {
    expect(endpointFor('http://h:1/policy/{category}/v1', 'miss_func')).toBe(
      'http://h:1/policy/miss_func/v1',
    );
    expect(endpointFor('http://h:1/{category}/{category}', 'base')).toBe('http://h:1/base/base');
    expect(endpointFor('http://h:1/v1', 'base')).toBe('http://h:1/v1');
  });
});
