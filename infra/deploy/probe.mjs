#!/usr/bin/env node
// Health probe run inside a rods container (compose healthcheck, Kubernetes exec probe):
//   node /app/infra/deploy/probe.mjs http://127.0.0.1:9464/readyz
// exits 0 on a 2xx answer within the timeout (PROBE_TIMEOUT_MS, default 4000), else 1 with one
// line. The metrics server of worker, aggregator and relay (--metrics-port) binds 127.0.0.1 only,
// so the kubelet cannot reach it with an httpGet probe; this runs beside it instead. For https
// the certificate is not checked (as the kubelet's own probes do not): it probes liveness, not trust.
import http from 'node:http';
import https from 'node:https';

const target = process.argv[2];
if (!target) {
  console.error('usage: probe.mjs URL');
  process.exit(2);
}
const url = new URL(target);
const timeout = Number(process.env.PROBE_TIMEOUT_MS ?? 4000);
const get = url.protocol === 'https:' ? https.get : http.get;
const req = get(url, { timeout, rejectUnauthorized: false }, (res) => {
  const ok = res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300;
  let body = '';
  res.setEncoding('utf8');
  res.on('data', (chunk) => {
    if (body.length < 300) body += chunk;
  });
  res.on('end', () => {
    if (!ok) console.error(`${url.pathname}: ${res.statusCode} ${body.trim().slice(0, 300)}`);
    process.exit(ok ? 0 : 1);
  });
});
req.on('timeout', () => req.destroy(new Error(`no answer within ${timeout} ms`)));
req.on('error', (e) => {
  console.error(`${url.pathname}: ${e.message}`);
  process.exit(1);
});
