// uPlot charts of the dashboard: lines per step, bars per category, points per synthesis; a line
// may carry an interval at each point (error bars), and charts may share their step range and
// cursor. Each chart's figure says how many data points it drew (data-points), which the browser
// test reads beside the pixels.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export const COLORS = {
  hard: '#d62728',
  boundary: '#2ca02c',
  mastered: '#1f77b4',
  seeds: '#8c564b',
  generated: '#9467bd',
  latency: '#ff7f0e',
  lag: '#17becf',
  reward: '#e377c2',
  accuracy: '#1d2330',
} as const;

/** Colours of the evaluation categories, in the order they appear. */
export const CATEGORY_COLORS = ['#bcbd22', '#17becf', '#ff7f0e', '#7f7f7f', '#e377c2', '#8c564b'] as const;

export interface SeriesSpec {
  label: string;
  color: string;
  /** Line width (lines only; default 2) and dash pattern. */
  width?: number;
  dash?: number[];
}

/** A low–high interval per x (null: none there). */
export type Intervals = ([number, number] | null)[];

export type ChartKind = 'lines' | 'bars' | 'points';

export class Chart {
  readonly figure: HTMLElement;
  private plot: uPlot | undefined;
  private readonly body: HTMLElement;

  constructor(
    readonly id: string,
    title: string,
    private readonly axes: {
      x: string;
      y: string;
      time?: boolean;
      categories?: boolean;
      /** A fixed y range (default: from 0 to a tenth above the highest value). */
      yRange?: [number, number];
      /** Charts with the same key show their cursor at the same x. */
      sync?: string;
    },
    private readonly specs: SeriesSpec[],
    private readonly kind: ChartKind = 'lines',
  ) {
    this.figure = document.createElement('figure');
    this.figure.className = 'chart';
    this.figure.dataset.chart = id;
    this.figure.dataset.points = '0';
    const cap = document.createElement('figcaption');
    cap.textContent = title;
    this.body = document.createElement('div');
    this.body.className = 'plot';
    this.figure.append(cap, this.body);
  }

  /**
   * x values and one array per series (null: no value there); `intervals[i]`, when given, is
   * drawn as error bars of series i.
   */
  update(
    x: number[],
    ys: (number | null)[][],
    labels?: string[],
    intervals?: (Intervals | undefined)[],
  ): void {
    const data = [x, ...ys] as uPlot.AlignedData;
    this.figure.dataset.points = String(
      ys.reduce((a, s) => a + s.filter((v) => v !== null && Number.isFinite(v)).length, 0),
    );
    this.figure.classList.toggle('empty', x.length === 0);
    if (labels) this.labels = labels;
    this.intervals = intervals ?? [];
    if (this.plot) this.plot.setData(data);
    else this.plot = new uPlot(this.options(), data, this.body);
    this.applyXRange();
    // Time charts show at least the last minute: one sample alone would stretch the axis over years.
    const last = x[x.length - 1];
    if (this.axes.time && last !== undefined)
      this.plot.setScale('x', { min: Math.min(x[0] ?? last, last - 60), max: last + 1 });
  }

  private labels: string[] = [];
  private intervals: (Intervals | undefined)[] = [];
  private xRange: [number, number] | null = null;

  /** Shows these x values whatever the data's (null: the data's own range), as another chart does. */
  setXRange(range: [number, number] | null): void {
    const same = range && this.xRange && range[0] === this.xRange[0] && range[1] === this.xRange[1];
    this.xRange = range;
    if (!same) this.applyXRange();
  }

  private applyXRange(): void {
    if (this.plot && this.xRange) this.plot.setScale('x', { min: this.xRange[0], max: this.xRange[1] });
  }

  /** Error bars of the series that have intervals, with a tick at either end. */
  private drawIntervals(u: uPlot): void {
    const ctx = u.ctx;
    const tick = 4 * devicePixelRatio;
    this.intervals.forEach((iv, i) => {
      const s = u.series[i + 1];
      if (!iv || !s?.show) return;
      ctx.save();
      ctx.strokeStyle = this.specs[i]?.color ?? '#000';
      ctx.lineWidth = 1.5 * devicePixelRatio;
      ctx.beginPath();
      iv.forEach((r, j) => {
        const xv = u.data[0][j];
        if (!r || xv === undefined) return;
        const x = u.valToPos(xv, 'x', true);
        const lo = u.valToPos(r[0], 'y', true);
        const hi = u.valToPos(r[1], 'y', true);
        ctx.moveTo(x, lo);
        ctx.lineTo(x, hi);
        ctx.moveTo(x - tick, lo);
        ctx.lineTo(x + tick, lo);
        ctx.moveTo(x - tick, hi);
        ctx.lineTo(x + tick, hi);
      });
      ctx.stroke();
      ctx.restore();
    });
  }

  private options(): uPlot.Options {
    const width = Math.max(280, this.body.clientWidth || 420);
    const series: uPlot.Series[] = [
      { label: this.axes.x },
      ...this.specs.map((s): uPlot.Series => {
        if (this.kind === 'bars')
          return {
            label: s.label,
            stroke: s.color,
            fill: `${s.color}cc`,
            width: 1,
            paths: uPlot.paths.bars!({ size: [0.6, 48] }),
            points: { show: false },
          };
        if (this.kind === 'points')
          return {
            label: s.label,
            stroke: s.color,
            paths: () => null,
            points: { show: true, size: 7, width: 0, fill: s.color, stroke: s.color },
          };
        // uPlot marks the points where they are sparse (a task observed at one step is one dot).
        return {
          label: s.label,
          stroke: s.color,
          width: s.width ?? 2,
          ...(s.dash ? { dash: s.dash } : {}),
          spanGaps: true,
          points: { size: 6, fill: s.color },
        };
      }),
    ];
    const xAxis: uPlot.Axis = { label: this.axes.x };
    // Steps and generations are whole numbers: no tick at 1.5.
    if (!this.axes.time) xAxis.incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];
    if (this.axes.categories) xAxis.values = (_u, splits) => splits.map((v) => this.labels[v] ?? '');
    return {
      width,
      height: 220,
      scales: {
        x: this.axes.time
          ? { time: true }
          : this.kind === 'bars'
            ? { time: false, range: (_u, min, max) => [min - 0.5, max + 0.5] }
            : { time: false },
        y: this.axes.yRange
          ? { range: this.axes.yRange }
          : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [xAxis, { label: this.axes.y, size: 60 }],
      series,
      legend: { show: true, live: false },
      cursor: {
        drag: { x: false, y: false },
        ...(this.axes.sync ? { sync: { key: this.axes.sync } } : {}),
      },
      hooks: { draw: [(u) => this.drawIntervals(u)] },
    };
  }

  resize(): void {
    if (this.plot) this.plot.setSize({ width: Math.max(280, this.body.clientWidth), height: 220 });
  }

  destroy(): void {
    this.plot?.destroy();
    this.plot = undefined;
  }
}
