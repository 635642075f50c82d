import { describe, expect, it } from 'vitest';
import { CopyFormatError, EventCopyParser } from './copy-binary.js';
import type { RecordedEvent } from './event-store.js';

// Builds a binary COPY stream the way PostgreSQL writes it for EVENTS_COPY_COLUMNS.
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

function field(data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeInt32BE(data.length);
  return Buffer.concat([len, data]);
}
const int8 = (v: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(v);
  return field(b);
};
const uint8 = (v: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(v);
  return field(b);
};
const text = (s: string) => field(Buffer.from(s, 'utf8'));
const jsonb = (s: string) => field(Buffer.concat([Buffer.from([1]), Buffer.from(s, 'utf8')]));
const uuid = (s: string) => field(Buffer.from(s.replace(/-/g, ''), 'hex'));

interface Row {
  position: bigint;
  xid: bigint;
  streamId: string;
  version: bigint;
  eventId: string;
  type: string;
  fingerprint: string;
  payload: string;
  metadata: string;
  micros: bigint;
}

function row(r: Row): Buffer {
  const count = Buffer.alloc(2);
  count.writeInt16BE(10);
  return Buffer.concat([
    count,
    int8(r.position),
    uint8(r.xid),
    text(r.streamId),
    int8(r.version),
    uuid(r.eventId),
    text(r.type),
    text(r.fingerprint),
    jsonb(r.payload),
    jsonb(r.metadata),
    int8(r.micros),
  ]);
}

function stream(rows: Row[]): Buffer {
  const header = Buffer.alloc(8);
  const trailer = Buffer.from([0xff, 0xff]);
  return Buffer.concat([SIGNATURE, header, ...rows.map(row), trailer]);
}

const ROWS: Row[] = [
  {
    position: 1n,
    xid: 739n,
    streamId: 'campaign/ç-1',
    version: 1n,
    eventId: '0a1b2c3d-4e5f-4607-8899-aabbccddeeff',
    type: 'CampaignStarted',
    fingerprint: '5f3c2a1b0e9d8c7a',
    payload: '{"name": "é \\"quoted\\"\\n", "rewards": [0.125, 1, 0]}',
    metadata: '{}',
    // 2026-12-01T02:03:04.567891Z: microseconds truncate to .567
    micros: BigInt(Date.UTC(2026, 11, 1, 2, 3, 4, 567) - Date.UTC(2000, 0, 1)) * 1000n + 891n,
  },
  {
    position: 9_007_199_254_740_991n,
    // Beyond 2^53: the decimal string is still exact.
    xid: 18_446_744_073_709_551_615n,
    streamId: 's',
    version: 42n,
    eventId: 'ffffffff-0000-4000-8000-000000000001',
    type: 'T',
    fingerprint: '0000000000000000',
    payload: 'null',
    metadata: '{"producer": "p", "correlationId": "c"}',
    // Before 2000: a negative offset floors to the millisecond below.
    micros: -1n,
  },
];

const EXPECTED: RecordedEvent[] = [
  {
    position: 1,
    transactionId: '739',
    streamId: 'campaign/ç-1',
    version: 1,
    eventId: '0a1b2c3d-4e5f-4607-8899-aabbccddeeff',
    type: 'CampaignStarted',
    fingerprint: '5f3c2a1b0e9d8c7a',
    payload: { name: 'é "quoted"\n', rewards: [0.125, 1, 0] },
    metadata: {},
    recordedAt: new Date('2026-12-01T02:03:04.567Z'),
  },
  {
    position: 9_007_199_254_740_991,
    transactionId: '18446744073709551615',
    streamId: 's',
    version: 42,
    eventId: 'ffffffff-0000-4000-8000-000000000001',
    type: 'T',
    fingerprint: '0000000000000000',
    payload: null,
    metadata: { producer: 'p', correlationId: 'c' },
    recordedAt: new Date('1999-12-31T23:59:59.999Z'),
  },
];

function parseInChunks(buf: Buffer, size: number): RecordedEvent[] {
  const p = new EventCopyParser();
  const out: RecordedEvent[] = [];
  for (let i = 0; i < buf.length; i += size) p.push(buf.subarray(i, i + size), out);
  p.end();
  return out;
}

describe('EventCopyParser', () => {
  it('decodes every column, whatever the chunk boundaries', () => {
    const buf = stream(ROWS);
    for (const size of [1, 2, 3, 7, 19, 64, buf.length]) {
      expect(parseInChunks(buf, size), `chunks of ${size}`).toEqual(EXPECTED);
    }
  });

  it('reads an empty result', () => {
    expect(parseInChunks(stream([]), 5)).toEqual([]);
  });

  it('refuses a stream that ends inside a row or before the trailer', () => {
    const buf = stream(ROWS);
    expect(() => parseInChunks(buf.subarray(0, buf.length - 10), 16)).toThrow(CopyFormatError);
    expect(() => parseInChunks(buf.subarray(0, buf.length - 2), 16)).toThrow(CopyFormatError);
  });

  it('refuses a text stream, other column lists, NULLs and positions beyond 2^53', () => {
    expect(() => parseInChunks(Buffer.from('1\t2\n'.repeat(10)), 100)).toThrow(/not a binary COPY/);
    const header = Buffer.concat([SIGNATURE, Buffer.alloc(8)]);
    const threeFields = Buffer.concat([header, Buffer.from([0, 3]), int8(1n), int8(1n), int8(1n)]);
    expect(() => parseInChunks(threeFields, 100)).toThrow(/3 fields/);
    const withNull = Buffer.from(row(ROWS[0]!));
    withNull.writeInt32BE(-1, 2 + 12); // the length of transaction_id
    expect(() => parseInChunks(Buffer.concat([header, withNull]), 1000)).toThrow(/NULL/);
    const far = stream([{ ...ROWS[0]!, position: 9_007_199_254_740_993n }]);
    expect(() => parseInChunks(far, 1000)).toThrow(/exceeds 2\^53/);
  });
});
