import { describe, expect, it } from 'vitest';
import { DeadLetterSendError, isTransient } from './isolate.js';

const pgError = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });

describe('which batch failures count against a record', () => {
  it('retries database faults without counting them', () => {
    for (const code of [
      '40001',
      '40P01',
      '42P01',
      '42501',
      '53100',
      '55P03',
      '57014',
      '57P01',
      '08006',
      'XX000',
    ])
      expect(isTransient(pgError(code)), code).toBe(true);
    expect(isTransient(new DeadLetterSendError(new Error('broker away')))).toBe(true);
    expect(isTransient(Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }))).toBe(true);
  });

  it('counts data exceptions, constraints, limits, trigger raises and code errors', () => {
    for (const code of ['22021', '22P02', '23505', '54000', 'P0001'])
      expect(isTransient(pgError(code)), code).toBe(false);
    expect(isTransient(new TypeError('x is undefined'))).toBe(false);
  });
});
