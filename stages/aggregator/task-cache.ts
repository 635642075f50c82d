// The statistics and dedupe windows of the tasks this process applied groups to, as its last
// committed batches left them. A batch still reads every task it touches inside its transaction,
// but only the pair (group count, last applied event id): where that pair matches the cached
// one, nobody has written the task since, and the cached state is used instead of parsing the
// stored row and its window of up to 64 ids (most of a batch's load phase and its garbage).
// Anything else (a task this process never saw, a partition applied meanwhile by another
// instance, a row rebuilt or removed) does not match and is read in full. The cache is only
// updated after a commit, so a rolled-back batch never leaves state in it.
import type { TaskState } from '../../domain/task-stats.js';
import {
  type CommittedTasks,
  type StoredTask,
  type TaskUpdate,
  taskKey,
} from '../../platform/store/task-stats/state.js';

export const DEFAULT_TASK_CACHE_SIZE = 20_000;

interface Cached {
  state: TaskState;
  recentEventIds: readonly string[];
  lastEventId: string;
}

/** Least recently used tasks are dropped beyond `capacity` (about 2 KiB each with a full window). */
export class TaskStateCache implements CommittedTasks {
  private readonly tasks = new Map<string, Cached>();

  constructor(readonly capacity = DEFAULT_TASK_CACHE_SIZE) {}

  get size(): number {
    return this.tasks.size;
  }

  /** What a batch checks against the stored row: the cached group count and last event id. */
  versionOf(key: string): { groups: number; lastEventId: string } | undefined {
    const c = this.tasks.get(key);
    return c && { groups: c.state.groups, lastEventId: c.lastEventId };
  }

  /** The cached task, with a window of its own (a batch appends to the array it is given). */
  take(campaignId: string, taskId: string): StoredTask | undefined {
    const key = taskKey(campaignId, taskId);
    const c = this.tasks.get(key);
    if (!c) return undefined;
    this.tasks.delete(key); // re-inserted last: the map's order is the recency order
    this.tasks.set(key, c);
    return { campaignId, taskId, state: c.state, recentEventIds: [...c.recentEventIds] };
  }

  /** After a commit: the tasks as the batch stored them. */
  committed(updates: readonly TaskUpdate[]): void {
    for (const u of updates) {
      const key = taskKey(u.campaignId, u.taskId);
      this.tasks.delete(key);
      this.tasks.set(key, { state: u.state, recentEventIds: u.recentEventIds, lastEventId: u.lastEventId });
    }
    for (const key of this.tasks.keys()) {
      if (this.tasks.size <= this.capacity) break;
      this.tasks.delete(key);
    }
  }

  clear(): void {
    this.tasks.clear();
  }
}
