// Large bodies a few at a time (entry/gateway/body-slots.ts), on a bare fastify app whose route
// holds each request until the test lets it go: how many are handled at once, who waits, who gets
// the 503, and that every slot comes back (answered, timed out or aborted).
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { registerBodySlots } from './body-slots.js';

let app: ReturnType<typeof Fastify>;
afterEach(async () => {
  await app?.close();
});

function build(limits: { slots: number; maxWaiting: number; waitMs: number }) {
  app = Fastify({ bodyLimit: 10 * 1024 * 1024 });
  registerBodySlots(app, { minBytes: 1000, ...limits });
  const gates: (() => void)[] = [];
  let inside = 0;
  let most = 0;
  app.post('/x', async () => {
    inside++;
    most = Math.max(most, inside);
    await new Promise<void>((r) => gates.push(r));
    inside--;
    return { ok: true };
  });
  return { gates, most: () => most, inside: () => inside };
}

const big = { blob: 'x'.repeat(5000) };
const small = { blob: 'x' };
const until = async (f: () => boolean) => {
  for (let i = 0; i < 500 && !f(); i++) await new Promise((r) => setTimeout(r, 5));
};

describe('large request bodies', () => {
  it('are handled `slots` at a time, the others wait their turn; small ones never wait', async () => {
    const s = build({ slots: 2, maxWaiting: 10, waitMs: 10_000 });
    const answers = Array.from({ length: 5 }, () => app.inject({ method: 'POST', url: '/x', payload: big }));
    await until(() => s.inside() === 2);
    const alone = app.inject({ method: 'POST', url: '/x', payload: small });
    await until(() => s.inside() === 3);
    expect(s.inside()).toBe(3);
    for (let i = 0; i < 6; i++) {
      await until(() => s.gates.length > 0);
      s.gates.shift()!();
    }
    expect((await Promise.all([...answers, alone])).map((r) => r.statusCode)).toEqual(Array(6).fill(200));
    // Two large ones at most, and the small one beside them.
    expect(s.most()).toBe(3);
  });

  it('answer 503 with Retry-After past maxWaiting or after waitMs, and give every slot back', async () => {
    const s = build({ slots: 1, maxWaiting: 1, waitMs: 200 });
    const first = app.inject({ method: 'POST', url: '/x', payload: big });
    await until(() => s.inside() === 1);
    const waits = app.inject({ method: 'POST', url: '/x', payload: big });
    const refused = await app.inject({ method: 'POST', url: '/x', payload: big });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBeDefined();
    expect(refused.json()).toMatchObject({ type: 'urn:rods:problem:large-bodies-busy' });
    expect((await waits).statusCode).toBe(503);
    s.gates.shift()!();
    expect((await first).statusCode).toBe(200);
    // The slot is free again.
    const next = app.inject({ method: 'POST', url: '/x', payload: big });
    await until(() => s.gates.length > 0);
    s.gates.shift()!();
    expect((await next).statusCode).toBe(200);
  });
});
