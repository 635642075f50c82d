import net from 'node:net';

/** A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/**
 * A free port for a server that starts a while later (a private stack's PostgreSQL, Kafka,
 * Temporal). Chosen below Linux's ephemeral range (32768-60999): a port the OS picks for
 * freePort() is also one it may hand to any outgoing connection meanwhile, which then holds it
 * when the server starts.
 */
export async function freeServicePort(low = 20_000, high = 32_000): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = low + Math.floor(Math.random() * (high - low));
    const s = net.createServer();
    const ok = await new Promise<boolean>((r) => {
      s.once('error', () => r(false));
      s.listen(port, '127.0.0.1', () => r(true));
    });
    if (ok) {
      await new Promise<void>((r) => s.close(() => r()));
      return port;
    }
  }
  throw new Error(`no free port in ${low}-${high} after 200 tries`);
}
