// Avro bodies whose declared lengths fit in their bytes, checked before anything is decoded.
//
// Avro writes an array's or a map's item count (and a string's or bytes' length) ahead of the
// items, and avsc allocates from that count: a 92-byte RolloutGroupScored whose `rewards` declares
// 2^31 - 1 items makes the decoder allocate until the heap is gone, and Node aborts where no
// try/catch can help. This walks a body against the writer schema without allocating and refuses
// it when any count or length needs more bytes than are left: every item, even of a type that
// takes no bytes, counts as at least one. What passes decodes within a bound set by its size.
import avsc from 'avsc';

/** Thrown with a reason naming the field and the numbers. */
export class DeclaredLengthError extends Error {
  override name = 'DeclaredLengthError';
}

/**
 * The body ends or breaks before its lengths could all be read (a truncated varint, a union index
 * out of range): the walk stops there and leaves the verdict to the decoder, which fails at the
 * same place, having read only what was checked.
 */
class ShapeStop extends Error {}

type Check = (buf: Uint8Array, pos: number, path: string) => number;

const MAX_DEPTH = 64;

/** A zig-zag varint long at pos: [value, next position]; values past 2^53 read as Infinity. */
function readLong(buf: Uint8Array, pos: number, path: string): [number, number] {
  let n = 0;
  let shift = 1;
  let p = pos;
  for (let i = 0; i < 10; i++) {
    if (p >= buf.length) throw new ShapeStop(`${path}: truncated varint at byte ${pos}`);
    const b = buf[p++]!;
    n += (b & 0x7f) * shift;
    shift *= 128;
    if ((b & 0x80) === 0) {
      // zig-zag: (n >>> 1) ^ -(n & 1), in floating point beyond 32 bits
      const v = n % 2 === 0 ? n / 2 : -(n + 1) / 2;
      return [Number.isSafeInteger(v) ? v : v > 0 ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY, p];
    }
  }
  throw new ShapeStop(`${path}: varint longer than 10 bytes at byte ${pos}`);
}

function fixedSize(size: number, what: string): Check {
  return (buf, pos, path) => {
    if (pos + size > buf.length)
      throw new ShapeStop(`${path}: ${what} needs ${size} bytes, ${buf.length - pos} left`);
    return pos + size;
  };
}

const varint: Check = (buf, pos, path) => readLong(buf, pos, path)[1];

const lengthPrefixed =
  (what: string): Check =>
  (buf, pos, path) => {
    const [len, p] = readLong(buf, pos, path);
    if (len < 0) throw new DeclaredLengthError(`${path}: negative ${what} length ${len}`);
    if (len > buf.length - p)
      throw new DeclaredLengthError(`${path}: ${what} declares ${len} bytes, ${buf.length - p} left`);
    return p + len;
  };

/** Fewest bytes a value of the type takes (0 for null). */
function minBytes(t: avsc.Type, seen = new Set<avsc.Type>()): number {
  const type = underlying(t);
  if (seen.has(type)) return 0; // a recursive type: its recursion can end in zero more bytes
  switch (type.typeName) {
    case 'null':
      return 0;
    case 'float':
      return 4;
    case 'double':
      return 8;
    case 'fixed':
      return (type as unknown as { size: number }).size;
    case 'record':
    case 'error': {
      seen.add(type);
      const total = (type as avsc.types.RecordType).fields.reduce((s, f) => s + minBytes(f.type, seen), 0);
      seen.delete(type);
      return total;
    }
    default:
      if (avsc.Type.isType(type, 'union')) {
        const branches = (type as unknown as { types: avsc.Type[] }).types;
        return 1 + Math.min(...branches.map((b) => minBytes(b, seen)));
      }
      return 1; // boolean, int, long, enum, string, bytes, and an array's or map's end marker
  }
}

function underlying(t: avsc.Type): avsc.Type {
  return avsc.Type.isType(t, 'logical') ? (t as unknown as { underlyingType: avsc.Type }).underlyingType : t;
}

/** A count read where a broken varint cannot be left to the decoder: it would allocate from it. */
function readCount(buf: Uint8Array, pos: number, path: string, what: string): [number, number] {
  try {
    return readLong(buf, pos, path);
  } catch (e) {
    if (e instanceof ShapeStop) throw new DeclaredLengthError(`${path}: ${what} count cut off: ${e.message}`);
    throw e;
  }
}

function blocks(
  itemMin: number,
  what: string,
  item: (buf: Uint8Array, pos: number, path: string) => number,
): Check {
  const per = Math.max(1, itemMin);
  return (buf, pos, path) => {
    let p = pos;
    for (;;) {
      let n: number;
      [n, p] = readCount(buf, p, path, what);
      if (n === 0) return p;
      // A negative count is followed by the block's byte size; the count is checked first, since
      // the decoder allocates from it whatever the size says.
      const negative = n < 0;
      if (negative) n = -n;
      if (!Number.isFinite(n) || n * per > buf.length - p)
        throw new DeclaredLengthError(
          `${path}: ${what} declares ${n} items, at least ${per} byte${per === 1 ? '' : 's'} each, ${buf.length - p} bytes left`,
        );
      if (negative) {
        let size: number;
        [size, p] = readCount(buf, p, path, `${what} block size`);
        if (size < 0 || size > buf.length - p)
          throw new DeclaredLengthError(
            `${path}: ${what} block declares ${size} bytes, ${buf.length - p} left`,
          );
      }
      for (let i = 0; i < n; i++) p = item(buf, p, `${path}[${i}]`);
    }
  };
}

function compile(t: avsc.Type, depth: number, memo: Map<avsc.Type, Check>): Check {
  const type = underlying(t);
  const known = memo.get(type);
  if (known) return known;
  if (depth > MAX_DEPTH) throw new Error(`schema nests deeper than ${MAX_DEPTH} levels`);
  // A forward slot first, so a recursive record refers to its own check.
  let impl: Check = () => {
    throw new Error('unreachable');
  };
  const slot: Check = (buf, pos, path) => impl(buf, pos, path);
  memo.set(type, slot);
  switch (type.typeName) {
    case 'null':
      impl = (_buf, pos) => pos;
      break;
    case 'boolean':
      impl = fixedSize(1, 'boolean');
      break;
    case 'int':
    case 'long':
    case 'enum':
      impl = varint;
      break;
    case 'float':
      impl = fixedSize(4, 'float');
      break;
    case 'double':
      impl = fixedSize(8, 'double');
      break;
    case 'string':
      impl = lengthPrefixed('string');
      break;
    case 'bytes':
      impl = lengthPrefixed('bytes');
      break;
    case 'fixed':
      impl = fixedSize((type as unknown as { size: number }).size, 'fixed');
      break;
    case 'array': {
      const items = (type as avsc.types.ArrayType).itemsType;
      impl = blocks(minBytes(items), 'array', compile(items, depth + 1, memo));
      break;
    }
    case 'map': {
      const values = (type as avsc.types.MapType).valuesType;
      const key = lengthPrefixed('map key');
      const value = compile(values, depth + 1, memo);
      impl = blocks(1 + minBytes(values), 'map', (buf, pos, path) => value(buf, key(buf, pos, path), path));
      break;
    }
    case 'record':
    case 'error': {
      const fields = (type as avsc.types.RecordType).fields.map(
        (f) => [f.name, compile(f.type, depth + 1, memo)] as const,
      );
      impl = (buf, pos, path) => {
        let p = pos;
        for (const [name, check] of fields) p = check(buf, p, path ? `${path}.${name}` : name);
        return p;
      };
      break;
    }
    default: {
      if (!avsc.Type.isType(type, 'union')) throw new Error(`no length check for Avro type ${type.typeName}`);
      const branches = (type as unknown as { types: avsc.Type[] }).types.map((b) =>
        compile(b, depth + 1, memo),
      );
      impl = (buf, pos, path) => {
        const [index, p] = readLong(buf, pos, path);
        const branch = branches[index];
        if (!branch) throw new ShapeStop(`${path}: union index ${index} of ${branches.length} branches`);
        return branch(buf, p, path);
      };
    }
  }
  return slot;
}

/**
 * A checker of bodies written with `type`: returns the offset after the value (-1 when the body
 * breaks off first, for the decoder to report), or throws DeclaredLengthError naming the field
 * whose count or length does not fit.
 */
export function lengthChecker(type: avsc.Type): (body: Uint8Array) => number {
  const check = compile(type, 0, new Map());
  return (body) => {
    try {
      return check(body, 0, '');
    } catch (e) {
      if (e instanceof ShapeStop) return -1;
      throw e;
    }
  };
}
