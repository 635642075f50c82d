// Bearer tokens with scopes. The presented token is compared with every configured token through
// SHA-256 digests (equal length) and crypto.timingSafeEqual, without an early exit. Tokens never
// leave this file: a principal carries a label (where the token was configured) and its scopes.
//
// Scopes: `admin` (create and steer campaigns; implies every other scope), `read` (status and
// pool of every campaign), `campaign:<id>` (post rollouts to that campaign, read its status, pool
// and batches).
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { ID_PATTERN } from './schemas.js';

export type Scope = 'admin' | 'read' | `campaign:${string}`;

/** Who presented a valid token: a label safe to log (never the token) and its scopes. */
export interface Principal {
  label: string;
  scopes: readonly Scope[];
}

export interface TokenEntry {
  token: string;
  scopes: Scope[];
  /** Where the token was configured (`tokens file line 3`); used in logs and as rate-limit key. */
  label: string;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

export class TokenSet {
  private readonly entries: { digest: Buffer; principal: Principal }[];
  /** Plain strings are admin tokens (RODS_GATEWAY_TOKENS, tests). */
  constructor(tokens: (string | TokenEntry)[]) {
    const clean = tokens
      .map(
        (t, i): TokenEntry =>
          typeof t === 'string' ? { token: t.trim(), scopes: ['admin'], label: `token ${i + 1}` } : t,
      )
      .filter((t) => t.token);
    if (clean.length === 0) throw new Error('the gateway needs at least one bearer token');
    this.entries = clean.map((t) => ({
      digest: digest(t.token),
      principal: { label: t.label, scopes: [...t.scopes] },
    }));
  }

  get size(): number {
    return this.entries.length;
  }

  /** The principal of a configured token, or undefined (constant time in the token's content). */
  identify(token: string): Principal | undefined {
    const d = digest(token);
    let found: Principal | undefined;
    for (const e of this.entries) {
      const eq = timingSafeEqual(d, e.digest);
      found = eq ? e.principal : found;
    }
    return found;
  }

  /** True when the token is one of the configured ones. */
  check(token: string): boolean {
    return this.identify(token) !== undefined;
  }
}

/** What a route needs of the caller's scopes. */
export type Requirement =
  | { kind: 'admin' }
  | { kind: 'campaign-write'; campaignId: string }
  | { kind: 'campaign-read'; campaignId: string }
  | { kind: 'authenticated' };

/** The scopes any one of which grants the requirement, most specific first. */
export function grantingScopes(need: Requirement): Scope[] {
  switch (need.kind) {
    case 'admin':
      return ['admin'];
    case 'campaign-write':
      return [`campaign:${need.campaignId}`, 'admin'];
    case 'campaign-read':
      return ['read', `campaign:${need.campaignId}`, 'admin'];
    case 'authenticated':
      return [];
  }
}

/** Null when the principal may, else the scopes it lacks (any one of them would do). */
export function missingScopes(p: Principal, need: Requirement): Scope[] | null {
  const granting = grantingScopes(need);
  if (granting.length === 0 || granting.some((s) => p.scopes.includes(s))) return null;
  return granting;
}

/** `requires scope campaign:abc or admin` */
export function describeMissing(scopes: readonly Scope[]): string {
  const head = scopes.slice(0, -1).join(', ');
  return `requires scope ${head ? `${head} or ` : ''}${scopes[scopes.length - 1]}`;
}

// RFC 6750 b64token: what a bearer token may hold (no spaces, no `#`).
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** A scope as written in the tokens file, or an error message. */
export function parseScope(s: string): Scope | string {
  if (s === 'admin' || s === 'read') return s;
  if (s.startsWith('campaign:')) {
    const id = s.slice('campaign:'.length);
    if (ID_PATTERN.test(id)) return `campaign:${id}`;
    return `scope ${JSON.stringify(s)} does not name a valid campaign id`;
  }
  return `unknown scope ${JSON.stringify(s.slice(0, 60))} (admin, read or campaign:<id>)`;
}

export interface LoadedTokens {
  entries: TokenEntry[];
  /** To log once at startup (they never hold a token). */
  warnings: string[];
}

/**
 * The tokens file: one token a line followed by its scopes (`<token> campaign:abc read`), `#`
 * starts a comment. A token alone on its line is an admin token, with a warning (the file had no
 * scopes before). Errors name the line, never the token.
 */
export function parseTokensFile(text: string, source = 'tokens file'): LoadedTokens {
  const entries: TokenEntry[] = [];
  const warnings: string[] = [];
  const errors: string[] = [];
  const seen = new Map<string, number>();
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = i + 1;
    const words = (raw.split(/(?:^|\s)#/)[0] ?? '')
      .trim()
      .split(/[\s,]+/)
      .filter(Boolean);
    const [token, ...rest] = words;
    if (!token) return;
    if (!B64TOKEN.test(token)) {
      errors.push(`${source} line ${line}: the token holds characters a bearer token cannot have`);
      return;
    }
    const again = seen.get(token);
    if (again !== undefined) {
      errors.push(`${source} line ${line}: the token of line ${again} again`);
      return;
    }
    seen.set(token, line);
    const scopes: Scope[] = [];
    for (const w of rest) {
      const s = parseScope(w);
      if (s === 'admin' || s === 'read' || s.startsWith('campaign:')) scopes.push(s as Scope);
      else errors.push(`${source} line ${line}: ${s}`);
    }
    if (rest.length === 0) {
      warnings.push(
        `${source} line ${line}: a token without scopes is an admin token; write "<token> admin" to say so, or give it narrower scopes`,
      );
      scopes.push('admin');
    }
    entries.push({ token, scopes: [...new Set(scopes)], label: `${source} line ${line}` });
  });
  if (errors.length) throw new Error(errors.join('; '));
  if (entries.length === 0) throw new Error(`${source} holds no token`);
  return { entries, warnings };
}

/**
 * Tokens from a file (`--tokens`, RODS_GATEWAY_TOKENS_FILE) or else the comma-separated
 * RODS_GATEWAY_TOKENS, all admin tokens (kept working, with a warning).
 */
export function loadTokens(opts: { file?: string; env?: NodeJS.ProcessEnv } = {}): LoadedTokens {
  const env = opts.env ?? process.env;
  const file = opts.file ?? (env.RODS_GATEWAY_TOKENS_FILE || undefined);
  if (file) {
    const loaded = parseTokensFile(readFileSync(file, 'utf8'));
    if ((statSync(file).mode & 0o077) !== 0)
      loaded.warnings.push('the tokens file is readable by other users: chmod 600 it');
    if (env.RODS_GATEWAY_TOKENS)
      loaded.warnings.push('RODS_GATEWAY_TOKENS is ignored: the tokens file is used');
    return loaded;
  }
  const tokens = env.RODS_GATEWAY_TOKENS?.split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  if (!tokens?.length) return { entries: [], warnings: [] };
  return {
    entries: tokens.map((token, i) => ({
      token,
      scopes: ['admin'],
      label: `RODS_GATEWAY_TOKENS[${i}]`,
    })),
    warnings: [
      `RODS_GATEWAY_TOKENS gives ${tokens.length} admin token(s) with every scope; prefer a tokens file with scopes (RODS_GATEWAY_TOKENS_FILE)`,
    ],
  };
}

/** The token of an `Authorization: Bearer <token>` header, or undefined when absent or malformed. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = header ? /^Bearer[ ]+([^\s]+)\s*$/i.exec(header) : null;
  return m?.[1];
}
