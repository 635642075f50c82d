// CRC-64-AVRO: the 64-bit Rabin fingerprint that the Avro specification prescribes for schema
// fingerprints ("Schema Fingerprints" in the spec). avsc does not ship it. Table-driven over
// BigInt; schemas are fingerprinted once when they are loaded, so speed is not a concern.

/** The fingerprint of the empty input; also the polynomial the table is built from. */
export const CRC64_AVRO_EMPTY = 0xc15d213aa4d7a795n;

const MASK64 = 0xffffffffffffffffn;

const TABLE: BigUint64Array = (() => {
  const table = new BigUint64Array(256);
  for (let i = 0; i < 256; i++) {
    let fp = BigInt(i);
    for (let j = 0; j < 8; j++) {
      // fp = (fp >>> 1) ^ (EMPTY & -(fp & 1)), in unsigned 64-bit arithmetic.
      fp = (fp >> 1n) ^ (CRC64_AVRO_EMPTY & (-(fp & 1n) & MASK64));
    }
    table[i] = fp;
  }
  return table;
})();

/**
 * The CRC-64-AVRO fingerprint of `data` (a string is taken as its UTF-8 bytes), as an unsigned
 * 64-bit integer.
 */
export function crc64Avro(data: Uint8Array | string): bigint {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let fp = CRC64_AVRO_EMPTY;
  for (const b of bytes) {
    fp = (fp >> 8n) ^ TABLE[Number((fp ^ BigInt(b)) & 0xffn)]!;
  }
  return fp;
}

/** The fingerprint as the 8 bytes that go on the wire: little-endian, as single-object encoding wants. */
export function fingerprintBytes(fp: bigint): Buffer {
  const buf = Buffer.alloc(8);
  buf.writeBigUInt64LE(fp & MASK64);
  return buf;
}

/** The fingerprint read back from its 8 little-endian wire bytes. */
export function fingerprintFromBytes(bytes: Uint8Array): bigint {
  if (bytes.length !== 8) throw new RangeError(`a fingerprint is 8 bytes, got ${bytes.length}`);
  return Buffer.from(bytes.buffer, bytes.byteOffset, 8).readBigUInt64LE(0);
}

/** 16 lower-case hex digits: the 8 fingerprint bytes in wire (little-endian) order. */
export function fingerprintHex(fp: bigint | Uint8Array): string {
  const bytes = typeof fp === 'bigint' ? fingerprintBytes(fp) : fp;
  if (bytes.length !== 8) throw new RangeError(`a fingerprint is 8 bytes, got ${bytes.length}`);
  return Buffer.from(bytes.buffer, bytes.byteOffset, 8).toString('hex');
}
