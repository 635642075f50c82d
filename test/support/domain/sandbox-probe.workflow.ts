// A workflow that runs the domain scenario inside Temporal's sandbox and reports its result
// through a sink (used by domain/sandbox.unit.test.ts with a replay worker: no server needed).
import { proxySinks, type Sinks } from '@temporalio/workflow';
import { idSamples } from './id-samples.js';
import { runScenario } from './sandbox-scenario.js';

export interface ProbeSinks extends Sinks {
  probe: { report(result: string): void };
}

export async function domainProbe(): Promise<void> {
  proxySinks<ProbeSinks>().probe.report(JSON.stringify(runScenario()));
  proxySinks<ProbeSinks>().probe.report(JSON.stringify(idSamples()));
}
