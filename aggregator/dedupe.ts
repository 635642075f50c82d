// Each task's dedupe window: the event ids of its last N applied groups, stored in the task's
// row with its statistics (same transaction), so a group a retrying producer sent again later
// (another offset, same id, same task) is recognised and skipped. See aggregator/README.md.

export const DEFAULT_DEDUPE_WINDOW = 64;

/** The windows of the tasks one batch touches, keyed by task key (campaign and task id). */
export class DedupeWindows {
  private readonly ids = new Map<string, string[]>();

  constructor(private readonly size = DEFAULT_DEDUPE_WINDOW) {}

  /** The window as stored with the task's statistics; this batch owns the array from now on. */
  load(task: string, eventIds: string[]): void {
    this.ids.set(task, eventIds);
  }

  seen(task: string, eventId: string): boolean {
    return this.ids.get(task)?.includes(eventId) ?? false;
  }

  /** Adds an applied group's id, dropping the oldest beyond the window. */
  remember(task: string, eventId: string): void {
    const ids = this.ids.get(task);
    if (!ids) {
      this.ids.set(task, [eventId]);
      return;
    }
    ids.push(eventId);
    if (ids.length > this.size) ids.splice(0, ids.length - this.size);
  }

  /** The window to store for a task this batch applied a group to. */
  of(task: string): string[] {
    return this.ids.get(task) ?? [];
  }
}
