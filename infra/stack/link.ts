// Sharing what the stack installs with another stack folder. Apart from paths.ts on purpose: that
// module reads RODS_STACK_DIR when it loads, and callers of this one set it afterwards.
import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';

/**
 * Links what `install()` builds or downloads in the shared stack (the temporal binary, caches,
 * the executor's venv, Kafka's jars, vLLM's tiny model; vLLM's venv is in the shared venv cache) into another stack folder, so a private or secured stack has
 * fresh data and no second download.
 */
export function linkInstalled(sharedStack: string, dir: string): void {
  mkdirSync(path.join(dir, 'kafka'), { recursive: true });
  for (const rel of ['bin', 'cache', 'venv', path.join('kafka', 'libs'), 'vllm-model']) {
    const src = path.join(sharedStack, rel);
    if (existsSync(src) && !existsSync(path.join(dir, rel))) symlinkSync(src, path.join(dir, rel));
  }
}
