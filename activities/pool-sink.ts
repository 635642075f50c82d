// The JSONL pool sink's files (`<sink>/<campaign>/pool-v<version>.jsonl` and `current.jsonl`): a
// full pool per version, so without a bound a weeks-long campaign fills the disk, and delivery then
// fails for ever. The newest `keep` versions stay; older version files are removed after each
// delivery (current.jsonl is always the newest).

/** Version files kept per campaign by default (RODS_SINK_KEEP; 0 keeps every version). */
export const DEFAULT_SINK_KEEP = 20;

const VERSION_FILE = /^pool-v(\d+)\.jsonl$/;

/** The version files of a campaign's sink folder to remove once `version` is written. */
export function sinkFilesToPrune(files: readonly string[], version: number, keep: number): string[] {
  if (keep <= 0) return [];
  return files.filter((f) => {
    const m = VERSION_FILE.exec(f);
    return m !== null && Number(m[1]) <= version - keep;
  });
}

/** RODS_SINK_KEEP as a count of versions (a clear error for anything else). */
export function sinkKeepFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.RODS_SINK_KEEP;
  if (raw === undefined || raw === '') return DEFAULT_SINK_KEEP;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new Error(
      `RODS_SINK_KEEP must be a whole number of versions >= 0 (0: keep all), got ${JSON.stringify(raw)}`,
    );
  return n;
}
