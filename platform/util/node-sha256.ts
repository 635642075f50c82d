import * as crypto from 'node:crypto';
import { useSha256 } from '../../domain/ids.js';

/** Derived ids hash with node:crypto in processes (workflow code keeps the pure implementation). */
export function installNodeSha256(): void {
  // The one-shot crypto.hash (Node >= 20.12) skips a Hash object per id: about a third faster.
  if (typeof crypto.hash === 'function') useSha256((text) => crypto.hash('sha256', text, 'buffer'));
  else useSha256((text) => crypto.createHash('sha256').update(text, 'utf8').digest());
}
