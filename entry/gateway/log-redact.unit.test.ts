// The gateway's log never carries a bearer token or a (refused) generator key or header.
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { LOG_REDACT } from './server.js';

describe('gateway log redaction', () => {
  it('censors the Authorization header and generator keys and headers wherever a config is logged', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const log = pino({ redact: LOG_REDACT }, sink);
    const generator = { model: 'm', apiKey: 'sk-log-canary', headers: { 'x-k': 'hdr-log-canary' } };
    log.info({ req: { headers: { authorization: 'Bearer tok-log-canary' } } }, 'request');
    log.info({ body: { config: { generator } } }, 'body');
    log.info({ config: { generator } }, 'config');
    const text = lines.join('');
    expect(lines).toHaveLength(3);
    expect(text).toContain('"model":"m"');
    expect(text).not.toMatch(/log-canary/);
  });
});
