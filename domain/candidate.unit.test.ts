import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseCampaignConfig } from './campaign-config.js';
import {
  type CandidateTask,
  candidateHash,
  canonicalContent,
  checkCandidate,
  type GateCode,
  type GateResult,
  gateLimits,
  MAX_CONFIG_DEPTH,
  type ToolCatalog,
} from './candidate.js';

const LIMITS = gateLimits(parseCampaignConfig({}));

const TOOLS: ToolCatalog = {
  GorillaFileSystem: ['cd', 'mkdir', 'mv', 'grep', 'sort', 'diff', 'ls', 'touch', 'echo', 'cat', 'cp'],
  TwitterAPI: ['post_tweet', 'authenticate_twitter', 'comment'],
  MathAPI: ['mean', 'standard_deviation'],
};

const user = (content: string) => [{ role: 'user', content }];

/** A candidate shaped like bfcl-eval's multi_turn_base_0, within the paper's gates. */
function task(over: Partial<CandidateTask> = {}): CandidateTask {
  return {
    id: 'rods_gen_0001',
    category: 'base',
    involved_classes: ['TwitterAPI', 'GorillaFileSystem'],
    initial_config: {
      GorillaFileSystem: {
        root: {
          workspace: {
            type: 'directory',
            contents: {
              document: {
                type: 'directory',
                contents: {
                  'final_report.pdf': { type: 'file', content: 'Year2024 This is the final report content.' },
                },
              },
            },
          },
        },
      },
      TwitterAPI: { username: 'analyst_pro', tags: ['#analysis', '#reports'], tweet_counter: 0 },
    },
    question: [
      user("Move 'final_report.pdf' within document into a new 'temp' directory there."),
      user('Look for budget analysis in it, then sort its lines.'),
      user('Tweet that the report is sorted, tagging it as finance.'),
    ],
    ground_truth: [
      [
        "cd(folder='document')",
        "mkdir(dir_name='temp')",
        "mv(source='final_report.pdf', destination='temp')",
      ],
      ["grep(file_name='temp/final_report.pdf', pattern='budget analysis')", "sort('temp/final_report.pdf')"],
      ["post_tweet(content='The report is sorted.', tags=['#finance'], mentions=[])"],
    ],
    ...over,
  };
}

function failure(r: GateResult): { code: GateCode; reason: string } {
  if (r.ok) throw new Error('expected the gates to fail');
  return { code: r.code, reason: r.reason };
}

const check = (c: unknown, limits = LIMITS) => checkCandidate(c, TOOLS, limits);

describe('canonical identity', () => {
  it('is the sorted-key JSON of everything but the id', () => {
    const c = task();
    const text = canonicalContent(c);
    expect(text).not.toContain('rods_gen_0001');
    expect(text.startsWith('{"category":"base","ground_truth":')).toBe(true);
    expect(JSON.parse(text)).toEqual({ ...c, id: undefined });
  });

  it('hashes content, not ids or key order, with SHA-256 of the UTF-8 canonical text', () => {
    const a = task();
    const b = JSON.parse(JSON.stringify({ ...task(), id: 'another-id' })) as CandidateTask;
    const reordered = Object.fromEntries(Object.entries(task()).reverse());
    expect(candidateHash(a)).toBe(candidateHash(b));
    expect(candidateHash(a)).toBe(candidateHash(reordered));
    expect(candidateHash(a)).toBe(createHash('sha256').update(canonicalContent(a), 'utf8').digest('hex'));
    expect(candidateHash(a)).toMatch(/^[0-9a-f]{64}$/);
    const changed = task({ question: [...task().question.slice(0, 2), user('Tweet it.')] });
    expect(candidateHash(changed)).not.toBe(candidateHash(a));
    expect(candidateHash({ ...a, extra_field: 1 })).not.toBe(candidateHash(a));
    expect(candidateHash({ id: 'x', category: 'base' })).toBe(
      createHash('sha256').update('{"category":"base"}').digest('hex'),
    );
  });

  it('keeps hostile keys as content', () => {
    const withProto = JSON.parse('{"id":"x","category":"base","__proto__":{"polluted":true}}');
    expect(canonicalContent(withProto)).toBe('{"__proto__":{"polluted":true},"category":"base"}');
    expect(candidateHash(withProto)).not.toBe(candidateHash({ id: 'x', category: 'base' }));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('deterministic gates', () => {
  it('pass a well-formed candidate and return its parsed calls', () => {
    const r = check(task());
    if (!r.ok) throw new Error(r.reason);
    expect(r.calls.map((t) => t.map((c) => c.name))).toEqual([
      ['cd', 'mkdir', 'mv'],
      ['grep', 'sort'],
      ['post_tweet'],
    ]);
  });

  it('take their limits from the campaign config', () => {
    const cfg = parseCampaignConfig({
      synthesis: {
        maxStringLength: 10,
        maxListItems: 1,
        turns: { min: 1, max: 2 },
        callsPerTurn: { min: 0, max: 4 },
      },
    });
    expect(gateLimits(cfg)).toEqual({
      maxStringLength: 10,
      maxListItems: 1,
      turns: { min: 1, max: 2 },
      callsPerTurn: { min: 0, max: 4 },
    });
  });

  it.each([
    [null, 'the candidate must be a JSON object'],
    [[], 'the candidate must be a JSON object'],
    [{ ...task(), id: '' }, 'id must be a non-empty string'],
    [{ ...task(), category: 3 }, 'category must be a non-empty string'],
    [{ ...task(), involved_classes: [] }, 'involved_classes must be a non-empty list'],
    [{ ...task(), involved_classes: 'GorillaFileSystem' }, 'involved_classes must be a non-empty list'],
    [{ ...task(), initial_config: [] }, 'initial_config must be an object'],
    [{ ...task(), question: 'hi' }, 'question must be a list of user turns'],
    [{ ...task(), question: [user('a'), 'b', user('c')] }, 'question[1] must be a list of messages'],
    [{ ...task(), question: [user('a'), [{ role: 'user' }], user('c')] }, 'question[1][0] must be a message'],
    [{ ...task(), ground_truth: {} }, 'ground_truth must be a list of turns'],
    [
      { ...task(), ground_truth: [['ls()'], [1], ['ls()']] },
      'ground_truth[1] must be a list of call strings',
    ],
    [{ ...task(), missed_function: ['sort'] }, 'missed_function must map turn indices'],
    [{ ...task(), missed_function: { x: ['sort'] } }, 'missed_function key "x" is not a turn index'],
    [{ ...task(), missed_function: { '01': ['sort'] } }, 'missed_function key "01" is not a turn index'],
    [{ ...task(), missed_function: { 1: 'sort' } }, 'missed_function[1] must be a list'],
    [{ ...task(), missed_function: { 7: ['sort'] } }, 'missed_function turn 7 is beyond the last turn 2'],
    [{ ...task(), excluded_function: 'cp' }, 'excluded_function must be a list'],
  ])('refuse a malformed record: %#', (c, reason) => {
    const f = failure(check(c));
    expect(f.code).toBe('malformed');
    expect(f.reason).toContain(reason);
  });

  it('count turns within bounds and require ground truth for each', () => {
    expect(failure(check(task({ ground_truth: task().ground_truth.slice(0, 2) })))).toEqual({
      code: 'turn-mismatch',
      reason: 'question has 3 turns but ground_truth has 2',
    });
    const one = task({ question: [user('x')], ground_truth: [['ls()']] });
    expect(failure(check(one))).toEqual({
      code: 'too-few-turns',
      reason: '1 turns; at least 2 are required',
    });
    const six = task({
      question: Array.from({ length: 6 }, () => user('x')),
      ground_truth: Array.from({ length: 6 }, () => ['ls()']),
    });
    expect(failure(check(six))).toEqual({ code: 'too-many-turns', reason: '6 turns; at most 5 are allowed' });
    const five = task({ question: six.question.slice(0, 5), ground_truth: six.ground_truth.slice(0, 5) });
    expect(check(five).ok).toBe(true);
    const two = task({ question: six.question.slice(0, 2), ground_truth: six.ground_truth.slice(0, 2) });
    expect(check(two).ok).toBe(true);
  });

  it('bound the calls per turn, allowing the empty turns of miss_func and miss_param tasks only', () => {
    const four = task({
      ground_truth: [["cd(folder='document')", 'ls()', 'ls()', 'ls()'], ['ls()'], ['ls()']],
    });
    expect(failure(check(four))).toEqual({
      code: 'too-many-calls',
      reason: 'turn 0 has 4 calls; at most 3 are allowed',
    });
    const emptyTurn = task({ ground_truth: [['ls()'], [], ['ls()']] });
    expect(failure(check(emptyTurn))).toEqual({
      code: 'too-few-calls',
      reason: 'turn 1 has 0 calls; at least 1 are required',
    });
    // miss_func, BFCL's shape: the holding turn (2) has no call, the function arrives with turn 3
    // (no user message) whose ground truth is the deferred call
    const missFunc = task({
      category: 'miss_func',
      question: [user('a'), user('b'), user('sort it'), []],
      ground_truth: [['ls()'], ['ls()'], [], ["sort('final_report.pdf')"]],
      missed_function: { 3: ['sort'] },
    });
    expect(check(missFunc).ok).toBe(true);
    expect(failure(check({ ...missFunc, missed_function: { 1: ['sort'] } })).code).toBe('too-few-calls');
    // miss_param: the turn that withholds a parameter expects a question back, not a call
    const missParam = task({ category: 'miss_param', ground_truth: [['ls()'], [], ['ls()']] });
    expect(check(missParam).ok).toBe(true);
    const noCall = task({ category: 'miss_param', ground_truth: [[], [], []] });
    expect(failure(check(noCall))).toEqual({
      code: 'too-few-calls',
      reason: 'the task has no ground-truth call',
    });
  });

  it('know the involved classes and their tools, minus excluded and not-yet-added functions', () => {
    expect(failure(check(task({ involved_classes: ['GorillaFileSystem', 'OsModule'] })))).toEqual({
      code: 'unknown-class',
      reason: 'involved class "OsModule" is not a known API class',
    });
    expect(failure(check(task({ involved_classes: ['toString'] }))).code).toBe('unknown-class');
    expect(failure(check(task({ involved_classes: ['__proto__'] }))).code).toBe('unknown-class');
    // a MathAPI function in a task that does not involve MathAPI
    const mean = task({ ground_truth: [['mean(numbers=[1, 2])'], ['ls()'], ['ls()']] });
    expect(failure(check(mean))).toEqual({
      code: 'unknown-tool',
      reason: 'ground_truth[0][0]: "mean" is not a method of the involved classes',
    });
    expect(check({ ...mean, involved_classes: ['GorillaFileSystem', 'MathAPI'] }).ok).toBe(true);
    // a well-formed call of a function no class has: parsed, then refused by name, never run
    const exec = task({ ground_truth: [["exec('import os')"], ['ls()'], ['ls()']] });
    expect(failure(check(exec))).toEqual({
      code: 'unknown-tool',
      reason: 'ground_truth[0][0]: "exec" is not a method of the involved classes',
    });
    const excluded = task({ excluded_function: ['mkdir'] });
    expect(failure(check(excluded))).toEqual({
      code: 'unknown-tool',
      reason: 'ground_truth[0][1]: mkdir is an excluded function',
    });
    const early = task({
      category: 'miss_func',
      question: [user('a'), [], user('c')],
      ground_truth: [["sort('x')"], [], ["sort('x')"]],
      missed_function: { 1: ['sort'] },
    });
    expect(failure(check(early))).toEqual({
      code: 'unknown-tool',
      reason: 'ground_truth[0][0]: sort is withheld until turn 1',
    });
    expect(failure(check({ ...early, missed_function: { 1: ['teleport'] } }))).toEqual({
      code: 'unknown-tool',
      reason: 'missed function "teleport" is not a method of the involved classes',
    });
    const catalog = new Map([['GorillaFileSystem', ['ls']]]);
    expect(
      checkCandidate(
        task({ involved_classes: ['GorillaFileSystem'], ground_truth: [['ls()'], ['ls()'], ['ls()']] }),
        catalog,
        LIMITS,
      ).ok,
    ).toBe(true);
  });

  it.each([
    "__import__('os').system('rm -rf /')",
    "os.system('rm -rf /')",
    "cd(folder=open('/etc/passwd').read())",
    "cd(folder='x'); import os",
    'cd(folder=__file__)',
    "cd(folder='x')()",
    "cd(folder='\\N{BULLET}')",
    `cd(folder=${'['.repeat(50)}${']'.repeat(50)})`,
    "cd(**{'folder': 'x'})",
    'cd(folder=f"{__import__(\'os\')}")',
    '',
  ])('refuse an unparseable call: %j', (call) => {
    const f = failure(check(task({ ground_truth: [[call], ['ls()'], ['ls()']] })));
    expect(f.code).toBe('unparseable-call');
    expect(f.reason).toMatch(/^ground_truth\[0\]\[0\]: /);
    expect(f.reason.length).toBeLessThan(300);
  });

  const hasControlCharacter = (s: string) => [...s].some((ch) => ch.charCodeAt(0) < 0x20);

  it('limit strings anywhere in initial_config and call arguments, in code points', () => {
    const s200 = 'x'.repeat(200);
    const s201 = 'x'.repeat(201);
    const emoji200 = '😀'.repeat(200); // 400 UTF-16 units, 200 characters
    const cfg = (v: unknown) =>
      task({ initial_config: { TwitterAPI: { username: 'u', deep: { list: [1, v] } } } });
    expect(check(cfg(s200)).ok).toBe(true);
    expect(check(cfg(emoji200)).ok).toBe(true);
    expect(failure(check(cfg(s201)))).toEqual({
      code: 'string-too-long',
      reason: `initial_config.TwitterAPI.deep.list[1]: string of 201 characters exceeds 200 (${JSON.stringify(`${'x'.repeat(40)}…`)})`,
    });
    // keys count as strings too, and are quoted safely in the path
    const longKey = task({ initial_config: { TwitterAPI: { [s201]: 1 } } });
    expect(failure(check(longKey)).code).toBe('string-too-long');
    const hostileKey = task({ initial_config: { TwitterAPI: { 'a"b\n': { v: s201 } } } });
    expect(failure(check(hostileKey)).reason).toMatch(
      /^initial_config\.TwitterAPI\["a\\"b\\n"\]\.v: string of 201/,
    );
    // a __proto__ key from JSON.parse is an ordinary key
    const proto = JSON.parse(
      JSON.stringify(task()).replace('"TwitterAPI":{', `"TwitterAPI":{"__proto__":{"x":"${s201}"},`),
    );
    expect(failure(check(proto)).reason).toMatch(/^initial_config\.TwitterAPI\.__proto__\.x: string of 201/);

    const arg = (a: string) =>
      task({ ground_truth: [[`echo(content=${a}, file_name='f')`], ['ls()'], ['ls()']] });
    expect(check(arg(`'${s200}'`)).ok).toBe(true);
    expect(failure(check(arg(`'${s201}'`)))).toMatchObject({ code: 'string-too-long' });
    expect(failure(check(arg(`'${s201}'`))).reason).toMatch(
      /^ground_truth\[0\]\[0\] echo argument content: string of 201/,
    );
    // implicit concatenation and escapes are measured after decoding
    expect(failure(check(arg(`'${'x'.repeat(150)}' '${'y'.repeat(51)}'`))).code).toBe('string-too-long');
    expect(check(arg(`'${'\\x41'.repeat(200)}'`)).ok).toBe(true); // 800 source characters, 200 decoded
    expect(failure(check(arg(`'${'\\x41'.repeat(201)}'`))).code).toBe('string-too-long');
    // positional arguments, nested values and dict keys
    const pos = task({ ground_truth: [[`sort('${s201}')`], ['ls()'], ['ls()']] });
    expect(failure(check(pos)).reason).toMatch(/sort argument 0: string of 201/);
    const nested = arg(`[{'k': ['${s201}']}]`);
    expect(failure(check(nested)).code).toBe('string-too-long');
    const dictKey = arg(`{'${s201}': 1}`);
    expect(failure(check(dictKey)).reason).toMatch(/content key 0: string of 201/);
  });

  it('limit lists anywhere in initial_config and call arguments (tuples too, dicts not)', () => {
    const five = [1, 2, 3, 4, 5];
    const cfg = (v: unknown) => task({ initial_config: { TwitterAPI: { v } } });
    expect(check(cfg(five)).ok).toBe(true);
    expect(failure(check(cfg([...five, 6])))).toEqual({
      code: 'list-too-long',
      reason: 'initial_config.TwitterAPI.v: list of 6 items exceeds 5',
    });
    expect(failure(check(cfg([[...five, 6]]))).reason).toContain('initial_config.TwitterAPI.v[0]: list of 6');
    const manyKeys = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`f${i}`, i]));
    expect(check(cfg(manyKeys)).ok).toBe(true);

    const tweet = (tags: string) =>
      task({ ground_truth: [[`post_tweet(content='x', tags=${tags})`], ['ls()'], ['ls()']] });
    expect(check(tweet("['a', 'b', 'c', 'd', 'e']")).ok).toBe(true);
    expect(failure(check(tweet("['a', 'b', 'c', 'd', 'e', 'f']")))).toEqual({
      code: 'list-too-long',
      reason: 'ground_truth[0][0] post_tweet argument tags: list of 6 items exceeds 5',
    });
    expect(failure(check(tweet('(1, 2, 3, 4, 5, 6)'))).reason).toContain('tuple of 6 items');
    expect(failure(check(tweet('[[1, 2, 3, 4, 5, 6]]'))).reason).toContain('tags[0]: list of 6 items');
    expect(failure(check(tweet("{'k': [1, 2, 3, 4, 5, 6]}"))).code).toBe('list-too-long');
    expect(check(tweet(`{${Array.from({ length: 9 }, (_, i) => `'k${i}': ${i}`).join(', ')}}`)).ok).toBe(
      true,
    );
  });

  it('refuse absurdly deep initial_config without overflowing the stack', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 200_000; i++) deep = { d: deep };
    const f = failure(check(task({ initial_config: { TwitterAPI: deep as Record<string, unknown> } })));
    expect(f.code).toBe('too-deep');
    expect(f.reason).toMatch(new RegExp(`nested deeper than ${MAX_CONFIG_DEPTH} levels`));
    expect(f.reason.length).toBeLessThan(MAX_CONFIG_DEPTH * 3 + 100);
  });

  it('keep hostile content out of reasons beyond a short escaped snippet', () => {
    const hostile = `\u001b[2J${'\u0000'.repeat(10_000)}`;
    const f = failure(check(task({ initial_config: { TwitterAPI: { bio: hostile } } })));
    expect(f.code).toBe('string-too-long');
    expect(f.reason.length).toBeLessThan(400);
    expect(hasControlCharacter(f.reason)).toBe(false);
  });

  it('check structure before content: the first failing gate is reported', () => {
    const both = task({
      question: [user('x')],
      ground_truth: [[`echo(content='${'x'.repeat(500)}')`]],
    });
    expect(failure(check(both)).code).toBe('too-few-turns');
  });
});
