// What a refused TLS certificate means, in an operator's words: Node (and the clients built on
// it: pg, kafkajs, grpc-js) reports OpenSSL's verification result, which says what failed but
// not what to check. Matched by error code, else by OpenSSL's stable message text.
const REASONS: [RegExp, string][] = [
  [
    /UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|unable to verify the first certificate|unable to get (?:local )?issuer certificate|self[- ]signed certificate/i,
    "the server's certificate is not signed by the CA given (a wrong or missing CA file?)",
  ],
  [
    /ERR_TLS_CERT_ALTNAME_INVALID|does not match certificate's altnames/i,
    "the server's certificate does not carry the name connected to (a wrong host, or a TLS server name to set?)",
  ],
  [/CERT_HAS_EXPIRED|certificate has expired/i, "the server's certificate has expired"],
  [
    /CERT_NOT_YET_VALID|certificate is not yet valid/i,
    "the server's certificate is not valid yet (clock skew?)",
  ],
  [
    /certificate required|ALERT_CERTIFICATE_REQUIRED/i,
    'the server demands a client certificate (none was given, or it was refused)',
  ],
  [
    /closed the connection right after the handshake/i,
    'a server that demands a client certificate does this when none is given',
  ],
  [
    /ALERT_UNKNOWN_CA|alert unknown ca|ALERT_BAD_CERTIFICATE|alert bad certificate/i,
    'the server refused the client certificate (not signed by a CA it trusts)',
  ],
];

/** The meaning of a TLS refusal in this error (its code or message), or undefined for any other error. */
export function tlsRefusal(e: unknown): string | undefined {
  const x = e as { code?: unknown; message?: unknown } | undefined;
  const text = `${typeof x?.code === 'string' ? x.code : ''} ${typeof x?.message === 'string' ? x.message : String(e)}`;
  return REASONS.find(([re]) => re.test(text))?.[1];
}

/** `message` with the refusal's meaning appended when it is a TLS refusal. */
export function withTlsMeaning(message: string, e: unknown = message): string {
  const why = tlsRefusal(e);
  return why && !message.includes(why) ? `${message}: ${why}` : message;
}
