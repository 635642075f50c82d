// `rods export --campaign C --format jsonl|csv|openlineage --out DIR`: a campaign's events and
// projections as files for notebooks, or its synthesis runs as OpenLineage RunEvents (analysis/export/).
import type { Command } from 'commander';
import {
  EXPORT_FORMATS,
  type ExportFormat,
  ExportTargetExistsError,
  exportCampaign,
} from '../../../analysis/export/export.js';
import { loadCampaign } from '../../../platform/store/campaigns.js';
import { createPool } from '../../../platform/store/db.js';
import { UsageError } from '../errors.js';
import { printJson } from '../output.js';

export function register(program: Command): void {
  program
    .command('export')
    .description(
      "write a campaign's events (one file per event type) and projections (task_stats, pool_members, " +
        'candidates, steps) as JSONL or CSV, or one OpenLineage RunEvent per synthesis run, into a new folder',
    )
    .requiredOption('--campaign <id>', 'campaign id')
    .option('--format <format>', `${EXPORT_FORMATS.join('|')}`, 'jsonl')
    .requiredOption('--out <dir>', 'output folder (must not exist; written atomically)')
    .option('--json', 'JSON output (the manifest)')
    .action(async (opts: { campaign: string; format: string; out: string; json?: boolean }) => {
      if (!(EXPORT_FORMATS as readonly string[]).includes(opts.format))
        throw new UsageError(`--format: expected one of ${EXPORT_FORMATS.join(', ')}, got ${opts.format}`);
      const pool = createPool({ application: 'rods-export', max: 2, limits: { statementTimeoutMs: 0 } });
      try {
        if (!(await loadCampaign(pool, opts.campaign)))
          throw new UsageError(`unknown campaign ${JSON.stringify(opts.campaign)}`);
        let r: Awaited<ReturnType<typeof exportCampaign>>;
        try {
          r = await exportCampaign(pool, {
            campaignId: opts.campaign,
            format: opts.format as ExportFormat,
            out: opts.out,
          });
        } catch (e) {
          if (e instanceof ExportTargetExistsError) throw new UsageError(`${e.message}; nothing written`);
          throw e;
        }
        if (opts.json) printJson(r);
        else {
          console.log(`exported campaign ${r.campaignId} (${r.format}) to ${r.out}`);
          for (const f of r.files) console.log(`  ${f.file}: ${f.rows} rows`);
        }
      } finally {
        await pool.end();
      }
    });
}
