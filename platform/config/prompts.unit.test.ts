import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { generatorConfig } from '../../activities/llm/config.js';
import {
  DEFAULT_PROMPTS_DIR,
  EVENT_STAGE,
  loadPrompt,
  PROMPT_FILES,
  PROMPT_NAMES,
  PromptError,
  parseStageMarker,
  promptVersion,
} from './prompts.js';

const temps: string[] = [];
function tempCopy(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'rods-prompts-'));
  cpSync(DEFAULT_PROMPTS_DIR, dir, { recursive: true });
  temps.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('stage prompts', () => {
  it('every prompt file starts with its marker line and hashes to the sha256 of its bytes', () => {
    for (const name of PROMPT_NAMES) {
      const file = path.join(DEFAULT_PROMPTS_DIR, PROMPT_FILES[name]);
      const bytes = readFileSync(file);
      const first = bytes.toString('utf8').split('\n', 1)[0]!;
      // the version in the marker is the one in the file name
      expect(parseStageMarker(first)).toEqual({
        stage: name,
        version: Number(/\.v(\d+)\.md$/.exec(PROMPT_FILES[name])![1]),
      });
      expect(promptVersion(name)).toBe(createHash('sha256').update(bytes).digest('hex'));
      expect(promptVersion(name)).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  it('hashes are stable and differ between prompts', () => {
    const first = PROMPT_NAMES.map((n) => promptVersion(n));
    const second = PROMPT_NAMES.map((n) => promptVersion(n));
    expect(second).toEqual(first);
    expect(new Set(first).size).toBe(PROMPT_NAMES.length);
  });

  it('a temp copy hashes the same, and a one-byte edit changes the hash of that prompt only', () => {
    const dir = tempCopy();
    for (const name of PROMPT_NAMES) expect(promptVersion(name, dir)).toBe(promptVersion(name));
    const file = path.join(dir, PROMPT_FILES.rewrite);
    writeFileSync(file, `${readFileSync(file, 'utf8')} `);
    expect(promptVersion('rewrite', dir)).not.toBe(promptVersion('rewrite'));
    expect(promptVersion('plan', dir)).toBe(promptVersion('plan'));
    expect(loadPrompt('rewrite', dir).hash).toBe(promptVersion('rewrite', dir));
  });

  it('refuses a prompt whose marker names another stage, or that has none', () => {
    const dir = tempCopy();
    const file = path.join(dir, PROMPT_FILES.judge);
    writeFileSync(
      file,
      readFileSync(file, 'utf8').replace('[rods-stage: judge v3]', '[rods-stage: plan v1]'),
    );
    expect(() => loadPrompt('judge', dir)).toThrow(PromptError);
    writeFileSync(file, 'no marker here\n');
    expect(() => loadPrompt('judge', dir)).toThrow(/must start with the line \[rods-stage: judge v<N>\]/);
  });

  it('maps every prompt to an event stage', () => {
    expect(EVENT_STAGE).toEqual({
      plan: 'plan',
      params: 'execute',
      'config-patch': 'execute',
      rewrite: 'rewrite',
      'turn-query': 'rewrite',
      judge: 'critique',
      refine: 'refine',
      augment: 'augment',
    });
  });

  it('finds a marker inside a longer text, not a malformed one', () => {
    expect(parseStageMarker('intro\n[rods-stage: config-patch v12]\nbody')).toEqual({
      stage: 'config-patch',
      version: 12,
    });
    expect(parseStageMarker('[rods-stage: plan]')).toBeNull();
    expect(parseStageMarker('see [rods-stage: plan v1] inline')).toBeNull();
  });
});

describe('generator config', () => {
  it('fills the defaults of the paper and vLLM', () => {
    const cfg = generatorConfig({ baseUrl: 'http://127.0.0.1:8000/v1', model: 'Qwen/Qwen3-32B' });
    expect(cfg).toMatchObject({
      apiKey: 'EMPTY',
      judgeModel: 'Qwen/Qwen3-32B',
      temperature: 1,
      topP: 0.7,
      maxAttempts: 3,
      structuredOutput: 'json_schema',
    });
  });

  it('rejects a non-http URL and out-of-range sampling values', () => {
    expect(() => generatorConfig({ baseUrl: 'ftp://x/v1', model: 'm' })).toThrow();
    expect(() => generatorConfig({ baseUrl: 'http://x/v1', model: 'm', topP: 0 })).toThrow();
    expect(() =>
      generatorConfig({ baseUrl: 'http://x/v1', model: 'm', structuredOutput: 'xml' as never }),
    ).toThrow();
  });
});
