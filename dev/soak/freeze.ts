// The soak's freeze fault: which process holds an open PostgreSQL transaction. PostgreSQL knows
// a session's client port (pg_stat_activity), Linux knows which process owns a socket (/proc):
// together they say whether a given child of the soak is inside a transaction right now.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type pg from 'pg';

/** Local TCP ports of the sockets process `pid` holds. */
export function localPorts(pid: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10 || !inodes.has(cols[9]!)) continue;
      const port = Number.parseInt(cols[1]!.split(':')[1]!, 16);
      if (Number.isFinite(port)) ports.add(port);
    }
  }
  return ports;
}

/** Whether process `pid` has a session of `application` inside a transaction. */
export async function holdsTransaction(db: pg.Pool, pid: number, application: string): Promise<boolean> {
  const { rows } = await db.query<{ client_port: number }>(
    `select client_port from pg_stat_activity
      where application_name = $1 and xact_start is not null and pid <> pg_backend_pid()`,
    [application],
  );
  if (rows.length === 0) return false;
  const mine = localPorts(pid);
  return rows.some((r) => mine.has(r.client_port));
}
