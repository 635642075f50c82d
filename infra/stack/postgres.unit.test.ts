import { describe, expect, it } from 'vitest';
import { hardenHba } from './postgres.js';

describe('hardenHba', () => {
  it('replaces trust with scram-sha-256 on every rule, comments untouched', () => {
    const before = [
      '# "local" is for Unix domain socket connections only',
      '# METHOD can be "trust", "reject"',
      'local   all             all                                     trust',
      'host    all             all             127.0.0.1/32            scram-sha-256',
      'local   replication     all                                     trust',
    ].join('\n');
    const after = hardenHba(before).split('\n');
    expect(after[1]).toBe('# METHOD can be "trust", "reject"');
    expect(after[2]).toBe('local   all             all                                     scram-sha-256');
    expect(after[4]).toMatch(/^local\s+replication\s+all\s+scram-sha-256$/);
    expect(hardenHba(hardenHba(before))).toBe(hardenHba(before));
  });
});
