import { describe, expect, it } from 'vitest';
import { C, events } from '../../../test/support/lineage/events.js';
import { LineageIndex } from '../model.js';
import { renderDot } from './dot.js';
import { LINEAGE_FORMATS, renderLineage } from './formats.js';
import { renderMermaid } from './mermaid.js';
import { renderTree } from './tree.js';

describe('lineage renderings', () => {
  it('renders tree, dot and mermaid', () => {
    const l = new LineageIndex(C, events()).lineage('s~s2~s5')!;
    const tree = renderTree(l);
    expect(tree).toContain('human seed s');
    expect(tree).toContain('judge: accept by judge');
    expect(tree).toContain('pruned: step 7');
    const dot = renderDot(l);
    expect(dot.startsWith('digraph lineage {')).toBe(true);
    expect(dot).toContain('"s" -> "s~s2"');
    expect(dot).toContain('"s~s2" -> "s~s2~s5"');
    const mermaid = renderMermaid(l);
    expect(mermaid.startsWith('graph TD\n')).toBe(true);
    expect(mermaid.match(/-->/g)?.length).toBe(2);
  });

  it('flags an incomplete chain in the tree', () => {
    const evs = events().filter((e) => !(e.type === 'TaskSeeded' && e.payload.taskId === 's'));
    const l = new LineageIndex(C, evs).lineage('s~s2')!;
    expect(renderTree(l)).toContain('INCOMPLETE');
    expect(renderTree(new LineageIndex(C, events()).lineage('s~s2')!)).not.toContain('INCOMPLETE');
  });

  it('picks the rendering by format; json is the model itself', () => {
    const l = new LineageIndex(C, events()).lineage('s~s2~s5')!;
    expect(renderLineage(l, 'tree')).toBe(renderTree(l));
    expect(renderLineage(l, 'dot')).toBe(renderDot(l));
    expect(renderLineage(l, 'mermaid')).toBe(renderMermaid(l));
    expect(JSON.parse(renderLineage(l, 'json'))).toEqual(JSON.parse(JSON.stringify(l)));
    expect(LINEAGE_FORMATS).toEqual(['tree', 'json', 'dot', 'mermaid']);
  });
});
