// Strict parsing of generator replies and stable hashing of values. A reply is data: it is parsed
// with JSON.parse and validated, never evaluated.
import { createHash } from 'node:crypto';

export type JsonParse = { ok: true; value: unknown } | { ok: false; error: string };

// A whole reply that is one fenced block: ```json ... ``` (or an unlabelled fence).
const FENCE = /^```[ \t]*(?:json|JSON)?[ \t]*\r?\n([\s\S]*?)\r?\n?```$/;
// Qwen3 served without vLLM's reasoning parser puts its reasoning first, in <think> tags.
const THINK = /^<think>[\s\S]*?<\/think>\s*/;

/**
 * Parses a reply that must be exactly one JSON value: surrounding whitespace, one ```json fence
 * around it and a leading <think>…</think> block are tolerated; nothing else is (no prose around
 * the JSON, no single quotes, no trailing commas, no comments).
 */
export function parseJsonReply(text: string): JsonParse {
  let body = text.trim().replace(THINK, '');
  const fence = FENCE.exec(body);
  if (fence) body = fence[1]!.trim();
  if (body === '') return { ok: false, error: 'the reply is empty' };
  try {
    return { ok: true, value: JSON.parse(escapeControlsInStrings(body)) };
  } catch (e) {
    return { ok: false, error: `the reply is not JSON (${(e as Error).message})` };
  }
}

/**
 * Raw control characters (U+0000-U+001F) inside string literals, escaped as \u00XX: constrained
 * decoding lets them through (vLLM's xgrammar, in strings bounded by maxLength or minLength) and
 * JSON.parse refuses them. Outside strings nothing changes, so whatever else is wrong still fails.
 */
export function escapeControlsInStrings(body: string): string {
  let out = '';
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]!;
    const code = ch.charCodeAt(0);
    if (inString && code < 0x20) {
      out += `\\u${code.toString(16).padStart(4, '0')}`;
      continue;
    }
    out += ch;
    if (inString && ch === '\\' && i + 1 < body.length)
      out += body[++i]; // the escaped character, as is
    else if (ch === '"') inString = !inString;
  }
  return out;
}

/** JSON with object keys sorted at every level: the same value always gives the same text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) out[k] = sortKeys((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** SHA-256 (hex) of a value's canonical JSON: the output hash recorded in lineage. */
export function hashValue(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
