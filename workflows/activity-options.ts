// The retry policies the workflows give their activities, named once.
import type { ActivityOptions } from '@temporalio/workflow';

/** Retried without end, backing off from 1 s to 30 s: a store or broker that is away comes back. */
export const UNTIL_DONE = { initialInterval: '1 second', maximumInterval: '30 seconds' } as const;

/** An activity of at most `startToCloseTimeout`, retried UNTIL_DONE. */
export const untilDone = (startToCloseTimeout: ActivityOptions['startToCloseTimeout']): ActivityOptions => ({
  startToCloseTimeout,
  retry: UNTIL_DONE,
});

/** A minute an attempt, retried UNTIL_DONE for ten minutes in all, then failed to the workflow. */
export const TEN_MINUTES_OF_RETRIES: ActivityOptions = {
  ...untilDone('1 minute'),
  scheduleToCloseTimeout: '10 minutes',
};
