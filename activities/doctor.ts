export async function echo(token: string): Promise<string> {
  return `echo:${token}`;
}
