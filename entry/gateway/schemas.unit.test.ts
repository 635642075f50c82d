// The gateway's string refinement: every stored string of a request is refused with a 422 naming
// its field when PostgreSQL could not store it (U+0000, lone surrogates) or an id would hold a
// control character, instead of failing in the database with a 500 the client retries for ever.
import { describe, expect, it } from 'vitest';
import { ProblemError, parseOr422 } from './problem.js';
import { CampaignCreate, RolloutBatch, unstorableCharacter } from './schemas.js';

function fieldsOf(schema: Parameters<typeof parseOr422>[0], value: unknown): string[] {
  try {
    parseOr422(schema, value, 'request');
  } catch (e) {
    expect(e).toBeInstanceOf(ProblemError);
    expect((e as ProblemError).status).toBe(422);
    return (e as ProblemError).errors!.map((x) => `${x.field}: ${x.message}`);
  }
  throw new Error(`expected ${JSON.stringify(value)} to be refused`);
}

describe('unstorableCharacter', () => {
  it('finds C0 controls, DEL and lone surrogates, with their position', () => {
    expect(unstorableCharacter('a\u0000b')).toBe('contains the control character U+0000 at index 1');
    expect(unstorableCharacter('tab\there')).toBe('contains the control character U+0009 at index 3');
    expect(unstorableCharacter('\u001f')).toMatch(/U\+001F at index 0/);
    expect(unstorableCharacter('x\u007f')).toMatch(/U\+007F at index 1/);
    expect(unstorableCharacter('ab\ud800')).toBe('contains a lone surrogate U+D800 at index 2');
    expect(unstorableCharacter('\udc00x')).toBe('contains a lone surrogate U+DC00 at index 0');
    expect(unstorableCharacter('\ud800\ud800\udc00')).toMatch(/U\+D800 at index 0/);
    expect(unstorableCharacter('\udbff')).toMatch(/lone surrogate U\+DBFF/);
  });

  it('accepts ordinary text, paired surrogates and characters just outside the ranges', () => {
    for (const s of [
      '',
      'multi_turn_base_17',
      'ckpt-1200',
      'é ü ß 日本',
      '😀 emoji',
      ' ~',
      '\u0080\u00a0',
      '\ue000\uffff',
    ])
      expect(unstorableCharacter(s)).toBeNull();
  });

  it('with controls off, refuses only what PostgreSQL cannot store', () => {
    expect(unstorableCharacter('line\nbreak\ttab\u007f', { controls: false })).toBeNull();
    expect(unstorableCharacter('a\u0000', { controls: false })).toMatch(/U\+0000/);
    expect(unstorableCharacter('\ud83d', { controls: false })).toMatch(/lone surrogate/);
  });
});

describe('stored strings of a request', () => {
  const batch = { batchId: 'b1', policyVersion: 'ckpt-1', groups: [{ taskId: 't1', rewards: [0.5] }] };

  it('names each bad field of a rollout batch once', () => {
    expect(
      fieldsOf(RolloutBatch, {
        ...batch,
        policyVersion: 'ckpt\u00001',
        groups: [
          { taskId: 'ok', rewards: [0.5] },
          { taskId: 'bad\ud800', rewards: [0.5] },
          { taskId: 'line\nbreak', rewards: [1] },
        ],
      }),
    ).toEqual([
      'policyVersion: policy version contains the control character U+0000 at index 4',
      'groups[1].taskId: task id contains a lone surrogate U+D800 at index 3',
      'groups[2].taskId: task id contains the control character U+000A at index 4',
    ]);
    expect(fieldsOf(RolloutBatch, { ...batch, batchId: 'b\u0000' })).toEqual([
      'batchId: batch id contains the control character U+0000 at index 1',
    ]);
    expect(RolloutBatch.parse(batch)).toEqual(batch);
    expect(
      RolloutBatch.parse({ ...batch, groups: [{ taskId: 'tâche-😀', rewards: [0] }] }).groups,
    ).toHaveLength(1);
  });

  it('covers the campaign id, name and every string of the config (keys too)', () => {
    expect(fieldsOf(CampaignCreate, { campaignId: 'c\u0000', config: {} })).toEqual([
      'campaignId: campaign id contains the control character U+0000 at index 1',
    ]);
    expect(fieldsOf(CampaignCreate, { campaignId: 'c1', name: 'n\u0007', config: {} })).toEqual([
      'name: name contains the control character U+0007 at index 1',
    ]);
    expect(
      fieldsOf(CampaignCreate, {
        campaignId: 'c1',
        config: { generator: { model: 'm\u0000' }, seeds: { categories: ['base', '\udfff'] }, 'k\u0000': 1 },
      }).sort(),
    ).toEqual([
      'config.generator.model: the string contains the control character U+0000 at index 1',
      'config.k\u0000: the key contains the control character U+0000 at index 1',
      'config.seeds.categories[1]: the string contains a lone surrogate U+DFFF at index 0',
    ]);
    // Newlines and tabs are ordinary text in a config.
    expect(CampaignCreate.parse({ campaignId: 'c1', config: { note: 'a\nb\tc' } }).config).toEqual({
      note: 'a\nb\tc',
    });
  });
});
