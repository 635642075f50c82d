// The unit tier shares worker processes between test files (vitest.unit.config.ts), where a
// module mock would see a module another file already loaded: every unit test that mocks a
// module must be in the isolated list, and the list names only such files.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MOCKING_UNIT_TESTS } from '../vitest.unit.config.js';
import { ROOT, sourceFiles } from './support/sources.js';

const mocksAModule = (source: string) => /\bvi\s*\.\s*(?:mock|doMock)\s*\(/.test(source);

describe('unit tests that mock a module', () => {
  it('finds vi.mock and vi.doMock, not prose about them', () => {
    expect(mocksAModule("vi.mock('./step-plan.js', async () => ({}));")).toBe(true);
    expect(mocksAModule("vi.doMock('pg')")).toBe(true);
    expect(mocksAModule('const spy = vi.fn(); vi.spyOn(console, "error");')).toBe(false);
  });

  it('run isolated, and only they', () => {
    const mocking = sourceFiles()
      .filter((f) => f.endsWith('.unit.test.ts') && f !== 'test/unit-isolation.unit.test.ts')
      .filter((f) => mocksAModule(readFileSync(path.join(ROOT, f), 'utf8')))
      .sort();
    expect(mocking).toEqual([...MOCKING_UNIT_TESTS].sort());
  });
});
