// The 405 routes the gateway adds for undeclared methods (entry/gateway/routing.ts), on a bare
// fastify instance: Allow lists the declared methods, HEAD comes with GET, methods fastify does
// not know are routed too, and a 405 route never hides another route that takes the method.
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { declaredMethods, patternsOverlap, registerMethodNotAllowed } from './routing.js';

describe('patternsOverlap', () => {
  it('holds when a param or a wildcard can stand for the other segment', () => {
    expect(patternsOverlap('/v1/campaigns/:id/pool', '/v1/campaigns/:id/pool')).toBe(true);
    expect(patternsOverlap('/v1/campaigns/:id', '/v1/campaigns/new')).toBe(true);
    expect(patternsOverlap('/dashboard/*', '/dashboard/')).toBe(true);
    expect(patternsOverlap('/a/:x/b', '/a/*')).toBe(true);
    expect(patternsOverlap('/v1/campaigns/:id/pool', '/v1/campaigns/:id/batch')).toBe(false);
    expect(patternsOverlap('/v1/campaigns', '/v1/campaigns/:id')).toBe(false);
    expect(patternsOverlap('/v1/dashboard/campaigns', '/v1/campaigns/:id')).toBe(false);
  });
});

describe('registerMethodNotAllowed', () => {
  it('answers other methods 405 with Allow, and leaves a method to a route that takes it', async () => {
    const app = Fastify();
    const declared = declaredMethods(app);
    app.get('/a/:id', async () => 'get');
    app.post('/a/*', async () => 'post');
    app.post('/b', async () => 'b');
    registerMethodNotAllowed(app, declared);
    await app.ready();
    const send = async (method: string, url: string) => {
      const r = await app.inject({ method: method as 'GET', url });
      return [r.statusCode, r.headers.allow ?? null, r.statusCode === 405 ? r.json().type : r.body];
    };
    expect(await send('GET', '/a/1')).toEqual([200, null, 'get']);
    expect(await send('HEAD', '/a/1')).toEqual([200, null, '']);
    // POST /a/1 is the wildcard's, not a 405 of /a/:id.
    expect(await send('POST', '/a/1')).toEqual([200, null, 'post']);
    expect(await send('DELETE', '/a/1')).toEqual([405, 'GET, HEAD', 'urn:rods:problem:method-not-allowed']);
    expect(await send('GET', '/b')).toEqual([405, 'POST', 'urn:rods:problem:method-not-allowed']);
    expect(await send('PROPFIND', '/b')).toEqual([405, 'POST', 'urn:rods:problem:method-not-allowed']);
    expect((await app.inject({ method: 'GET', url: '/c' })).statusCode).toBe(404);
    await app.close();
  });
});
