// The Kafka client library stays behind the port: only its adapter folder may import it, so
// replacing kafkajs touches one folder (platform/kafka/README.md).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importSpecifiers, ROOT, sourceFiles } from '../../test/support/sources.js';

const ADAPTER = 'platform/kafka/adapters/kafkajs/';
// This file names the package in its examples below.
const SELF = path
  .relative(ROOT, fileURLToPath(import.meta.url))
  .split(path.sep)
  .join('/');
const importsKafkajs = (source: string) =>
  importSpecifiers(source).some((s) => s === 'kafkajs' || s.startsWith('kafkajs/'));

describe('Kafka boundary', () => {
  it("no source file outside platform/kafka/adapters/kafkajs/ imports 'kafkajs'", () => {
    const importers = sourceFiles()
      .filter((f) => f !== SELF)
      .filter((f) => importsKafkajs(readFileSync(path.join(ROOT, f), 'utf8')));
    // The scan finds the adapter itself, so an empty result elsewhere means something.
    expect(importers.filter((f) => f.startsWith(ADAPTER))).not.toEqual([]);
    expect(importers.filter((f) => !f.startsWith(ADAPTER))).toEqual([]);
  });

  it('recognises every import form', () => {
    for (const line of [
      "import { Kafka } from 'kafkajs';",
      'import type { Admin } from "kafkajs";',
      "export * from 'kafkajs';",
      "const k = await import('kafkajs');",
      "const { Kafka } = require('kafkajs');",
      "import 'kafkajs';",
      "import x from 'kafkajs/src/index.js';",
    ])
      expect(importsKafkajs(line), line).toBe(true);
    expect(importsKafkajs("import { x } from './kafkajs-notes.js';")).toBe(false);
  });
});
