// The Python client's version is the gateway's API version (no services: reads the files).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { API_VERSION } from '../../entry/gateway/api-version.js';
import { openApiDocument } from '../../entry/gateway/openapi.js';

const read = (p: string) => readFileSync(new URL(p, import.meta.url), 'utf8');

describe('Python client version', () => {
  it('equals the API version the gateway declares', () => {
    const declared = read('./rods_client/__init__.py').match(/^__version__ = "([^"]+)"$/m)?.[1];
    expect(declared).toBe(API_VERSION);
    expect((openApiDocument().info as { version: string }).version).toBe(API_VERSION);
  });

  it('is the one pyproject.toml builds the package with, and the package has no runtime dependency', () => {
    const pyproject = read('./pyproject.toml');
    expect(pyproject).toMatch(/^dynamic = \["version"\]$/m);
    expect(pyproject).toMatch(/^dependencies = \[\]$/m);
    expect(pyproject).toMatch(/^name = "rods_client"$/m); // flit reads __version__ from this module
  });
});
