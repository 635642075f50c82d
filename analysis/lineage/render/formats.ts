// The output formats of `rods lineage` and the one entry point that picks the rendering.
import type { Lineage } from '../model.js';
import { renderDot } from './dot.js';
import { renderJson } from './json.js';
import { renderMermaid } from './mermaid.js';
import { renderTree } from './tree.js';

export const LINEAGE_FORMATS = ['tree', 'json', 'dot', 'mermaid'] as const;
export type LineageFormat = (typeof LINEAGE_FORMATS)[number];

export function renderLineage(l: Lineage, format: LineageFormat): string {
  switch (format) {
    case 'tree':
      return renderTree(l);
    case 'json':
      return renderJson(l);
    case 'dot':
      return renderDot(l);
    case 'mermaid':
      return renderMermaid(l);
  }
}
