import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from './endpoints.js';
import { loadSecretFiles } from './secret-files.js';

const dir = mkdtempSync(path.join(tmpdir(), 'rods-secrets-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe('secrets from files (NAME_FILE)', () => {
  it('sets each variable from its file, one trailing newline dropped', () => {
    const env: NodeJS.ProcessEnv = {
      DATABASE_URL_FILE: file('db-url', 'postgres://rods:s3cret@db.internal:5432/rods\n'),
      RODS_AUDIT_HMAC_KEY_FILE: file('hmac', 'k3y  \n'),
    };
    expect(loadSecretFiles(env)).toEqual(['DATABASE_URL', 'RODS_AUDIT_HMAC_KEY']);
    expect(env.DATABASE_URL).toBe('postgres://rods:s3cret@db.internal:5432/rods');
    expect(env.RODS_AUDIT_HMAC_KEY).toBe('k3y  ');
    expect(loadSecretFiles({})).toEqual([]);
  });

  it('refuses both set, an unreadable file and an empty one, by name and without the secret', () => {
    const refusal = (env: NodeJS.ProcessEnv) => {
      try {
        loadSecretFiles(env);
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as Error).message;
      }
      throw new Error('not refused');
    };
    const both = refusal({
      RODS_GENERATOR_API_KEY: 'sk-inline',
      RODS_GENERATOR_API_KEY_FILE: file('k', 'sk-file'),
    });
    expect(both).toBe('RODS_GENERATOR_API_KEY and RODS_GENERATOR_API_KEY_FILE are both set; keep one');
    expect(refusal({ RODS_MIGRATE_DATABASE_URL_FILE: path.join(dir, 'absent') })).toMatch(
      /^RODS_MIGRATE_DATABASE_URL_FILE: cannot read .*absent \(ENOENT\)$/,
    );
    expect(refusal({ DATABASE_URL_FILE: file('empty', '\n') })).toMatch(/DATABASE_URL_FILE: .* is empty/);
  });

  it('takes NAME and NAME_FILE both set to the same value (a child of a process that read the file)', () => {
    const env: NodeJS.ProcessEnv = {
      RODS_AUDIT_HMAC_KEY: 'same',
      RODS_AUDIT_HMAC_KEY_FILE: file('same', 'same\n'),
    };
    expect(loadSecretFiles(env)).toEqual(['RODS_AUDIT_HMAC_KEY']);
    expect(env.RODS_AUDIT_HMAC_KEY).toBe('same');
  });
});
