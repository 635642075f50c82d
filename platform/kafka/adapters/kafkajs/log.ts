// kafkajs's own log lines. An error a broker answers while a coordinator loads or moves, or while
// a new topic's leader is elected, passes by itself: kafkajs retries it. Those lines go to the
// transient-log handler (`rods doctor` prints them as progress) or, without one, as WARN; every
// other line is printed as kafkajs prints it (JSON on stderr), so real failures still show.
import { type logCreator, logLevel } from 'kafkajs';
import type { ClientLogNote } from '../../port.js';

// kafkajs's messages (src/protocol/error.js) of Kafka's error codes 3, 5, 6, 14, 15, 16, and its
// own error when FindCoordinator keeps answering those.
export const TRANSIENT_ERRORS: Record<string, string> = {
  "The coordinator is loading and hence can't process requests for this group":
    'the group coordinator is loading',
  'The group coordinator is not available': 'the group coordinator is not available yet',
  'This is not the correct coordinator for this group': 'the group coordinator is moving',
  'Failed to find group coordinator': 'the group coordinator is not available yet',
  'There is no leader for this topic-partition as we are in the middle of a leadership election':
    'a partition leader is being elected',
  'This server is not the leader for that topic-partition': 'a partition leader is moving',
  'This server does not host this topic-partition': 'a new topic is reaching the broker',
};

let transientHandler: ((note: ClientLogNote) => void) | undefined;

/** Routes transient errors to `handler` (undefined: back to WARN lines). */
export function setTransientLog(handler: ((note: ClientLogNote) => void) | undefined): void {
  transientHandler = handler;
}

// kafkajs logs "Restarting the consumer in N ms" right after the crash it restarts from.
let lastCrashTransient = false;

/** What a log line says is passing, or undefined for a line to print as it is. */
export function transientOf(log: { message?: unknown; error?: unknown }): string | undefined {
  const message = String(log.message ?? '');
  const text = `${message} ${String(log.error ?? '')}`;
  let what: string | undefined;
  for (const [msg, w] of Object.entries(TRANSIENT_ERRORS)) if (text.includes(msg)) what ??= w;
  if (message.startsWith('Crash:')) lastCrashTransient = what !== undefined;
  else if (message.startsWith('Restarting the consumer') && lastCrashTransient)
    what = 'the consumer restarts after a transient error';
  return what;
}

const LABEL: Record<number, string> = {
  [logLevel.ERROR]: 'ERROR',
  [logLevel.WARN]: 'WARN',
  [logLevel.INFO]: 'INFO',
  [logLevel.DEBUG]: 'DEBUG',
};

export const routedLogCreator: logCreator =
  () =>
  ({ namespace, level, label, log }) => {
    const message = `${namespace ? `[${namespace}] ` : ''}${log.message}`;
    const what = level <= logLevel.WARN ? transientOf(log) : undefined;
    if (what && transientHandler) {
      transientHandler({
        what,
        detail: message,
        broker: typeof log.broker === 'string' ? log.broker : undefined,
      });
      return;
    }
    const line = JSON.stringify({
      ...log,
      level: what ? 'WARN' : (LABEL[level] ?? label),
      message,
      ...(what ? { transient: what } : {}),
    });
    if (level === logLevel.ERROR && !what) console.error(line);
    else if (level <= logLevel.WARN) console.warn(line);
    else console.log(line);
  };
