import { describe, expect, it } from 'vitest';
import { pickServices } from './cli.js';
import { manages } from './service.js';

describe('manages: which endpoints the stack manager starts', () => {
  it('loopback hosts, unless RODS_MANAGE_<NAME>=0', () => {
    expect(manages('127.0.0.1', 'kafka', {})).toBe(true);
    expect(manages('localhost', 'postgres', {})).toBe(true);
    expect(manages('127.0.0.1', 'kafka', { RODS_MANAGE_KAFKA: '0' })).toBe(false);
  });

  it('another host only with RODS_STACK_MANAGE=1 (the address is this machine own)', () => {
    expect(manages('services.rods.test', 'temporal', {})).toBe(false);
    expect(manages('10.231.0.1', 'postgres', {})).toBe(false);
    expect(manages('services.rods.test', 'temporal', { RODS_STACK_MANAGE: '1' })).toBe(true);
    expect(manages('10.231.0.1', 'postgres', { RODS_STACK_MANAGE: '1', RODS_MANAGE_POSTGRES: '0' })).toBe(
      false,
    );
  });
});

describe('stack --services', () => {
  it('picks the services named, in the stack order; all without the option', () => {
    expect(pickServices(undefined).map((s) => s.name)).toEqual(['postgres', 'kafka', 'temporal', 'executor']);
    expect(pickServices('temporal, postgres,kafka').map((s) => s.name)).toEqual([
      'postgres',
      'kafka',
      'temporal',
    ]);
    expect(pickServices('executor').map((s) => s.name)).toEqual(['executor']);
  });

  it('vLLM is opt-in: --vllm adds it, --services names it', () => {
    expect(pickServices(undefined, { vllm: true }).map((s) => s.name)).toEqual([
      'postgres',
      'kafka',
      'temporal',
      'executor',
      'vllm',
    ]);
    expect(pickServices('vllm').map((s) => s.name)).toEqual(['vllm']);
    expect(pickServices('executor', { vllm: true }).map((s) => s.name)).toEqual(['executor', 'vllm']);
  });

  it('refuses a name it does not know, and an empty list', () => {
    expect(() => pickServices('postgres,redis')).toThrow(
      /--services takes .*postgres, kafka, temporal, executor, vllm/,
    );
    expect(() => pickServices(',')).toThrow(/--services/);
  });
});
