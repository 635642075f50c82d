import { describe, expect, it } from 'vitest';
import { DecodeError } from './errors.js';
import { frame, HEADER_LENGTH, unframe } from './single-object.js';

describe('Avro single-object framing', () => {
  const fp = Buffer.from('8f5c393f1ad57572', 'hex');

  it('is 0xC3 0x01, the 8 fingerprint bytes, then the body', () => {
    const bytes = frame(fp, Buffer.from([0x02, 0x04]));
    expect(bytes.toString('hex')).toBe('c3018f5c393f1ad575720204');
    const { fingerprint, body } = unframe(bytes);
    expect(fingerprint.equals(fp)).toBe(true);
    expect([...body]).toEqual([0x02, 0x04]);
  });

  it('accepts an empty body (a record without fields) and a plain Uint8Array', () => {
    const bytes = new Uint8Array(frame(fp, Buffer.alloc(0)));
    expect(bytes.length).toBe(HEADER_LENGTH);
    expect(unframe(bytes).body.length).toBe(0);
  });

  it('rejects short input and a wrong marker with typed errors', () => {
    expect(() => unframe(Buffer.from([0xc3, 0x01]))).toThrow(DecodeError);
    expect(() => unframe(Buffer.from([0xc3, 0x01]))).toThrow(/too short: 2 bytes/);
    expect(() => unframe(Buffer.concat([Buffer.from([0xc3, 0x02]), fp]))).toThrow(/starts with 0xc302/);
    expect(() => frame(Buffer.alloc(4), Buffer.alloc(0))).toThrow(RangeError);
  });
});
