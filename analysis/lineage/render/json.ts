// The JSON rendering of a lineage (`--format json`): the model as it is, indented.
import type { Lineage } from '../model.js';

export function renderJson(l: Lineage): string {
  return `${JSON.stringify(l, null, 2)}\n`;
}
