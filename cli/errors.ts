/** Bad input from the user (unknown id, bad flag value): the CLI prints it and exits 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}
