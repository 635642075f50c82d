import { describe, expect, it } from 'vitest';
import { tlsRefusal, withTlsMeaning } from './tls-refusal.js';

describe('tlsRefusal', () => {
  it("names what to check for OpenSSL's verification failures, by code or by message", () => {
    const coded = Object.assign(new Error('whatever'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
    expect(tlsRefusal(coded)).toMatch(/does not carry the name/);
    expect(tlsRefusal(new Error('Connection error: unable to verify the first certificate'))).toMatch(
      /not signed by the CA given/,
    );
    expect(tlsRefusal(new Error('certificate has expired'))).toMatch(/has expired/);
    expect(tlsRefusal(new Error('tlsv13 alert certificate required'))).toMatch(
      /demands a client certificate/,
    );
  });

  it('leaves other errors alone, and does not repeat a meaning already in the message', () => {
    expect(tlsRefusal(new Error('connect ECONNREFUSED 127.0.0.1:5432'))).toBeUndefined();
    expect(withTlsMeaning('relation "x" does not exist')).toBe('relation "x" does not exist');
    const once = withTlsMeaning('certificate has expired');
    expect(withTlsMeaning(once)).toBe(once);
  });
});
