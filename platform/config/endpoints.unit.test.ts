import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, DEFAULT_DATABASE_URL, loadEndpoints, shownEndpoints } from './endpoints.js';

const stack = mkdtempSync(path.join(tmpdir(), 'rods-endpoints-'));
afterAll(() => rmSync(stack, { recursive: true, force: true }));

describe('loadEndpoints: the database URLs', () => {
  it('refuses the default password for a non-loopback DATABASE_URL, unless explicitly allowed', () => {
    const remote = 'postgres://rods:rods@db.example.internal:5432/rods';
    expect(() => loadEndpoints({ DATABASE_URL: remote })).toThrow(ConfigError);
    expect(() => loadEndpoints({ DATABASE_URL: remote })).toThrow(
      /DATABASE_URL uses the default password .*RODS_ALLOW_DEFAULT_DB_PASSWORD=1/,
    );
    expect(() => loadEndpoints({ DATABASE_URL: 'postgres://app:rods@10.0.0.7/rods' })).toThrow(ConfigError);
    expect(() =>
      loadEndpoints({
        DATABASE_URL: 'postgres://rods:s3cret@db.example.internal/rods',
        RODS_MIGRATE_DATABASE_URL: 'postgres://owner:rods@db.example.internal/rods',
      }),
    ).toThrow(/RODS_MIGRATE_DATABASE_URL uses the default password/);
    expect(loadEndpoints({ DATABASE_URL: remote, RODS_ALLOW_DEFAULT_DB_PASSWORD: '1' }).databaseUrl).toBe(
      remote,
    );
    // Loopback (the local stack) and real passwords are fine.
    for (const ok of [
      'postgres://rods:rods@127.0.0.1:5432/rods',
      'postgres://rods:rods@localhost/rods',
      'postgres://rods:rods@[::1]:5432/rods',
      'postgres://rods:s3cret@db.example.internal/rods',
    ])
      expect(loadEndpoints({ DATABASE_URL: ok }).databaseUrl).toBe(ok);
  });

  it("defaults to the local stack's app role with the password from its secrets, and its owner role", () => {
    const env = { RODS_STACK_DIR: stack };
    // Before `stack up` made the passwords: the well-known default, and no owner URL.
    expect(loadEndpoints(env)).toMatchObject({ databaseUrl: DEFAULT_DATABASE_URL });
    expect(loadEndpoints(env).ownerDatabaseUrl).toBeUndefined();
    mkdirSync(path.join(stack, 'secrets'));
    writeFileSync(path.join(stack, 'secrets', 'postgres-app.password'), 'a/p+w@x\n', { mode: 0o600 });
    writeFileSync(path.join(stack, 'secrets', 'postgres-owner.password'), 'ownerpw\n', { mode: 0o600 });
    const e = loadEndpoints(env);
    const app = new URL(e.databaseUrl);
    expect([app.username, decodeURIComponent(app.password), app.host, app.pathname]).toEqual([
      'rods',
      'a/p+w@x',
      '127.0.0.1:5432',
      '/rods',
    ]);
    expect(e.ownerDatabaseUrl).toBe('postgres://rods_owner:ownerpw@127.0.0.1:5432/rods');
    // An explicit DATABASE_URL is another database: the stack's owner is not assumed for it.
    expect(
      loadEndpoints({ ...env, DATABASE_URL: 'postgres://u:p@127.0.0.1:6000/x' }).ownerDatabaseUrl,
    ).toBeUndefined();
    expect(
      loadEndpoints({ ...env, RODS_MIGRATE_DATABASE_URL: 'postgres://o:q@127.0.0.1/rods' }).ownerDatabaseUrl,
    ).toBe('postgres://o:q@127.0.0.1/rods');
  });
});

describe('shownEndpoints', () => {
  it("hides both roles' passwords, percent-encoded ones too, and keeps the rest of the URL", () => {
    const ep = loadEndpoints({
      DATABASE_URL: 'postgres://rods:app%2Fsecret@db.example:5432/rods?sslmode=verify-full',
      RODS_MIGRATE_DATABASE_URL: 'postgres://rods_owner:owner-secret@db.example:5432/rods',
      RODS_STACK_DIR: stack,
    });
    const shown = JSON.stringify(shownEndpoints(ep));
    expect(shown).not.toContain('secret');
    expect(shownEndpoints(ep).databaseUrl).toBe(
      'postgres://rods:***@db.example:5432/rods?sslmode=verify-full',
    );
    expect(shownEndpoints(ep).ownerDatabaseUrl).toBe('postgres://rods_owner:***@db.example:5432/rods');
  });
});
