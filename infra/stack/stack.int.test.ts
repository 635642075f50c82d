import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAlive } from './proc.js';

// A foreign listener on the port a service wants: `up` must name the port and the process and
// leave that process alone. The service is pointed at a free port through KAFKA_BROKERS, the
// same override that points the project at a cluster.
describe('stack manager against a port taken by a foreign process', () => {
  let server: net.Server;
  let port: number;
  const sockets = new Set<net.Socket>();

  beforeAll(async () => {
    server = net.createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('refuses to start, names the port and the owning process, and never kills it', async () => {
    process.env.KAFKA_BROKERS = `127.0.0.1:${port}`;
    const { kafkaService } = await import('./kafka.js');
    const { up } = await import('./cli.js');
    const svc = kafkaService();
    expect(svc.port).toBe(port);
    // The stack's own broker (if running) is on another port and must not count as this service.
    expect(svc.pid()).toBeUndefined();
    const err = await up([svc]).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    const message = (err as Error).message;
    expect(message).toContain('stack:up failed for kafka');
    expect(message).toContain(`port ${port} is taken by pid ${process.pid}`);
    expect(isAlive(process.pid)).toBe(true);
    // The foreign listener still accepts connections.
    await new Promise<void>((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => {
        s.destroy();
        resolve();
      });
      s.once('error', reject);
    });
  });
});
