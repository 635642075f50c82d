// The gateway's request metrics: rate, errors and duration per route and status, on the
// registry `rods gateway --metrics-port` serves (platform/util/metrics.ts).
import type { FastifyInstance } from 'fastify';
import client from 'prom-client';

export function instrumentGateway(app: FastifyInstance, registry: client.Registry): void {
  const requests = new client.Counter({
    name: 'rods_gateway_requests_total',
    help: 'HTTP requests answered, by method, route (the pattern, not the path) and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const seconds = new client.Histogram({
    name: 'rods_gateway_request_seconds',
    help: 'time to answer an HTTP request (pool long-polls included), by method, route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  app.addHook('onResponse', async (req, reply) => {
    // The route pattern keeps the label set small; requests that matched no route share one value.
    const labels = {
      method: req.method,
      route: req.routeOptions.url ?? 'unmatched',
      status: String(reply.statusCode),
    };
    requests.inc(labels);
    seconds.observe(labels, reply.elapsedTime / 1000);
  });
}
