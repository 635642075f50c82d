// The rods dashboard: the campaigns a token may read; for one campaign, live (polled with ETags):
// what holds it, band counts per step beside the held-out accuracy of its checkpoints on the same
// steps, reward variance per step, the pool by origin and generation, the synthesis funnel and
// latency, aggregator lag and dead letters; and a lineage explorer.
// Read-only: it only GETs the gateway's dashboard JSON.
import './style.css';
import { accuracyPlot, type DashboardEvaluations, fmtInterval, fmtPct, stepRange } from './accuracy.js';
import {
  AuthError,
  adoptToken,
  api,
  type CampaignList,
  type DashboardSeries,
  type LineageView,
  type StatusView,
  setToken,
} from './api.js';
import { CATEGORY_COLORS, Chart, COLORS } from './charts.js';
import { el, fmtMs } from './dom.js';
import { renderLineage } from './lineage.js';
import { poll } from './poll.js';

const SERIES_MS = 3000;
const STATUS_MS = 5000;
// An evaluation scores a task in seconds to minutes: its figures change slowly.
const EVALUATIONS_MS = 10_000;
const app = document.getElementById('app')!;
const updated = document.getElementById('updated')!;
const crumb = document.getElementById('crumb')!;
const uiLink = document.getElementById('temporal-ui') as HTMLAnchorElement;
const forget = document.getElementById('forget')!;

/** Stops the page's polls (entry/dashboard/src/poll.ts). */
let polls: (() => void)[] = [];
let charts: Chart[] = [];
let meta: CampaignList | null = null;

function stop(): void {
  for (const stopPoll of polls) stopPoll();
  polls = [];
  for (const c of charts) c.destroy();
  charts = [];
}

function route(): { campaign: string | null } {
  const p = new URLSearchParams(location.hash.replace(/^#/, ''));
  return { campaign: p.get('campaign') };
}

function stamp(): void {
  updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
}

function showError(e: unknown): void {
  if (e instanceof AuthError) {
    askToken(e.message === 'no token' ? '' : e.message);
    return;
  }
  const box = document.getElementById('error') ?? el('p', { id: 'error', class: 'error' });
  box.textContent = `could not load: ${(e as Error).message}`;
  if (!box.isConnected) app.prepend(box);
}

function askToken(reason: string): void {
  stop();
  forget.hidden = true;
  crumb.textContent = '';
  const input = el('input', {
    type: 'password',
    id: 'token',
    autocomplete: 'off',
    placeholder: 'bearer token',
    size: '40',
  }) as HTMLInputElement;
  const form = el(
    'form',
    { id: 'token-form' },
    el(
      'p',
      {},
      'A gateway token (admin, read or campaign:<id>): it is sent as a Bearer header and kept for this tab only.',
    ),
    reason ? el('p', { class: 'error' }, reason) : '',
    input,
    el('button', { type: 'submit' }, 'Open'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    setToken(input.value.trim() || null);
    void render();
  });
  app.replaceChildren(form);
  input.focus();
}

async function render(): Promise<void> {
  stop();
  if (!adoptToken()) {
    askToken('');
    return;
  }
  forget.hidden = false;
  try {
    meta = await api.campaigns();
  } catch (e) {
    showError(e);
    return;
  }
  if (meta.temporalUi) {
    uiLink.href = meta.temporalUi;
    uiLink.hidden = false;
  }
  const { campaign } = route();
  if (campaign) {
    renderCampaign(campaign);
    return;
  }
  renderList(meta);
  polls.push(
    // The list was just read: the first poll waits for its period.
    poll(
      async () => {
        try {
          const next = await api.campaigns();
          // The same object when the gateway answered 304: nothing to redraw.
          if (next !== meta) {
            meta = next;
            renderList(next);
          }
          stamp();
        } catch (e) {
          showError(e);
        }
      },
      15_000,
      { startNow: false },
    ),
  );
}

function renderList(list: CampaignList): void {
  crumb.textContent = '';
  stamp();
  const rows = list.campaigns.map((c) =>
    el(
      'tr',
      {},
      el('td', {}, el('a', { href: `#campaign=${encodeURIComponent(c.campaignId)}` }, c.campaignId)),
      el('td', {}, c.name),
      el('td', {}, c.status),
      el('td', { class: 'num' }, String(c.step)),
      el('td', { class: 'num' }, String(c.poolVersion)),
      el('td', {}, new Date(c.createdAt).toLocaleString()),
    ),
  );
  app.replaceChildren(
    el(
      'section',
      { id: 'campaigns' },
      el('h2', {}, `Campaigns (${list.campaigns.length})`),
      list.campaigns.length === 0
        ? el('p', {}, 'No campaign this token may read.')
        : el(
            'table',
            {},
            el(
              'thead',
              {},
              el(
                'tr',
                {},
                ...['campaign', 'name', 'status', 'step', 'pool version', 'created'].map((h) =>
                  el('th', {}, h),
                ),
              ),
            ),
            el('tbody', {}, ...rows),
          ),
    ),
  );
}

function renderCampaign(id: string): void {
  crumb.textContent = `/ ${id}`;
  // One colour per band and per origin on every chart that shows them.
  const byBand = (['hard', 'boundary', 'mastered'] as const).map((b) => ({ label: b, color: COLORS[b] }));
  const byOrigin = (seeds: string) => [
    { label: seeds, color: COLORS.seeds },
    { label: 'generated', color: COLORS.generated },
  ];
  // The band composition and the held-out accuracy share their step range and cursor.
  const bands = new Chart(
    'bands',
    'Tasks per band at each step',
    { x: 'step', y: 'tasks', sync: 'steps' },
    byBand,
  );
  const variance = new Chart(
    'variance',
    'Mean reward variance by band',
    { x: 'step', y: 'variance' },
    byBand,
  );
  const pool = new Chart('pool', 'Active pool by origin', { x: 'step', y: 'tasks' }, byOrigin('human seeds'));
  const generations = new Chart(
    'generations',
    'Pool by generation (active tasks)',
    { x: 'generations from the seed', y: 'tasks', categories: true },
    byOrigin('seeds'),
    'bars',
  );
  const outcomes = [
    { label: 'validated', color: COLORS.boundary },
    { label: 'rejected', color: COLORS.hard },
  ];
  const latency = new Chart(
    'latency',
    'Synthesis latency (selection step, seconds to outcome)',
    { x: 'step', y: 'seconds' },
    outcomes,
    'points',
  );
  const lag = new Chart(
    'lag',
    'Aggregator lag (records), sampled by this page',
    { x: 'time', y: 'records', time: true },
    [{ label: 'total lag', color: COLORS.lag }],
  );
  const others = [variance, pool, generations, latency, lag];
  charts = [bands, ...others];
  const accuracy = accuracyPanel(id);
  charts.push(accuracy.chart());

  const summary = el('section', { id: 'summary', class: 'card' }, 'loading ...');
  const holds = el('section', { id: 'holds', class: 'card' });
  const funnel = el('section', { id: 'funnel', class: 'card' });
  const dead = el('section', { id: 'dead-letters', class: 'card' });
  const pair = el('div', { class: 'grid', id: 'steps-pair' }, bands.figure, accuracy.slot);
  const grid = el('div', { class: 'grid' }, ...others.map((c) => c.figure));
  const lineage = lineageExplorer(id);
  app.replaceChildren(
    summary,
    holds,
    pair,
    accuracy.table,
    grid,
    el('div', { class: 'row' }, funnel, dead),
    lineage,
  );

  // The steps both charts show: those of the band composition and of the evaluated checkpoints.
  let bandSteps: number[] = [];
  let evaluatedSteps: number[] = [];
  const alignSteps = () => {
    const range = stepRange(bandSteps, evaluatedSteps);
    bands.setXRange(range);
    accuracy.chart().setXRange(range);
  };

  const lagX: number[] = [];
  const lagY: (number | null)[] = [];

  const pollSeries = async () => {
    try {
      const s = await api.series(id);
      drawSeries(s, { bands, variance, pool, generations, latency });
      bandSteps = s.steps.map((p) => p.step);
      alignSteps();
      renderFunnel(funnel, s);
      stamp();
    } catch (e) {
      showError(e);
    }
  };
  const pollStatus = async () => {
    try {
      const st = await api.status(id);
      renderSummary(summary, st);
      renderHolds(holds, st);
      renderDeadLetters(dead, st);
      lagX.push(Date.now() / 1000);
      lagY.push(st.holds?.aggregator?.totalLag ?? null);
      if (lagX.length > 720) {
        lagX.shift();
        lagY.shift();
      }
      lag.update([...lagX], [[...lagY]]);
      stamp();
    } catch (e) {
      showError(e);
    }
  };
  let evaluations: DashboardEvaluations | null = null;
  const pollEvaluations = async () => {
    try {
      const next = await api.evaluations(id);
      // The same object when the gateway answered 304: nothing to redraw.
      if (next !== evaluations) {
        evaluations = next;
        evaluatedSteps = accuracy.render(next);
        alignSteps();
      }
      stamp();
    } catch (e) {
      showError(e);
    }
  };
  polls.push(poll(pollSeries, SERIES_MS), poll(pollStatus, STATUS_MS), poll(pollEvaluations, EVALUATIONS_MS));
}

/**
 * The held-out accuracy of the campaign's checkpoints: a chart of overall accuracy with its 95 %
 * interval and a dashed line per category against the trainer step (beside the band composition,
 * on its steps), and a table of every evaluation. The chart is made again when the categories
 * change (a line per category).
 */
function accuracyPanel(campaignId: string) {
  const make = (categories: string[]) =>
    new Chart(
      'accuracy',
      'Held-out accuracy per checkpoint (95% interval)',
      { x: 'step', y: 'accuracy (%)', yRange: [0, 100], sync: 'steps' },
      [
        { label: 'overall', color: COLORS.accuracy, width: 2.5 },
        ...categories.map((c, i) => ({
          label: c,
          color: CATEGORY_COLORS[i % CATEGORY_COLORS.length]!,
          width: 1.5,
          dash: [5, 4],
        })),
      ],
    );
  let chart = make([]);
  let shown = '';
  const empty = `no evaluation yet: rods eval run --campaign ${campaignId} --checkpoint K --endpoint URL --model M`;
  // In the chart's figure while it has no point to draw.
  const none = el('p', { class: 'muted chart-empty' }, 'no evaluated checkpoint to draw yet');
  chart.figure.append(none);
  const slot = el('div', { class: 'chart-slot' }, chart.figure);
  const table = el(
    'section',
    { id: 'evaluations', class: 'card' },
    el('h2', {}, 'Held-out accuracy per checkpoint'),
    el('p', { class: 'muted' }, 'loading ...'),
  );

  /** Draws the evaluations; returns the trainer steps drawn. */
  const render = (d: DashboardEvaluations): number[] => {
    const p = accuracyPlot(d.evaluations);
    const key = p.categories.join('\u001f');
    if (key !== shown) {
      const next = make(p.categories);
      const at = charts.indexOf(chart);
      if (at >= 0) charts[at] = next;
      chart.destroy();
      next.figure.append(none);
      slot.replaceChildren(next.figure);
      chart = next;
      shown = key;
    }
    chart.update(p.steps, [p.overall, ...p.byCategory], undefined, [p.intervals]);
    none.hidden = p.steps.length > 0;
    const note = (text: string) => el('p', { class: 'muted' }, text);
    table.replaceChildren(
      el('h2', {}, `Held-out accuracy per checkpoint (${d.evaluations.length})`),
      d.evaluations.length === 0
        ? el('p', { id: 'no-evaluation' }, empty)
        : evaluationTable(d, p.categories.length ? p.categories : categoriesOf(d)),
      d.truncated ? note(`the newest ${d.limit} evaluations only`) : '',
      p.notDrawn > 0
        ? note(
            `${p.notDrawn} evaluation(s) in the table are not on the chart (no checkpoint, failed, nothing scored yet, or another at the same step: completed first, then the most tasks scored)`,
          )
        : '',
    );
    return p.steps;
  };
  return { slot, table, render, chart: () => chart };
}

const categoriesOf = (d: DashboardEvaluations) => [
  ...new Set(d.evaluations.flatMap((e) => e.categories.map((c) => c.category))),
];

function evaluationTable(d: DashboardEvaluations, categories: string[]): HTMLElement {
  const cell = (a: {
    accuracy: number | null;
    interval95: [number, number];
    correct: number;
    total: number;
  }) =>
    el(
      'td',
      { class: 'num', title: `${a.correct}/${a.total}, 95% interval ${fmtInterval(a.interval95)} %` },
      a.total ? `${fmtPct(a.accuracy)} ${fmtInterval(a.interval95)}` : '-',
    );
  const rows = d.evaluations.map((e) =>
    el(
      'tr',
      { 'data-evaluation': e.evaluationId },
      el('td', { title: e.evaluationId }, e.checkpointId ?? '(base model)'),
      el('td', { class: 'num' }, e.trainerStep === null ? '-' : String(e.trainerStep)),
      el('td', {}, e.model),
      el(
        'td',
        e.reason ? { title: e.reason } : {},
        el('span', { class: `status status-${e.status}` }, e.status),
        e.reason ? ` ${e.reason.slice(0, 80)}` : '',
      ),
      el('td', { class: 'num' }, `${e.scored}/${e.tasks}`),
      cell(e.overall),
      ...categories.map((name) => {
        const c = e.categories.find((x) => x.category === name);
        return c ? cell(c) : el('td', { class: 'num' }, '-');
      }),
    ),
  );
  return el(
    'table',
    { id: 'evaluation-table' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...['checkpoint', 'step', 'model', 'status', 'scored', 'overall (95% interval)', ...categories].map(
          (h) => el('th', {}, h),
        ),
      ),
    ),
    el('tbody', {}, ...rows),
  );
}

function drawSeries(
  s: DashboardSeries,
  c: { bands: Chart; variance: Chart; pool: Chart; generations: Chart; latency: Chart },
): void {
  const x = s.steps.map((p) => p.step);
  c.bands.update(x, [
    s.steps.map((p) => p.hard),
    s.steps.map((p) => p.boundary),
    s.steps.map((p) => p.mastered),
  ]);
  c.variance.update(x, [
    s.steps.map((p) => p.varHard),
    s.steps.map((p) => p.varBoundary),
    s.steps.map((p) => p.varMastered),
  ]);
  c.pool.update(
    s.pool.map((p) => p.step),
    [s.pool.map((p) => p.seeds), s.pool.map((p) => p.generated)],
  );
  const depths = [...new Set(s.composition.map((r) => r.depth))].sort((a, b) => a - b);
  const at = (origin: string, d: number) =>
    s.composition.filter((r) => r.origin === origin && r.depth === d).reduce((a, r) => a + r.active, 0) ||
    null;
  c.generations.update(
    depths.map((_d, i) => i),
    [depths.map((d) => at('seed', d)), depths.map((d) => at('generated', d))],
    depths.map(String),
  );
  // Points per synthesis at its selection step, jittered within the step so they do not overlap.
  const lat = [...s.latency].sort((a, b) => (a.step ?? 0) - (b.step ?? 0));
  const seen = new Map<number, number>();
  const lx = lat.map((l) => {
    const k = seen.get(l.step ?? 0) ?? 0;
    seen.set(l.step ?? 0, k + 1);
    return (l.step ?? 0) + ((k % 7) - 3) * 0.06;
  });
  const order = lx.map((_, i) => i).sort((a, b) => lx[a]! - lx[b]!);
  c.latency.update(
    order.map((i) => lx[i]!),
    [
      order.map((i) => (lat[i]!.outcome === 'validated' ? lat[i]!.ms / 1000 : null)),
      order.map((i) => (lat[i]!.outcome === 'rejected' ? lat[i]!.ms / 1000 : null)),
    ],
  );
}

function renderSummary(box: HTMLElement, st: StatusView): void {
  const link = st.temporalUi
    ? el(
        'a',
        { href: st.temporalUi, target: '_blank', rel: 'noopener noreferrer', id: 'workflow-link' },
        'workflow in the Temporal UI',
      )
    : '';
  const kv = (k: string, v: string) => el('span', { class: 'kv' }, el('b', {}, k), ` ${v}`);
  box.replaceChildren(
    el('h2', {}, `${st.name} `, el('span', { class: `status status-${st.status}` }, st.status)),
    el(
      'p',
      {},
      kv('step', String(st.step)),
      kv('pool', `${st.pool.active} active (v${st.poolVersion})`),
      kv('queue', String(st.pool.queueLength)),
      kv('running syntheses', String(st.running ?? st.holds?.runningSyntheses ?? '-')),
      kv('worker', st.worker.present ? 'present' : 'absent'),
      kv('source', st.source),
      link,
    ),
  );
}

const WAITING: Record<string, string> = {
  'trainer-batches': 'the trainer: no batch received yet',
  'trainer-close': 'the trainer: batches received, none closing the step',
  'unpublished-batches': 'batches accepted but not yet on Kafka',
  'aggregator-declare': "the aggregator to read the step's closing record",
  'aggregator-groups': 'the aggregator: fewer groups counted than declared',
  'aggregator-close': "the aggregator's next sweep to close the step",
};

function renderHolds(box: HTMLElement, st: StatusView): void {
  const h = st.holds;
  const o = h?.oldestOpenStep;
  const agg = h?.aggregator;
  box.replaceChildren(
    el('h2', {}, 'What holds the campaign'),
    h?.missingStep
      ? el(
          'p',
          { id: 'waiting', class: 'missing-step' },
          `Step ${h.missingStep.step} never came: ${h.missingStep.detail} (ingestion.missingSteps: ${h.missingStep.policy}${h.missingStep.policy === 'move-on' ? ` after ${h.missingStep.afterSteps} later steps` : ''}).`,
        )
      : o
        ? el(
            'p',
            { id: 'waiting' },
            `Step ${o.step} waits for ${o.waitingFor.map((w) => WAITING[w] ?? w).join('; ') || 'nothing'} ` +
              `(${o.countedGroups}/${o.declaredGroups ?? '?'} groups counted).`,
          )
        : el(
            'p',
            { id: 'waiting' },
            `Every step the trainer sent is closed (last closed ${h?.lastClosedStep ?? 0}).`,
          ),
    el(
      'ul',
      { class: 'findings' },
      ...st.findings.map((f) =>
        el(
          'li',
          { class: `level-${f.level}`, 'data-code': f.code },
          el('b', {}, f.level),
          ` ${f.what}`,
          f.action ? el('div', { class: 'action' }, f.action) : '',
        ),
      ),
    ),
    el(
      'p',
      {},
      agg
        ? `Aggregator ${agg.groupId} on ${agg.topic}: lag ${agg.totalLag} record(s) over ${agg.partitions.length} partition(s).`
        : `Aggregator lag unread${st.errors.aggregator ? `: ${st.errors.aggregator}` : ''}.`,
    ),
  );
}

function renderDeadLetters(box: HTMLElement, st: StatusView): void {
  const d = st.holds?.deadLetters;
  const rows = Object.entries(d?.byReason ?? {}).sort((a, b) => b[1] - a[1]);
  const other = Object.entries(d?.unattributed ?? {});
  box.replaceChildren(
    el('h2', {}, `Dead letters${d ? ` (${d.total})` : ''}`),
    d
      ? el(
          'table',
          { id: 'dead-letter-table' },
          el('thead', {}, el('tr', {}, el('th', {}, 'reason'), el('th', {}, 'records'))),
          el(
            'tbody',
            {},
            ...rows.map(([r, n]) => el('tr', {}, el('td', {}, r), el('td', { class: 'num' }, String(n)))),
            ...other.map(([r, n]) =>
              el(
                'tr',
                { class: 'muted' },
                el('td', {}, `${r} (no campaign)`),
                el('td', { class: 'num' }, String(n)),
              ),
            ),
          ),
        )
      : el('p', {}, `Not read${st.errors.deadLetters ? `: ${st.errors.deadLetters}` : ''}.`),
    d ? el('p', { class: 'muted' }, `since ${d.since ?? 'the start'}; ${d.scanned} record(s) scanned`) : '',
  );
}

function renderFunnel(box: HTMLElement, s: DashboardSeries): void {
  const f = s.funnel;
  const top = Math.max(1, f.selected, f.validated + f.rejected);
  const bar = (label: string, n: number, cls = '') =>
    el(
      'div',
      { class: `funnel-row ${cls}`, 'data-stage': label },
      el('span', { class: 'label' }, label),
      el('span', { class: 'bar', style: `width:${Math.round((100 * n) / top)}%` }),
      el('span', { class: 'num' }, String(n)),
    );
  const reasons = Object.entries(f.rejectedByReason).sort((a, b) => b[1] - a[1]);
  const lat = s.latency.map((l) => l.ms).sort((a, b) => a - b);
  const median = lat.length ? lat[Math.floor(lat.length / 2)]! : null;
  box.replaceChildren(
    el('h2', {}, 'Synthesis funnel'),
    bar('selected', f.selected),
    bar('planned', f.planned),
    bar('executed', f.executed),
    bar('rewritten', f.rewritten),
    bar('judged', f.judged),
    bar('validated', f.validated, 'ok'),
    bar('rejected', f.rejected, 'bad'),
    ...reasons.map(([r, n]) => bar(`  ${r}`, n, 'bad sub')),
    bar('injected', f.injected, 'ok'),
    bar('retired', f.retired),
    bar('pruned', f.pruned),
    el(
      'p',
      { class: 'muted' },
      `median synthesis latency ${median === null ? '-' : fmtMs(median)} over ${lat.length} run(s)`,
    ),
    el('p', { class: 'muted', id: 'generator-cost' }, costLine(s.cost)),
  );
}

/** The generator's tokens: in all, and per validated and per injected task. */
function costLine(c: DashboardSeries['cost'] | undefined): string {
  if (!c || c.tokens.total === 0) return 'generator tokens: none reported';
  const n = (x: number | null) => (x === null ? '-' : x.toLocaleString('en-US'));
  return `generator tokens ${n(c.tokens.total)} (${n(c.tokens.prompt)} prompt); per validated ${n(c.perValidated)}, per injected ${n(c.perInjected)}, per useful ${n(c.perUseful)} (${c.useful} injected tasks seen in the boundary band soon after)`;
}

function lineageExplorer(campaignId: string): HTMLElement {
  const input = el('input', {
    id: 'task-search',
    type: 'search',
    placeholder: 'task id (part of it), e.g. ~',
    autocomplete: 'off',
  }) as HTMLInputElement;
  const results = el('ul', { id: 'task-results' });
  const detail = el('div', { id: 'lineage-detail' });
  const rewards = new Chart('rewards', 'Reward history (group mean per step)', { x: 'step', y: 'reward' }, [
    { label: 'task', color: COLORS.reward },
    { label: 'its seed', color: COLORS.seeds },
  ]);
  charts.push(rewards);
  const search = async () => {
    try {
      const { tasks } = await api.tasks(campaignId, input.value.trim());
      results.replaceChildren(
        ...tasks.map((t) => {
          const b = el(
            'button',
            { type: 'button', class: 'task', 'data-task': t.taskId },
            `${t.taskId} `,
            el('small', {}, `${t.origin}, depth ${t.depth}${t.active ? '' : ', removed'}`),
          );
          b.addEventListener('click', () => void show(t.taskId));
          return el('li', {}, b);
        }),
      );
      if (tasks.length === 0) results.replaceChildren(el('li', { class: 'muted' }, 'no task matches'));
    } catch (e) {
      showError(e);
    }
  };
  const show = async (taskId: string) => {
    try {
      const l: LineageView = await api.lineage(campaignId, taskId);
      detail.replaceChildren(renderLineage(l));
      let seed = l.root;
      while (seed.parents[0]) seed = seed.parents[0];
      const steps = [...new Set(l.rewards.map((r) => r.step))].sort((a, b) => a - b);
      const of = (id: string) =>
        steps.map((s) => l.rewards.find((r) => r.taskId === id && r.step === s)?.groupMean ?? null);
      rewards.update(steps, [
        of(l.root.taskId),
        seed.taskId === l.root.taskId ? steps.map(() => null) : of(seed.taskId),
      ]);
    } catch (e) {
      showError(e);
    }
  };
  const form = el('form', { id: 'task-form' }, input, el('button', { type: 'submit' }, 'Find'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void search();
  });
  return el(
    'section',
    { id: 'lineage', class: 'card' },
    el('h2', {}, 'Lineage explorer'),
    el(
      'p',
      { class: 'muted' },
      'Find a task; its ancestry to the human seed, with models, prompt hashes, judge verdicts and rewards.',
    ),
    form,
    el('div', { class: 'row' }, results, el('div', { class: 'lineage-main' }, detail, rewards.figure)),
  );
}

forget.addEventListener('click', () => {
  setToken(null);
  askToken('');
});
window.addEventListener('hashchange', () => void render());
window.addEventListener('resize', () => {
  for (const c of charts) c.resize();
});
void render();
