import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createPool } from './db.js';
import { migrate } from './migrate.js';

const pool = createPool({ application: 'rods-smoke' });
afterAll(() => pool.end());

describe('PostgreSQL smoke', () => {
  it('migrations are recorded and a second run applies nothing', async () => {
    const { rows } = await pool.query<{ name: string }>('select name from rods_migrations order by id');
    expect(rows.map((r) => r.name)).toContain('0001_settings');
    const again = await migrate();
    expect(again.applied).toEqual([]);
  });

  it('round-trips a row through the migrated schema', async () => {
    const key = `smoke-${randomUUID()}`;
    const value = { answer: 42, nested: { list: [1, 'two', null] }, unicode: 'φ = 4·m·(1−m)' };
    await pool.query('insert into rods_settings (key, value) values ($1, $2)', [key, JSON.stringify(value)]);
    const { rows } = await pool.query<{ value: unknown }>('select value from rods_settings where key = $1', [
      key,
    ]);
    expect(rows[0]?.value).toEqual(value);
    await pool.query('delete from rods_settings where key = $1', [key]);
  });
});
