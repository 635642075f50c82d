// Parsers of option values shared by commands: a bad value is a usage error that names the flag.
import { UsageError } from './errors.js';

export function positiveInt(flag: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 1)
      throw new UsageError(`${flag} must be a positive integer, got ${v}`);
    return n;
  };
}
