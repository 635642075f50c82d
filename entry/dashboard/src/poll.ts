// A poll that never overlaps itself: the next request starts `ms` after the previous answer (a
// slow gateway delays the next poll instead of stacking requests on it), and a hidden tab does
// not poll at all; it polls once as soon as it is shown again, then on its period.

export interface PollHost {
  hidden(): boolean;
  /** Calls `fn` whenever the page becomes visible; returns the way to stop. */
  onVisible(fn: () => void): () => void;
  setTimeout(fn: () => void, ms: number): number;
  clearTimeout(id: number): void;
}

const browser: PollHost = {
  hidden: () => document.hidden,
  onVisible(fn) {
    const h = () => {
      if (!document.hidden) fn();
    };
    document.addEventListener('visibilitychange', h);
    return () => document.removeEventListener('visibilitychange', h);
  },
  setTimeout: (fn, ms) => window.setTimeout(fn, ms),
  clearTimeout: (id) => window.clearTimeout(id),
};

/**
 * Runs `run` now (or after one period, `startNow: false`) and then `ms` after each run ends,
 * while the page is visible; returns stop.
 */
export function poll(
  run: () => Promise<void>,
  ms: number,
  { startNow = true, host = browser }: { startNow?: boolean; host?: PollHost } = {},
): () => void {
  let stopped = false;
  let running = false;
  let timer: number | undefined;
  // A tick fell due while the page was hidden: run it when the page is shown.
  let due = false;
  const tick = async (): Promise<void> => {
    timer = undefined;
    if (stopped || running) return;
    if (host.hidden()) {
      due = true;
      return;
    }
    running = true;
    try {
      await run();
    } finally {
      running = false;
      if (!stopped) timer = host.setTimeout(() => void tick(), ms);
    }
  };
  const offVisible = host.onVisible(() => {
    if (due) {
      due = false;
      void tick();
    }
  });
  if (startNow) void tick();
  else timer = host.setTimeout(() => void tick(), ms);
  return () => {
    stopped = true;
    if (timer !== undefined) host.clearTimeout(timer);
    offVisible();
  };
}
