// Where the Temporal Web UI of the local dev server is: `npm run stack:up` starts it on loopback
// (infra/stack/temporal.ts), the dashboard and `npm run stack:status` link to it. Pure.
import { isLoopback, splitHostPort } from '../config/endpoints.js';

/** The UI's port beside the frontend's: Temporal's own default (7233 -> 8233). */
export const UI_PORT_OFFSET = 1000;
/** The dev server's HTTP API moved off 8233 to leave Temporal's usual UI port to the UI. */
export const HTTP_PORT_OFFSET = 3000;

/**
 * The UI's port on the dev server the stack starts, or null when disabled
 * (RODS_TEMPORAL_UI_PORT=0 or off: headless).
 */
export function temporalUiPort(temporalPort: number, env: NodeJS.ProcessEnv = process.env): number | null {
  const v = env.RODS_TEMPORAL_UI_PORT?.trim();
  if (v === undefined || v === '') return temporalPort + UI_PORT_OFFSET;
  if (v === '0' || v.toLowerCase() === 'off') return null;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 65_535)
    throw new Error(`RODS_TEMPORAL_UI_PORT must be a port, 0 or off, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * The UI's URL: RODS_TEMPORAL_UI_URL when set (a UI elsewhere), else the local dev server's
 * UI beside a loopback TEMPORAL_ADDRESS; null when there is none to link to.
 */
export function temporalUiUrl(temporalAddress: string, env: NodeJS.ProcessEnv = process.env): string | null {
  const explicit = env.RODS_TEMPORAL_UI_URL?.trim();
  if (explicit) return explicit.replace(/\/+$/, '');
  const { host, port } = splitHostPort(temporalAddress);
  if (!isLoopback(host)) return null;
  const ui = temporalUiPort(port, env);
  if (ui === null) return null;
  return `http://${host.includes(':') ? `[${host}]` : host}:${ui}`;
}

/** The dev server's HTTP API port (RODS_TEMPORAL_HTTP_PORT, else the frontend's + 3000). */
export function temporalHttpPort(temporalPort: number, env: NodeJS.ProcessEnv = process.env): number {
  return Number(env.RODS_TEMPORAL_HTTP_PORT || temporalPort + HTTP_PORT_OFFSET);
}
