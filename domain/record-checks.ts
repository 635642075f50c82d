// Checks of a reward record's text fields that the aggregator and replay apply alike, before any
// query sees them: an event id the dedupe window can store (a UUID), and strings PostgreSQL can
// store. Each answer becomes a dead letter's code and reason.
import { unstorableCharacter } from './storable-text.js';

export interface Problem {
  code: string;
  reason: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The dedupe window stores event ids as uuid, so anything else is refused at decode. */
export function eventIdProblem(eventId: string): Problem | null {
  return UUID.test(eventId)
    ? null
    : { code: 'bad-event-id', reason: `eventId ${JSON.stringify(eventId)} is not a UUID` };
}

/**
 * A string PostgreSQL cannot store (U+0000, a lone surrogate) would fail every transaction it
 * reaches, so it is refused before any query sees it. Control characters it can store pass.
 */
export function unstorableProblem(fields: Readonly<Record<string, string>>): Problem | null {
  for (const [name, value] of Object.entries(fields)) {
    const why = unstorableCharacter(value, { controls: false });
    // JSON.stringify escapes U+0000 and lone surrogates: the reason itself is storable text.
    if (why)
      return { code: 'unstorable-text', reason: `${name} ${JSON.stringify(value.slice(0, 200))} ${why}` };
  }
  return null;
}
