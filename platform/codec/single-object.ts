// Avro single-object encoding (Avro specification, "Single-object encoding"): the two marker
// bytes 0xC3 0x01, the 8-byte little-endian CRC-64-AVRO fingerprint of the writer schema's
// Parsing Canonical Form, then the Avro binary body.
import { DecodeError } from './errors.js';

export const SINGLE_OBJECT_MAGIC: Readonly<Buffer> = Buffer.from([0xc3, 0x01]);
export const FINGERPRINT_LENGTH = 8;
export const HEADER_LENGTH = SINGLE_OBJECT_MAGIC.length + FINGERPRINT_LENGTH;

/** Prefixes an Avro body with the single-object header for the writer fingerprint (8 wire bytes). */
export function frame(fingerprint: Uint8Array, body: Uint8Array): Buffer {
  if (fingerprint.length !== FINGERPRINT_LENGTH) {
    throw new RangeError(`a fingerprint is ${FINGERPRINT_LENGTH} bytes, got ${fingerprint.length}`);
  }
  return Buffer.concat([SINGLE_OBJECT_MAGIC, fingerprint, body]);
}

export interface Unframed {
  /** The writer fingerprint, 8 bytes in wire order (a view into the input). */
  fingerprint: Buffer;
  /** The Avro body (a view into the input). */
  body: Buffer;
}

/** Splits a single-object encoded record; throws DecodeError 'too-short' or 'bad-magic'. */
export function unframe(bytes: Uint8Array): Unframed {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  if (buf.length < HEADER_LENGTH) {
    throw new DecodeError(
      'too-short',
      `single-object record too short: ${buf.length} bytes, the header alone is ${HEADER_LENGTH}`,
    );
  }
  if (buf[0] !== SINGLE_OBJECT_MAGIC[0] || buf[1] !== SINGLE_OBJECT_MAGIC[1]) {
    throw new DecodeError(
      'bad-magic',
      `not an Avro single-object record: starts with 0x${buf.subarray(0, 2).toString('hex')}, expected 0xc301`,
    );
  }
  return {
    fingerprint: buf.subarray(2, HEADER_LENGTH),
    body: buf.subarray(HEADER_LENGTH),
  };
}
