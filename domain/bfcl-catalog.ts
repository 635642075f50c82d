// Lookups on the generated BFCL method catalog (bfcl-catalog.generated.ts).
import { BFCL_CATALOG, type CatalogMethod } from './bfcl-catalog.generated.js';

export { BFCL_CATALOG };

/** The class that owns `name` among `classes` (the later class wins, as in bfcl's name mapping). */
export function classOf(name: string, classes: readonly string[]): string | null {
  let owner: string | null = null;
  for (const c of classes) if (BFCL_CATALOG[c]?.[name]) owner = c;
  return owner;
}

export function methodOf(cls: string | null, name: string): CatalogMethod | undefined {
  return cls ? BFCL_CATALOG[cls]?.[name] : undefined;
}

/** Parameter names of a method, in order (for positional arguments). */
export function paramNames(cls: string | null, name: string): string[] {
  return methodOf(cls, name)?.params.map((p) => p.name) ?? [];
}

export function isReadOnly(cls: string | null, name: string): boolean {
  return methodOf(cls, name)?.readOnly ?? false;
}
