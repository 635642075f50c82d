import { createHash } from 'node:crypto';

/**
 * A UUID (version 8, name-based on SHA-256) derived from the parts: the same inputs give the same
 * id, so an event re-derived after a crash or during replay carries the id it had the first time
 * and the store's idempotent append or a consumer's dedupe recognises it.
 */
export function derivedUuid(...parts: (string | number)[]): string {
  const h = createHash('sha256').update(parts.join('\u001f')).digest();
  h[6] = (h[6]! & 0x0f) | 0x80; // version 8
  h[8] = (h[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}
