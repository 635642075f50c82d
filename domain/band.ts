// The band detector: which band a task is in, from a statistic of its reward groups.
// The paper's default: the latest group mean m, hard < 0.20 <= boundary <= 0.85 < mastered.
import { z } from 'zod';

export type Band = 'hard' | 'boundary' | 'mastered';
export const BANDS: readonly Band[] = ['hard', 'boundary', 'mastered'];

/** Which statistic of the groups the detector reads. */
export type DetectorWindow =
  | { kind: 'latest' }
  | { kind: 'ewma'; alpha: number }
  | { kind: 'last'; k: number };

export interface DetectorConfig {
  /** Below this the task is hard. */
  low: number;
  /** Above this the task is mastered. */
  high: number;
  window: DetectorWindow;
  /** Smoothing of the EWMA kept for every task (also used when window is ewma). */
  ewmaAlpha: number;
}

export const MAX_WINDOW = 64;

export const PAPER_DETECTOR: Readonly<DetectorConfig> = Object.freeze({
  low: 0.2,
  high: 0.85,
  window: { kind: 'latest' } as DetectorWindow,
  ewmaAlpha: 0.3,
});

/** Parses `latest`, `ewma:0.3` or `last:4` (the CLI and config spelling of a window). */
export function parseWindow(spec: string): DetectorWindow {
  if (spec === 'latest') return { kind: 'latest' };
  const ewma = /^ewma:(\d*\.?\d+)$/.exec(spec);
  if (ewma) {
    const alpha = Number(ewma[1]);
    if (!(alpha > 0 && alpha <= 1)) throw new Error(`window ${spec}: alpha must be in (0, 1]`);
    return { kind: 'ewma', alpha };
  }
  const last = /^last:(\d+)$/.exec(spec);
  if (last) {
    const k = Number(last[1]);
    if (!(k >= 1 && k <= MAX_WINDOW)) throw new Error(`window ${spec}: k must be in 1..${MAX_WINDOW}`);
    return { kind: 'last', k };
  }
  throw new Error(`window ${JSON.stringify(spec)}: expected latest, ewma:ALPHA or last:K`);
}

export function windowSpec(w: DetectorWindow): string {
  return w.kind === 'latest' ? 'latest' : w.kind === 'ewma' ? `ewma:${w.alpha}` : `last:${w.k}`;
}

export const DetectorConfigSchema = z
  .object({
    low: z.number().min(0).max(1).default(PAPER_DETECTOR.low),
    high: z.number().min(0).max(1).default(PAPER_DETECTOR.high),
    window: z
      .string()
      .default('latest')
      .transform((s, ctx) => {
        try {
          return parseWindow(s);
        } catch (e) {
          ctx.addIssue({ code: 'custom', message: (e as Error).message });
          return z.NEVER;
        }
      }),
    ewmaAlpha: z.number().gt(0).max(1).default(PAPER_DETECTOR.ewmaAlpha),
  })
  .refine((c) => c.low <= c.high, { message: 'low must not exceed high', path: ['low'] });

export function bandOf(m: number, cfg: Pick<DetectorConfig, 'low' | 'high'>): Band {
  if (m < cfg.low) return 'hard';
  if (m > cfg.high) return 'mastered';
  return 'boundary';
}

/** Boundary score φ = 4·m·(1−m): the Popoviciu bound on the variance of a [0,1] reward with mean m. */
export function phi(m: number): number {
  return 4 * m * (1 - m);
}
