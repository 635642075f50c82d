import type { Command } from 'commander';
import { type ManifestCheck, verifyManifests } from '../../../analysis/manifest/manifest.js';
import { createPool } from '../../../platform/store/db.js';
import {
  type AnchorCheck,
  auditStoreId,
  verifyAnchor,
  verifyChains,
} from '../../../platform/store/events/audit.js';
import { campaignsWithCheckpoints } from '../../../platform/store/events/checkpoints.js';
import { anchorAndPublish, readPublishedAnchors } from '../../../stages/relay/anchor.js';
import { UsageError } from '../errors.js';
import { printJson } from '../output.js';

const positive = (flag: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new UsageError(`${flag}: expected a positive integer, got ${v}`);
  return n;
};

export function register(program: Command): void {
  const audit = program.command('audit').description('check the integrity of the event store');
  audit
    .command('anchor')
    .description(
      "record a digest over every stream's head and the global position in audit_anchors (an HMAC with RODS_AUDIT_HMAC_KEY) and publish it to Kafka",
    )
    .option('--prefix <text>', 'anchor only the streams whose id starts with this')
    .option('--json', 'JSON output')
    .action(async (opts: { prefix?: string; json?: boolean }) => {
      const pool = createPool({ application: 'rods-audit', max: 1, limits: { statementTimeoutMs: 0 } });
      try {
        const a = await anchorAndPublish(pool, { streamPrefix: opts.prefix });
        if (opts.json) printJson(a);
        else
          console.log(
            `anchor ${a.anchorId}: ${a.streamCount} streams up to position ${a.globalPosition}, ${a.algorithm} ${a.digest}, published at offset ${a.offset ?? '?'}`,
          );
      } finally {
        await pool.end();
      }
    });
  audit
    .command('verify')
    .description(
      "recompute every stream's hash chain (or some streams') and compare it with the stored hashes and stream heads, then check every anchored stream against the latest anchor (rewritten, truncated, deleted); exit 1 on any finding",
    )
    .option('--stream <id>', 'check only this stream')
    .option('--prefix <text>', 'check only the streams whose id starts with this')
    .option('--anchor <id>', 'check against this anchor instead of the latest', positive('--anchor'))
    .option('--kafka', "check against the latest anchor published on Kafka (or --anchor's copy there)")
    .option('--no-anchor', 'only the hash chains')
    .option(
      '--no-manifests',
      'skip recomputing the manifest of every recorded checkpoint (in scope) and comparing its Merkle root with the recorded one',
    )
    .option('--page-size <n>', 'rows read per query (default 2000)', positive('--page-size'))
    .option('--json', 'JSON output')
    .action(
      async (opts: {
        stream?: string;
        prefix?: string;
        pageSize?: number;
        anchor: number | boolean;
        manifests: boolean;
        kafka?: boolean;
        json?: boolean;
      }) => {
        const pool = createPool({ application: 'rods-audit', max: 1, limits: { statementTimeoutMs: 0 } });
        try {
          const chain = await verifyChains(pool, {
            streamId: opts.stream,
            streamPrefix: opts.prefix,
            pageSize: opts.pageSize,
          });
          let anchor: AnchorCheck | null = null;
          if (opts.anchor !== false) {
            let anchorId = typeof opts.anchor === 'number' ? opts.anchor : undefined;
            let expectedDigest: string | undefined;
            let noCopy = false;
            if (opts.kafka) {
              const scope = opts.prefix ?? opts.stream;
              const storeId = await auditStoreId(pool);
              const copies = (await readPublishedAnchors()).filter(
                (a) =>
                  a.storeId === storeId &&
                  (anchorId !== undefined
                    ? a.anchorId === anchorId
                    : a.streamPrefix === null || scope?.startsWith(a.streamPrefix)),
              );
              const copy = copies.at(-1);
              if (copy) {
                anchorId = copy.anchorId;
                expectedDigest = copy.digest;
              } else noCopy = true;
            }
            anchor = await verifyAnchor(pool, {
              anchorId,
              expectedDigest,
              streamPrefix: opts.prefix,
              streamId: opts.stream,
              pageSize: opts.pageSize,
            });
            if (noCopy) {
              anchor.ok = false;
              anchor.anchorProblem ??= 'not-published';
              anchor.anchorDetail ??= `no copy of ${anchorId === undefined ? 'any anchor' : `anchor ${anchorId}`} on Kafka`;
            }
          }
          // No anchor at all yet (and none asked for) is a warning, not a finding.
          const noneYet =
            anchor?.anchorProblem === 'missing' &&
            anchor.anchor === null &&
            typeof opts.anchor !== 'number' &&
            !opts.kafka;
          let manifests: ManifestCheck[] | null = null;
          if (opts.manifests) {
            manifests = [];
            const scope = { streamId: opts.stream, streamPrefix: opts.prefix };
            for (const c of await campaignsWithCheckpoints(pool, scope))
              manifests.push(...(await verifyManifests(pool, c)));
          }
          const ok =
            chain.ok && (anchor === null || anchor.ok || noneYet) && (manifests ?? []).every((m) => m.ok);
          if (opts.json) printJson({ ok, chain, anchor, manifests });
          else {
            if (chain.ok) {
              const scope =
                opts.stream !== undefined
                  ? ` in stream ${opts.stream}${chain.streams === 0 ? ' (no such stream)' : ''}`
                  : ` in ${chain.streams} streams`;
              console.log(`ok: ${chain.events} events checked${scope}`);
            } else {
              console.log(
                `BROKEN: stream ${chain.streamId} version ${chain.version}` +
                  `${chain.eventId ? ` event ${chain.eventId}` : ''}${chain.position !== null ? ` (position ${chain.position})` : ''}: ` +
                  `${chain.problem}: ${chain.detail} (${chain.events} events verified before it)`,
              );
            }
            if (anchor) printAnchor(anchor, noneYet);
            if (manifests) printManifests(manifests);
          }
          if (!ok) process.exitCode = 1;
        } finally {
          await pool.end();
        }
      },
    );
}

function printManifests(checks: ManifestCheck[]): void {
  for (const m of checks.filter((c) => !c.ok))
    console.log(
      `MANIFEST: campaign ${m.campaignId} checkpoint ${m.checkpointId} (step ${m.trainerStep}): ${m.problem}`,
    );
  if (checks.length > 0 && checks.every((c) => c.ok))
    console.log(`ok: ${checks.length} checkpoint manifests match their recorded Merkle roots`);
}

function printAnchor(c: AnchorCheck, noneYet: boolean): void {
  if (noneYet) {
    console.log(`warning: ${c.anchorDetail}`);
    return;
  }
  const a = c.anchor;
  const what = a
    ? `anchor ${a.anchorId} (${a.anchoredAt}, position ${a.globalPosition}, ${a.algorithm})`
    : 'anchor';
  if (c.anchorProblem) console.log(`${c.anchorProblem.toUpperCase()}: ${what}: ${c.anchorDetail}`);
  for (const f of c.findings) console.log(`${f.problem.toUpperCase()}: stream ${f.streamId}: ${f.detail}`);
  if (c.ok) console.log(`ok: ${c.streams} anchored streams match ${what}`);
  else if (c.findings.length)
    console.log(`${c.findings.length} of ${c.streams} anchored streams differ from ${what}`);
}
