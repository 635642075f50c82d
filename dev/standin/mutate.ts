// Rule-based mutation of a real BFCL task: the stand-in's "parameters" answer. Every rule keeps
// the task executable in the environment:
//  - file-system names (files and folders of initial_config, and those the calls create) are
//    renamed consistently across the config tree and every call that names them;
//  - MessageAPI contact names (user_map keys, get_user_id, add_contact) are renamed;
//  - TwitterAPI credentials (username, password) are renamed in the config and the login calls;
//  - TravelAPI client credentials (client id, secret, refresh token) are renamed in the calls;
//  - TicketAPI ticket ids of three or more digits are renumbered in the queue and the calls;
//  - literal values the environment accepts, and that the user states in that turn, are varied:
//    tail line counts, order sizes and prices, fund and fuel amounts (scaled down where a balance
//    or the tank's capacity bounds them), travel budgets (up), amounts to convert, cruise speeds
//    (multiples of 5), climate temperatures, the house number of a navigation address;
//  - free-text arguments and contents follow the renames, so the task stays coherent.
import type { TaskRecord } from '../../domain/task.js';
import { formatCall, isFloatText, num, type PyCall, type PyValue } from './pycall.js';
import type { Rng } from './rng.js';
import { argOf, namedArgs, type SeedCall, withArg } from './seed.js';

type Json = unknown;
type Config = Record<string, Record<string, Json>>;

export interface MutatedTask {
  initial_config: Config;
  ground_truth: string[][];
  /** Which rules changed something, e.g. "fs-rename final_report.pdf→final_summary.pdf". */
  rules: string[];
}

/** File-system parameters that hold a file or folder name (or a path of names). */
export const FS_NAME_PARAMS: Record<string, string[]> = {
  cd: ['folder'],
  mkdir: ['dir_name'],
  touch: ['file_name'],
  echo: ['file_name'],
  cat: ['file_name'],
  find: ['path', 'name'],
  wc: ['file_name'],
  sort: ['file_name'],
  grep: ['file_name'],
  tail: ['file_name'],
  diff: ['file_name1', 'file_name2'],
  mv: ['source', 'destination'],
  rm: ['file_name'],
  rmdir: ['dir_name'],
  cp: ['source', 'destination'],
};
const FS_CREATING: Record<string, string[]> = {
  mkdir: ['dir_name'],
  touch: ['file_name'],
  mv: ['destination'],
  cp: ['destination'],
};
/** Parameters whose text is free prose: renames are carried into it. */
const FREE_TEXT_PARAMS = new Set([
  'content',
  'message',
  'comment_content',
  'description',
  'title',
  'resolution',
]);
const SPECIAL_NAMES = new Set(['', '.', '..', '/', '~']);
const FS_FORBIDDEN = /[|/\\?%*:"><]/;

const SYNONYMS: Record<string, string> = {
  report: 'summary',
  summary: 'digest',
  document: 'paper',
  documents: 'papers',
  documentation: 'manuals',
  archive: 'vault',
  archives: 'vaults',
  archived: 'stored',
  draft: 'sketch',
  drafts: 'sketches',
  notes: 'memos',
  note: 'memo',
  project: 'venture',
  projects: 'ventures',
  data: 'records',
  dataset: 'corpus',
  log: 'journal',
  logs: 'journals',
  temp: 'scratch',
  tmp: 'scratch',
  backup: 'snapshot',
  backups: 'snapshots',
  analysis: 'review',
  research: 'study',
  budget: 'spending',
  file: 'record',
  files: 'records',
  test: 'trial',
  tests: 'trials',
  config: 'settings',
  experiment: 'trial',
  annual: 'yearly',
  monthly: 'weekly',
  quarterly: 'seasonal',
  financial: 'fiscal',
  finance: 'treasury',
  history: 'chronicle',
  ideas: 'concepts',
  idea: 'concept',
  team: 'crew',
  meeting: 'sync',
  workspace: 'workbench',
  results: 'outcomes',
  result: 'outcome',
  images: 'pictures',
  photos: 'pictures',
  old: 'legacy',
  previous: 'earlier',
  final: 'closing',
  overview: 'outline',
  plan: 'roadmap',
  proposal: 'pitch',
  presentation: 'deck',
  invoice: 'bill',
  contract: 'agreement',
  reports: 'summaries',
  script: 'routine',
  scripts: 'routines',
  deploy: 'release',
  readme: 'guide',
  summaries: 'digests',
  paper: 'article',
  papers: 'articles',
  lecture: 'seminar',
  assignment: 'exercise',
  homework: 'coursework',
  music: 'audio',
  travel: 'trip',
  recipe: 'dish',
  recipes: 'dishes',
  feedback: 'comments',
  progress: 'status',
  stats: 'metrics',
  statistics: 'metrics',
  sales: 'revenue',
};
const SUFFIXES = ['v2', '2025', 'old', 'final', 'copy', 'new', 'alt', 'b'];
const CONTACT_NAMES = [
  'Olivia',
  'Liam',
  'Noah',
  'Ava',
  'Mia',
  'Ethan',
  'Lucas',
  'Amelia',
  'Harper',
  'Elena',
  'Jonas',
  'Priya',
  'Mateo',
  'Yuki',
  'Nora',
  'Omar',
  'Leila',
  'Tomas',
  'Ines',
  'Felix',
];
const HANDLES = [
  'data_dana',
  'code_weaver',
  'night_owl_dev',
  'trail_kim',
  'pixel_pete',
  'market_maven',
  'sky_writer',
];

function matchCase(model: string, word: string): string {
  if (model.length > 1 && model === model.toUpperCase()) return word.toUpperCase();
  if (model[0] === model[0]!.toUpperCase()) return word[0]!.toUpperCase() + word.slice(1);
  return word;
}

/** A new, valid, unused file or folder name in the style of `name` (extension kept). */
export function renameFsName(name: string, rng: Rng, taken: Set<string>): string {
  const hidden = name.startsWith('.');
  const body = hidden ? name.slice(1) : name;
  const dot = body.lastIndexOf('.');
  const stem = dot > 0 ? body.slice(0, dot) : body;
  const ext = dot > 0 ? body.slice(dot) : '';
  const words = [...stem.matchAll(/[A-Za-z]+/g)];
  const swappable = words.filter((m) => SYNONYMS[m[0].toLowerCase()]);
  let next = stem;
  if (swappable.length > 0) {
    const chosen = swappable.filter(() => rng.chance(0.7));
    const use = chosen.length > 0 ? chosen : [rng.pick(swappable)];
    // Replace from the end so earlier indices stay valid.
    for (const m of [...use].sort((a, b) => b.index! - a.index!)) {
      next =
        next.slice(0, m.index) +
        matchCase(m[0], SYNONYMS[m[0].toLowerCase()]!) +
        next.slice(m.index! + m[0].length);
    }
  } else {
    const suffix = rng.pick(SUFFIXES);
    if (/[a-z][A-Z]/.test(stem) || /^[A-Z][a-z]/.test(stem))
      next = stem + suffix[0]!.toUpperCase() + suffix.slice(1);
    else if (stem.includes('-')) next = `${stem}-${suffix}`;
    else next = `${stem}_${suffix}`;
  }
  let out = (hidden ? '.' : '') + next + ext;
  for (let n = 2; taken.has(out) || FS_FORBIDDEN.test(out) || out === name; n++) {
    out = `${hidden ? '.' : ''}${next.replace(FS_FORBIDDEN, '')}${n}${ext}`;
  }
  taken.add(out);
  return out;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Replaces whole occurrences of the map's keys in a text (not inside longer names: the characters
 * around a match may not be letters, digits or underscores), longest key first, in one pass.
 */
export function applyTextMap(text: string, map: ReadonlyMap<string, string>): string {
  const keys = [...map.keys()].filter((k) => k.length > 0).sort((a, b) => b.length - a.length);
  if (keys.length === 0) return text;
  const re = new RegExp(`(?<![A-Za-z0-9_])(?:${keys.map(escapeRe).join('|')})(?![A-Za-z0-9_])`, 'g');
  return text.replace(re, (m) => map.get(m) ?? m);
}

function deepClone<T>(v: T): T {
  return structuredClone(v);
}

/** Every file and folder name of a GorillaFileSystem config (the top folder included). */
function fsConfigNames(fs: Record<string, Json> | undefined): Set<string> {
  const names = new Set<string>();
  const walk = (entries: unknown) => {
    if (!entries || typeof entries !== 'object') return;
    for (const [k, v] of Object.entries(entries as Record<string, unknown>)) {
      names.add(k);
      const contents = (v as { contents?: unknown } | null)?.contents;
      if (contents) walk(contents);
    }
  };
  walk(fs?.root);
  return names;
}

function renameFsTree(
  entries: unknown,
  map: ReadonlyMap<string, string>,
  text: ReadonlyMap<string, string>,
): unknown {
  if (!entries || typeof entries !== 'object' || Array.isArray(entries)) return entries;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(entries as Record<string, unknown>)) {
    let node = v;
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const n = { ...(v as Record<string, unknown>) };
      if (n.contents !== undefined) n.contents = renameFsTree(n.contents, map, text);
      if (typeof n.content === 'string') n.content = applyTextMap(n.content, text);
      node = n;
    }
    out[map.get(k) ?? k] = node;
  }
  return out;
}

/** Replaces every string equal to `from` (values only) in a JSON value. */
function replaceStrings(v: unknown, from: string, to: string): unknown {
  if (v === from) return to;
  if (Array.isArray(v)) return v.map((x) => replaceStrings(x, from, to));
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, replaceStrings(x, from, to)]));
  }
  return v;
}

/** Applies the text map to every string of a JSON value (values only). */
function mapStrings(v: unknown, map: ReadonlyMap<string, string>): unknown {
  if (typeof v === 'string') return applyTextMap(v, map);
  if (Array.isArray(v)) return v.map((x) => mapStrings(x, map));
  if (v && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapStrings(x, map)]));
  return v;
}

const str = (v: PyValue | undefined): string | undefined => (v?.t === 'str' ? v.v : undefined);

interface Working {
  calls: { seed: SeedCall; call: PyCall | null; changed: boolean }[][];
  config: Config;
  text: Map<string, string>;
  rules: string[];
}

function eachCall(w: Working, fn: (c: Working['calls'][number][number]) => void): void {
  for (const turn of w.calls) for (const c of turn) if (c.call) fn(c);
}

function setArg(c: Working['calls'][number][number], param: string, value: PyValue): void {
  const next = withArg(c.call!, c.seed.cls, param, value);
  if (next !== c.call) {
    c.call = next;
    c.changed = true;
  }
}

function renameFileSystem(w: Working, rng: Rng): void {
  const fs = w.config.GorillaFileSystem;
  if (!fs) return;
  const inConfig = fsConfigNames(fs);
  const candidates = new Set<string>();
  for (const n of inConfig) if (!SPECIAL_NAMES.has(n)) candidates.add(n);
  eachCall(w, (c) => {
    for (const p of FS_CREATING[c.call!.name] ?? []) {
      const v = str(argOf(c.call!, c.seed.cls, p));
      if (v && !v.includes('/') && !SPECIAL_NAMES.has(v)) candidates.add(v);
    }
  });
  // Prefer names the calls use: renaming those is what the agent notices.
  const used = new Set<string>();
  eachCall(w, (c) => {
    for (const p of FS_NAME_PARAMS[c.call!.name] ?? []) {
      const v = str(argOf(c.call!, c.seed.cls, p));
      if (v) for (const seg of v.split('/')) used.add(seg);
    }
  });
  const list = [...candidates].sort();
  const chosen = list.filter((n) => rng.chance(used.has(n) ? 0.7 : 0.4));
  const usedList = list.filter((n) => used.has(n));
  if (chosen.length === 0 && usedList.length > 0) chosen.push(rng.pick(usedList));
  if (chosen.length === 0) return;
  const taken = new Set([...inConfig, ...candidates]);
  const map = new Map<string, string>();
  for (const n of chosen) map.set(n, renameFsName(n, rng, taken));
  for (const [a, b] of map) w.text.set(a, b);
  w.config.GorillaFileSystem = { ...fs, root: renameFsTree(fs.root, map, w.text) };
  eachCall(w, (c) => {
    for (const p of FS_NAME_PARAMS[c.call!.name] ?? []) {
      const v = str(argOf(c.call!, c.seed.cls, p));
      if (v === undefined) continue;
      const next = v
        .split('/')
        .map((seg) => map.get(seg) ?? seg)
        .join('/');
      if (next !== v) setArg(c, p, { t: 'str', v: next });
    }
  });
  w.rules.push(`fs-rename ${[...map].map(([a, b]) => `${a}→${b}`).join(', ')}`);
}

function renameContacts(w: Working, rng: Rng): void {
  const msg = w.config.MessageAPI;
  const userMap = msg?.user_map as Record<string, string> | undefined;
  const inMap = userMap ? Object.keys(userMap) : [];
  const added: string[] = [];
  eachCall(w, (c) => {
    if (c.call!.name === 'add_contact') {
      const v = str(argOf(c.call!, c.seed.cls, 'user_name'));
      if (v && !inMap.includes(v)) added.push(v);
    }
  });
  const chosen = [...inMap, ...added].filter(() => rng.chance(0.6));
  if (chosen.length === 0) return;
  const free = CONTACT_NAMES.filter((n) => !inMap.includes(n) && !added.includes(n));
  const map = new Map<string, string>();
  for (const n of chosen) {
    if (free.length === 0) break;
    const pickIdx = rng.int(0, free.length - 1);
    map.set(n, free.splice(pickIdx, 1)[0]!);
  }
  if (userMap && msg) {
    msg.user_map = Object.fromEntries(Object.entries(userMap).map(([k, v]) => [map.get(k) ?? k, v]));
  }
  eachCall(w, (c) => {
    const param =
      c.call!.name === 'get_user_id' ? 'user' : c.call!.name === 'add_contact' ? 'user_name' : null;
    if (!param) return;
    const v = str(argOf(c.call!, c.seed.cls, param));
    if (v && map.has(v)) setArg(c, param, { t: 'str', v: map.get(v)! });
  });
  for (const [a, b] of map) w.text.set(a, b);
  w.rules.push(`contact-rename ${[...map].map(([a, b]) => `${a}→${b}`).join(', ')}`);
}

function renameTwitterCredentials(w: Working, rng: Rng): void {
  const tw = w.config.TwitterAPI;
  const username = typeof tw?.username === 'string' ? tw.username : undefined;
  if (!tw || !username || !rng.chance(0.6)) return;
  const handle = HANDLES.filter((h) => h !== username);
  const newUser = rng.pick(handle);
  const password = typeof tw.password === 'string' ? tw.password : undefined;
  const alphabet = 'ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz23456789';
  const newPassword = password
    ? Array.from({ length: Math.max(8, password.length) }, (_, i) =>
        i % 4 === 3 ? rng.pick(['#', '$', '!', '@']) : alphabet[rng.int(0, alphabet.length - 1)],
      ).join('')
    : undefined;
  let next = replaceStrings(tw, username, newUser) as Record<string, Json>;
  if (password && newPassword) next = { ...next, password: newPassword };
  w.config.TwitterAPI = next;
  eachCall(w, (c) => {
    if (c.call!.name !== 'authenticate_twitter' && c.call!.name !== 'ticket_login') return;
    if (str(argOf(c.call!, c.seed.cls, 'username')) === username)
      setArg(c, 'username', { t: 'str', v: newUser });
    if (password && newPassword && str(argOf(c.call!, c.seed.cls, 'password')) === password) {
      setArg(c, 'password', { t: 'str', v: newPassword });
    }
  });
  w.text.set(username, newUser);
  if (password && newPassword) w.text.set(password, newPassword);
  w.rules.push(`twitter-credentials ${username}→${newUser}`);
}

/** A new credential in the style of the old one: its digits redrawn, or digits appended. */
function newCredential(old: string, rng: Rng): string {
  const digits = (old.match(/\d/g) ?? []).length;
  if (digits >= 2) {
    for (;;) {
      const next = old.replace(/\d/g, () => String(rng.int(0, 9)));
      if (next !== old) return next;
    }
  }
  return `${old}${/[_-]/.test(old) ? '_' : ''}${rng.int(100, 999)}`;
}

const TRAVEL_CREDENTIALS = ['client_id', 'client_secret', 'refresh_token'];

/** TravelAPI client credentials are free strings: renamed wherever the calls repeat them. */
function renameTravelCredentials(w: Working, rng: Rng): void {
  const map = new Map<string, string>();
  eachCall(w, (c) => {
    if (c.call!.name !== 'authenticate_travel') return;
    for (const p of TRAVEL_CREDENTIALS) {
      const v = str(argOf(c.call!, c.seed.cls, p));
      if (v && v.length >= 3 && !map.has(v) && rng.chance(0.7)) map.set(v, newCredential(v, rng));
    }
  });
  if (map.size === 0) return;
  eachCall(w, (c) => {
    for (const [param, v] of namedArgs(c.call!, c.seed.cls)) {
      if (v.t === 'str' && map.has(v.v)) setArg(c, param, { t: 'str', v: map.get(v.v)! });
    }
  });
  for (const [a, b] of map) w.text.set(a, b);
  w.rules.push(`travel-credentials ${[...map].map(([a, b]) => `${a}→${b}`).join(', ')}`);
}

const TICKET_ID_CALLS = new Set(['get_ticket', 'close_ticket', 'resolve_ticket', 'edit_ticket']);

function renumberTickets(w: Working, rng: Rng): void {
  const queue = w.config.TicketAPI?.ticket_queue;
  if (!Array.isArray(queue)) return;
  const ids = queue
    .map((t) => (t as { id?: unknown }).id)
    .filter((id): id is number => typeof id === 'number' && Number.isInteger(id) && id >= 100);
  const referenced = new Set<number>();
  eachCall(w, (c) => {
    if (!TICKET_ID_CALLS.has(c.call!.name)) return;
    const v = argOf(c.call!, c.seed.cls, 'ticket_id');
    if (v?.t === 'num') referenced.add(Number(v.text));
  });
  const chosen = ids.filter((id) => referenced.has(id) && rng.chance(0.7));
  if (chosen.length === 0) return;
  const all = new Set(ids);
  const map = new Map<number, number>();
  for (const id of chosen) {
    let n: number;
    do n = rng.int(10_000, 999_999);
    while (all.has(n));
    all.add(n);
    map.set(id, n);
  }
  w.config.TicketAPI!.ticket_queue = queue.map((t) => {
    const id = (t as { id?: unknown }).id;
    return typeof id === 'number' && map.has(id) ? { ...(t as object), id: map.get(id) } : t;
  });
  eachCall(w, (c) => {
    if (!TICKET_ID_CALLS.has(c.call!.name)) return;
    const v = argOf(c.call!, c.seed.cls, 'ticket_id');
    if (v?.t === 'num' && map.has(Number(v.text)))
      setArg(c, 'ticket_id', num(map.get(Number(v.text))!, false));
  });
  for (const [a, b] of map) w.text.set(String(a), String(b));
  w.rules.push(`ticket-renumber ${[...map].map(([a, b]) => `${a}→${b}`).join(', ')}`);
}

/** The user text of a seed turn, with the turns before it that had no calls (their request is answered here). */
export function seedTurnText(seed: Pick<TaskRecord, 'question' | 'ground_truth'>, turn: number): string {
  let start = turn;
  while (start > 0 && (seed.ground_truth[start - 1]?.length ?? 0) === 0) start--;
  const parts: string[] = [];
  for (let t = start; t <= turn; t++) {
    for (const m of seed.question[t] ?? [])
      if (m.role === 'user' && m.content.trim()) parts.push(m.content.trim());
  }
  return parts.join(' ');
}

const numbersIn = (text: string): number[] => [...text.matchAll(/\d+(?:\.\d+)?/g)].map((m) => Number(m[0]));

function varyNumbers(w: Working, seed: TaskRecord, rng: Rng): void {
  eachCall(w, (c) => {
    const call = c.call!;
    // Only values the user states in that turn are varied, so the rewrite can carry the change into the text.
    const stated = c.seed.turn >= 0 ? numbersIn(seedTurnText(seed, c.seed.turn)) : [];
    const vary = (param: string, next: (old: number, float: boolean) => number | null) => {
      const v = argOf(call, c.seed.cls, param);
      if (v?.t !== 'num') return;
      const float = isFloatText(v.text);
      const old = Number(v.text);
      if (!stated.includes(old)) return;
      const n = next(old, float);
      if (n === null || n === old || !(n > 0)) return;
      setArg(c, param, num(n, float));
      w.rules.push(`vary ${call.name}.${param} ${old}→${n}`);
    };
    const scaled =
      (factors: number[], minimum = 1) =>
      (old: number, float: boolean) => {
        const n = old * rng.pick(factors);
        return float ? Math.round(n * 100) / 100 : Math.max(minimum, Math.round(n));
      };
    switch (call.name) {
      case 'tail':
        if (rng.chance(0.7)) vary('lines', (old) => rng.pick([3, 5, 8, 10, 15].filter((x) => x !== old)));
        break;
      case 'place_order':
        // Fewer shares or a lower limit price always fit the balance a buy needs.
        if (rng.chance(0.6))
          vary('amount', (old) => (old > 1 ? scaled([0.5, 0.6, 0.75, 0.8])(old, false) : null));
        if (rng.chance(0.4)) vary('price', scaled([0.9, 0.95, 0.98]));
        break;
      case 'compute_exchange_rate':
        if (rng.chance(0.6)) vary('value', scaled([0.5, 0.8, 1.25, 2]));
        break;
      case 'set_budget_limit':
        // A higher budget never blocks a later booking.
        if (rng.chance(0.6)) vary('budget_limit', scaled([1.2, 1.5, 2]));
        break;
      case 'fund_account':
        if (rng.chance(0.6)) vary('amount', scaled([0.5, 0.8, 1.25, 1.5]));
        break;
      case 'withdraw_funds':
      case 'fillFuelTank':
        // Less is always accepted: a balance or the tank's capacity bounds these from above.
        if (rng.chance(0.6))
          vary(call.name === 'fillFuelTank' ? 'fuelAmount' : 'amount', scaled([0.5, 0.6, 0.8]));
        break;
      case 'setCruiseControl':
        if (rng.chance(0.6))
          vary('speed', (old) => rng.pick([45, 50, 55, 60, 65, 70, 75].filter((x) => x !== old)));
        break;
      case 'adjustClimateControl':
        if (rng.chance(0.6)) vary('temperature', (old) => old + rng.pick([-3, -2, 2, 3]));
        break;
      case 'set_navigation': {
        const dest = argOf(call, c.seed.cls, 'destination');
        const m = dest?.t === 'str' ? /^(\d+)(\s.*)$/.exec(dest.v) : null;
        if (dest?.t === 'str' && m && rng.chance(0.7)) {
          let n = rng.int(10, 9999);
          if (String(n) === m[1]) n += 1;
          const next = `${n}${m[2]}`;
          setArg(c, 'destination', { t: 'str', v: next });
          w.text.set(dest.v, next);
          w.rules.push(`vary set_navigation.destination ${dest.v}→${next}`);
        }
        break;
      }
    }
  });
}

function carryIntoFreeText(w: Working): void {
  if (w.text.size === 0) return;
  eachCall(w, (c) => {
    for (const [param, v] of namedArgs(c.call!, c.seed.cls)) {
      if (!FREE_TEXT_PARAMS.has(param) || v.t !== 'str') continue;
      const next = applyTextMap(v.v, w.text);
      if (next !== v.v) setArg(c, param, { t: 'str', v: next });
    }
  });
  // Prose inside the state (messages, tweets, comments) follows the names too.
  for (const cls of ['MessageAPI', 'TwitterAPI', 'TicketAPI'] as const) {
    const cfg = w.config[cls];
    if (!cfg) continue;
    for (const key of ['inbox', 'tweets', 'comments', 'ticket_queue']) {
      if (cfg[key] !== undefined) cfg[key] = mapStrings(cfg[key], w.text);
    }
  }
}

/**
 * Mutates the selected seed calls (one list per planned turn) and the seed's initial_config by
 * the rules above; the result's ground truth has the same shape as `selected`.
 */
export function mutateTask(seed: TaskRecord, selected: SeedCall[][], rng: Rng): MutatedTask {
  const w: Working = {
    calls: selected.map((turn) => turn.map((s) => ({ seed: s, call: s.call, changed: false }))),
    config: deepClone(seed.initial_config) as Config,
    text: new Map(),
    rules: [],
  };
  renameFileSystem(w, rng.fork('fs'));
  renameContacts(w, rng.fork('contacts'));
  renameTwitterCredentials(w, rng.fork('twitter'));
  renumberTickets(w, rng.fork('tickets'));
  renameTravelCredentials(w, rng.fork('travel'));
  varyNumbers(w, seed, rng.fork('numbers'));
  carryIntoFreeText(w);
  return {
    initial_config: w.config,
    ground_truth: w.calls.map((turn) =>
      turn.map((c) => (c.changed && c.call ? formatCall(c.call) : c.seed.text)),
    ),
    rules: w.rules,
  };
}
