// The dashboard: a read-only page at /dashboard/ (built by `npm run build:dashboard` from
// entry/dashboard/, not committed) and the JSON it polls, behind the same bearer tokens as the API.
// The page's files hold no data and are served to anyone; every data route needs a token that
// may read the campaign (read, campaign:<id> or admin). Each JSON answer carries an ETag of its
// body, so a poll whose data did not change costs a 304 and no body.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { Client } from '@temporalio/client';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type pg from 'pg';
import { z } from 'zod';
import { campaignsOfTask, loadLineageIndex } from '../../analysis/lineage/store.js';
import { campaignStatus, type StatusOptions } from '../../analysis/status/campaign-status.js';
import { dashboardSeries, findTasks, listCampaigns, rewardHistory } from '../../analysis/status/dashboard.js';
import { diagnose } from '../../analysis/status/diagnose.js';
import { dashboardEvaluations } from '../../analysis/status/evaluations.js';
import type { StatusKafka } from '../../analysis/status/kafka-shared.js';
import { workflowIds } from '../../domain/ids.js';
import { DEFAULT_TEMPORAL_ADDRESS, DEFAULT_TEMPORAL_NAMESPACE } from '../../platform/config/endpoints.js';
import { DEFAULT_HISTORY_STEPS } from '../../platform/store/events/task-steps.js';
import { temporalUiUrl } from '../../platform/temporal/ui.js';
import { ACCESS } from './access.js';
import { ProblemError, parseOr422, problem, sendProblem } from './problem.js';
import { requireCampaign } from './routes/context.js';
import { CampaignParams } from './schemas.js';

/** Where `npm run build:dashboard` writes the page (vite, entry/dashboard/vite.config.ts). */
export const DASHBOARD_DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dashboard/dist');

export interface DashboardOptions {
  db: pg.Pool;
  temporal: Client;
  /** The built page (default entry/dashboard/dist); absent: /dashboard/ says how to build it. */
  dir?: string;
  /** The Temporal Web UI to link to (default: beside a loopback TEMPORAL_ADDRESS, platform/temporal/ui.ts). */
  temporalUiUrl?: string | null;
  namespace?: string;
  status: Pick<StatusOptions, 'relayName' | 'aggregatorGroup' | 'synthesisTimeoutMs' | 'rewardsTopic'> & {
    queryTimeoutMs?: number;
  };
  /** The gateway's one Kafka part for every status call (analysis/status/kafka-shared.ts). */
  statusKafka?: () => StatusKafka;
}

const TaskQuery = z.object({ q: z.string().max(200).default('') });
// How many of the newest steps a lineage view reads band changes and rewards from (each costs a read).
const LineageQuery = z.object({
  steps: z.coerce.number().int().min(1).max(10_000).default(DEFAULT_HISTORY_STEPS),
});
const LineageParams = z.object({
  id: CampaignParams.shape.id,
  // Any stored task id (ids from the gateway exclude control characters already).
  taskId: z.string().min(1).max(512),
});

/** Sends `body` as JSON with an ETag of its bytes; 304 when the client holds that version. */
function sendTagged(req: FastifyRequest, reply: FastifyReply, body: unknown): FastifyReply {
  const json = JSON.stringify(body);
  const etag = `"${createHash('sha256').update(json).digest('base64url').slice(0, 27)}"`;
  reply.header('ETag', etag).header('Cache-Control', 'no-cache');
  const inm = req.headers['if-none-match'];
  if (inm?.split(',').some((t) => t.trim() === etag || t.trim() === '*')) return reply.code(304).send();
  return reply.type('application/json; charset=utf-8').send(json);
}

// The page loads its own scripts and styles only and talks to its own origin only.
const PAGE_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
};

export function registerDashboard(app: FastifyInstance, opts: DashboardOptions): void {
  const { db } = opts;
  const dir = opts.dir ?? DASHBOARD_DIST;
  const built = existsSync(path.join(dir, 'index.html'));
  const ui =
    opts.temporalUiUrl !== undefined
      ? opts.temporalUiUrl
      : temporalUiUrl(process.env.TEMPORAL_ADDRESS || DEFAULT_TEMPORAL_ADDRESS);
  const namespace = opts.namespace ?? (process.env.TEMPORAL_NAMESPACE || DEFAULT_TEMPORAL_NAMESPACE);
  const { open, authenticated, campaignRead } = ACCESS;

  if (built) app.register(fastifyStatic, { root: dir, serve: false, decorateReply: true });
  const page = (reply: FastifyReply, file: string) => {
    if (!built)
      return sendProblem(
        reply,
        problem(
          503,
          'the dashboard is not built: run `npm run build:dashboard` (npm run demo and CI do)',
          undefined,
          'dashboard-not-built',
        ),
      );
    reply.headers(PAGE_HEADERS);
    // Vite names assets by content hash: they never change; the page itself is revalidated.
    const immutable = file.startsWith('assets/');
    reply.header('Cache-Control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    return reply.sendFile(file, { cacheControl: false });
  };
  app.get('/dashboard', open, async (_req, reply) => reply.redirect('/dashboard/'));
  app.get('/dashboard/', open, async (_req, reply) => page(reply, 'index.html'));
  app.get('/dashboard/*', open, async (req, reply) => {
    const file = (req.params as { '*': string })['*'];
    if (!/^assets\/[\w.-]+$/.test(file) && file !== 'favicon.svg')
      throw new ProblemError(404, `no dashboard file ${JSON.stringify(file.slice(0, 100))}`);
    return page(reply, file);
  });

  // The campaigns this token may read, and where the Temporal UI is.
  app.get('/v1/dashboard/campaigns', authenticated, async (req, reply) => {
    const scopes = req.principal?.scopes ?? [];
    const all = scopes.includes('admin') || scopes.includes('read');
    const only = all ? null : scopes.filter((s) => s.startsWith('campaign:')).map((s) => s.slice(9));
    const campaigns = await listCampaigns(db, only);
    return sendTagged(req, reply, { temporalUi: ui, namespace, campaigns });
  });

  app.get('/v1/campaigns/:id/dashboard/series', campaignRead, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    await requireCampaign(db, id);
    return sendTagged(req, reply, await dashboardSeries(db, id));
  });

  // What holds the campaign: the status report (aggregator lag, dead letters, the oldest open
  // step and what it waits for) and the doctor's findings.
  app.get('/v1/campaigns/:id/dashboard/status', campaignRead, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const r = await campaignStatus({ db, temporal: opts.temporal, statusKafka: opts.statusKafka?.() }, id, {
      queryTimeoutMs: opts.status.queryTimeoutMs ?? 5000,
      ...opts.status,
    });
    if (!r) return requireCampaign(db, id);
    const { workflow, checkedAt: _c, ...rest } = r;
    const workflowId = workflowIds.campaign(id);
    return sendTagged(req, reply, {
      ...rest,
      // The config stays out (it may name endpoints); the page needs the counts only.
      running: workflow ? Object.keys(workflow.running).length : null,
      findings: diagnose(r),
      temporalUi: ui
        ? `${ui}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`
        : null,
    });
  });

  // The campaign's evaluations on BFCL's held-out tasks (the newest 200), by trainer step, with
  // accuracy per category and overall and their 95 % intervals.
  app.get('/v1/campaigns/:id/dashboard/evaluations', campaignRead, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    await requireCampaign(db, id);
    return sendTagged(req, reply, await dashboardEvaluations(db, id));
  });

  app.get('/v1/campaigns/:id/dashboard/tasks', campaignRead, async (req, reply) => {
    const { id } = parseOr422(CampaignParams, req.params, 'path');
    const { q } = parseOr422(TaskQuery, req.query, 'query');
    await requireCampaign(db, id);
    return sendTagged(req, reply, { campaignId: id, q, tasks: await findTasks(db, id, q) });
  });

  // A task's ancestry to its human seed (analysis/lineage/), with the reward history of every task in it.
  app.get('/v1/campaigns/:id/dashboard/lineage/:taskId', campaignRead, async (req, reply) => {
    const { id, taskId } = parseOr422(LineageParams, req.params, 'path');
    const { steps } = parseOr422(LineageQuery, req.query, 'query');
    await requireCampaign(db, id);
    const index = await loadLineageIndex(db, id, taskId, { steps });
    const lineage = index.lineage(taskId);
    if (!lineage) {
      // Whether another campaign has the task says something of that campaign: only to a token
      // that may read every campaign (admin or read), never to one scoped to some campaigns.
      const scopes = req.principal?.scopes ?? [];
      const readsAll = scopes.includes('admin') || scopes.includes('read');
      const elsewhere = readsAll && (await campaignsOfTask(db, taskId)).length > 0;
      throw new ProblemError(
        404,
        `campaign ${id} has no record of task ${JSON.stringify(taskId)}${elsewhere ? ' (another campaign has)' : ''}`,
        undefined,
        'unknown-task',
      );
    }
    const ids = new Set<string>();
    const walk = (n: typeof lineage.root) => {
      ids.add(n.taskId);
      for (const p of n.parents) walk(p);
    };
    walk(lineage.root);
    return sendTagged(req, reply, { ...lineage, rewards: await rewardHistory(db, id, [...ids], { steps }) });
  });
}
