// Where the schemas live and how their files are named:
//   schemas/events/<Name>.avsc          the current schema of each event (what writers use)
//   schemas/published/<Name>.v<N>.avsc  every version ever published, the current one included
// Each schema carries its version in the custom attribute "rods.version" (custom attributes are
// not part of the Parsing Canonical Form, so the version does not change the fingerprint).
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SCHEMAS_DIR = fileURLToPath(new URL('../../schemas/', import.meta.url));
export const NAMESPACE = 'rods.v1';
export const VERSION_ATTRIBUTE = 'rods.version';

export interface SchemaSource {
  /** Path shown to people, relative to the project root (e.g. schemas/events/StepClosed.avsc). */
  file: string;
  /** The parsed schema JSON. */
  schema: unknown;
}

export interface SchemaSources {
  published: SchemaSource[];
  current: SchemaSource[];
}

const PUBLISHED_FILE = /^([A-Za-z_][A-Za-z0-9_]*)\.v([1-9][0-9]*)\.avsc$/;
const CURRENT_FILE = /^([A-Za-z_][A-Za-z0-9_]*)\.avsc$/;

/** What a schema file's name says about it; throws if the name does not follow the layout. */
export function parseSchemaFileName(file: string): { name: string; version?: number } {
  const base = basename(file);
  const published = PUBLISHED_FILE.exec(base);
  if (published) return { name: published[1]!, version: Number(published[2]) };
  const current = CURRENT_FILE.exec(base);
  if (current) return { name: current[1]! };
  throw new Error(`${file}: schema files are named <Name>.avsc (current) or <Name>.v<N>.avsc (published)`);
}

function readDir(root: string, sub: string): SchemaSource[] {
  const dir = join(root, sub);
  const display = dirname(root.replace(/[/\\]+$/, ''));
  return readdirSync(dir)
    .filter((f) => f.endsWith('.avsc'))
    .sort()
    .map((f) => {
      const path = join(dir, f);
      const file = relative(display, path);
      let schema: unknown;
      try {
        schema = JSON.parse(readFileSync(path, 'utf8'));
      } catch (e) {
        throw new Error(`${file}: not valid JSON: ${(e as Error).message}`);
      }
      return { file, schema };
    });
}

/** Reads schemas/events and schemas/published (or the same layout under another root). */
export function loadSchemaSources(root: string = SCHEMAS_DIR): SchemaSources {
  return { published: readDir(root, 'published'), current: readDir(root, 'events') };
}
