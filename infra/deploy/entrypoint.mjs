#!/usr/bin/env node
// The container's entrypoint: reads the secrets that rods takes only as environment variables from
// mounted files (compose `secrets:`, Kubernetes Secret volumes), then runs the `rods` CLI in this
// same process, so that node stays PID 1 and each role gets SIGTERM itself.
//
//   NAME_FILE=/path         NAME is set to the file's content (trailing newline dropped), for
//                           the names below only; NAME and NAME_FILE together are refused. (The
//                           CLI learns the same convention for most of them, platform/config/
//                           secret-files.ts; read here first, NAME_FILE is removed so that the two
//                           never both see NAME and NAME_FILE.)
//   DATABASE_PASSWORD_FILE  the password put into DATABASE_URL (a URL with a user and no password);
//   RODS_MIGRATE_DATABASE_PASSWORD_FILE  the same for RODS_MIGRATE_DATABASE_URL.
//
// Settings that rods already reads from a file keep their own names and need nothing here:
// RODS_GATEWAY_TOKENS_FILE, RODS_EXECUTOR_TOKEN_FILE, RODS_GENERATOR_ENDPOINTS_FILE,
// TEMPORAL_API_KEY_FILE, TEMPORAL_TLS_*_PATH, KAFKA_CLIENT_PROPERTIES and the TLS files that a
// database URL names (sslrootcert, sslcert, sslkey). No secret is printed.
import { readFileSync } from 'node:fs';

const FROM_FILE = [
  'DATABASE_URL',
  'RODS_MIGRATE_DATABASE_URL',
  'RODS_AUDIT_HMAC_KEY',
  'RODS_GENERATOR_API_KEY',
  'RODS_GENERATOR_HEADERS',
];
const PASSWORD_FILE = {
  DATABASE_PASSWORD_FILE: 'DATABASE_URL',
  RODS_MIGRATE_DATABASE_PASSWORD_FILE: 'RODS_MIGRATE_DATABASE_URL',
};

function fail(message) {
  console.error(`rods entrypoint: ${message}`);
  process.exit(2);
}

function readSecret(variable) {
  const file = process.env[variable];
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    fail(`${variable}: cannot read ${file}: ${e.code ?? e.message}`);
  }
  const value = text.replace(/\r?\n$/, '');
  if (value === '') fail(`${variable}: ${file} is empty`);
  return value;
}

for (const name of FROM_FILE) {
  const variable = `${name}_FILE`;
  if (!process.env[variable]) continue;
  if (process.env[name]) fail(`both ${name} and ${variable} are set: keep one`);
  process.env[name] = readSecret(variable);
  // read here: the CLI, which reads the same NAME_FILE variables itself, sees NAME only
  delete process.env[variable];
}

for (const [variable, name] of Object.entries(PASSWORD_FILE)) {
  if (!process.env[variable]) continue;
  const raw = process.env[name];
  if (!raw) fail(`${variable} is set but ${name} is not: set ${name} to the URL without its password`);
  let url;
  try {
    url = new URL(raw);
  } catch {
    fail(`${name} is not a URL`);
  }
  if (!url.username) fail(`${name} names no user for the password of ${variable}`);
  if (url.password) fail(`${name} carries a password and ${variable} is set: keep one`);
  url.password = encodeURIComponent(readSecret(variable));
  process.env[name] = url.toString();
  delete process.env[variable];
}

await import('../../bin/rods.mjs');
