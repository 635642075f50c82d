// The gateway's dashboard JSON, fetched with the bearer token (never in a URL: the page takes it
// from the form or once from the URL fragment, which browsers do not send, and keeps it in this
// tab's sessionStorage). Each URL's last body is kept with its ETag: a poll that gets a 304
// reuses it.

import type { Lineage } from '../../../analysis/lineage/model.js';
import type {
  CampaignListItem,
  DashboardSeries,
  RewardPoint,
  TaskMatch,
} from '../../../analysis/status/dashboard.js';
import type { Finding } from '../../../analysis/status/diagnose.js';
import type { DashboardEvaluations } from '../../../analysis/status/evaluations.js';
import type { CampaignStatusReport } from '../../../analysis/status/report.js';

export type { CampaignListItem, DashboardSeries, Finding, Lineage, RewardPoint, TaskMatch };

export interface CampaignList {
  temporalUi: string | null;
  namespace: string;
  campaigns: CampaignListItem[];
}

export type StatusView = Omit<CampaignStatusReport, 'workflow' | 'checkedAt'> & {
  running: number | null;
  findings: Finding[];
  temporalUi: string | null;
};

export type LineageView = Lineage & { rewards: RewardPoint[] };

const KEY = 'rods.dashboard.token';

export class AuthError extends Error {}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Takes `token=` out of the URL fragment (into sessionStorage) and returns the token in use. */
export function adoptToken(): string | null {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const t = params.get('token');
  if (t) {
    sessionStorage.setItem(KEY, t);
    params.delete('token');
    const rest = params.toString();
    history.replaceState(null, '', `${location.pathname}${rest ? `#${rest}` : ''}`);
  }
  return sessionStorage.getItem(KEY);
}

export function setToken(t: string | null): void {
  if (t) sessionStorage.setItem(KEY, t);
  else sessionStorage.removeItem(KEY);
}

const cache = new Map<string, { etag: string; body: unknown }>();

export async function getJson<T>(url: string): Promise<T> {
  const token = sessionStorage.getItem(KEY);
  if (!token) throw new AuthError('no token');
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'application/json' };
  const held = cache.get(url);
  if (held) headers['if-none-match'] = held.etag;
  const r = await fetch(url, { headers, cache: 'no-store' });
  if (r.status === 304 && held) return held.body as T;
  if (r.status === 401 || r.status === 403) {
    const p = (await r.json().catch(() => ({}))) as { detail?: string };
    throw new AuthError(p.detail ?? `HTTP ${r.status}`);
  }
  if (!r.ok) {
    const p = (await r.json().catch(() => ({}))) as { detail?: string };
    throw new HttpError(r.status, p.detail ?? `HTTP ${r.status}`);
  }
  const body = (await r.json()) as T;
  const etag = r.headers.get('etag');
  if (etag) cache.set(url, { etag, body });
  return body;
}

const enc = encodeURIComponent;
export const api = {
  campaigns: () => getJson<CampaignList>('/v1/dashboard/campaigns'),
  series: (id: string) => getJson<DashboardSeries>(`/v1/campaigns/${enc(id)}/dashboard/series`),
  status: (id: string) => getJson<StatusView>(`/v1/campaigns/${enc(id)}/dashboard/status`),
  evaluations: (id: string) =>
    getJson<DashboardEvaluations>(`/v1/campaigns/${enc(id)}/dashboard/evaluations`),
  tasks: (id: string, q: string) =>
    getJson<{ tasks: TaskMatch[] }>(`/v1/campaigns/${enc(id)}/dashboard/tasks?q=${enc(q)}`),
  lineage: (id: string, taskId: string) =>
    getJson<LineageView>(`/v1/campaigns/${enc(id)}/dashboard/lineage/${enc(taskId)}`),
};
