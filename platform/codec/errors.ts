// Typed errors of the codec. Consumers switch on `code` (a dead-lettered record carries it as
// its reason code); the message names the cause for people.

export type DecodeErrorCode =
  /** Fewer bytes than the 10-byte single-object header. */
  | 'too-short'
  /** The first two bytes are not the single-object marker 0xC3 0x01. */
  | 'bad-magic'
  /** No published schema has the writer fingerprint. */
  | 'unknown-fingerprint'
  /** The writer schema is known but the reader's schema cannot resolve it (Avro resolution rules). */
  | 'incompatible-schema'
  /** The Avro body does not decode with the writer schema (truncated, bad union/enum index, ...). */
  | 'body-invalid'
  /** An array, map, string or bytes length the body declares needs more bytes than it has (platform/codec/bounded.ts). */
  | 'declared-length'
  /** The body decoded but bytes were left over after it. */
  | 'trailing-bytes';

export const DECODE_ERROR_CODES: readonly DecodeErrorCode[] = [
  'too-short',
  'bad-magic',
  'unknown-fingerprint',
  'incompatible-schema',
  'body-invalid',
  'declared-length',
  'trailing-bytes',
];

export class DecodeError extends Error {
  override name = 'DecodeError';
  readonly code: DecodeErrorCode;
  /** Writer fingerprint (16 hex digits, wire order) when the header was readable. */
  readonly fingerprint: string | undefined;

  constructor(code: DecodeErrorCode, message: string, opts: { fingerprint?: string; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.fingerprint = opts.fingerprint;
  }
}

export type EncodeErrorCode =
  /** No current schema has that event name. */
  | 'unknown-event'
  /** The payload does not match the event's schema. */
  | 'invalid-payload';

export interface EncodeIssue {
  /** Field path, e.g. `stats.band` or `rewards[3]`; empty for the payload itself. */
  path: string;
  /** What the schema expects there. */
  expected: string;
  /** The offending value, abbreviated. */
  got: string;
}

export class EncodeError extends Error {
  override name = 'EncodeError';
  readonly code: EncodeErrorCode;
  readonly event: string;
  readonly issues: readonly EncodeIssue[];

  constructor(code: EncodeErrorCode, event: string, message: string, issues: EncodeIssue[] = []) {
    super(message);
    this.code = code;
    this.event = event;
    this.issues = issues;
  }
}
