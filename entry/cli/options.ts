// Parsers of option values shared by commands: a bad value is a usage error that names the flag.
import { UsageError } from './errors.js';

/** An integer in [min, max]; the error names the flag and the range. */
export function intOption(flag: string, min = 0, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      const range =
        max !== Number.MAX_SAFE_INTEGER
          ? `an integer from ${min} to ${max}`
          : min === 0
            ? 'a non-negative integer'
            : min === 1
              ? 'a positive integer'
              : `an integer of at least ${min}`;
      throw new UsageError(`${flag} must be ${range}, got ${JSON.stringify(v)}`);
    }
    return n;
  };
}

export const positiveInt = (flag: string) => intOption(flag, 1);

/** A TCP port (0: any free one). */
export const portOption = (flag: string) => intOption(flag, 0, 65535);

/** A non-negative number of minutes (fractions allowed). */
export function minutesOption(flag: string) {
  return (v: string): number => {
    const m = Number(v);
    if (v.trim() === '' || !Number.isFinite(m) || m < 0)
      throw new UsageError(`${flag} must be minutes >= 0, got ${JSON.stringify(v)}`);
    return m;
  };
}
