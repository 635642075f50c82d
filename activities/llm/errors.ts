// The three ways a generator call fails, so that callers (Temporal activities) can tell a retry
// later from a dead end. `name` is the error type Temporal records.

export abstract class GeneratorError extends Error {
  /** Whether trying the same call again later may succeed. */
  abstract readonly retryable: boolean;
}

/** Transient failures (HTTP 5xx, 429, timeouts, connection resets) outlasted the retry budget. */
export class GeneratorUnavailableError extends GeneratorError {
  override name = 'GeneratorUnavailableError';
  readonly retryable = true;
  constructor(
    message: string,
    /** HTTP requests made, the failed ones included. */
    readonly requests: number,
    /** HTTP status of the last failure, when there was one. */
    readonly lastStatus?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface OutputAttempt {
  /** The reply text exactly as received (kept for audit). */
  raw: string;
  /** Why it was refused: JSON syntax or schema issues, one line each. */
  issues: string[];
}

/** Every answer failed JSON parsing or schema validation (non-retryable: kept for audit). */
export class GeneratorOutputError extends GeneratorError {
  override name = 'GeneratorOutputError';
  readonly retryable = false;
  /** The last reply, verbatim. */
  readonly raw: string;
  /** The issues of the last reply. */
  readonly issues: string[];
  constructor(
    readonly stage: string,
    readonly model: string,
    /** Every refused answer, in order. */
    readonly attempts: OutputAttempt[],
    /** The tokens the refused answers cost, as the endpoint reported them (null: it reported none). */
    readonly usage: { promptTokens: number; completionTokens: number } | null = null,
    /** SHA-256 of the stage's prompt file, when the caller named it (StageFailed.promptVersionHash). */
    readonly promptHash?: string,
  ) {
    const last = attempts[attempts.length - 1] ?? { raw: '', issues: ['no answer'] };
    super(
      `generator output for stage ${stage} (${model}) failed validation ${attempts.length} time(s): ${last.issues
        .slice(0, 3)
        .join('; ')}`,
    );
    this.raw = last.raw;
    this.issues = last.issues;
  }
}

/** The endpoint refused the request itself (HTTP 400, 401, 403, 404, 422): fix the configuration. */
export class GeneratorRequestError extends GeneratorError {
  override name = 'GeneratorRequestError';
  readonly retryable = false;
  constructor(
    message: string,
    readonly status: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
