// The form in which a pool task leaves rods (the JSONL sink and the gateway's pool and batch
// answers): a BFCL multi-turn task record that bfcl-eval's own executor and checker run unchanged.
import { bfclTaskId } from './ids.js';

/**
 * The record as delivered: `id` is the BFCL id (bfclTaskId), `rods_task_id` the pool's task id,
 * under which rewards are reported. Every other field is the stored record's; `category` (the
 * record's, else the pool's) names the BFCL test category.
 */
export function deliveredTask(taskId: string, category: string, task: unknown): Record<string, unknown> {
  const record = (typeof task === 'string' ? JSON.parse(task) : task) as Record<string, unknown>;
  return { ...record, id: deliveredId(taskId, category, record), rods_task_id: taskId };
}

/** The BFCL id a pool task is delivered under (the pool keeps it, so a reported id maps back). */
export function deliveredId(taskId: string, category: string, task: unknown): string {
  const record = (typeof task === 'string' ? JSON.parse(task) : task) as Record<string, unknown>;
  // The record's own category is the one it was validated under (long_context loads extensions).
  const own = typeof record?.category === 'string' ? record.category : category;
  return bfclTaskId(taskId, own);
}
