// The one Prometheus endpoint of every long-running rods process (worker, gateway, relay,
// aggregator): `--metrics-port P` serves the process's registry on 127.0.0.1:P/metrics, with
// /healthz (liveness) and /readyz (the process's own readiness check, when it has one).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import client from 'prom-client';

/** A registry with the Node.js process metrics (CPU, memory, event loop, GC). */
export function processRegistry(): client.Registry {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  return registry;
}

export interface MetricsServerOptions {
  registry: client.Registry;
  port: number;
  /** Listen address; loopback unless the operator opens it on purpose. */
  host?: string;
  /** Readiness beyond liveness: /readyz answers 503 with `detail` while this says not ok. */
  ready?: () => Promise<{ ok: boolean; detail?: string }>;
}

export interface MetricsServer {
  /** The bound port (the one asked for, or the OS's pick for 0). */
  port: number;
  close(): Promise<void>;
}

/** Serves /metrics, /healthz and /readyz; resolves once listening (rejects if the port is taken). */
export async function serveMetrics(opts: MetricsServerOptions): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const answer = async () => {
      if (path === '/metrics') {
        const body = await opts.registry.metrics();
        res.setHeader('content-type', opts.registry.contentType);
        res.end(body);
      } else if (path === '/healthz') {
        res.end('ok');
      } else if (path === '/readyz') {
        const r = opts.ready ? await opts.ready() : { ok: true };
        res.statusCode = r.ok ? 200 : 503;
        res.end(r.ok ? 'ready' : `not ready: ${r.detail ?? 'unknown'}`);
      } else {
        res.statusCode = 404;
        res.end('not found: try /metrics, /healthz or /readyz');
      }
    };
    // A collector that throws (the database away) must not take the process down.
    answer().catch((e: Error) => {
      if (res.headersSent) return res.destroy();
      res.statusCode = 500;
      res.end(`metrics failed: ${e.message}`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/** The metric family names a registry holds, without collecting them (dashboards' checks). */
export function metricNames(registry: client.Registry): Set<string> {
  return new Set(registry.getMetricsAsArray().map((m) => m.name));
}
