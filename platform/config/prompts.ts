// The versioned stage prompts (prompts/<name>.v<N>.md). Each file starts with a marker line,
// `[rods-stage: <name> v<N>]`, that says which stage it drives (the stand-in generator recognises
// the stage by it); its SHA-256 is the prompt version recorded in lineage
// (StageCompleted.promptVersionHash).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Stage } from '../../schemas/types.generated.js';

/** The LLM steps of the synthesis pipeline, by prompt name. */
export const PROMPT_NAMES = [
  'plan',
  'params',
  'config-patch',
  'rewrite',
  'turn-query',
  'judge',
  'refine',
  'augment',
] as const;
export type PromptName = (typeof PROMPT_NAMES)[number];

/** The prompt file each step uses now; a new version is a new file and a new entry here. */
export const PROMPT_FILES: Record<PromptName, string> = {
  plan: 'plan.v1.md',
  params: 'params.v1.md',
  'config-patch': 'config-patch.v1.md',
  rewrite: 'rewrite.v1.md',
  'turn-query': 'turn-query.v1.md',
  judge: 'judge.v3.md',
  refine: 'refine.v1.md',
  augment: 'augment.v1.md',
};

/** The pipeline stage (event `Stage`) each prompt belongs to. */
export const EVENT_STAGE: Record<PromptName, Stage> = {
  plan: 'plan',
  params: 'execute',
  'config-patch': 'execute',
  rewrite: 'rewrite',
  // the rewrite-off ablation's stand-in for the rewrite: one message per turn, turn by turn
  'turn-query': 'rewrite',
  judge: 'critique',
  refine: 'refine',
  augment: 'augment',
};

export const DEFAULT_PROMPTS_DIR = fileURLToPath(new URL('../../prompts/', import.meta.url));

/** `[rods-stage: plan v1]` on a line of its own. */
const MARKER = /^\[rods-stage: ([a-z][a-z-]*) v(\d+)\][ \t]*$/m;

export interface StageMarker {
  stage: string;
  version: number;
}

/** The stage marker in a text (a prompt file or a message built from one), or null. */
export function parseStageMarker(text: string): StageMarker | null {
  const m = MARKER.exec(text);
  return m ? { stage: m[1]!, version: Number(m[2]) } : null;
}

export interface Prompt {
  name: PromptName;
  file: string;
  /** The file's text: the system message of the stage. */
  text: string;
  /** SHA-256 (hex) of the file's bytes. */
  hash: string;
  version: number;
}

export class PromptError extends Error {
  override name = 'PromptError';
}

/** Reads a stage prompt and checks its marker line (read on every call: edits count at once). */
export function loadPrompt(name: PromptName, dir: string = DEFAULT_PROMPTS_DIR): Prompt {
  const file = PROMPT_FILES[name];
  if (!file) throw new PromptError(`unknown prompt ${JSON.stringify(name)}`);
  const full = path.join(dir, file);
  let bytes: Buffer;
  try {
    bytes = readFileSync(full);
  } catch (e) {
    throw new PromptError(`cannot read prompt ${full}: ${(e as Error).message}`);
  }
  const text = bytes.toString('utf8');
  const firstLine = text.split('\n', 1)[0] ?? '';
  const marker = parseStageMarker(firstLine);
  if (!marker || marker.stage !== name) {
    throw new PromptError(`${full} must start with the line [rods-stage: ${name} v<N>], found ${firstLine}`);
  }
  return {
    name,
    file,
    text,
    hash: createHash('sha256').update(bytes).digest('hex'),
    version: marker.version,
  };
}

/** SHA-256 (hex) of a stage prompt file's bytes: the prompt version recorded in lineage. */
export function promptVersion(name: PromptName, dir?: string): string {
  return loadPrompt(name, dir).hash;
}
