import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import { kafkaStatsCheck } from '../../../analysis/replay/kafka-source.js';
import { ReplayError, replayCampaign } from '../../../analysis/replay/replay.js';
import { DEFAULT_DEDUPE_WINDOW } from '../../../domain/dedupe.js';
import { campaignStreamPrefixes } from '../../../domain/ids.js';
import { loadEndpoints } from '../../../platform/config/endpoints.js';
import { createPool } from '../../../platform/store/db.js';
import { verifyChains } from '../../../platform/store/events/audit.js';
import { migrate } from '../../../platform/store/migrate.js';
import { UsageError } from '../errors.js';
import { intOption, positiveInt } from '../options.js';
import { printJson } from '../output.js';

export function register(program: Command): void {
  program
    .command('replay')
    .description(
      "rebuild a campaign's projections (task statistics, bands, pool membership, candidates and lineage) from its event history into a separate schema and compare them with the live ones; resumable",
    )
    .requiredOption('--campaign <id>', 'campaign id')
    .option(
      '--to-step <n>',
      'replay decisions up to this training step and compare with the pool recorded then',
      intOption('--to-step'),
    )
    .option(
      '--source <source>',
      'store (the event store) or kafka (recompute the statistics from the reward topic)',
      'store',
    )
    .option('--topic <topic>', 'with --source kafka: the reward topic', 'rods.rewards.v1')
    .option(
      '--dedupe-window <groups>',
      "with --source kafka: the live aggregators' --dedupe-window (a repeat of one of a task's last N groups is skipped, as they did)",
      positiveInt('--dedupe-window'),
      DEFAULT_DEDUPE_WINDOW,
    )
    .option('--fresh', 'discard an earlier partial rebuild instead of resuming it')
    .option(
      '--no-compare',
      'rebuild (or resume the rebuild) only: no comparison with the live tables and no audit, both of which read all the campaign has recorded; a later run resumes and compares',
    )
    .option('--json', 'JSON report')
    .action(
      async (opts: {
        campaign: string;
        toStep?: number;
        source: string;
        topic: string;
        dedupeWindow: number;
        fresh?: boolean;
        compare: boolean;
        json?: boolean;
      }) => {
        if (opts.source !== 'store' && opts.source !== 'kafka')
          throw new UsageError('--source must be store or kafka');
        if (!opts.compare && (opts.source === 'kafka' || opts.toStep !== undefined))
          throw new UsageError('--no-compare rebuilds only: it takes neither --source kafka nor --to-step');
        await migrate();
        // Replays build scratch schemas: the owner role's work where there are two roles.
        const pool = createPool({
          application: 'rods-replay',
          max: 4,
          connectionString: loadEndpoints().ownerDatabaseUrl,
          // A replay reads the whole log in one COPY: no statement timeout.
          limits: { statementTimeoutMs: 0 },
        });
        const bar =
          opts.json || !process.stderr.isTTY
            ? undefined
            : new cliProgress.SingleBar(
                { format: 'replay {bar} {value}/{total} events', stream: process.stderr },
                cliProgress.Presets.shades_classic,
              );
        try {
          let started = false;
          const report = await replayCampaign(pool, {
            campaignId: opts.campaign,
            toStep: opts.toStep,
            fresh: opts.fresh,
            compare: opts.compare,
            onProgress: (done, total) => {
              if (!bar) return;
              if (!started) {
                bar.start(total, done);
                started = true;
              } else bar.update(done);
            },
          });
          bar?.stop();
          if (!opts.compare) {
            const out = { ...report, equal: null, compared: false };
            if (opts.json) printJson(out);
            else
              console.log(
                `rebuilt: ${report.events} events in ${report.schema}${report.resumedFrom ? `, resumed after ${report.resumedFrom}` : ''} (not compared: run again without --no-compare)`,
              );
            return;
          }
          const kafka =
            opts.source === 'kafka'
              ? await kafkaStatsCheck(pool, opts.campaign, opts.topic, opts.dedupeWindow)
              : undefined;
          let audited = 0;
          let broken: unknown = null;
          for (const prefix of campaignStreamPrefixes(opts.campaign)) {
            const a = await verifyChains(pool, { streamPrefix: prefix });
            audited += a.events;
            if (!a.ok && !broken) broken = a;
          }
          const equal = report.equal && (kafka?.equal ?? true) && !broken;
          const out = {
            ...report,
            equal,
            source: opts.source,
            kafka,
            audit: broken ? broken : { ok: true, events: audited },
          };
          if (opts.json) printJson(out);
          else {
            console.log(
              `equal: ${equal}  (${report.events} events replayed into ${report.schema}${report.resumedFrom ? `, resumed after ${report.resumedFrom}` : ''})`,
            );
            for (const t of report.tables) {
              console.log(
                `  ${t.equal ? 'ok  ' : 'DIFF'} ${t.table}: live ${t.liveRows} rows, replay ${t.replayRows}`,
              );
              for (const r of t.onlyLive)
                console.log(`       only live:   ${JSON.stringify(r).slice(0, 200)}`);
              for (const r of t.onlyReplay)
                console.log(`       only replay: ${JSON.stringify(r).slice(0, 200)}`);
            }
            if (kafka)
              console.log(
                `  ${kafka.equal ? 'ok  ' : 'DIFF'} statistics recomputed from ${opts.topic}: ${kafka.tasks} tasks, ${kafka.groups} groups${kafka.firstDifference ? `; first difference ${JSON.stringify(kafka.firstDifference)}` : ''}`,
              );
            console.log(
              broken
                ? `  BROKEN hash chain: ${JSON.stringify(broken)}`
                : `  audit: ok, ${audited} events checked`,
            );
          }
          if (!equal) process.exitCode = 1;
        } catch (e) {
          bar?.stop();
          if (e instanceof ReplayError) throw new UsageError(e.message);
          throw e;
        } finally {
          await pool.end();
        }
      },
    );
}
