// Bearer-token authentication: the presented token is compared with every configured token
// through SHA-256 digests (equal length) and crypto.timingSafeEqual, without an early exit.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

export class TokenSet {
  private readonly digests: Buffer[];
  constructor(tokens: string[]) {
    const clean = tokens.map((t) => t.trim()).filter(Boolean);
    if (clean.length === 0) throw new Error('the gateway needs at least one bearer token');
    this.digests = clean.map(digest);
  }

  get size(): number {
    return this.digests.length;
  }

  /** True when the token is one of the configured ones (constant time in the token's content). */
  check(token: string): boolean {
    const d = digest(token);
    let ok = false;
    for (const known of this.digests) ok = timingSafeEqual(d, known) || ok;
    return ok;
  }
}

/** Tokens from a file (one a line, `#` comments) or a comma-separated RODS_GATEWAY_TOKENS. */
export function loadTokens(opts: { file?: string; env?: NodeJS.ProcessEnv } = {}): string[] {
  if (opts.file) {
    return readFileSync(opts.file, 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
  }
  return (
    (opts.env ?? process.env).RODS_GATEWAY_TOKENS?.split(',')
      .map((t) => t.trim())
      .filter(Boolean) ?? []
  );
}

/** The token of an `Authorization: Bearer <token>` header, or undefined when absent or malformed. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = header ? /^Bearer[ ]+([^\s]+)\s*$/i.exec(header) : null;
  return m?.[1];
}
