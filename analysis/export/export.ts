// `rods export`: a campaign's events (every event whose payload.campaignId is the campaign, from
// all its streams) and projections (task_stats, pool_members, candidates, steps) as files for
// notebooks: JSONL or CSV, one file per event type (events/<Type>.<ext>) and per projection
// (projections/<table>.<ext>), plus manifest.json with the row count of each file; or, with
// `openlineage`, one OpenLineage RunEvent per synthesis run (openlineage.jsonl).
// Everything is read in one REPEATABLE READ snapshot and written into a temporary sibling
// folder that is renamed to the target at the end: an existing target is refused before
// anything is written, and a failed export leaves no partial folder behind.
import { randomUUID } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, renameSync, rmSync, type WriteStream } from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { redactCampaignConfig } from '../../domain/campaign-config.js';
import { inSnapshot } from '../../platform/store/db.js';
import { campaignEventPage, payloadKeysByType } from '../../platform/store/events/campaign-reads.js';
import type { RecordedEvent } from '../../platform/store/events/recorded-event.js';
import { campaignRows, type Table } from '../../platform/store/tables.js';
import { DEFAULT_PRODUCER, openLineageEvents, type SynthesisEvent } from './openlineage.js';

export const EXPORT_FORMATS = ['jsonl', 'csv', 'openlineage'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const PROJECTIONS: Partial<Record<Table, string>> = {
  task_stats: 'task_id',
  pool_members: 'task_id',
  candidates: 'candidate_id, candidate_hash',
  steps: 'step',
};

export class ExportTargetExistsError extends Error {
  override name = 'ExportTargetExistsError';
}

export interface ExportResult {
  campaignId: string;
  format: ExportFormat;
  out: string;
  files: { file: string; rows: number }[];
}

/** A value as a CSV cell: null empty, objects and arrays as JSON, dates as ISO 8601. */
export function csvCell(v: unknown): string {
  let s: string;
  if (v === null || v === undefined) s = '';
  else if (v instanceof Date) s = v.toISOString();
  else if (Buffer.isBuffer(v)) s = v.toString('hex');
  else if (typeof v === 'object') s = JSON.stringify(v);
  else s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

const jsonValue = (_k: string, v: unknown) =>
  v &&
  typeof v === 'object' &&
  (v as { type?: string }).type === 'Buffer' &&
  Array.isArray((v as { data?: unknown }).data)
    ? Buffer.from((v as { data: number[] }).data).toString('hex')
    : v;

/** Writes rows to one file as JSONL or CSV (header from `columns`). */
class TableWriter {
  rows = 0;
  private readonly stream: WriteStream;
  private readonly done: Promise<void>;
  constructor(
    readonly file: string,
    private readonly format: 'jsonl' | 'csv',
    private readonly columns: string[],
  ) {
    mkdirSync(path.dirname(file), { recursive: true });
    this.stream = createWriteStream(file, { flags: 'wx' });
    this.done = new Promise((resolve, reject) => {
      this.stream.on('finish', () => resolve());
      this.stream.on('error', reject);
    });
    if (format === 'csv') this.write(`${columns.map(csvCell).join(',')}\n`);
  }

  private write(chunk: string): Promise<void> | undefined {
    if (this.stream.write(chunk)) return undefined;
    return new Promise((r) => this.stream.once('drain', () => r()));
  }

  async add(row: Record<string, unknown>): Promise<void> {
    this.rows++;
    const line =
      this.format === 'jsonl'
        ? `${JSON.stringify(row, jsonValue)}\n`
        : `${this.columns.map((c) => csvCell(row[c])).join(',')}\n`;
    await this.write(line);
  }

  async close(): Promise<void> {
    this.stream.end();
    await this.done;
  }
}

const safeName = (s: string) => s.replace(/[^A-Za-z0-9_.-]/g, '_');

const EVENT_ENVELOPE = [
  'position',
  'transaction_id',
  'stream_id',
  'stream_version',
  'event_id',
  'type',
  'fingerprint',
  'recorded_at',
];

/**
 * An event as exported: the config of CampaignStarted and CampaignReconfigured recorded before
 * generator endpoints existed may carry a generator URL or key, which is left out.
 */
function shown(e: RecordedEvent): ExportedEvent {
  const payload = (e.payload ?? {}) as Record<string, unknown>;
  if (typeof payload.config !== 'string') return { ...e, payload };
  return { ...e, payload: { ...payload, config: redactCampaignConfig(payload.config) } };
}

type ExportedEvent = RecordedEvent & { payload: Record<string, unknown> };

/** The campaign's events in read order (transaction id, position), page by page. */
async function* campaignEvents(
  c: pg.ClientBase,
  campaignId: string,
  types?: string[],
): AsyncGenerator<ExportedEvent> {
  let after = { tx: '0', pos: 0 };
  for (;;) {
    const rows = await campaignEventPage(c, campaignId, after, types);
    for (const r of rows) yield shown(r);
    const last = rows[rows.length - 1];
    if (!last || rows.length < 2000) return;
    after = { tx: last.transactionId, pos: last.position };
  }
}

async function writeTables(
  c: pg.ClientBase,
  campaignId: string,
  format: 'jsonl' | 'csv',
  dir: string,
): Promise<{ file: string; rows: number }[]> {
  const files: { file: string; rows: number }[] = [];
  // Events: one file per type; CSV columns are the envelope, payload.<key> per top-level payload
  // key seen for that type, and the metadata.
  const payloadKeys = await payloadKeysByType(c, campaignId);
  const writers = new Map<string, TableWriter>();
  for await (const e of campaignEvents(c, campaignId)) {
    let w = writers.get(e.type);
    if (!w) {
      const pk = payloadKeys.get(e.type) ?? [];
      w = new TableWriter(path.join(dir, 'events', `${safeName(e.type)}.${format}`), format, [
        ...EVENT_ENVELOPE,
        ...pk.map((k) => `payload.${k}`),
        'metadata',
      ]);
      writers.set(e.type, w);
    }
    const row: Record<string, unknown> = {
      position: e.position,
      transaction_id: e.transactionId,
      stream_id: e.streamId,
      stream_version: e.version,
      event_id: e.eventId,
      type: e.type,
      fingerprint: e.fingerprint,
      recorded_at: e.recordedAt,
    };
    if (format === 'jsonl') {
      row.payload = e.payload;
      row.metadata = e.metadata;
    } else {
      for (const [k, v] of Object.entries(e.payload)) row[`payload.${k}`] = v;
      row.metadata = e.metadata;
    }
    await w.add(row);
  }
  for (const [, w] of [...writers].sort(([a], [b]) => a.localeCompare(b))) {
    await w.close();
    files.push({ file: path.relative(dir, w.file), rows: w.rows });
  }
  // Projections: every column, in table order.
  for (const [table, order] of Object.entries(PROJECTIONS)) {
    const { columns, rows } = await campaignRows(c, table as Table, campaignId, order);
    const w = new TableWriter(path.join(dir, 'projections', `${table}.${format}`), format, columns);
    for (const row of rows) await w.add(row);
    await w.close();
    files.push({ file: path.relative(dir, w.file), rows: w.rows });
  }
  return files;
}

async function writeOpenLineage(
  c: pg.ClientBase,
  campaignId: string,
  dir: string,
  producer: string,
): Promise<{ file: string; rows: number }[]> {
  const events: SynthesisEvent[] = [];
  for await (const e of campaignEvents(c, campaignId, [
    'SynthesisStarted',
    'StageCompleted',
    'CandidateValidated',
    'CandidateRejected',
  ])) {
    events.push({ streamId: e.streamId, type: e.type, payload: e.payload, metadata: e.metadata });
  }
  const w = new TableWriter(path.join(dir, 'openlineage.jsonl'), 'jsonl', []);
  for (const ev of openLineageEvents(campaignId, events, producer))
    await w.add(ev as unknown as Record<string, unknown>);
  await w.close();
  return [{ file: 'openlineage.jsonl', rows: w.rows }];
}

/**
 * Exports a campaign into `out` (which must not exist). Throws ExportTargetExistsError, before
 * writing anything, when it does.
 */
export async function exportCampaign(
  pool: pg.Pool,
  opts: { campaignId: string; format: ExportFormat; out: string; producer?: string },
): Promise<ExportResult> {
  const out = path.resolve(opts.out);
  if (existsSync(out)) throw new ExportTargetExistsError(`output folder ${opts.out} already exists`);
  const parent = path.dirname(out);
  mkdirSync(parent, { recursive: true });
  const tmp = path.join(parent, `.${path.basename(out)}.tmp-${randomUUID().slice(0, 8)}`);
  mkdirSync(tmp);
  try {
    const files = await inSnapshot(pool, (c) =>
      opts.format === 'openlineage'
        ? writeOpenLineage(
            c,
            opts.campaignId,
            tmp,
            opts.producer ?? process.env.RODS_OPENLINEAGE_PRODUCER ?? DEFAULT_PRODUCER,
          )
        : writeTables(c, opts.campaignId, opts.format, tmp),
    );
    const result: ExportResult = { campaignId: opts.campaignId, format: opts.format, out, files };
    const manifest = new TableWriter(path.join(tmp, 'manifest.json'), 'jsonl', []);
    await manifest.add({ campaignId: opts.campaignId, format: opts.format, files });
    await manifest.close();
    if (existsSync(out))
      throw new ExportTargetExistsError(`output folder ${opts.out} appeared during the export`);
    renameSync(tmp, out);
    return result;
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
}
