// The running local stack's PostgreSQL credentials (whichever stack the tests run on: .stack, or
// RODS_STACK_DIR): passwords in 0600 files, a 0700 socket folder, no trusted socket, and the
// superuser's password apart from the application's.
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { readStackSecret } from '../../platform/config/endpoints.js';
import { createClient } from '../../platform/store/db.js';
import { paths, secretFile } from './paths.js';

const mode = (f: string) => statSync(f).mode & 0o777;
const socketDir = path.join(paths.run, 'postgres-socket');
const { port } = new URL(inject('endpoints').databaseUrl);

async function login(opts: { host: string; user: string; password: string }): Promise<string> {
  const c = createClient({
    ...opts,
    port: Number(port || 5432),
    database: 'postgres',
    connectionTimeoutMillis: 5000,
  });
  try {
    await c.connect();
    return 'ok';
  } catch (e) {
    return (e as Error).message;
  } finally {
    await c.end().catch(() => {});
  }
}

describe("the local stack's PostgreSQL credentials", () => {
  it('keeps its passwords in files of mode 0600 in a 0700 folder, and no initdb password file', () => {
    expect(mode(paths.secrets)).toBe(0o700);
    expect(existsSync(secretFile('superuser'))).toBe(true);
    for (const name of ['app', 'owner', 'superuser'] as const)
      if (existsSync(secretFile(name))) expect(mode(secretFile(name))).toBe(0o600);
    expect(existsSync(path.join(paths.run, 'pg-superuser-pw'))).toBe(false);
  });

  it('has a socket folder of mode 0700 and asks for a password on the socket too', async () => {
    expect(mode(socketDir)).toBe(0o700);
    const superuser = readStackSecret('superuser')!;
    expect(await login({ host: socketDir, user: 'postgres', password: 'wrong' })).toMatch(
      /password authentication failed/,
    );
    expect(await login({ host: socketDir, user: 'postgres', password: superuser })).toBe('ok');
  });

  it("does not give the superuser the application's password", async () => {
    const app = decodeURIComponent(new URL(inject('endpoints').databaseUrl).password);
    expect(app).not.toBe(readStackSecret('superuser'));
    expect(await login({ host: '127.0.0.1', user: 'postgres', password: app })).toMatch(
      /password authentication failed/,
    );
    expect(await login({ host: '127.0.0.1', user: 'postgres', password: 'rods' })).toMatch(
      /password authentication failed/,
    );
  });
});
