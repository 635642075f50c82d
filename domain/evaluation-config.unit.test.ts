// A campaign's `evaluation` setting: validated with messages that name the field, its placeholders
// filled in per checkpoint, and the evaluation it names the one `rods eval run` names.
import { describe, expect, it } from 'vitest';
import { type CampaignConfigError, parseCampaignConfig } from './campaign-config.js';
import {
  checkpointEvaluationInput,
  evaluationIdOf,
  evaluationInputOf,
  fillCheckpoint,
} from './evaluation.js';

const issues = (evaluation: unknown): string[] => {
  try {
    parseCampaignConfig({ evaluation });
  } catch (e) {
    return (e as CampaignConfigError).issues;
  }
  throw new Error('the config was accepted');
};

const CKPT = { checkpointId: 'run-1-step-500', trainerStep: 500, runId: 'run-1' };

describe('campaign config: evaluation', () => {
  it("is absent by default, and takes `rods eval run`'s defaults when given", () => {
    expect(parseCampaignConfig({}).evaluation).toBeUndefined();
    expect(
      parseCampaignConfig({ evaluation: { baseUrl: 'http://v:8000/v1', model: 'ckpt-{step}' } }).evaluation,
    ).toEqual({
      onCheckpoint: true,
      baseUrl: 'http://v:8000/v1',
      model: 'ckpt-{step}',
      concurrency: 1,
      endpointAttempts: 5,
    });
  });

  it('refuses a key, credentials in the URL and a key in place of a variable name, saying what to do', () => {
    const [url, key] = issues({ baseUrl: 'http://u:secret@v/v1', model: 'm', apiKey: 'sk-1' });
    expect(url).toMatch(/^evaluation\.baseUrl: .* must not carry credentials/);
    expect(key).toMatch(
      /^evaluation: "apiKey" is not an evaluation setting .*name the worker's environment variable in apiKeyEnv/,
    );
    expect(issues({ baseUrl: 'http://v/v1', model: 'm', apiKeyEnv: 'sk-live-123' })).toEqual([
      "evaluation.apiKeyEnv: evaluation.apiKeyEnv must be the name of the worker's environment variable holding the key (letters, digits, _), not the key",
    ]);
  });

  it('refuses unknown placeholders, what is not an http URL, bad task ids and a task list beside a split', () => {
    expect(issues({ baseUrl: 'http://v/{model}/v1', model: '{category}' })).toEqual([
      'evaluation.baseUrl: evaluation.baseUrl may hold {checkpoint}, {step}, {run}, {category}; {model} is none of them',
      'evaluation.model: evaluation.model may hold {checkpoint}, {step}, {run}; {category} is none of them',
    ]);
    expect(issues({ baseUrl: 'ftp://v/{checkpoint}', model: 'm' })).toEqual([
      'evaluation.baseUrl: evaluation.baseUrl "ftp://v/{checkpoint}" must be an http:// or https:// URL',
    ]);
    expect(issues({ baseUrl: 'v:8000', model: '' })).toHaveLength(2);
    expect(issues({ baseUrl: 'http://v/v1', model: 'm', tasks: ['multi_turn_base_1', 'simple_4'] })).toEqual([
      'evaluation.tasks.1: evaluation.tasks: "simple_4" is not a BFCL multi-turn task id (multi_turn_<category>_<n>)',
    ]);
    expect(
      issues({ baseUrl: 'http://v/v1', model: 'm', tasks: ['multi_turn_base_1'], perCategory: 2 }),
    ).toEqual([
      'evaluation.tasks: evaluation.tasks names the tasks: give it without perCategory and categories',
    ]);
    expect(issues({ baseUrl: 'http://v/v1', model: 'm', concurrency: 0 })).toEqual([
      'evaluation.concurrency: evaluation.concurrency must be >= 1',
    ]);
  });
});

describe("a checkpoint's evaluation", () => {
  it('fills {checkpoint}, {step} and {run} in, percent-encoded in the URL, and leaves {category} to each task', () => {
    expect(fillCheckpoint('{run}/{checkpoint}@{step}', CKPT)).toBe('run-1/run-1-step-500@500');
    const input = checkpointEvaluationInput('c', CKPT, {
      baseUrl: 'http://{run}.serve:8000/{checkpoint}/{category}/v1/',
      model: 'lora-{checkpoint}',
    });
    expect(input.endpoint).toEqual({
      baseUrl: 'http://run-1.serve:8000/run-1-step-500/{category}/v1',
      model: 'lora-run-1-step-500',
    });
    const odd = checkpointEvaluationInput(
      'c',
      { ...CKPT, checkpointId: 'a/b?c#d' },
      { baseUrl: 'http://v/{checkpoint}/v1', model: '{checkpoint}' },
    );
    expect(odd.endpoint).toEqual({ baseUrl: 'http://v/a%2Fb%3Fc%23d/v1', model: 'a/b?c#d' });
  });

  it('names the evaluation `rods eval run` names for the same checkpoint, model and selection', () => {
    const settings = {
      baseUrl: 'http://v/v1',
      model: 'ckpt-{step}',
      perCategory: 4,
      concurrency: 2,
      endpointAttempts: 5,
    };
    const auto = checkpointEvaluationInput('c', CKPT, settings);
    // `rods eval run --campaign c --checkpoint run-1-step-500 --endpoint http://v/v1 --model ckpt-500 --per-category 4 --concurrency 2`
    const cli = evaluationInputOf({
      campaignId: 'c',
      checkpointId: CKPT.checkpointId,
      endpoint: { baseUrl: 'http://v/v1', model: 'ckpt-500' },
      perCategory: 4,
      concurrency: 2,
      endpointAttempts: 5,
    });
    expect(auto).toEqual(cli);
    // The id recorded before this setting existed (the held-out split's selection as `rods eval run` spelled it).
    expect(auto.evaluationId).toBe(
      evaluationIdOf(
        'c',
        CKPT.checkpointId,
        'ckpt-500',
        'held-out;categories=base,miss_func,miss_param,long_context;perCategory=4',
      ),
    );
    const listed = checkpointEvaluationInput('c', CKPT, {
      ...settings,
      perCategory: undefined,
      tasks: ['multi_turn_base_100'],
    });
    expect(listed.tasks).toEqual([{ taskId: 'multi_turn_base_100', category: 'base' }]);
    expect(listed.evaluationId).toBe(
      evaluationIdOf('c', CKPT.checkpointId, 'ckpt-500', 'base/multi_turn_base_100'),
    );
    expect(
      checkpointEvaluationInput('c', { ...CKPT, trainerStep: 600, checkpointId: 'run-1-step-600' }, settings)
        .evaluationId,
    ).not.toBe(auto.evaluationId);
  });
});
