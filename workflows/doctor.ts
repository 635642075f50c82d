// A round trip through Temporal for `rods doctor`: one workflow, one activity.
import { proxyActivities } from '@temporalio/workflow';
import type * as activities from '../activities/doctor.js';

const { echo } = proxyActivities<typeof activities>({ startToCloseTimeout: '30 seconds' });

export async function doctorRoundTrip(token: string): Promise<string> {
  return echo(token);
}
