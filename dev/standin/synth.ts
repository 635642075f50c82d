// The stand-in's plan, parameter and config-patch answers: deterministic, rule-based edits of the
// real BFCL seed task found in the request, so that the environment executor really validates
// them. (The stand-in replaces vLLM in tests and the demo only.)
import type { Failure } from '../../activities/executor-client.js';
import {
  DEFAULT_LIMITS,
  type GeneratedCalls,
  isBlocked,
  type Plan,
  type SynthesisLimits,
} from '../../activities/llm/schemas.js';
import { classOf, isReadOnly } from '../../domain/bfcl-catalog.js';
import type { TaskRecord } from '../../domain/task.js';
import { mutateTask } from './mutate.js';
import { type PyValue, tryParseCall } from './pycall.js';
import type { Rng } from './rng.js';
import { argOf, type SeedCall, seedCalls, type Unit, unitsOf } from './seed.js';

/** Argument-free calls that leave the state alone, for seeds with a single call. */
export const PADDING_CALLS: Record<string, string> = {
  GorillaFileSystem: 'pwd()',
  MathAPI: 'absolute_value(number=-7.5)',
  MessageAPI: 'list_users()',
  TwitterAPI: 'posting_get_login_status()',
  TicketAPI: 'ticket_get_login_status()',
  TradingBot: 'get_current_time()',
  TravelAPI: 'list_all_airports()',
  VehicleControlAPI: 'get_current_speed()',
};

const words = (name: string) =>
  name
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .replace(/_/g, ' ')
    .toLowerCase();

const CLASS_NOUNS: Record<string, string> = {
  GorillaFileSystem: 'file system',
  MathAPI: 'calculator',
  MessageAPI: 'messaging workspace',
  TwitterAPI: 'social network account',
  TicketAPI: 'support ticket system',
  TradingBot: 'trading account',
  TravelAPI: 'travel booking service',
  VehicleControlAPI: 'car',
};

function syntheticCall(cls: string, text: string): SeedCall {
  const call = tryParseCall(text);
  const name = call?.name ?? text;
  return { turn: -1, index: 0, text, call, name, cls, readOnly: isReadOnly(cls, name) };
}

function label(u: Unit, all: SeedCall[][]): string {
  if (u.seedTurn < 0) return 'extra';
  const whole = all[u.seedTurn]!.length;
  const first = u.calls[0]!.index + 1;
  const last = u.calls[u.calls.length - 1]!.index + 1;
  return first === 1 && last === whole && u.calls.length === whole
    ? `${u.seedTurn + 1}`
    : `${u.seedTurn + 1}:${first}-${last}`;
}

export interface PlanInput {
  seed: TaskRecord;
  blocklist?: string[];
  limits?: Partial<SynthesisLimits>;
}

/**
 * Plan: a prefix of the seed's turns (turns of more than maxCalls calls split into near-equal
 * parts), as many as the seed has or one fewer, within 2–5; a read-only turn may be left out and two adjacent read-only turns may swap
 * places; blocklisted functions are avoided (a read-only turn holding one is left out, the plan
 * stops before a state-changing one). The narrative names the seed turns it follows.
 */
export function answerPlan(input: PlanInput, rng: Rng): Plan {
  const seed = input.seed;
  const limits = { ...DEFAULT_LIMITS, ...input.limits };
  const blocklist = [...(input.blocklist ?? []), ...(seed.excluded_function ?? [])];
  const all = seedCalls(seed);
  const units = unitsOf(seed, limits.maxCallsPerTurn, limits.minTurns);
  const blocked = (c: SeedCall) => (c.cls ? isBlocked(blocklist, c.cls, c.name) : blocklist.includes(c.name));
  // As many turns as the seed has units, or one fewer, within the limits: the method's plan follows
  // the seed's structure (domain/structure.ts checks it).
  const clampTurns = (n: number) => Math.max(limits.minTurns, Math.min(limits.maxTurns, n));
  const target = rng.int(clampTurns(units.length - 1), clampTurns(units.length));
  const sel: Unit[] = [];
  const dropped: string[] = [];
  for (let i = 0; i < units.length && sel.length < target; i++) {
    let u = units[i]!;
    if (u.calls.some(blocked)) {
      if (u.readOnly) {
        dropped.push(label(u, all));
        continue;
      }
      if (sel.length >= limits.minTurns) break;
      const kept = u.calls.filter((c) => !blocked(c));
      if (kept.length === 0) continue;
      u = { ...u, calls: kept };
    }
    const remaining = units.length - i - 1;
    if (u.readOnly && sel.length > 0 && remaining >= target - sel.length && rng.chance(0.25)) {
      dropped.push(label(u, all));
      continue;
    }
    sel.push(u);
  }
  let swapped = false;
  const pairs = sel.flatMap((u, i) => (i + 1 < sel.length && u.readOnly && sel[i + 1]!.readOnly ? [i] : []));
  if (pairs.length > 0 && rng.chance(0.5)) {
    const i = rng.pick(pairs);
    [sel[i], sel[i + 1]] = [sel[i + 1]!, sel[i]!];
    swapped = true;
  }
  // A seed with a single call: add state-neutral calls of its classes.
  for (let k = 0; sel.length < limits.minTurns && k < seed.involved_classes.length * 2; k++) {
    const cls = seed.involved_classes[k % seed.involved_classes.length]!;
    const pad = PADDING_CALLS[cls];
    if (pad && !blocked(syntheticCall(cls, pad))) {
      sel.push({ label: 'extra', seedTurn: -1, calls: [syntheticCall(cls, pad)], readOnly: true });
    }
  }
  const functions = sel.map((u) =>
    u.calls.map((c) => ({ class: c.cls ?? seed.involved_classes[0]!, name: c.name })),
  );
  const classes = seed.involved_classes.map((c) => CLASS_NOUNS[c] ?? c);
  const verbs = [...new Set(sel.flatMap((u) => u.calls.map((c) => words(c.name))))].slice(0, 4);
  const narrative =
    `A user working with their ${classes.join(' and ')} wants to ${verbs.join(', ')} in ${sel.length} steps, ` +
    `each building on the state the previous one left. ` +
    `It follows seed turns ${sel.map((u) => label(u, all)).join(', ')} of ${seed.id}` +
    (dropped.length ? `, leaving out the lookup turn(s) ${dropped.join(', ')}` : '') +
    (swapped ? ', with two lookups in swapped order' : '') +
    '.';
  return { functions, narrative };
}

const PROVENANCE = /follows seed turns ((?:\d+(?::\d+-\d+)?|extra)(?:, (?:\d+(?::\d+-\d+)?|extra))*)/;

/** The seed calls each plan turn was drawn from, by the narrative's provenance or by name. */
export function selectCalls(plan: Plan, seed: TaskRecord): SeedCall[][] {
  const all = seedCalls(seed);
  const labels = PROVENANCE.exec(plan.narrative)?.[1]?.split(', ');
  const pick = (pool: SeedCall[], fn: { class: string; name: string }, used: Set<SeedCall>): SeedCall => {
    const found = pool.find((c) => c.name === fn.name && !used.has(c));
    if (found) {
      used.add(found);
      return found;
    }
    const cls = classOf(fn.name, seed.involved_classes) ?? fn.class;
    const pad = PADDING_CALLS[cls];
    return syntheticCall(cls, pad && tryParseCall(pad)?.name === fn.name ? pad : `${fn.name}()`);
  };
  if (labels && labels.length === plan.functions.length) {
    return plan.functions.map((turn, i) => {
      const m = /^(\d+)(?::(\d+)-(\d+))?$/.exec(labels[i]!);
      const calls = m ? (all[Number(m[1]) - 1] ?? []) : [];
      const pool = m?.[2] ? calls.slice(Number(m[2]) - 1, Number(m[3])) : calls;
      const used = new Set<SeedCall>();
      return turn.map((fn) => pick(pool, fn, used));
    });
  }
  // No provenance (a plan from elsewhere): match names in order over the whole seed.
  const flat = all.flat();
  let at = 0;
  return plan.functions.map((turn) =>
    turn.map((fn) => {
      const i = flat.findIndex((c, k) => k >= at && c.name === fn.name);
      if (i < 0) return pick([], fn, new Set());
      at = i + 1;
      return flat[i]!;
    }),
  );
}

export interface ParamsInput {
  plan: Plan;
  seed: TaskRecord;
}

/** Parameters: the plan's seed calls and the seed's initial_config, mutated by the rules of mutate.ts. */
export function answerParams(input: ParamsInput, rng: Rng): GeneratedCalls & { rules: string[] } {
  const selected = selectCalls(input.plan, input.seed);
  return mutateTask(input.seed, selected, rng);
}

// ---- config patch -------------------------------------------------------------------------------

type Dir = { type?: string; contents?: Record<string, unknown> };

function fsDir(config: Record<string, Record<string, unknown>>, path: string[]): Dir | null {
  const root = config.GorillaFileSystem?.root as Record<string, Dir> | undefined;
  const top = root ? Object.values(root)[0] : undefined;
  let dir: Dir | undefined = top;
  for (const seg of path) {
    const next = dir?.contents?.[seg] as Dir | undefined;
    if (next?.type !== 'directory') return null;
    dir = next;
  }
  return dir ?? null;
}

const FS_READS: Record<string, { params: string[]; kind: 'file' | 'directory' }> = {
  cd: { params: ['folder'], kind: 'directory' },
  rmdir: { params: ['dir_name'], kind: 'directory' },
  cat: { params: ['file_name'], kind: 'file' },
  grep: { params: ['file_name'], kind: 'file' },
  tail: { params: ['file_name'], kind: 'file' },
  wc: { params: ['file_name'], kind: 'file' },
  sort: { params: ['file_name'], kind: 'file' },
  echo: { params: ['file_name'], kind: 'file' },
  rm: { params: ['file_name'], kind: 'file' },
  diff: { params: ['file_name1', 'file_name2'], kind: 'file' },
  mv: { params: ['source'], kind: 'file' },
  cp: { params: ['source'], kind: 'file' },
};

export interface PatchInput {
  candidate: TaskRecord;
  failure: Failure;
}

/**
 * Config patch: repairs the state for the failures it recognises — a missing file or folder is
 * created in the folder the calls were in (found by replaying the `cd` calls over the config
 * tree), an existing one that blocks mkdir/touch is removed, a missing contact is added to
 * MessageAPI's user_map, a TradingBot balance too small for an order is raised. Anything else
 * comes back unchanged (the caller's repair budget ends it).
 */
export function answerPatch(input: PatchInput): { initial_config: Record<string, Record<string, unknown>> } {
  const { candidate, failure } = input;
  const config = structuredClone(candidate.initial_config) as Record<string, Record<string, unknown>>;
  const calls = seedCalls(candidate);
  const failed = calls[failure.turn]?.[failure.index];
  const reason = failure.reason;
  if (failed?.call && failed.cls === 'GorillaFileSystem') {
    const path: string[] = [];
    for (const turn of calls) {
      for (const c of turn) {
        if (c.turn > failure.turn || (c.turn === failure.turn && c.index >= failure.index)) break;
        if (c.call?.name !== 'cd') continue;
        const folder = argOf(c.call, c.cls, 'folder');
        if (folder?.t !== 'str') continue;
        for (const seg of folder.v.split('/')) {
          if (seg === '..') path.pop();
          else if (seg === '' && folder.v.startsWith('/')) path.length = 0;
          else if (seg !== '.' && seg !== '') path.push(seg);
        }
      }
    }
    const dir = fsDir(config, path);
    const spec = FS_READS[failed.name];
    if (dir?.contents && /No such file|No such directory|not found/i.test(reason) && spec) {
      for (const p of spec.params) {
        const v: PyValue | undefined = argOf(failed.call, failed.cls, p);
        const name = v?.t === 'str' ? v.v.split('/')[0] : undefined;
        if (!name || name === '..' || name === '.' || name in dir.contents) continue;
        dir.contents[name] =
          spec.kind === 'directory'
            ? { type: 'directory', contents: {} }
            : { type: 'file', content: 'Notes kept for this task.' };
      }
    } else if (dir?.contents && /File exists/i.test(reason)) {
      const v = argOf(failed.call, failed.cls, failed.name === 'mkdir' ? 'dir_name' : 'file_name');
      if (v?.t === 'str') delete dir.contents[v.v];
    }
  } else if (failed?.call && failed.cls === 'MessageAPI' && config.MessageAPI) {
    const msg = config.MessageAPI;
    const userMap = { ...((msg.user_map as Record<string, string> | undefined) ?? {}) };
    const user = /User '([^']+)' not found/.exec(reason)?.[1];
    const receiver = /Receiver ID '?([^' ]+?)'? not found/.exec(reason)?.[1];
    const ids = new Set(Object.values(userMap));
    if (user) {
      let n = Object.keys(userMap).length + 1;
      while (ids.has(`USR${String(n).padStart(3, '0')}`)) n++;
      userMap[user] = `USR${String(n).padStart(3, '0')}`;
    } else if (receiver && !ids.has(receiver)) {
      userMap[`Contact ${receiver}`] = receiver;
    }
    msg.user_map = userMap;
  } else if (failed?.call && failed.cls === 'TradingBot' && config.TradingBot) {
    const need = /required \$([\d.]+)/.exec(reason)?.[1];
    const account = config.TradingBot.account_info as { balance?: number } | undefined;
    if (need && account) account.balance = Math.ceil(Number(need) * 1.5);
  }
  return { initial_config: config };
}
