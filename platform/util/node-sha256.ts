import * as crypto from 'node:crypto';
import { useSha256 } from '../../domain/sha256.js';

/** Derived ids hash with node:crypto in processes (workflow code keeps the pure implementation). */
export function installNodeSha256(): void {
  // The one-shot crypto.hash (Node >= 20.12) skips a Hash object per id: about a third faster.
  if (typeof crypto.hash === 'function') useSha256((data) => crypto.hash('sha256', data, 'buffer'));
  else useSha256((data) => crypto.createHash('sha256').update(data).digest());
}
