// Route errors against the gateway with a real PostgreSQL and Temporal: an unknown route is a 404
// problem for every caller (admin, a campaign's token, an invalid token, no token), a known path
// with a method it does not declare a 405 with `Allow` (TRACE and QUERY included, also over a real
// socket), HEAD of a GET route keeps working, neither answer depends on which campaigns exist, and
// both count toward the per-token (or per-address) rate limit.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerCampaign } from '../../platform/store/campaigns.js';
import {
  type GatewayUnderTest,
  startGatewayUnderTest,
} from '../../test/support/gateway/gateway-under-test.js';

const u = () => randomUUID().replaceAll('-', '');
const A = `rt-a-${randomUUID().slice(0, 8)}`;
// Never registered: answers must not tell it from A.
const NONE = `rt-none-${randomUUID().slice(0, 8)}`;
const T = { admin: u(), a: u(), read: u() };
const taskQueue = `gateway-routing-${randomUUID().slice(0, 8)}`;
const gateways: GatewayUnderTest[] = [];
let gw: GatewayUnderTest;
let app: FastifyInstance;

/** Every kind of caller: the answers to an unknown route or method must not differ between them. */
const CALLERS: [string, Record<string, string>][] = [
  ['admin', { authorization: `Bearer ${T.admin}` }],
  ['campaign token', { authorization: `Bearer ${T.a}` }],
  ['read token', { authorization: `Bearer ${T.read}` }],
  ['invalid token', { authorization: `Bearer ${u()}` }],
  ['malformed header', { authorization: `Basic ${T.admin}` }],
  ['no token', {}],
];

type Method = 'GET' | 'POST';
interface Answer {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
}

const send = (
  a: FastifyInstance,
  method: string,
  url: string,
  headers: Record<string, string>,
  payload?: string,
): Promise<Answer> =>
  a.inject({
    method: method as Method,
    url,
    headers: payload === undefined ? headers : { 'content-type': 'application/json', ...headers },
    ...(payload === undefined ? {} : { payload }),
  });

function problemOf(res: Answer, status: number, what: string) {
  expect(res.statusCode, `${what}: ${res.body}`).toBe(status);
  expect(String(res.headers['content-type']), what).toMatch(/^application\/problem\+json/);
  return JSON.parse(res.body) as { type: string; status: number; detail: string; [k: string]: unknown };
}

beforeAll(async () => {
  gw = await startGatewayUnderTest({
    application: 'rods-gateway-routing-test',
    tokens: [
      { token: T.admin, scopes: ['admin'], label: 'admin' },
      { token: T.a, scopes: [`campaign:${A}`], label: 'a' },
      { token: T.read, scopes: ['read'], label: 'read' },
    ],
    taskQueue,
  });
  gateways.push(gw);
  app = gw.app;
  await registerCampaign(gw.db, { campaignId: A, config: {} });
});

afterAll(async () => {
  for (const g of gateways.slice(1)) await g.close([]);
  await gw?.close([A]);
});

describe('an unknown route', () => {
  // [method, path, body]: paths no route matches, under any method.
  const UNKNOWN: [string, string, string?][] = [
    ['GET', '/nope'],
    ['GET', '/v1/nothing-here'],
    ['GET', `/v1/campaigns/${A}/nope`],
    ['GET', `/v1/campaigns/${A}/steps/1/nope`],
    ['POST', `/v1/campaigns/${A}/nope`, '{"x":1}'],
    ['DELETE', `/v1/campaigns/${A}/dashboard`],
    ['TRACE', '/v1/nope'],
    ['QUERY', '/v1/nope'],
    ['QUERY', `/v1/campaigns/${A}/nope`, '{}'],
    ['PROPFIND', '/v1/nope'],
  ];

  it('is a 404 not-found problem for every caller, naming no scope and asking for no token', async () => {
    for (const [who, headers] of CALLERS)
      for (const [method, url, body] of UNKNOWN) {
        const what = `${who}: ${method} ${url}`;
        const res = await send(app, method, url, headers, body);
        const p = problemOf(res, 404, what);
        expect(p.type, what).toBe('urn:rods:problem:not-found');
        expect(p.detail, what).toBe(`no route ${method} ${url}`);
        expect(res.headers['www-authenticate'], what).toBeUndefined();
        expect(res.headers.allow, what).toBeUndefined();
      }
  });

  it('answers the same whether the campaign in the path exists or not', async () => {
    for (const [who, headers] of CALLERS)
      for (const [method, tail] of [
        ['GET', '/nope'],
        ['POST', '/steps/1/nope'],
        ['TRACE', '/dashboard/lineage'],
      ] as const) {
        const known = await send(app, method, `/v1/campaigns/${A}${tail}`, headers);
        const unknown = await send(app, method, `/v1/campaigns/${NONE}${tail}`, headers);
        expect([unknown.statusCode, unknown.body.replace(NONE, A)], `${who}: ${method} ${tail}`).toEqual([
          known.statusCode,
          known.body,
        ]);
      }
  });
});

describe('a method a known path does not declare', () => {
  // [method, path, the methods its route declares, body]
  const UNDECLARED: [string, string, string, string?][] = [
    ['DELETE', `/v1/campaigns/${A}/pool`, 'GET, HEAD'],
    ['TRACE', `/v1/campaigns/${A}/pool`, 'GET, HEAD'],
    ['QUERY', `/v1/campaigns/${A}/pool`, 'GET, HEAD'],
    ['QUERY', `/v1/campaigns/${A}/batch?n=1`, 'GET, HEAD', '{"n":1}'],
    ['PUT', '/v1/campaigns', 'POST', '{}'],
    ['GET', '/v1/campaigns', 'POST'],
    ['GET', `/v1/campaigns/${A}/steps/1/rollouts`, 'POST'],
    ['HEAD', `/v1/campaigns/${A}/checkpoints`, 'POST'],
    ['PATCH', `/v1/campaigns/${A}`, 'GET, HEAD', '{}'],
    ['OPTIONS', `/v1/campaigns/${A}/dashboard/lineage/t1`, 'GET, HEAD'],
    ['PROPFIND', `/v1/campaigns/${A}/pool`, 'GET, HEAD'],
    ['TRACE', '/healthz', 'GET, HEAD'],
    ['POST', '/openapi.json', 'GET, HEAD', '{}'],
    ['DELETE', '/dashboard/assets/x.js', 'GET, HEAD'],
  ];

  it('is a 405 method-not-allowed problem with Allow, for every caller', async () => {
    for (const [who, headers] of CALLERS)
      for (const [method, url, allow, body] of UNDECLARED) {
        const what = `${who}: ${method} ${url}`;
        const res = await send(app, method, url, headers, body);
        expect(res.statusCode, `${what}: ${res.body}`).toBe(405);
        expect(res.headers.allow, what).toBe(allow);
        expect(res.headers['www-authenticate'], what).toBeUndefined();
        if (method === 'HEAD') continue;
        const p = problemOf(res, 405, what);
        expect(p.type, what).toBe('urn:rods:problem:method-not-allowed');
        expect(p.detail, what).toContain(method);
        expect(p.allow, what).toEqual(allow.split(', '));
      }
  });

  it('answers the same whether the campaign in the path exists or not', async () => {
    for (const [who, headers] of CALLERS)
      for (const [method, tail] of [
        ['DELETE', '/pool'],
        ['TRACE', ''],
        ['GET', '/steps/1/rollouts'],
      ] as const) {
        const known = await send(app, method, `/v1/campaigns/${A}${tail}`, headers);
        const unknown = await send(app, method, `/v1/campaigns/${NONE}${tail}`, headers);
        expect(
          [unknown.statusCode, unknown.headers.allow, unknown.body],
          `${who}: ${method} ${tail}`,
        ).toEqual([known.statusCode, known.headers.allow, known.body]);
      }
  });

  it('reaches the router over a real socket: TRACE and QUERY are 405, an unknown path 404', async () => {
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    expect(address).toContain(String(port));
    const raw = (method: string, path: string, body?: string) =>
      new Promise<{ status: number; allow?: string; type?: string }>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method,
            path,
            headers: body === undefined ? {} : { 'content-type': 'application/json' },
          },
          (res) => {
            res.resume();
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                allow: res.headers.allow,
                type: res.headers['content-type'],
              }),
            );
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    expect(await raw('TRACE', `/v1/campaigns/${A}/pool`)).toEqual({
      status: 405,
      allow: 'GET, HEAD',
      type: expect.stringMatching(/^application\/problem\+json/),
    });
    expect(await raw('QUERY', `/v1/campaigns/${A}/pool`)).toMatchObject({ status: 405, allow: 'GET, HEAD' });
    expect(await raw('QUERY', `/v1/campaigns/${A}/pool`, '{}')).toMatchObject({
      status: 405,
      allow: 'GET, HEAD',
    });
    expect(await raw('TRACE', '/v1/nope')).toMatchObject({ status: 404, allow: undefined });
    expect(await raw('QUERY', '/v1/nope')).toMatchObject({ status: 404 });
  });
});

describe('HEAD of a GET route', () => {
  it('still answers as fastify does, behind the same token check as GET', async () => {
    const health = await app.inject({ method: 'HEAD', url: '/healthz' });
    expect([health.statusCode, health.body]).toEqual([200, '']);
    const pool = await app.inject({
      method: 'HEAD',
      url: `/v1/campaigns/${A}/pool`,
      headers: { authorization: `Bearer ${T.a}` },
    });
    expect([pool.statusCode, pool.body]).toEqual([200, '']);
    expect(pool.headers.etag).toBeDefined();
    expect((await app.inject({ method: 'HEAD', url: `/v1/campaigns/${A}/pool` })).statusCode).toBe(401);
  });
});

describe('the rate limit', () => {
  it('counts 404 and 405 answers: they cannot be used past it, by a token or by an address', async () => {
    const limited = await startGatewayUnderTest({
      application: 'rods-gateway-routing-limit',
      tokens: [
        { token: T.admin, scopes: ['admin'], label: 'admin' },
        { token: T.a, scopes: [`campaign:${A}`], label: 'a' },
      ],
      taskQueue,
      limits: { rateLimit: { max: 3, windowMs: 60_000 } },
    });
    gateways.push(limited);
    const pool = `/v1/campaigns/${A}/pool`;
    const statuses = async (headers: Record<string, string>) => {
      const out: number[] = [];
      for (const [method, url] of [
        ['GET', '/v1/nope'],
        ['TRACE', pool],
        ['GET', pool],
        ['GET', '/v1/nope'],
        ['TRACE', pool],
        ['GET', pool],
      ])
        out.push((await send(limited.app, method!, url!, headers)).statusCode);
      return out;
    };
    expect(await statuses({ authorization: `Bearer ${T.a}` })).toEqual([404, 405, 200, 429, 429, 429]);
    // Keyed by token: another token is served; without a valid token, by address.
    expect((await send(limited.app, 'GET', pool, { authorization: `Bearer ${T.admin}` })).statusCode).toBe(
      200,
    );
    expect(await statuses({})).toEqual([404, 405, 401, 429, 429, 429]);
    const p = problemOf(
      await send(limited.app, 'GET', '/v1/nope', { authorization: `Bearer ${u()}` }),
      429,
      'x',
    );
    expect(p.type).toBe('urn:rods:problem:rate-limited');
  });
});
