// A task's lineage as nested cards: the task, then each parent up to the human seed; per
// derivation the step, policy version, generator model, each stage's model, prompt version hash
// and output hash, and the judge's verdict, scores and reasons.
import type { LineageView } from './api.js';
import { el, short } from './dom.js';

type Node = LineageView['root'];

function stageTable(n: Node): HTMLElement | string {
  const d = n.derivation;
  if (!d || d.stages.length === 0) return '';
  return el(
    'table',
    { class: 'stages' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...['stage', 'attempt', 'model', 'prompt hash', 'output hash'].map((h) => el('th', {}, h)),
      ),
    ),
    el(
      'tbody',
      {},
      ...d.stages.map((s) =>
        el(
          'tr',
          {},
          el('td', {}, s.stage),
          el('td', { class: 'num' }, String(s.attempt)),
          el('td', {}, s.model ?? '(environment)'),
          el('td', { title: s.promptVersionHash ?? '', class: 'hash' }, short(s.promptVersionHash)),
          el('td', { title: s.outputHash, class: 'hash' }, short(s.outputHash)),
        ),
      ),
    ),
  );
}

function judge(n: Node): HTMLElement | string {
  const j = n.derivation?.judge;
  if (!j) return '';
  const scores = Object.entries(j.scores)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return el(
    'div',
    { class: 'judge' },
    el('b', {}, 'judge '),
    `${j.model ?? '-'}: ${j.verdict ?? '-'}${j.refined ? ' (after one refinement)' : ''}`,
    scores ? el('div', { class: 'muted' }, scores) : '',
    ...j.reasons.map((r) => el('div', { class: 'reason' }, r)),
  );
}

function card(n: Node): HTMLElement {
  const d = n.derivation;
  const life = n.life;
  const bands = life.bandChanges.map((b) => `${b.to}@${b.step}`).join(' → ');
  return el(
    'div',
    { class: `lineage-node origin-${n.origin}`, 'data-task': n.taskId, 'data-origin': n.origin },
    el(
      'div',
      { class: 'node-head' },
      el(
        'span',
        { class: `badge ${n.origin}` },
        n.origin === 'seed' ? 'human seed' : `generation ${n.depth}`,
      ),
      el('code', {}, n.taskId),
      el('span', { class: 'muted' }, ` ${n.category ?? ''} · ${life.status}`),
    ),
    d
      ? el(
          'div',
          { class: 'derivation' },
          el(
            'div',
            {},
            `synthesis ${d.synthesisId ?? '-'} · selected at step ${d.step ?? '-'} (policy ${d.policyVersion ?? '-'}, φ ${d.parentPhi?.toFixed(3) ?? '-'}) · generator ${d.generatorModel ?? '-'}`,
          ),
          stageTable(n),
          judge(n),
        )
      : el('div', { class: 'muted' }, `seeded${life.seeded?.source ? ` from ${life.seeded.source}` : ''}`),
    life.injected
      ? el(
          'div',
          { class: 'muted' },
          `injected at step ${life.injected.step} (pool v${life.injected.poolVersion})`,
        )
      : '',
    bands ? el('div', { class: 'muted' }, `bands: ${bands}`) : '',
    n.missingParents.length
      ? el('div', { class: 'error' }, `missing parents: ${n.missingParents.join(', ')}`)
      : '',
    n.parents.length ? el('div', { class: 'parents' }, ...n.parents.map(card)) : '',
  );
}

export function renderLineage(l: LineageView): HTMLElement {
  return el(
    'div',
    { class: 'lineage', 'data-complete': String(l.complete) },
    el(
      'p',
      {},
      l.complete
        ? 'Every chain ends at a human seed.'
        : el('span', { class: 'error' }, 'The chain is broken.'),
    ),
    card(l.root),
  );
}
