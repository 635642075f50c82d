// The Grafana dashboard and the Prometheus scrape config name only metrics the processes really
// register: each query's metric names are looked up in the registries the four processes build.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { registerPipelineGauges } from '../../analysis/status/metrics.js';
import { instrumentGateway } from '../../entry/gateway/metrics.js';
import { START } from '../../platform/store/events/event-store.js';
import { activityMetrics } from '../../platform/temporal/activity-metrics.js';
import { metricNames, processRegistry } from '../../platform/util/metrics.js';
import { AggregatorService } from '../../stages/aggregator/service.js';
import { relayMetrics } from '../../stages/relay/metrics.js';
import { dashboardQueries, queriedMetrics } from '../../test/support/monitoring/dashboard.js';

const noDb = {} as pg.Pool;

/** Every metric family of the worker, gateway, relay and aggregator. */
function registered(): Set<string> {
  const r = processRegistry();
  instrumentGateway(Fastify(), r);
  registerPipelineGauges(noDb, r);
  activityMetrics(r);
  relayMetrics(r, noDb, () => START);
  const aggregator = new AggregatorService(noDb).metrics;
  return new Set([...metricNames(r), ...metricNames(aggregator)]);
}

describe('monitoring config', () => {
  it('maps series of a histogram to its family and ignores label values', () => {
    expect(
      queriedMetrics(
        'histogram_quantile(0.95, sum by (le) (rate(rods_relay_transaction_seconds_bucket[5m]))) + rate(process_cpu_seconds_total{job=~"rods-.*"}[5m])',
      ),
    ).toEqual(['rods_relay_transaction_seconds', 'process_cpu_seconds_total']);
  });

  it('every dashboard query reads at least one metric, and only metrics the processes register', () => {
    const known = registered();
    const queries = dashboardQueries();
    expect(queries.length).toBeGreaterThan(20);
    const unknown: string[] = [];
    for (const q of queries) {
      const names = queriedMetrics(q.expr);
      expect(names.length, `${q.where}: ${q.expr}`).toBeGreaterThan(0);
      for (const n of names) if (!known.has(n)) unknown.push(`${q.where}: ${n}`);
    }
    expect(unknown).toEqual([]);
    // Every rods family is on the dashboard.
    const shown = new Set(queries.flatMap((q) => queriedMetrics(q.expr)));
    expect([...known].filter((n) => n.startsWith('rods_') && !shown.has(n))).toEqual([]);
  });

  it('the scrape config has a job for each of the four processes', () => {
    const yml = readFileSync(new URL('prometheus.yml', import.meta.url), 'utf8');
    for (const job of ['rods-worker', 'rods-gateway', 'rods-relay', 'rods-aggregator'])
      expect(yml).toMatch(new RegExp(`job_name: ${job}\\n`));
    // The dashboard's process panels select these jobs.
    expect(dashboardQueries().some((q) => q.expr.includes('job=~"rods-.*"'))).toBe(true);
  });
});
