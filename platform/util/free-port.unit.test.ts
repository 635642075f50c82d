import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { freeServicePort } from './free-port.js';

describe('freeServicePort', () => {
  it('gives a bindable port below the ephemeral range, skipping taken ones', async () => {
    const port = await freeServicePort();
    expect(port).toBeGreaterThanOrEqual(20_000);
    expect(port).toBeLessThan(32_000);
    // A one-port range whose port is taken has nothing to give.
    const s = net.createServer();
    await new Promise<void>((r) => s.listen(port, '127.0.0.1', r));
    try {
      await expect(freeServicePort(port, port + 1)).rejects.toThrow(/no free port/);
    } finally {
      await new Promise<void>((r) => s.close(() => r()));
    }
    expect(await freeServicePort(port, port + 1)).toBe(port);
  });
});
