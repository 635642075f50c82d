// A parser of PostgreSQL's binary COPY format for the event store's bulk reader
// (platform/store/events/event-store.ts readLog): rows of the columns in EVENTS_COPY_COLUMNS, fed in chunks that
// may cut a row anywhere. Binary rather than text: integers, ids and timestamps arrive as fixed
// width fields that need no text parsing, and jsonb arrives as its JSON text behind a version
// byte, which JSON.parse reads exactly as pg parses the text protocol's jsonb.
import type { RecordedEvent } from './recorded-event.js';

/** The select list the parser expects, in this order (types in the comments). */
export const EVENTS_COPY_COLUMNS =
  'position, transaction_id, stream_id, stream_version, event_id, type, fingerprint, payload, metadata, recorded_at';
// int8, xid8, text, int8, uuid, text, text, jsonb, jsonb, timestamptz

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const FIELDS = 10;
const TWO_32 = 4294967296;
// 2000-01-01T00:00:00Z, the epoch of binary timestamps, in Unix milliseconds.
const PG_EPOCH_MS = 946684800000;

export class CopyFormatError extends Error {
  override name = 'CopyFormatError';
}

// Buffer#utf8Slice is what toString('utf8', ...) calls after its argument checks; for the many
// short strings of a row those checks cost as much as the decoding.
type Sliceable = Buffer & { utf8Slice(start: number, end: number): string };

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

// A lookup per byte beats Buffer#hexSlice plus slicing here (short strings, many rows).
function uuidAt(b: Buffer, s: number): string {
  let out = '';
  for (let i = 0; i < 16; i++) {
    out += HEX[b[s + i]!]!;
    if (i === 3 || i === 5 || i === 7 || i === 9) out += '-';
  }
  return out;
}

function uint32At(b: Buffer, s: number): number {
  return b[s]! * 0x1000000 + ((b[s + 1]! << 16) | (b[s + 2]! << 8) | b[s + 3]!);
}

function int32At(b: Buffer, s: number): number {
  return (b[s]! << 24) | (b[s + 1]! << 16) | (b[s + 2]! << 8) | b[s + 3]!;
}

/** An unsigned 64-bit integer as a decimal string (xid8). */
function uint64At(b: Buffer, s: number): string {
  const hi = uint32At(b, s);
  // Below 2^53 a double holds it exactly; xid8 only gets there after 2^21 wraparound epochs.
  return hi < 0x200000 ? String(hi * TWO_32 + uint32At(b, s + 4)) : b.readBigUInt64BE(s).toString();
}

/** A signed 64-bit integer that must fit a double exactly (positions, versions, microseconds). */
function int64At(b: Buffer, s: number): number {
  const v = int32At(b, s) * TWO_32 + uint32At(b, s + 4);
  if (!Number.isSafeInteger(v)) throw new CopyFormatError(`int8 ${b.readBigInt64BE(s)} exceeds 2^53`);
  return v;
}

/**
 * Incremental parser: push() each chunk of the COPY stream, get the rows it completed. end()
 * checks that the stream stopped at the trailer, not inside a row.
 */
export class EventCopyParser {
  private rest: Buffer | null = null;
  private headerDone = false;
  private finished = false;

  push(chunk: Buffer, out: RecordedEvent[]): void {
    let b = chunk;
    if (this.rest) {
      b = Buffer.concat([this.rest, chunk]);
      this.rest = null;
    }
    let p = 0;
    if (!this.headerDone) {
      // Signature (11 bytes), flags (int32), header extension length (int32) and extension.
      if (b.length < 19) {
        this.rest = b;
        return;
      }
      if (!b.subarray(0, 11).equals(SIGNATURE)) throw new CopyFormatError('not a binary COPY stream');
      const ext = b.readUInt32BE(15);
      if (b.length < 19 + ext) {
        this.rest = b;
        return;
      }
      p = 19 + ext;
      this.headerDone = true;
    }
    const n = b.length;
    while (p < n) {
      if (this.finished) throw new CopyFormatError('data after the trailer');
      if (p + 2 > n) break;
      const fields = b.readInt16BE(p);
      if (fields === -1) {
        this.finished = true;
        p += 2;
        continue;
      }
      if (fields !== FIELDS) throw new CopyFormatError(`row of ${fields} fields, expected ${FIELDS}`);
      // Is the whole row here? Walk the field lengths before decoding anything.
      let q = p + 2;
      let complete = true;
      for (let f = 0; f < FIELDS; f++) {
        if (q + 4 > n) {
          complete = false;
          break;
        }
        const len = b.readInt32BE(q);
        if (len < 0) throw new CopyFormatError(`unexpected NULL in field ${f}`);
        q += 4 + len;
        if (q > n) {
          complete = false;
          break;
        }
      }
      if (!complete) break;
      out.push(decodeRow(b as Sliceable, p + 2));
      p = q;
    }
    if (p < n) this.rest = b.subarray(p);
  }

  end(): void {
    if (!this.finished || this.rest) throw new CopyFormatError('COPY stream ended inside a row');
  }
}

// Lengths were checked by the caller; fixed-width fields are read at their known offsets.
function decodeRow(b: Sliceable, p: number): RecordedEvent {
  p += 4;
  const position = int64At(b, p);
  p += 8 + 4;
  const transactionId = uint64At(b, p);
  p += 8;
  let len = int32At(b, p);
  p += 4;
  const streamId = b.utf8Slice(p, p + len);
  p += len + 4;
  const version = int64At(b, p);
  p += 8 + 4;
  const eventId = uuidAt(b, p);
  p += 16;
  len = int32At(b, p);
  p += 4;
  const type = b.utf8Slice(p, p + len);
  p += len;
  len = int32At(b, p);
  p += 4;
  const fingerprint = b.utf8Slice(p, p + len);
  p += len;
  // jsonb: a format version byte (1), then the JSON text.
  len = int32At(b, p);
  p += 4;
  if (b[p] !== 1) throw new CopyFormatError(`jsonb format version ${b[p]}`);
  const payload = JSON.parse(b.utf8Slice(p + 1, p + len));
  p += len;
  len = int32At(b, p);
  p += 4;
  if (b[p] !== 1) throw new CopyFormatError(`jsonb format version ${b[p]}`);
  const metadata = JSON.parse(b.utf8Slice(p + 1, p + len));
  p += len + 4;
  // timestamptz: microseconds since 2000-01-01 UTC, truncated to milliseconds like the other
  // readers (floor, which is what date_trunc does).
  const recordedAt = new Date(PG_EPOCH_MS + Math.floor(int64At(b, p) / 1000));
  return {
    position,
    transactionId,
    streamId,
    version,
    eventId,
    type,
    fingerprint,
    payload,
    metadata,
    recordedAt,
  };
}
