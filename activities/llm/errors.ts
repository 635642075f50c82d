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
  /** Why, when known: `context-length`, the prompt and max tokens do not fit the model. */
  readonly reason?: 'context-length';
  constructor(
    message: string,
    readonly status: number | undefined,
    options?: {
      cause?: unknown;
      reason?: 'context-length';
    },
  ) {
    super(message, options);
    this.reason = options?.reason;
  }
}

/**
 * A refusal of a request that does not fit the model's context length. vLLM answers 400 when the
 * prompt alone is over it ("This model's maximum context length is ...") or max_completion_tokens
 * is ("... cannot be greater than max_model_len"); OpenAI's servers say "context_length_exceeded".
 */
export function isContextLengthRefusal(status: number | undefined, message: string): boolean {
  return (
    status === 400 &&
    /maximum context length|max_model_len|context_length_exceeded|context length/i.test(message)
  );
}
