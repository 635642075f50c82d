// `--profile DIR`: a V8 CPU profile of a benchmark's measured phase only (not its setup or its
// baseline), written as DIR/<name>.cpuprofile; open it in Chrome DevTools or speedscope.
import { mkdir, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import path from 'node:path';

/** A frame's share of the profiled phase's samples (self time: in the function itself). */
export interface TopFrame {
  frame: string;
  self_pct: number;
}

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples?: number[];
  timeDeltas?: number[];
}

/** The frames with the most self time, e.g. `encode canonical-json.ts:41` or `(garbage collector)`. */
export function topFrames(profile: CpuProfile, n = 15): TopFrame[] {
  const name = new Map<number, string>();
  for (const node of profile.nodes) {
    const f = node.callFrame;
    // Code that tsx compiled reports line 0: the file alone then.
    const line = f.lineNumber > 0 ? `:${f.lineNumber + 1}` : '';
    const file = f.url ? ` ${f.url.split('/').pop()}${line}` : '';
    name.set(node.id, `${f.functionName || '(anonymous)'}${file}`);
  }
  const self = new Map<string, number>();
  let total = 0;
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    const d = deltas[i] ?? 0;
    const frame = name.get(samples[i]!) ?? '?';
    self.set(frame, (self.get(frame) ?? 0) + d);
    total += d;
  }
  return [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([frame, t]) => ({ frame, self_pct: Number(((100 * t) / Math.max(1, total)).toFixed(1)) }));
}

/** Runs the phase; with `--profile DIR`, profiles it and returns its top frames too. */
export async function profiled<T>(
  opts: Record<string, string | boolean>,
  name: string,
  phase: () => Promise<T>,
): Promise<{ value: T; top?: TopFrame[] }> {
  const dir = opts.profile;
  if (typeof dir !== 'string') return { value: await phase() };
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 1000 });
  await session.post('Profiler.start');
  const stop = async () => {
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    return profile;
  };
  let value: T;
  try {
    value = await phase();
  } catch (e) {
    await stop();
    throw e;
  }
  const profile = await stop();
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${name}.cpuprofile`);
  await writeFile(file, JSON.stringify(profile));
  if (!opts.json) console.error(`profile of the measured phase: ${file}`);
  return { value, top: topFrames(profile as CpuProfile) };
}
