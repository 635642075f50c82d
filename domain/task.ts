// The task as rods knows it: a BFCL multi-turn task record (bfcl-eval's question file joined with
// its ground truth), the shape of every seed and of every candidate synthesized from one. One
// declaration, read by the executor's client, the LLM stage schemas and the step plan.
import { z } from 'zod';

export const SEED_CATEGORIES = ['base', 'miss_func', 'miss_param', 'long_context'] as const;
export type SeedCategory = (typeof SEED_CATEGORIES)[number];

const Json: z.ZodType<unknown> = z.unknown();
const Message = z.object({ role: z.string(), content: z.string() }).loose();

/** A BFCL multi-turn task record (bfcl-eval's question file joined with its ground truth). */
const TaskFieldsSchema = z.object({
  id: z.string(),
  category: z.enum(SEED_CATEGORIES),
  involved_classes: z.array(z.string()).min(1),
  initial_config: z.record(z.string(), z.record(z.string(), Json)),
  /** User turns; a turn may be empty (miss_func: the turn where the withheld function is added). */
  question: z.array(z.array(Message)),
  /** Call strings per turn. */
  ground_truth: z.array(z.array(z.string())),
  /** miss_func: turn index -> the function names withheld until that turn. */
  missed_function: z.record(z.string(), z.array(z.string())).optional(),
  /** Functions not offered to the model at all. */
  excluded_function: z.array(z.string()).optional(),
  /** The function path the task was written from ("Class.method"). */
  path: z.array(z.string()).optional(),
});
export const TaskRecordSchema = TaskFieldsSchema.loose();
export type TaskRecord = z.infer<typeof TaskRecordSchema>;
/** The declared fields of a task record, without the fields it may carry beyond them. */
export type TaskFields = z.infer<typeof TaskFieldsSchema>;
