import { createHash } from 'node:crypto';
import { useSha256 } from '../domain/ids.js';

/** Derived ids hash with node:crypto in processes (workflow code keeps the pure implementation). */
export function installNodeSha256(): void {
  useSha256((text) => createHash('sha256').update(text, 'utf8').digest());
}
