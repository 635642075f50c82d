// How rods connects to Kafka beyond the local stack's plaintext listener: a client properties file
// named by KAFKA_CLIENT_PROPERTIES, in the format Kafka's own CLI tools take with --command-config,
// so an operator's existing file works as it is. A setting rods does not understand is refused by
// name rather than ignored: a silently dropped `ssl.truststore.location` would mean no TLS check.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { getProperties } from 'properties-file';
import { ConfigError, loadEndpoints } from '../config/endpoints.js';

export type SecurityProtocol = 'PLAINTEXT' | 'SSL' | 'SASL_PLAINTEXT' | 'SASL_SSL';

export interface KafkaTls {
  /** PEM CA certificates the brokers' certificates must chain to (absent: the system's CAs). */
  ca?: string;
  /** Mutual TLS: the client's PEM certificate chain and private key. */
  cert?: string;
  key?: string;
  passphrase?: string;
  /** ssl.endpoint.identification.algorithm=https (the default): the broker's name is checked. */
  verifyHostname: boolean;
}

export type KafkaSasl =
  | { mechanism: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512'; username: string; password: string }
  | { mechanism: 'OAUTHBEARER'; tokenFile: string };

export interface KafkaSecurity {
  protocol: SecurityProtocol;
  tls?: KafkaTls;
  sasl?: KafkaSasl;
  /** bootstrap.servers, when the file names them. */
  bootstrapServers?: string[];
  /** One line for logs and `rods doctor`: how, never a secret. */
  describe: string;
}

const PROTOCOLS: SecurityProtocol[] = ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'];
const MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'OAUTHBEARER'] as const;
const LOGIN_MODULES: Record<(typeof MECHANISMS)[number], string> = {
  PLAIN: 'org.apache.kafka.common.security.plain.PlainLoginModule',
  'SCRAM-SHA-256': 'org.apache.kafka.common.security.scram.ScramLoginModule',
  'SCRAM-SHA-512': 'org.apache.kafka.common.security.scram.ScramLoginModule',
  OAUTHBEARER: 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule',
};
const OAUTH_FILE_HANDLER = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler';
// Kafka's config providers (KIP-297, KIP-887): `${name:path:key}` in a value is read from a file.
const PROVIDERS: Record<string, 'file' | 'directory' | 'env'> = {
  'org.apache.kafka.common.config.provider.FileConfigProvider': 'file',
  'org.apache.kafka.common.config.provider.DirectoryConfigProvider': 'directory',
  'org.apache.kafka.common.config.provider.EnvVarConfigProvider': 'env',
};

const KNOWN = new Set([
  'bootstrap.servers',
  'security.protocol',
  'sasl.mechanism',
  'sasl.jaas.config',
  'sasl.login.callback.handler.class',
  'sasl.oauthbearer.token.endpoint.url',
  'ssl.truststore.type',
  'ssl.truststore.location',
  'ssl.truststore.certificates',
  'ssl.keystore.type',
  'ssl.keystore.location',
  'ssl.keystore.certificate.chain',
  'ssl.keystore.key',
  'ssl.key.password',
  'ssl.endpoint.identification.algorithm',
  'config.providers',
]);

/** The security settings from KAFKA_CLIENT_PROPERTIES; PLAINTEXT when it is unset. */
export function loadKafkaSecurity(env: NodeJS.ProcessEnv = process.env): KafkaSecurity {
  const file = env.KAFKA_CLIENT_PROPERTIES;
  if (!file) return { protocol: 'PLAINTEXT', describe: 'plaintext' };
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(
      `KAFKA_CLIENT_PROPERTIES: cannot read ${file} (${(e as NodeJS.ErrnoException).code})`,
    );
  }
  return parseKafkaClientProperties(text, { source: file, env });
}

/** KAFKA_BROKERS, else the file's bootstrap.servers, else the local stack's broker. */
export function kafkaBootstrap(
  env: NodeJS.ProcessEnv = process.env,
  security = loadKafkaSecurity(env),
): string[] {
  if (env.KAFKA_BROKERS) return loadEndpoints(env).kafkaBrokers;
  return security.bootstrapServers ?? loadEndpoints(env).kafkaBrokers;
}

/** Parses a client properties file's text; `source` names it in errors, relative paths start at its folder. */
export function parseKafkaClientProperties(
  text: string,
  opts: { source: string; env?: NodeJS.ProcessEnv },
): KafkaSecurity {
  const where = `KAFKA_CLIENT_PROPERTIES ${opts.source}`;
  const fail = (msg: string): never => {
    throw new ConfigError(`${where}: ${msg}`);
  };
  const raw = getProperties(text);
  const providers = configProviders(raw, fail);
  const unknown = Object.keys(raw).filter(
    (k) => !KNOWN.has(k) && !/^config\.providers\.[^.]+\.class$/.test(k),
  );
  if (unknown.length > 0)
    fail(
      `${unknown.join(', ')}: not a setting rods understands (it reads ${[...KNOWN].join(', ')} and config.providers.<name>.class)`,
    );
  const base = path.dirname(path.resolve(opts.source));
  const props: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw))
    props[k] = k.startsWith('config.providers')
      ? v
      : resolveProviders(k, v, providers, base, opts.env ?? process.env, fail);
  const readPem = (key: string): string => {
    const p = path.resolve(base, props[key]!);
    try {
      return readFileSync(p, 'utf8');
    } catch (e) {
      return fail(`${key}: cannot read ${p} (${(e as NodeJS.ErrnoException).code})`);
    }
  };

  const protocol = (props['security.protocol'] ?? 'PLAINTEXT').toUpperCase() as SecurityProtocol;
  if (!PROTOCOLS.includes(protocol))
    fail(`security.protocol=${props['security.protocol']}: expected one of ${PROTOCOLS.join(', ')}`);
  const usesTls = protocol === 'SSL' || protocol === 'SASL_SSL';
  const usesSasl = protocol.startsWith('SASL_');

  const sslKeys = Object.keys(props).filter((k) => k.startsWith('ssl.'));
  if (!usesTls && sslKeys.length > 0)
    fail(`${sslKeys.join(', ')} given, but security.protocol=${protocol} has no TLS`);
  const saslKeys = Object.keys(props).filter((k) => k.startsWith('sasl.'));
  if (!usesSasl && saslKeys.length > 0)
    fail(`${saslKeys.join(', ')} given, but security.protocol=${protocol} has no SASL`);

  let tls: KafkaTls | undefined;
  if (usesTls) {
    tls = { verifyHostname: true };
    for (const k of ['ssl.truststore.type', 'ssl.keystore.type'])
      if (props[k] !== undefined && props[k]!.toUpperCase() !== 'PEM')
        fail(
          `${k}=${props[k]}: rods reads PEM only (convert: keytool -exportcert -rfc for a truststore, openssl pkcs12 -nodes for a keystore)`,
        );
    if (props['ssl.truststore.location'] && props['ssl.truststore.certificates'])
      fail('ssl.truststore.location and ssl.truststore.certificates: give one');
    if (props['ssl.truststore.location']) tls.ca = readPem('ssl.truststore.location');
    if (props['ssl.truststore.certificates']) tls.ca = props['ssl.truststore.certificates'];
    if (tls.ca !== undefined && !/-----BEGIN CERTIFICATE-----/.test(tls.ca))
      fail('ssl.truststore: no PEM certificate in it');
    if (
      props['ssl.keystore.location'] &&
      (props['ssl.keystore.certificate.chain'] || props['ssl.keystore.key'])
    )
      fail('ssl.keystore.location and ssl.keystore.certificate.chain/ssl.keystore.key: give one');
    if (props['ssl.keystore.location']) {
      // A PEM keystore file holds the private key and the certificate chain together.
      const pem = readPem('ssl.keystore.location');
      tls.key = pemBlocks(pem, /PRIVATE KEY/).join('');
      tls.cert = pemBlocks(pem, /^CERTIFICATE$/).join('');
      if (!tls.key || !tls.cert)
        fail('ssl.keystore.location: expected a PEM private key and certificate in it');
    } else if (props['ssl.keystore.certificate.chain'] || props['ssl.keystore.key']) {
      if (!props['ssl.keystore.certificate.chain'] || !props['ssl.keystore.key'])
        fail('ssl.keystore.certificate.chain and ssl.keystore.key: give both');
      tls.cert = props['ssl.keystore.certificate.chain'];
      tls.key = props['ssl.keystore.key'];
    }
    if (props['ssl.key.password']) {
      if (!tls.key) fail('ssl.key.password given without a keystore');
      tls.passphrase = props['ssl.key.password'];
    }
    const algo = props['ssl.endpoint.identification.algorithm'];
    if (algo !== undefined) {
      if (algo === '') tls.verifyHostname = false;
      else if (algo.toLowerCase() !== 'https')
        fail(
          `ssl.endpoint.identification.algorithm=${algo}: expected https, or empty to skip the name check`,
        );
    }
  }

  let sasl: KafkaSasl | undefined;
  if (usesSasl) {
    const mechanism = (props['sasl.mechanism'] ?? 'GSSAPI').toUpperCase();
    if (!(MECHANISMS as readonly string[]).includes(mechanism))
      fail(
        `sasl.mechanism=${mechanism}${props['sasl.mechanism'] ? '' : ' (the default)'}: rods speaks ${MECHANISMS.join(', ')}`,
      );
    const m = mechanism as (typeof MECHANISMS)[number];
    const jaas = props['sasl.jaas.config'];
    const login = jaas === undefined ? undefined : parseJaas(jaas, fail);
    if (login && login.module !== LOGIN_MODULES[m])
      fail(`sasl.jaas.config: ${login.module} does not serve sasl.mechanism=${m} (${LOGIN_MODULES[m]} does)`);
    if (m === 'OAUTHBEARER') {
      const handler = props['sasl.login.callback.handler.class'];
      if (handler !== undefined && handler !== OAUTH_FILE_HANDLER)
        fail(
          `sasl.login.callback.handler.class=${handler}: rods takes ${OAUTH_FILE_HANDLER} with a file: token URL`,
        );
      const url = props['sasl.oauthbearer.token.endpoint.url'];
      if (!url?.startsWith('file:'))
        fail(
          'OAUTHBEARER: rods reads the token from a file: set sasl.oauthbearer.token.endpoint.url=file:///path/to/token (a JWT, re-read before it expires)',
        );
      const extra = Object.keys(login?.options ?? {});
      if (extra.length > 0) fail(`sasl.jaas.config: ${extra.join(', ')}: not used with a token file`);
      sasl = { mechanism: 'OAUTHBEARER', tokenFile: path.resolve(base, new URL(url!).pathname) };
    } else {
      if (!login) fail(`sasl.mechanism=${m} needs sasl.jaas.config with username and password`);
      const { username, password, ...rest } = login!.options;
      if (!username || password === undefined)
        fail('sasl.jaas.config: needs username="..." and password="..."');
      // tokenauth (delegation tokens) included: the client library cannot use them.
      const extra = Object.keys(rest);
      if (extra.length > 0) fail(`sasl.jaas.config: ${extra.join(', ')}: not an option rods understands`);
      sasl = { mechanism: m, username: username!, password: password! };
    }
  }

  const bootstrap = props['bootstrap.servers']
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const parts: string[] = [protocol];
  if (sasl)
    parts.push(
      sasl.mechanism === 'OAUTHBEARER'
        ? `OAUTHBEARER token file ${sasl.tokenFile}`
        : `${sasl.mechanism} as ${sasl.username}`,
    );
  if (tls) {
    parts.push(tls.ca ? 'CA from the properties file' : "the system's CAs");
    if (tls.cert) parts.push('client certificate');
    if (!tls.verifyHostname) parts.push('broker names not checked');
  }
  return {
    protocol,
    ...(tls ? { tls } : {}),
    ...(sasl ? { sasl } : {}),
    ...(bootstrap?.length ? { bootstrapServers: bootstrap } : {}),
    describe: parts.join(', '),
  };
}

/** `config.providers=a,b` with `config.providers.a.class=...`: the aliases rods can resolve. */
function configProviders(
  raw: Record<string, string>,
  fail: (m: string) => never,
): Map<string, 'file' | 'directory' | 'env'> {
  const out = new Map<string, 'file' | 'directory' | 'env'>();
  const names = (raw['config.providers'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const name of names) {
    const cls = raw[`config.providers.${name}.class`];
    if (!cls) fail(`config.providers names ${name} but config.providers.${name}.class is not set`);
    const kind = PROVIDERS[cls!];
    if (!kind)
      fail(`config.providers.${name}.class=${cls}: rods resolves ${Object.keys(PROVIDERS).join(', ')}`);
    out.set(name, kind!);
  }
  for (const k of Object.keys(raw)) {
    const m = /^config\.providers\.([^.]+)\.class$/.exec(k);
    if (m && !out.has(m[1]!)) fail(`${k} is set but config.providers does not list ${m[1]}`);
  }
  return out;
}

/** Replaces `${alias:path:key}` (and `${alias:key}`) with what the provider reads. */
function resolveProviders(
  key: string,
  value: string,
  providers: Map<string, 'file' | 'directory' | 'env'>,
  base: string,
  env: NodeJS.ProcessEnv,
  fail: (m: string) => never,
): string {
  return value.replace(
    /\$\{([^}:]+):(?:([^}]*?):)?([^}]*?)\}/g,
    (_m, alias: string, p: string | undefined, k: string) => {
      const kind = providers.get(alias);
      if (!kind) fail(`${key}: \${${alias}:...} names no provider listed in config.providers`);
      if (kind === 'env') {
        const v = env[k];
        if (v === undefined) fail(`${key}: environment variable ${k} (\${${alias}:${k}}) is not set`);
        return v!;
      }
      if (!p) fail(`${key}: \${${alias}:path:key} needs a path`);
      const target = path.resolve(base, p!);
      if (kind === 'directory') return readSecret(path.join(target, k), key, fail).replace(/\r?\n$/, '');
      const values = getProperties(readSecret(target, key, fail));
      const v = values[k];
      if (v === undefined) fail(`${key}: ${target} has no key ${k}`);
      return v!;
    },
  );
}

function readSecret(file: string, key: string, fail: (m: string) => never): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    return fail(`${key}: cannot read ${file} (${(e as NodeJS.ErrnoException).code})`);
  }
}

/** `Module required a="b" c="d";` → the module and its options (JAAS syntax, one login module). */
export function parseJaas(
  text: string,
  fail: (m: string) => never,
): { module: string; options: Record<string, string> } {
  const m = /^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*([\s\S]*?)\s*;\s*$/.exec(text);
  if (!m) return fail('sasl.jaas.config: expected "<LoginModule> required key=\\"value\\" ...;"');
  const options: Record<string, string> = {};
  const opt = /([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s"]+))\s*/gy;
  const body = m[3]!;
  let at = 0;
  while (at < body.length) {
    opt.lastIndex = at;
    const o = opt.exec(body);
    // The option's text is not echoed: it may hold a password.
    if (!o)
      return fail(`sasl.jaas.config: cannot read the options after ${m[1]} (expected key="value" pairs)`);
    options[o[1]!] = o[2] !== undefined ? o[2].replace(/\\(.)/g, '$1') : o[3]!;
    at = opt.lastIndex;
  }
  return { module: m[1]!, options };
}

function pemBlocks(pem: string, label: RegExp): string[] {
  const out: string[] = [];
  for (const b of pem.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----\n?/g))
    if (label.test(b[1]!)) out.push(b[0].endsWith('\n') ? b[0] : `${b[0]}\n`);
  return out;
}

/**
 * An OAUTHBEARER token provider reading the token file each time the client (re)authenticates:
 * a token written anew by the operator's refresher is used at the next login. An expired token is
 * refused by name, with when it expired, instead of a broker's bare authentication failure.
 */
export function oauthTokenFromFile(
  file: string,
  now: () => number = Date.now,
): () => Promise<{ value: string }> {
  return async () => {
    let value: string;
    try {
      value = readFileSync(file, 'utf8').trim(); // small, and read only at a login
    } catch (e) {
      throw new ConfigError(
        `OAUTHBEARER token file ${file}: cannot read it (${(e as NodeJS.ErrnoException).code})`,
      );
    }
    if (!value) throw new ConfigError(`OAUTHBEARER token file ${file} is empty`);
    const exp = jwtExpiry(value);
    if (exp !== undefined && exp * 1000 <= now())
      throw new ConfigError(
        `OAUTHBEARER token in ${file} expired at ${new Date(exp * 1000).toISOString()}: write a fresh token there`,
      );
    return { value };
  };
}

/** A JWT's `exp` (seconds), when the token is a JWT that has one. */
function jwtExpiry(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const exp = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')).exp;
    return typeof exp === 'number' ? exp : undefined;
  } catch {
    return undefined;
  }
}
