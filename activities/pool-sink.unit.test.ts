import { describe, expect, it } from 'vitest';
import { DEFAULT_SINK_KEEP, sinkFilesToPrune, sinkKeepFromEnv } from './pool-sink.js';

describe('pool sink retention', () => {
  const files = [
    'current.jsonl',
    'pool-v1.jsonl',
    'pool-v2.jsonl',
    'pool-v9.jsonl',
    'pool-v10.jsonl',
    'x.tmp',
  ];

  it('removes only version files older than the newest `keep`', () => {
    expect(sinkFilesToPrune(files, 10, 2).sort()).toEqual(['pool-v1.jsonl', 'pool-v2.jsonl']);
    expect(sinkFilesToPrune(files, 10, 1).sort()).toEqual([
      'pool-v1.jsonl',
      'pool-v2.jsonl',
      'pool-v9.jsonl',
    ]);
    expect(sinkFilesToPrune(files, 10, 9)).toEqual(['pool-v1.jsonl']);
    // 0 keeps everything; current.jsonl and other files are never removed
    expect(sinkFilesToPrune(files, 10, 0)).toEqual([]);
    expect(sinkFilesToPrune(files, 100, 1)).not.toContain('current.jsonl');
  });

  it('reads RODS_SINK_KEEP, refusing what is not a count', () => {
    expect(sinkKeepFromEnv({})).toBe(DEFAULT_SINK_KEEP);
    expect(sinkKeepFromEnv({ RODS_SINK_KEEP: '0' })).toBe(0);
    expect(sinkKeepFromEnv({ RODS_SINK_KEEP: '5' })).toBe(5);
    for (const bad of ['-1', '2.5', 'many'])
      expect(() => sinkKeepFromEnv({ RODS_SINK_KEEP: bad })).toThrow(/RODS_SINK_KEEP/);
  });
});
