// Shared output helpers: every command offers --json for scripts and a readable form for people.
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
