// Event store throughput: appends N events through platform/store/events/event-store.ts (batches of --batch
// events to --streams streams from --concurrency connections), reads them all back in the log's
// order through the store's bulk reader (readLog, what replay and projection rebuilds use; pages
// of --page events) and through its paged reader (readPage, one query per page, what the relay
// and projection catch-up use), and, as the baseline, copies the same rows and columns out with
// a plain `COPY (select ...) TO STDOUT` that only counts lines. Both readers deliver whole
// RecordedEvents (payload and metadata parsed). read_ratio is the bulk reader's; page_read_ratio
// the paged reader's. Runs in a schema of its own (dropped afterwards), so the project's events
// table is untouched. Options: --events, --streams, --batch, --concurrency, --page, --rounds
// (rounds of the three readers in turn; the best of each counts).
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { loadEndpoints } from '../../platform/config/endpoints.js';
import {
  append,
  type Cursor,
  cursorOf,
  type NewEvent,
  readLog,
  readPage,
  START,
} from '../../platform/store/events/event-store.js';
import { MIGRATIONS_DIR } from '../../platform/store/migrate.js';
import type { BenchResult } from './result.js';

const FINGERPRINT = '5f3c2a1b0e9d8c7a';

/** The Up section of the event store migration, to create the tables in the bench schema. */
async function eventStoreDdl(): Promise<string> {
  const sql = await readFile(path.join(MIGRATIONS_DIR, '0002_event_store.sql'), 'utf8');
  const up = sql.split(/^-- Down Migration/m)[0]!;
  return up.replace(/^-- Up Migration/m, '');
}

function batchOf(stream: number, round: number, size: number): NewEvent[] {
  const producedAt = Date.now();
  return Array.from({ length: size }, (_, i) => ({
    eventId: randomUUID(),
    type: 'RolloutGroupScored' as const,
    fingerprint: FINGERPRINT,
    payload: {
      eventId: randomUUID(),
      campaignId: 'bench',
      taskId: `bfcl-multi-turn-base-${stream}`,
      step: round * size + i,
      policyVersion: '7',
      rewards: Array.from({ length: 16 }, (_, k) => ((stream + i + k) % 8) / 8),
      producedAt,
    },
    metadata: { producer: 'bench-event-store', correlationId: `bench-${stream}` },
  }));
}

export default async function eventStore(opts: Record<string, string | boolean>): Promise<BenchResult> {
  const total = Number(opts.events ?? 1_000_000);
  const streams = Number(opts.streams ?? 1000);
  const batch = Number(opts.batch ?? 500);
  const concurrency = Number(opts.concurrency ?? 4);
  const pageSize = Number(opts.page ?? 2000);
  const rounds = Math.max(1, Number(opts.rounds ?? 3));
  const log = opts.json ? () => {} : (m: string) => console.error(m);

  const schema = `bench_event_store_${randomUUID().slice(0, 8)}`;
  // Its own schema and tables: the owner role's work where there are two roles.
  const { ownerDatabaseUrl, databaseUrl } = loadEndpoints();
  const url = ownerDatabaseUrl ?? databaseUrl;
  const admin = new pg.Client({ connectionString: url, application_name: 'rods-bench' });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  const pool = new pg.Pool({
    connectionString: url,
    max: concurrency + 1,
    application_name: 'rods-bench',
    options: `-c search_path=${schema}`,
  });
  try {
    await pool.query(await eventStoreDdl());

    // 1. Append through the store.
    const batches = Math.ceil(total / batch);
    let next = 0;
    const t0 = performance.now();
    const worker = async () => {
      for (let b = next++; b < batches; b = next++) {
        const stream = b % streams;
        const round = Math.floor(b / streams);
        const size = Math.min(batch, total - b * batch);
        // Every earlier batch of this stream came from a lower batch index: with fewer workers
        // than streams it has committed, so the expected version is exact.
        const expected = round === 0 ? 'no-stream' : round * batch;
        await append(pool, `bench/${stream}`, expected, batchOf(stream, round, size));
        if (b % 200 === 0) log(`appended ${(b * batch).toLocaleString()} events`);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const appendS = (performance.now() - t0) / 1000;
    // What autovacuum does after a bulk load anyway: statistics, hint bits and the visibility
    // map, so that neither of the two readers below pays for the first visit of fresh rows.
    await pool.query('vacuum (analyze) events');

    // 2a. Read everything back through the store's bulk reader, in the log's order.
    const readAllBulk = async (): Promise<number> => {
      let read = 0;
      let last = 0;
      const t = performance.now();
      for await (const page of readLog(pool, { pageSize })) {
        read += page.length;
        last = page[page.length - 1]!.position;
      }
      const s = (performance.now() - t) / 1000;
      if (read !== total || last === 0) throw new Error(`bulk read ${read} events, appended ${total}`);
      return s;
    };

    // 2b. The same through the paged reader, one query per page.
    const readAllThrough = async (): Promise<number> => {
      let read = 0;
      let cursor: Cursor = { ...START };
      const t = performance.now();
      for (;;) {
        const page = await readPage(pool, cursor, pageSize);
        if (page.length === 0) break;
        read += page.length;
        cursor = cursorOf(page[page.length - 1]!);
      }
      const s = (performance.now() - t) / 1000;
      if (read !== total) throw new Error(`read ${read} events, appended ${total}`);
      return s;
    };

    // 3. Baseline: the same rows and columns, in the same order, through COPY TO STDOUT.
    const copyAll = async (): Promise<number> => {
      const client = await pool.connect();
      let rows = 0;
      const t = performance.now();
      try {
        await pipeline(
          client.query(
            copyTo(`copy (select position, transaction_id, stream_id, stream_version, event_id, type, fingerprint,
                                payload, metadata, recorded_at
                           from events order by transaction_id, position) to stdout`),
          ),
          new Writable({
            write(chunk: Buffer, _enc, done) {
              for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) rows++;
              done();
            },
          }),
        );
      } finally {
        client.release();
      }
      const s = (performance.now() - t) / 1000;
      if (rows !== total) throw new Error(`COPY returned ${rows} rows, appended ${total}`);
      return s;
    };

    // Alternate the two readers for a few rounds and keep each one's best time, so that a burst
    // of other work on a shared machine does not decide the ratio.
    let readS = Number.POSITIVE_INFINITY;
    let pageS = Number.POSITIVE_INFINITY;
    let copyS = Number.POSITIVE_INFINITY;
    for (let r = 0; r < rounds; r++) {
      readS = Math.min(readS, await readAllBulk());
      copyS = Math.min(copyS, await copyAll());
      pageS = Math.min(pageS, await readAllThrough());
      log(
        `round ${r + 1}: bulk reader ${Math.round(total / readS)}/s, paged reader ${Math.round(total / pageS)}/s, COPY ${Math.round(total / copyS)}/s (best so far)`,
      );
    }

    const readRate = total / readS;
    const pageRate = total / pageS;
    const copyRate = total / copyS;
    return {
      events: total,
      streams,
      batch_size: batch,
      concurrency,
      page_size: pageSize,
      rounds,
      append_events_per_s: Math.round(total / appendS),
      read_events_per_s: Math.round(readRate),
      raw_copy_rows_per_s: Math.round(copyRate),
      read_ratio: Number((readRate / copyRate).toFixed(3)),
      page_read_events_per_s: Math.round(pageRate),
      page_read_ratio: Number((pageRate / copyRate).toFixed(3)),
    };
  } finally {
    await pool.end();
    await admin.query(`drop schema ${schema} cascade`);
    await admin.end();
  }
}
