// Each task's dedupe window: the event ids of its last N applied groups, stored in the task's
// row with its statistics (same transaction), so a group a retrying producer sent again later
// (another offset, same id, same task) is recognised and skipped. See stages/aggregator/README.md.

export const DEFAULT_DEDUPE_WINDOW = 64;

interface Window {
  /** Oldest first from `head` on: the order stored with the task. */
  order: string[];
  /** Ids before it have left the window (dropped in bulk, not one shift per group). */
  head: number;
  /** The ids in the window, for a constant-time check per group (a batch checks every group it folds). */
  set: Set<string>;
}

/** The windows of the tasks one batch touches, keyed by task key (campaign and task id). */
export class DedupeWindows {
  private readonly windows = new Map<string, Window>();

  constructor(private readonly size = DEFAULT_DEDUPE_WINDOW) {}

  /** The window as stored with the task's statistics; this batch owns the array from now on. */
  load(task: string, eventIds: string[]): void {
    this.windows.set(task, { order: eventIds, head: 0, set: new Set(eventIds) });
  }

  seen(task: string, eventId: string): boolean {
    return this.windows.get(task)?.set.has(eventId) ?? false;
  }

  /** Adds an applied group's id, dropping the oldest beyond the window. */
  remember(task: string, eventId: string): void {
    const w = this.windows.get(task);
    if (!w) {
      this.windows.set(task, { order: [eventId], head: 0, set: new Set([eventId]) });
      return;
    }
    w.order.push(eventId);
    w.set.add(eventId);
    // Ids in a window are distinct (an id already in it is skipped, not remembered again).
    while (w.order.length - w.head > this.size) w.set.delete(w.order[w.head++]!);
    if (w.head >= this.size) {
      w.order = w.order.slice(w.head);
      w.head = 0;
    }
  }

  /** The window to store for a task this batch applied a group to. */
  of(task: string): string[] {
    const w = this.windows.get(task);
    if (!w) return [];
    return w.head === 0 ? w.order : w.order.slice(w.head);
  }
}
