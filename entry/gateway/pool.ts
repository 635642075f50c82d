// Serving the active pool (platform/store/pool/active.ts reads it): seeded samples of it and the
// If-None-Match versions that answer 304.
import { createHash } from 'node:crypto';
import { xorshift32 } from '../../platform/util/xorshift.js';

/** xorshift32 seeded from SHA-256 of the seed string: the same seed gives the same draws. */
const rng = (seed: string) => xorshift32(createHash('sha256').update(seed).digest().readUInt32LE(0));

/** n draws with replacement (members are ordered by task id, so a seed fixes the sample per version). */
export function sample<T>(items: T[], n: number, seed: string): T[] {
  const r = rng(seed);
  return Array.from({ length: n }, () => items[Math.floor(r() * items.length)]!);
}

/** Versions named by If-None-Match (`"5"`, `W/"5"`, lists); `*` matches any. */
export function parseIfNoneMatch(header: string | undefined): { any: boolean; versions: number[] } {
  if (!header) return { any: false, versions: [] };
  const versions: number[] = [];
  let any = false;
  for (const part of header.split(',')) {
    const t = part.trim();
    if (t === '*') any = true;
    const m = /^(?:W\/)?"(\d+)"$/.exec(t);
    if (m) versions.push(Number(m[1]));
  }
  return { any, versions };
}
