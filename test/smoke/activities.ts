// Activities for the Temporal smoke tests; `calls` lets a test see which worker ran what.
export const calls: string[] = [];

export async function record(value: string): Promise<string> {
  calls.push(value);
  return `${value} (pid ${process.pid})`;
}
