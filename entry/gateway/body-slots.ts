// Large request bodies, a few at a time. A body near the 8 MiB limit costs tens of megabytes once
// parsed and validated (a checkpoint naming 180,000 retrained tasks, a batch of 100,000 groups), so
// a token sending many at once could take the gateway's memory with it. Requests that declare a
// body over `minBytes` take one of `slots` before fastify reads the body (onRequest) and give it
// back when answered; past `maxWaiting` waiting, or after `waitMs`, they are answered 503 with
// Retry-After. Small bodies never wait.
import type { FastifyInstance, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request holds a large-body slot (entry/gateway/body-slots.ts). */
    bodySlot: boolean;
  }
}

import { problem, sendProblem } from './problem.js';

export interface BodySlotLimits {
  /** Bodies declared (Content-Length) over this many bytes take a slot. */
  minBytes: number;
  /** Large bodies read and handled at once. */
  slots: number;
  /** Large bodies waiting for a slot; more are answered 503 at once. */
  maxWaiting: number;
  /** How long one waits for a slot before its 503. */
  waitMs: number;
}

export const DEFAULT_BODY_SLOTS: BodySlotLimits = {
  minBytes: 1024 * 1024,
  slots: 4,
  maxWaiting: 64,
  waitMs: 30_000,
};

export function registerBodySlots(app: FastifyInstance, limits: BodySlotLimits = DEFAULT_BODY_SLOTS): void {
  let held = 0;
  const waiting: (() => void)[] = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else held--;
  };
  app.decorateRequest('bodySlot', false);
  app.addHook('onRequest', async (req, reply) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (!(declared > limits.minBytes)) return;
    if (held < limits.slots) {
      held++;
    } else {
      const busy = (why: string) => {
        reply.header('Retry-After', String(Math.ceil(limits.waitMs / 1000 / 2)));
        return sendProblem(
          reply,
          problem(
            503,
            `${why}: this gateway reads ${limits.slots} bodies over ${limits.minBytes} bytes at a time; retry`,
            undefined,
            'large-bodies-busy',
          ),
        );
      };
      if (waiting.length >= limits.maxWaiting)
        return busy(`${waiting.length} large request bodies are waiting`);
      let granted!: () => void;
      const slot = new Promise<boolean>((resolve) => {
        granted = () => resolve(true);
        waiting.push(granted);
        setTimeout(() => resolve(false), limits.waitMs).unref();
      });
      if (!(await slot)) {
        const at = waiting.indexOf(granted);
        if (at >= 0) waiting.splice(at, 1);
        // Granted at the same moment it timed out: hand the slot on.
        else release();
        return busy(`waited ${limits.waitMs} ms for a slot`);
      }
    }
    req.bodySlot = true;
  });
  const done = async (req: FastifyRequest) => {
    if (req.bodySlot) {
      req.bodySlot = false;
      release();
    }
  };
  app.addHook('onResponse', done);
  // A connection closed before the answer still gives its slot back.
  app.addHook('onRequestAbort', done);
}
