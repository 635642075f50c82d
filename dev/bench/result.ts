// What every benchmark returns: one JSON object of its figures (and the ratio to its baseline).
export interface BenchResult {
  [figure: string]: number | string | boolean | Record<string, unknown> | unknown[];
}

export type BenchFn = (opts: Record<string, string | boolean>) => Promise<BenchResult>;

export interface BenchEntry {
  describe: string;
  load: () => Promise<BenchFn>;
}
