// Small SVG charts for the demo report: line charts over steps and bar charts. The y axis runs
// from 0 to a round maximum with round ticks (d3-scale's nice()), its title clear of the labels.
import { scaleLinear } from 'd3-scale';

const W = 720;
const H = 360;
const M = { left: 68, right: 150, top: 36, bottom: 44 };
const COLORS = ['#d62728', '#2ca02c', '#1f77b4', '#ff7f0e', '#9467bd', '#8c564b'];

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** The y axis of values up to `max`: a round top and its ticks (about five of them). */
export function yAxis(max: number): { top: number; ticks: number[]; format: (v: number) => string } {
  const scale = scaleLinear()
    .domain([0, max > 0 ? max : 1])
    .nice(5);
  const ticks = scale.ticks(5);
  const top = scale.domain()[1]!;
  // 10k and up in SI units (200k, 1.2M), so no label runs into the axis title.
  const format = scale.tickFormat(5, top >= 1e4 ? '~s' : undefined);
  return { top, ticks, format };
}

function frame(
  title: string,
  body: string,
  axis: ReturnType<typeof yAxis>,
  xLabel: string,
  yLabel: string,
  xTicks: string,
): string {
  const ih = H - M.top - M.bottom;
  const yTicks = axis.ticks
    .map((v) => {
      const y = M.top + ih - (ih * v) / axis.top;
      return `<line x1="${M.left}" x2="${W - M.right}" y1="${y}" y2="${y}" stroke="#eee"/><text x="${M.left - 6}" y="${y + 4}" text-anchor="end" font-size="11">${axis.format(v)}</text>`;
    })
    .join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">
<rect width="${W}" height="${H}" fill="white"/>
<text x="${W / 2}" y="20" text-anchor="middle" font-size="15">${esc(title)}</text>
${yTicks}
<line x1="${M.left}" y1="${H - M.bottom}" x2="${W - M.right}" y2="${H - M.bottom}" stroke="#333"/>
<line x1="${M.left}" y1="${M.top}" x2="${M.left}" y2="${H - M.bottom}" stroke="#333"/>
${xTicks}
<text x="${(M.left + W - M.right) / 2}" y="${H - 8}" text-anchor="middle" font-size="12">${esc(xLabel)}</text>
<text x="14" y="${H / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 14 ${H / 2})">${esc(yLabel)}</text>
${body}
</svg>
`;
}

/** One line per series over x = 1..n. */
export function lineChart(
  title: string,
  xLabel: string,
  yLabel: string,
  series: { name: string; values: (number | null)[] }[],
): string {
  const n = Math.max(1, ...series.map((s) => s.values.length));
  const axis = yAxis(Math.max(0, ...series.flatMap((s) => s.values.filter((v): v is number => v !== null))));
  const yMax = axis.top;
  const iw = W - M.left - M.right;
  const ih = H - M.top - M.bottom;
  const x = (i: number) => M.left + (n === 1 ? iw / 2 : (iw * i) / (n - 1));
  const y = (v: number) => M.top + ih - (ih * v) / yMax;
  const lines = series
    .map((s, k) => {
      const pts = s.values
        .map((v, i) => (v === null ? null : `${x(i).toFixed(1)},${y(v).toFixed(1)}`))
        .filter(Boolean);
      const color = COLORS[k % COLORS.length];
      return `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.join(' ')}"/>
<rect x="${W - M.right + 12}" y="${M.top + 18 * k}" width="12" height="12" fill="${color}"/><text x="${W - M.right + 30}" y="${M.top + 18 * k + 11}" font-size="12">${esc(s.name)}</text>`;
    })
    .join('\n');
  const step = Math.max(1, Math.ceil(n / 10));
  const xTicks = Array.from({ length: n }, (_, i) => i)
    .filter((i) => i % step === 0 || i === n - 1)
    .map(
      (i) => `<text x="${x(i)}" y="${H - M.bottom + 16}" text-anchor="middle" font-size="11">${i + 1}</text>`,
    )
    .join('');
  return frame(title, lines, axis, xLabel, yLabel, xTicks);
}

/** Vertical bars with labels. */
export function barChart(
  title: string,
  xLabel: string,
  yLabel: string,
  bars: { label: string; value: number }[],
  note?: string,
): string {
  // Headroom above the tallest bar for its value label.
  const axis = yAxis(Math.max(0, ...bars.map((b) => b.value)) * 1.08);
  const yMax = axis.top;
  const iw = W - M.left - M.right;
  const ih = H - M.top - M.bottom;
  const bw = iw / Math.max(1, bars.length);
  const body = bars
    .map((b, i) => {
      const h = (ih * b.value) / yMax;
      const x0 = M.left + i * bw + bw * 0.15;
      return `<rect x="${x0.toFixed(1)}" y="${(M.top + ih - h).toFixed(1)}" width="${(bw * 0.7).toFixed(1)}" height="${h.toFixed(1)}" fill="${COLORS[i % COLORS.length]}"/>
<text x="${(x0 + bw * 0.35).toFixed(1)}" y="${(M.top + ih - h - 4).toFixed(1)}" text-anchor="middle" font-size="11">${Number(b.value.toPrecision(3))}</text>`;
    })
    .join('\n');
  const xTicks = bars
    .map(
      (b, i) =>
        `<text x="${(M.left + i * bw + bw / 2).toFixed(1)}" y="${H - M.bottom + 16}" text-anchor="middle" font-size="11">${esc(b.label)}</text>`,
    )
    .join('');
  const extra = note
    ? `<text x="${W - M.right + 12}" y="${M.top + 12}" font-size="12">${esc(note)}</text>`
    : '';
  return frame(title, body + extra, axis, xLabel, yLabel, xTicks);
}
