// How a refused value is described: one "path: message" per zod issue, the same words in every
// error that quotes a schema (config, endpoints, generator output, executor answers).
import type { z } from 'zod';

/** The issues of a failed parse as "path: message" ('(root)' for the value itself), at most `max`. */
export function issueLines(error: z.ZodError, max = Number.POSITIVE_INFINITY): string[] {
  return error.issues
    .slice(0, max)
    .map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`);
}
