// The top-level handler names the service that does not answer, its endpoint, the variable that
// sets it and how to start it, from the errors the clients really throw (connections to closed
// ports on loopback; no service needed).
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { TLS_HANDSHAKE_ERROR } from '../../platform/temporal/connect.js';
import { freePort } from '../../platform/util/free-port.js';
import { describeUnreachable, unreachableService } from './errors.js';

async function refused<T>(f: () => Promise<T>): Promise<unknown> {
  try {
    await f();
  } catch (e) {
    return e;
  }
  throw new Error('expected a connection failure');
}

describe('unreachable services', () => {
  it('PostgreSQL: pg refused at the DATABASE_URL port', async () => {
    const port = await freePort();
    const env = { DATABASE_URL: `postgres://rods:secret@127.0.0.1:${port}/rods` };
    const e = await refused(async () => {
      const c = new pg.Client({ connectionString: env.DATABASE_URL });
      await c.connect();
    });
    const u = unreachableService(e, env);
    expect(u).toMatchObject({
      service: 'PostgreSQL',
      endpoint: `127.0.0.1:${port}`,
      variable: 'DATABASE_URL',
    });
    const text = describeUnreachable(u!);
    expect(text).toContain(`PostgreSQL does not answer at 127.0.0.1:${port} (set by DATABASE_URL)`);
    expect(text).toContain('npm run stack:up');
    expect(text).not.toContain('secret');
  });

  it('the executor and the generator: fetch refused at RODS_EXECUTOR_URL / RODS_GENERATOR_BASE_URL', async () => {
    const [ex, gen] = [await freePort(), await freePort()];
    const env = {
      DATABASE_URL: 'postgres://rods:x@127.0.0.1:5432/rods',
      RODS_EXECUTOR_URL: `http://127.0.0.1:${ex}`,
      RODS_GENERATOR_BASE_URL: `http://localhost:${gen}/v1`,
    };
    const e1 = await refused(() => fetch(`http://127.0.0.1:${ex}/health`));
    expect(unreachableService(e1, env)).toMatchObject({
      service: 'the environment executor',
      variable: 'RODS_EXECUTOR_URL',
    });
    // Wrapped as a client library wraps it (an error whose cause is fetch's).
    const e2 = new Error('Connection error.', {
      cause: await refused(() => fetch(`http://127.0.0.1:${gen}/v1/models`)),
    });
    const u = unreachableService(e2, env);
    expect(u).toMatchObject({ service: 'the generator', variable: 'RODS_GENERATOR_BASE_URL' });
    expect(describeUnreachable(u!)).toMatch(/start vLLM .*standin-generator/);
  });

  it('Kafka: a kafkajs connection error (message only) on one of KAFKA_BROKERS', async () => {
    const env = {
      DATABASE_URL: 'postgres://rods:x@127.0.0.1:5432/rods',
      KAFKA_BROKERS: 'k1:9092,127.0.0.1:19092',
    };
    const cause = Object.assign(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:19092'), {
      name: 'KafkaJSConnectionError',
    });
    const e = Object.assign(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:19092'), {
      name: 'KafkaJSNonRetriableError',
      cause,
    });
    expect(unreachableService(e, env)).toMatchObject({
      service: 'Kafka',
      endpoint: '127.0.0.1:19092',
      variable: 'KAFKA_BROKERS',
    });
  });

  it('Temporal: grpc gives no address, TEMPORAL_ADDRESS names it; a remote endpoint is not sent to stack:up', () => {
    const env = {
      DATABASE_URL: 'postgres://rods:x@127.0.0.1:5432/rods',
      TEMPORAL_ADDRESS: 'temporal.internal:7233',
    };
    const u = unreachableService(new Error('Failed to connect before the deadline'), env);
    expect(u).toMatchObject({
      service: 'Temporal',
      endpoint: 'temporal.internal:7233',
      variable: 'TEMPORAL_ADDRESS',
    });
    expect(describeUnreachable(u!)).toMatch(/check that it runs and is reachable from here/);
    // Reached, and its TLS handshake refused (platform/temporal/connect.ts): not "does not answer".
    const tls = new Error('Temporal at temporal.internal:7233 (TLS): the TLS handshake failed: bad CA', {
      cause: new Error('Failed to connect before the deadline'),
    });
    tls.name = TLS_HANDSHAKE_ERROR;
    expect(unreachableService(tls, env)).toBeUndefined();
  });

  it('anything else is left alone: other errors, and a refused endpoint rods does not know', async () => {
    expect(unreachableService(new Error('unknown campaign "x"'))).toBeUndefined();
    const port = await freePort();
    const e = await refused(() => fetch(`http://127.0.0.1:${port}/`));
    expect(unreachableService(e, { DATABASE_URL: 'postgres://rods:x@127.0.0.1:5432/rods' })).toBeUndefined();
  });
});
