import { Command } from 'commander';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { listSchemas } from '../../../platform/codec/registry.js';
import { register } from './schemas.js';

afterEach(() => {
  vi.restoreAllMocks();
});

async function run(args: string[]): Promise<string> {
  const out: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    out.push(String(chunk));
    return true;
  });
  vi.spyOn(console, 'log').mockImplementation((...parts: unknown[]) => {
    out.push(`${parts.join(' ')}\n`);
  });
  const program = new Command('rods').exitOverride();
  register(program);
  await program.parseAsync(args, { from: 'user' });
  return out.join('');
}

describe('rods schemas', () => {
  it('--json lists every published version with fingerprint, status and file', async () => {
    const rows = JSON.parse(await run(['schemas', '--json'])) as Record<string, unknown>[];
    expect(rows).toHaveLength(listSchemas().length);
    const scored = rows.find((r) => r.fullName === 'rods.v1.RolloutGroupScored' && r.version === 1);
    expect(scored).toEqual({
      fullName: 'rods.v1.RolloutGroupScored',
      version: 1,
      fingerprint: '2645a7cc0c52eff3',
      status: 'current',
      file: 'schemas/published/RolloutGroupScored.v1.avsc',
    });
    for (const r of rows) expect(r.fingerprint).toMatch(/^[0-9a-f]{16}$/);
  });

  it('prints one line per version for people', async () => {
    const lines = (await run(['schemas'])).trim().split('\n');
    expect(lines).toHaveLength(listSchemas().length);
    expect(lines.find((l) => l.startsWith('rods.v1.StepClosed '))).toMatch(
      /^rods\.v1\.StepClosed\s+v1\s+bbf740a91242bb5d\s+current\s+schemas\/published\/StepClosed\.v1\.avsc$/,
    );
  });
});
