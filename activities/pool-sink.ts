// The JSONL pool sink's files (`<sink>/<campaign>/pool-v<version>.jsonl` and `current.jsonl`): a
// full pool per version, so without a bound a weeks-long campaign fills the disk, and delivery then
// fails for ever. The newest `keep` versions stay; older version files are removed after each
// delivery (current.jsonl is always the newest).

import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import { activePool } from '../platform/store/pool/active.js';

/** Version files kept per campaign by default (RODS_SINK_KEEP; 0 keeps every version). */
export const DEFAULT_SINK_KEEP = 20;

const VERSION_FILE = /^pool-v(\d+)\.jsonl$/;

/** The version files of a campaign's sink folder to remove once `version` is written. */
export function sinkFilesToPrune(files: readonly string[], version: number, keep: number): string[] {
  if (keep <= 0) return [];
  return files.filter((f) => {
    const m = VERSION_FILE.exec(f);
    return m !== null && Number(m[1]) <= version - keep;
  });
}

/** RODS_SINK_KEEP as a count of versions (a clear error for anything else). */
export function sinkKeepFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.RODS_SINK_KEEP;
  if (raw === undefined || raw === '') return DEFAULT_SINK_KEEP;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new Error(
      `RODS_SINK_KEEP must be a whole number of versions >= 0 (0: keep all), got ${JSON.stringify(raw)}`,
    );
  return n;
}

/**
 * Writes the campaign's active pool as `pool-v<version>.jsonl` and `current.jsonl` (each written
 * to a temporary file and renamed: a reader never sees half a file), then removes the version
 * files beyond the newest `keep`. A crash between the two leaves extra files the next one removes.
 */
export async function deliverPoolJsonl(
  db: pg.Pool,
  sinkDir: string,
  campaignId: string,
  version: number,
  keep = DEFAULT_SINK_KEEP,
): Promise<{ file: string; tasks: number }> {
  const { tasks } = await activePool(db, campaignId);
  const dir = path.join(sinkDir, campaignId);
  await mkdir(dir, { recursive: true });
  const body = tasks.map((t) => JSON.stringify(t.task)).join('\n');
  const file = path.join(dir, `pool-v${version}.jsonl`);
  for (const target of [file, path.join(dir, 'current.jsonl')]) {
    const tmp = `${target}.${process.pid}.${Date.now()}.tmp`;
    await writeFile(tmp, tasks.length ? `${body}\n` : '');
    await rename(tmp, target);
  }
  for (const old of sinkFilesToPrune(await readdir(dir), version, keep))
    await rm(path.join(dir, old), { force: true });
  return { file, tasks: tasks.length };
}
