import { describe, expect, it } from 'vitest';
import { topFrames } from './profile.js';

describe('topFrames', () => {
  it('ranks frames by self time and names them by function, file and line', () => {
    const frame = (id: number, functionName: string, url = '', lineNumber = -1) => ({
      id,
      callFrame: { functionName, url, lineNumber },
    });
    const top = topFrames(
      {
        nodes: [
          frame(1, '(root)'),
          frame(2, 'encode', 'file:///x/domain/canonical-json.ts', 40),
          frame(3, '(garbage collector)'),
        ],
        samples: [2, 3, 2, 1, 2],
        timeDeltas: [100, 300, 100, 0, 500],
      },
      2,
    );
    expect(top).toEqual([
      { frame: 'encode canonical-json.ts:41', self_pct: 70 },
      { frame: '(garbage collector)', self_pct: 30 },
    ]);
  });
});
