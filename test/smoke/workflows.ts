// Workflows for the Temporal smoke tests: deterministic code, all I/O in activities.
import { condition, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type * as activities from './activities.js';

const { record } = proxyActivities<typeof activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', maximumAttempts: 20 },
});

export async function greet(name: string): Promise<string> {
  return record(`hello ${name}`);
}

export const proceed = defineSignal('proceed');

/** Runs one activity, waits for a signal, runs a second: the worker is replaced in between. */
export async function twoStep(name: string): Promise<string[]> {
  let go = false;
  setHandler(proceed, () => {
    go = true;
  });
  const first = await record(`${name}:first`);
  await condition(() => go);
  const second = await record(`${name}:second`);
  return [first, second];
}
