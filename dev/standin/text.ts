// The stand-in's rewrite, judge and refine answers. Rewrite reuses the human seed's wording for
// every candidate turn that is exactly a seed turn (with the candidate's renames and varied
// values carried into the text), and writes template sentences from the calls otherwise. The
// judge scores the five criteria with simple checks on the text and the calls; a rejection can be
// injected. Refine classifies by the lowest score and rewrites the questions from templates.

import {
  callName,
  JUDGE_CRITERIA,
  type JudgeCriterion,
  type Judgement,
  type RefineClass,
  type Refinement,
  type Rewrite,
  type TurnQuery,
} from '../../activities/llm/schemas.js';
import { BFCL_CATALOG } from '../../domain/bfcl-catalog.js';
import type { TaskRecord } from '../../domain/task.js';
import { applyTextMap, FS_NAME_PARAMS, seedTurnText } from './mutate.js';
import { type PyCall, type PyValue, toPlain } from './pycall.js';
import type { Rng } from './rng.js';
import { namedArgs, type SeedCall, seedCalls } from './seed.js';

// ---- templates ----------------------------------------------------------------------------------

function fmt(v: PyValue | undefined): string {
  if (!v) return '';
  switch (v.t) {
    case 'str':
      return `'${v.v}'`;
    case 'num':
      return v.text.replace(/\.0$/, '');
    case 'bool':
      return v.v ? 'yes' : 'no';
    case 'none':
      return 'nothing';
    case 'list': {
      const items = v.items.map(fmt);
      return items.length <= 1
        ? (items[0] ?? 'nothing')
        : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
    }
    case 'dict':
      return v.entries.map(([k, x]) => `${words(String(toPlain(k)))} ${fmt(x)}`).join(', ');
  }
}

const words = (name: string) =>
  name
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .replace(/_/g, ' ')
    .toLowerCase()
    .trim();

type Args = Record<string, PyValue>;
const s = (a: Args, k: string) => fmt(a[k]);
const has = (a: Args, k: string) => a[k] !== undefined && a[k]!.t !== 'none';

const TEMPLATES: Record<string, (a: Args) => string> = {
  // GorillaFileSystem
  pwd: () => "tell me which folder I'm in",
  ls: (a) =>
    a.a?.t === 'bool' && a.a.v
      ? 'list everything in the current folder, hidden files included'
      : "list what's in the current folder",
  cd: (a) => {
    const f = a.folder?.t === 'str' ? a.folder.v : '';
    if (f === '..') return 'go up one folder';
    if (f === '/' || f === '') return 'go back to the top folder';
    return `go into the ${s(a, 'folder')} folder`;
  },
  mkdir: (a) => `create a new folder called ${s(a, 'dir_name')}`,
  touch: (a) => `create an empty file named ${s(a, 'file_name')}`,
  echo: (a) =>
    has(a, 'file_name')
      ? `write ${s(a, 'content')} into ${s(a, 'file_name')}`
      : `show the text ${s(a, 'content')}`,
  cat: (a) => `show me what's in ${s(a, 'file_name')}`,
  find: (a) =>
    has(a, 'name')
      ? `look for anything named like ${s(a, 'name')}${a.path?.t === 'str' && a.path.v !== '.' ? ` under ${s(a, 'path')}` : ' from here down'}`
      : `list every file and folder below ${has(a, 'path') ? s(a, 'path') : 'this folder'}`,
  wc: (a) => {
    const mode = a.mode?.t === 'str' ? a.mode.v : 'l';
    return `count the ${mode === 'w' ? 'words' : mode === 'c' ? 'characters' : 'lines'} in ${s(a, 'file_name')}`;
  },
  sort: (a) => `sort the lines of ${s(a, 'file_name')}`,
  grep: (a) => `find the lines in ${s(a, 'file_name')} that mention ${s(a, 'pattern')}`,
  du: (a) =>
    `tell me how much disk space this folder uses${a.human_readable?.t === 'bool' && a.human_readable.v ? ', in a readable format' : ''}`,
  tail: (a) => `show the last ${has(a, 'lines') ? s(a, 'lines') : '10'} lines of ${s(a, 'file_name')}`,
  diff: (a) => `compare ${s(a, 'file_name1')} with ${s(a, 'file_name2')} line by line`,
  mv: (a) => `move ${s(a, 'source')} to ${s(a, 'destination')}`,
  rm: (a) => `delete ${s(a, 'file_name')}`,
  rmdir: (a) => `remove the folder ${s(a, 'dir_name')}`,
  cp: (a) => `copy ${s(a, 'source')} to ${s(a, 'destination')}`,
  // TwitterAPI
  authenticate_twitter: (a) =>
    `sign me in to my social account as ${s(a, 'username')} with the password ${s(a, 'password')}`,
  post_tweet: (a) =>
    `post ${s(a, 'content')}${has(a, 'tags') ? ` tagged ${s(a, 'tags')}` : ''}${has(a, 'mentions') ? ` mentioning ${s(a, 'mentions')}` : ''}`,
  comment: (a) => `reply ${s(a, 'comment_content')} to post ${s(a, 'tweet_id')}`,
  retweet: (a) => `share post ${s(a, 'tweet_id')} again on my profile`,
  mention: (a) => `mention ${s(a, 'mentioned_usernames')} in post ${s(a, 'tweet_id')}`,
  follow_user: (a) => `follow ${s(a, 'username_to_follow')}`,
  unfollow_user: (a) => `stop following ${s(a, 'username_to_unfollow')}`,
  get_tweet: (a) => `show me post ${s(a, 'tweet_id')}`,
  get_user_tweets: (a) => `show me the posts of ${s(a, 'username')}`,
  search_tweets: (a) => `search the posts for ${s(a, 'keyword')}`,
  get_user_stats: (a) => `show the account statistics of ${s(a, 'username')}`,
  list_all_following: () => 'list everyone I follow',
  get_tweet_comments: (a) => `show the replies to post ${s(a, 'tweet_id')}`,
  posting_get_login_status: () => "check whether I'm signed in to my social account",
  // MessageAPI
  message_login: (a) => `log me in to the messaging workspace as user ${s(a, 'user_id')}`,
  send_message: (a) => `send ${s(a, 'message')} to user ${s(a, 'receiver_id')}`,
  get_user_id: (a) => `look up the user id of ${s(a, 'user')}`,
  add_contact: (a) => `add ${s(a, 'user_name')} to my contacts`,
  delete_message: (a) => `delete my latest message to user ${s(a, 'receiver_id')}`,
  view_messages_sent: () => "show me the messages I've sent",
  list_users: () => 'list every user in the workspace',
  search_messages: (a) => `search my messages for ${s(a, 'keyword')}`,
  get_message_stats: () => 'show my messaging statistics',
  message_get_login_status: () => "check whether I'm logged in to messaging",
  // TicketAPI
  ticket_login: (a) =>
    `log in to the ticket system as ${s(a, 'username')} with the password ${s(a, 'password')}`,
  create_ticket: (a) =>
    `open a support ticket titled ${s(a, 'title')}${has(a, 'description') && a.description?.t === 'str' && a.description.v ? ` saying ${s(a, 'description')}` : ''}${has(a, 'priority') ? ` with priority ${s(a, 'priority')}` : ''}`,
  get_ticket: (a) => `show me ticket ${s(a, 'ticket_id')}`,
  close_ticket: (a) => `close ticket ${s(a, 'ticket_id')}`,
  resolve_ticket: (a) =>
    `mark ticket ${s(a, 'ticket_id')} as resolved${a.resolution?.t === 'str' && a.resolution.v ? ` with the note ${s(a, 'resolution')}` : ''}`,
  edit_ticket: (a) => `update ticket ${s(a, 'ticket_id')}: set ${s(a, 'updates')}`,
  get_user_tickets: (a) => `list my tickets${has(a, 'status') ? ` that are ${s(a, 'status')}` : ''}`,
  logout: () => 'log me out of the ticket system',
  ticket_get_login_status: () => "check whether I'm logged in to the ticket system",
  // TradingBot
  get_stock_info: (a) => `get the latest quote for ${s(a, 'symbol')}`,
  place_order: (a) =>
    `place a ${s(a, 'order_type').toLowerCase()} order for ${s(a, 'amount')} shares of ${s(a, 'symbol')} at ${s(a, 'price')} each`,
  get_order_details: (a) => `show the details of order ${s(a, 'order_id')}`,
  cancel_order: (a) => `cancel order ${s(a, 'order_id')}`,
  get_account_info: () => 'show my trading account details',
  fund_account: (a) => `add ${s(a, 'amount')} dollars to my trading account`,
  withdraw_funds: (a) => `withdraw ${s(a, 'amount')} dollars from my trading account`,
  add_to_watchlist: (a) => `add ${s(a, 'stock')} to my watchlist`,
  remove_stock_from_watchlist: (a) => `remove ${s(a, 'symbol')} from my watchlist`,
  get_watchlist: () => 'show my watchlist',
  get_symbol_by_name: (a) => `find the ticker symbol of ${s(a, 'name')}`,
  get_available_stocks: (a) => `list the stocks in the ${s(a, 'sector')} sector`,
  get_order_history: () => 'show my order history',
  get_transaction_history: () => 'show my transaction history',
  get_current_time: () => 'tell me the current market time',
  // VehicleControlAPI
  startEngine: () => 'start the engine',
  lockDoors: (a) =>
    `${a.unlock?.t === 'bool' && a.unlock.v ? 'unlock' : 'lock'} the ${s(a, 'door').replace(/'/g, '')} doors`,
  setHeadlights: (a) => `turn the headlights ${s(a, 'mode').replace(/'/g, '')}`,
  displayCarStatus: (a) => `show the car's ${s(a, 'option').replace(/'/g, '')} status`,
  fillFuelTank: (a) => `add ${s(a, 'fuelAmount')} gallons of fuel`,
  check_tire_pressure: () => 'check the tire pressure',
  find_nearest_tire_shop: () => 'find the nearest tire shop',
  activateParkingBrake: (a) => `${s(a, 'mode').replace(/'/g, '')} the parking brake`,
  pressBrakePedal: (a) => `press the brake pedal to position ${s(a, 'pedalPosition')}`,
  releaseBrakePedal: () => 'release the brake pedal',
  setCruiseControl: (a) =>
    `${a.activate?.t === 'bool' && !a.activate.v ? 'turn off' : 'set'} cruise control at ${s(a, 'speed')} mph${has(a, 'distanceToNextVehicle') ? `, keeping ${s(a, 'distanceToNextVehicle')} meters to the car ahead` : ''}`,
  set_navigation: (a) => `navigate to ${s(a, 'destination')}`,
  estimate_distance: (a) => `estimate the distance between ${s(a, 'cityA')} and ${s(a, 'cityB')}`,
  estimate_drive_feasibility_by_mileage: (a) => `check whether the car can drive ${s(a, 'distance')} miles`,
  gallon_to_liter: (a) => `convert ${s(a, 'gallon')} gallons to liters`,
  liter_to_gallon: (a) => `convert ${s(a, 'liter')} liters to gallons`,
  get_zipcode_based_on_city: (a) => `find the zip code of ${s(a, 'city')}`,
  get_outside_temperature_from_google: () => 'check the outside temperature',
  get_outside_temperature_from_weather_com: () => 'check the outside temperature',
  get_current_speed: () => 'tell me the current speed',
  // MathAPI
  add: (a) => `add ${s(a, 'a')} and ${s(a, 'b')}`,
  subtract: (a) => `subtract ${s(a, 'b')} from ${s(a, 'a')}`,
  multiply: (a) => `multiply ${s(a, 'a')} by ${s(a, 'b')}`,
  divide: (a) => `divide ${s(a, 'a')} by ${s(a, 'b')}`,
  mean: (a) => `work out the average of ${s(a, 'numbers')}`,
  standard_deviation: (a) => `work out the standard deviation of ${s(a, 'numbers')}`,
  square_root: (a) =>
    `take the square root of ${s(a, 'number')}${has(a, 'precision') ? ` to ${s(a, 'precision')} digits` : ''}`,
  absolute_value: (a) => `give me the absolute value of ${s(a, 'number')}`,
  logarithm: (a) =>
    `compute the logarithm of ${s(a, 'value')} in base ${s(a, 'base')}${has(a, 'precision') ? ` to ${s(a, 'precision')} digits` : ''}`,
  sum_values: (a) => `add up ${s(a, 'numbers')}`,
  max_value: (a) => `find the largest of ${s(a, 'numbers')}`,
  min_value: (a) => `find the smallest of ${s(a, 'numbers')}`,
  percentage: (a) => `tell me what percentage ${s(a, 'part')} is of ${s(a, 'whole')}`,
  power: (a) => `raise ${s(a, 'base')} to the power of ${s(a, 'exponent')}`,
  round_number: (a) =>
    `round ${s(a, 'number')}${has(a, 'decimal_places') ? ` to ${s(a, 'decimal_places')} decimal places` : ''}`,
};

/** One imperative clause for a call, without function or parameter names. */
export function describeCall(call: PyCall, cls: string | null): string {
  const args: Args = Object.fromEntries(namedArgs(call, cls));
  const t = TEMPLATES[call.name];
  if (t) return t(args);
  const parts = Object.entries(args).map(([k, v]) => `${words(k)} ${fmt(v)}`);
  return `please ${words(call.name)}${parts.length ? ` for ${parts.join(', ')}` : ''}`.replace(
    /^please please /,
    'please ',
  );
}

const OPENERS = ['Please', 'Could you', 'I need you to', 'Can you'];

/** A user message asking for a turn's calls. */
export function templateTurn(calls: SeedCall[], rng: Rng): string {
  const clauses = calls.map((c) => (c.call ? describeCall(c.call, c.cls) : `please ${words(c.name)}`));
  const body =
    clauses.length === 1
      ? clauses[0]!
      : clauses.length === 2
        ? `${clauses[0]}, then ${clauses[1]}`
        : `${clauses.slice(0, -1).join(', then ')}, and finally ${clauses.at(-1)}`;
  const opener = rng.pick(OPENERS);
  const clean = body.replace(/^please /, '');
  const question = opener === 'Could you' || opener === 'Can you';
  return `${opener} ${clean}${question ? '?' : '.'}`;
}

// ---- rewrite ------------------------------------------------------------------------------------

/** Collects renames between the seed's and the candidate's JSON (keys, short strings, numbers), position by position. */
function diffJson(a: unknown, b: unknown, out: Map<string, string>): void {
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length === b.length) for (const [i, x] of a.entries()) diffJson(x, b[i], out);
    return;
  }
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    if (ka.length !== kb.length) return;
    ka.forEach((k, i) => {
      if (k !== kb[i] && k.length <= 80) out.set(k, kb[i]!);
      diffJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[kb[i]!], out);
    });
    return;
  }
  if (typeof a === 'string' && typeof b === 'string' && a !== b && a.length <= 80) out.set(a, b);
  if (typeof a === 'number' && typeof b === 'number' && a !== b) out.set(String(a), String(b));
}

function argDiff(seed: SeedCall, cand: SeedCall): number {
  if (!seed.call || !cand.call) return 99;
  const a = new Map(namedArgs(seed.call, seed.cls).map(([k, v]) => [k, JSON.stringify(v)]));
  const b = namedArgs(cand.call, cand.cls);
  return b.reduce((n, [k, v]) => n + (a.get(k) === JSON.stringify(v) ? 0 : 1), Math.abs(a.size - b.length));
}

/** Pairs every candidate call with the seed call it most likely came from (same name, fewest changed arguments, in order). */
function alignCalls(seed: SeedCall[][], cand: SeedCall[][]): (SeedCall | null)[][] {
  const flat = seed.flat();
  const used = new Set<SeedCall>();
  let last = -1;
  return cand.map((turn) =>
    turn.map((c) => {
      let best: SeedCall | null = null;
      let bestCost = Number.POSITIVE_INFINITY;
      flat.forEach((sc, i) => {
        if (used.has(sc) || sc.name !== c.name) return;
        const cost = argDiff(sc, c) * 100 + (i > last ? i - last : 50 + last - i);
        if (cost < bestCost) {
          bestCost = cost;
          best = sc;
        }
      });
      if (best) {
        used.add(best);
        last = flat.indexOf(best);
      }
      return best;
    }),
  );
}

export interface RewriteInput {
  candidate: TaskRecord;
  seed?: TaskRecord;
  narrative?: string;
}

/**
 * The rewrite-off ablation's answer: one turn's message from its calls alone, from templates (no
 * seed wording to borrow, no earlier turn to refer back to).
 */
export function answerTurnQuery(input: { involved_classes: string[]; calls: string[] }, rng: Rng): TurnQuery {
  const [calls] = seedCalls({ ground_truth: [input.calls], involved_classes: input.involved_classes });
  return { content: templateTurn(calls!, rng) };
}

/** The rewrite answer: one user message per candidate turn. */
export function answerRewrite(input: RewriteInput, rng: Rng): Rewrite {
  const cand = input.candidate;
  const candCalls = seedCalls(cand);
  const texts: string[] = candCalls.map((turn) => templateTurn(turn, rng));
  const seed = input.seed;
  if (seed) {
    const seedCallList = seedCalls(seed);
    const aligned = alignCalls(seedCallList, candCalls);
    const global = new Map<string, string>();
    diffJson(seed.initial_config, cand.initial_config, global);
    const perTurn: Map<string, string>[] = candCalls.map(() => new Map());
    candCalls.forEach((turn, t) => {
      turn.forEach((c, i) => {
        const sc = aligned[t]![i];
        if (!sc?.call || !c.call) return;
        const before = new Map(namedArgs(sc.call, sc.cls));
        for (const [k, v] of namedArgs(c.call, c.cls)) {
          const old = before.get(k);
          if (!old || JSON.stringify(old) === JSON.stringify(v)) continue;
          if (old.t === 'str' && v.t === 'str') {
            if (FS_NAME_PARAMS[c.name]?.includes(k)) {
              const a = old.v.split('/');
              const b = v.v.split('/');
              if (a.length === b.length)
                for (const [j, seg] of a.entries()) if (seg !== b[j]) global.set(seg, b[j]!);
            } else if (old.v.length <= 80) global.set(old.v, v.v);
          } else if (old.t === 'num' && v.t === 'num') {
            perTurn[t]!.set(String(Number(old.text)), String(Number(v.text)));
            perTurn[t]!.set(old.text, v.text);
          }
        }
      });
    });
    candCalls.forEach((turn, t) => {
      const sources = aligned[t]!;
      if (sources.some((x) => x === null)) return;
      const seedTurns = new Set(sources.map((x) => x!.turn));
      if (seedTurns.size !== 1) return;
      const st = [...seedTurns][0]!;
      if (seedCallList[st]!.length !== turn.length) return;
      const original = seedTurnText(seed, st);
      if (!original) return;
      texts[t] = applyTextMap(original, new Map([...global, ...perTurn[t]!]));
    });
  }
  return { question: texts.map((content) => [{ role: 'user' as const, content }]) };
}

// ---- judge --------------------------------------------------------------------------------------

function salientValues(call: PyCall, cls: string | null): string[] {
  const out: string[] = [];
  const visit = (v: PyValue) => {
    if (v.t === 'str') {
      const x = v.v.trim();
      if (x.length >= 2 && x !== '..' && x !== '/' && x.length <= 60) out.push(x);
    } else if (v.t === 'num') out.push(String(Number(v.text)));
    else if (v.t === 'list') v.items.forEach(visit);
  };
  for (const [, v] of namedArgs(call, cls)) visit(v);
  return out;
}

function mentioned(value: string, text: string): boolean {
  const lower = text.toLowerCase();
  if (lower.includes(value.toLowerCase().replace(/^[@#]/, ''))) return true;
  const n = Number(value);
  if (Number.isFinite(n)) return [...text.matchAll(/-?\d+(?:\.\d+)?/g)].some((m) => Number(m[0]) === n);
  return false;
}

export interface JudgeInput {
  candidate: TaskRecord;
}

const REASONS: Record<JudgeCriterion, string> = {
  alignment: 'a user message does not state values the calls need',
  state_consistency: 'the calls do not fit the initial state',
  coherence: 'the number of user messages does not match the turns',
  naturalness: 'a user message names functions or reads like code',
  ambiguity: 'a turn is empty, which leaves its request undefined',
};

/** The judge answer: rule-based scores; `reject` forces a rejection (fault injection). */
export function answerJudge(input: JudgeInput, rng: Rng, reject: boolean): Judgement {
  const cand = input.candidate;
  const calls = seedCalls(cand);
  const texts = cand.question.map((turn) =>
    turn
      .filter((m) => m.role === 'user')
      .map((m) => m.content)
      .join(' '),
  );
  // A call is covered when the conversation so far states one of its values or names what it does
  // (a word of four letters or more of the function's name: "lock the doors" covers lockDoors).
  let seen = '';
  const perTurn = calls.map((turn, t) => {
    seen += ` ${texts[t] ?? ''}`;
    const lower = seen.toLowerCase();
    if (turn.length === 0) return 1;
    const covered = turn.filter((c) => {
      const values = c.call ? salientValues(c.call, c.cls) : [];
      const verbs = words(c.name)
        .split(' ')
        .filter((w) => w.length >= 4);
      if (values.length === 0 && verbs.length === 0) return true;
      return values.some((v) => mentioned(v, seen)) || verbs.some((w) => lower.includes(w));
    });
    return covered.length / turn.length;
  });
  const alignment = perTurn.length ? perTurn.reduce((a, b) => a + b, 0) / perTurn.length : 0;
  const names = new Set(calls.flat().map((c) => c.name));
  const codeLike = texts.some(
    (t) =>
      [...names].some((n) => new RegExp(`\\b${n}\\s*\\(`).test(t)) ||
      [...names].some((n) => (n.includes('_') || /[a-z][A-Z]/.test(n)) && t.includes(n)),
  );
  const unknown = calls.flat().some((c) => !c.cls || callName(c.text) === null);
  const configOk = Object.keys(cand.initial_config).every((k) => k in BFCL_CATALOG);
  // a miss_func turn where the withheld function arrives has no user message, by BFCL's format
  const arrivals = new Set(Object.keys(cand.missed_function ?? {}).map(Number));
  const spoken = texts.filter((_, t) => !arrivals.has(t));
  const scores: Judgement['scores'] = {
    alignment: Math.round(Math.max(0.3, alignment) * 100) / 100,
    state_consistency: unknown || !configOk ? 0.3 : 0.95,
    coherence: texts.length === calls.length && spoken.every((t) => t.trim().length > 0) ? 0.9 : 0.3,
    naturalness: codeLike ? 0.2 : texts.some((t) => t.length > 1200) ? 0.6 : 0.9,
    ambiguity: spoken.some((t) => t.trim().length === 0) ? 0.4 : 1,
  };
  const reasons: string[] = [];
  if (reject) {
    const criterion = rng.pick(JUDGE_CRITERIA);
    scores[criterion] = Math.round((0.15 + rng.next() * 0.25) * 100) / 100;
    reasons.push(`${criterion}: ${REASONS[criterion]} (a rejection injected by the stand-in generator)`);
  }
  for (const c of JUDGE_CRITERIA)
    if (scores[c] < 0.5 && !reasons.some((r) => r.startsWith(c))) reasons.push(`${c}: ${REASONS[c]}`);
  const values = Object.values(scores);
  const accept = values.every((v) => v >= 0.5) && values.reduce((a, b) => a + b, 0) / values.length >= 0.7;
  return { verdict: accept ? 'accept' : 'reject', scores, reasons };
}

// ---- refine -------------------------------------------------------------------------------------

const CLASS_OF: Record<JudgeCriterion, RefineClass> = {
  alignment: 'query_misaligned',
  state_consistency: 'state_inconsistent',
  coherence: 'incoherent',
  naturalness: 'unnatural',
  ambiguity: 'ambiguity_malformed',
};

export interface RefineInput {
  candidate: TaskRecord;
  judgement: Judgement;
}

/** The refine answer: the weakest criterion names the problem; the questions are rewritten from the calls. */
export function answerRefine(input: RefineInput, rng: Rng): Refinement {
  const { candidate, judgement } = input;
  const weakest = [...JUDGE_CRITERIA].sort((a, b) => judgement.scores[a] - judgement.scores[b])[0]!;
  const classification = CLASS_OF[weakest];
  if (classification === 'state_inconsistent') return { classification: 'unfixable', candidate };
  const question = seedCalls(candidate).map((turn) => [
    { role: 'user' as const, content: templateTurn(turn, rng) },
  ]);
  return { classification, candidate: { ...candidate, question } };
}
