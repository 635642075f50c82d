// `rods manifest`: what a checkpoint was trained on (analysis/manifest/), recomputed from the log
// and checked against the Merkle root recorded when the trainer reported the checkpoint; `rods
// manifest diff A B` compares two checkpoints step by step; `rods manifest list` names them.
import type { Command } from 'commander';
import { type RecordedManifest, recordedManifest } from '../../../analysis/manifest/manifest.js';
import { diffManifests, ManifestError } from '../../../domain/manifest.js';
import { loadCampaign } from '../../../platform/store/campaigns.js';
import { createPool, type Pool } from '../../../platform/store/db.js';
import { checkpointEvents } from '../../../platform/store/events/checkpoints.js';
import { UsageError } from '../errors.js';
import { printJson } from '../output.js';

async function manifestOf(db: Pool, campaignId: string, checkpointId: string): Promise<RecordedManifest> {
  if (!(await loadCampaign(db, campaignId)))
    throw new UsageError(`unknown campaign ${JSON.stringify(campaignId)}`);
  try {
    return await recordedManifest(db, campaignId, checkpointId);
  } catch (e) {
    if (e instanceof ManifestError) throw new UsageError(e.message);
    throw e;
  }
}

/** A list in text output: the first five and how many more. */
const few = (xs: string[]) =>
  xs.length === 0 ? '-' : xs.slice(0, 5).join(',') + (xs.length > 5 ? ` (+${xs.length - 5})` : '');

/** --campaign of a subcommand: given after it, or before it (where `rods manifest` itself reads it). */
function campaignOption(opts: { campaign?: string }, cmd: Command): string {
  const campaign = opts.campaign ?? (cmd.parent?.opts().campaign as string | undefined);
  if (!campaign) throw new UsageError('give --campaign C');
  return campaign;
}

const withDb = async <T>(fn: (db: Pool) => Promise<T>): Promise<T> => {
  const db = createPool({ application: 'rods-manifest', max: 2, limits: { statementTimeoutMs: 0 } });
  try {
    return await fn(db);
  } finally {
    await db.end();
  }
};

export function register(program: Command): void {
  const manifest = program
    .command('manifest')
    .description(
      "what a checkpoint was trained on: every task of every step up to the checkpoint's trainer step along its chain " +
        "of runs (a resumed run's steps after its resume, its parent checkpoint's before; steps a run trained again " +
        'as the run reported them), each with its content hash, lineage root and the steps and groups it was rewarded in, ' +
        'and the Merkle root over them, recomputed from the log and compared with the root recorded with the checkpoint ' +
        '(exit 1 when they differ). Subcommands: list, diff.',
    )
    .option('--campaign <id>', 'campaign id')
    .option('--checkpoint <id>', 'checkpoint id (rods manifest list --campaign C names them)')
    .option('--tasks <n>', 'tasks listed in the text output (JSON lists all)', (v) => Number(v), 20)
    .option('--json', 'JSON output (every entry, every step)')
    .action(async (opts: { campaign?: string; checkpoint?: string; tasks: number; json?: boolean }) => {
      if (!opts.campaign || !opts.checkpoint)
        throw new UsageError('give --campaign C --checkpoint X (or a subcommand: list, diff; see --help)');
      const { campaign, checkpoint } = opts as { campaign: string; checkpoint: string };
      await withDb(async (db) => {
        const { event, manifest: m } = await manifestOf(db, campaign, checkpoint);
        const verified = m.root === event.payload.manifestRoot;
        const recorded = {
          root: event.payload.manifestRoot,
          tasks: event.payload.manifestTasks,
          digest: event.payload.digest ?? null,
        };
        if (opts.json) {
          printJson({
            campaignId: campaign,
            checkpointId: checkpoint,
            runId: event.payload.runId,
            trainerStep: m.trainerStep,
            resumedFrom: event.payload.resumedFrom ?? null,
            recorded,
            root: m.root,
            verified,
            tasks: m.entries.length,
            groups: m.groups,
            chain: m.chain,
            entries: m.entries,
            steps: m.steps,
          });
        } else {
          console.log(
            `checkpoint ${checkpoint} of campaign ${campaign}: trainer step ${m.trainerStep}, run ${event.payload.runId}` +
              (event.payload.resumedFrom ? `, resumed from ${event.payload.resumedFrom}` : '') +
              (recorded.digest ? `, ${recorded.digest}` : ''),
          );
          console.log(
            `chain: ${m.chain.map((s) => `steps ${s.from + 1}-${s.to} by ${s.runId}`).join(' → ')}; ` +
              `${m.steps.filter((s) => s.source === 'retrained').length} step(s) trained again after a resume`,
          );
          console.log(
            `${m.entries.length} tasks, ${m.groups} groups; Merkle root ${m.root} ` +
              (verified ? '(equals the recorded root)' : `(DIFFERS from the recorded root ${recorded.root})`),
          );
          console.log(
            'task id                              content hash  lineage root                 steps  groups  rollouts',
          );
          for (const e of m.entries.slice(0, opts.tasks))
            console.log(
              `${e.taskId.padEnd(36)} ${e.contentHash.slice(0, 12)}  ${e.lineageRoot.padEnd(28)} ${String(e.steps.length).padStart(5)} ${String(e.groups).padStart(7)} ${String(e.rollouts).padStart(9)}`,
            );
          if (m.entries.length > opts.tasks)
            console.log(`... ${m.entries.length - opts.tasks} more (--json lists all)`);
        }
        if (!verified) process.exitCode = 1;
      });
    });

  manifest
    .command('list')
    .description("the campaign's recorded checkpoints, in the order recorded")
    .option('--campaign <id>', 'campaign id')
    .option('--json', 'JSON output')
    .action(async (o: { campaign?: string; json?: boolean }, cmd: Command) => {
      const opts = { ...o, campaign: campaignOption(o, cmd), json: o.json ?? cmd.parent?.opts().json };
      await withDb(async (db) => {
        const rows = (await checkpointEvents(db, opts.campaign)).map((e) => ({
          checkpointId: e.payload.checkpointId,
          runId: e.payload.runId,
          trainerStep: Number(e.payload.trainerStep),
          resumedFrom: e.payload.resumedFrom ?? null,
          retrainedSteps: e.payload.retrainedSteps.map((r) => Number(r.step)),
          tasks: e.payload.manifestTasks,
          root: e.payload.manifestRoot,
          recordedAt: e.recordedAt.toISOString(),
        }));
        if (opts.json) return printJson(rows);
        if (rows.length === 0) console.log(`campaign ${opts.campaign} has no recorded checkpoint`);
        for (const r of rows)
          console.log(
            `${r.checkpointId}  step ${r.trainerStep}  run ${r.runId}` +
              (r.resumedFrom ? `  resumed from ${r.resumedFrom}` : '') +
              (r.retrainedSteps.length ? `  retrained ${r.retrainedSteps.join(',')}` : '') +
              `  ${r.tasks} tasks  root ${r.root.slice(0, 16)}…`,
          );
      });
    });

  manifest
    .command('diff')
    .description(
      'compare what two checkpoints were trained on, step by step: steps only one holds, steps both hold from different ' +
        "runs (replayed: one checkpoint keeps an earlier run's training of the step, the other a resumed run's, with the " +
        'tasks that differ), and tasks in one manifest only. Checkpoints of two campaigns compare by their tasks.',
    )
    .argument('<a>', 'checkpoint id')
    .argument('<b>', 'checkpoint id')
    .option('--campaign <id>', 'campaign of A (and of B unless --campaign-b)')
    .option('--campaign-b <id>', 'campaign of B')
    .option('--json', 'JSON output')
    .action(
      async (
        a: string,
        b: string,
        o: { campaign?: string; campaignB?: string; json?: boolean },
        cmd: Command,
      ) => {
        const opts = { ...o, campaign: campaignOption(o, cmd), json: o.json ?? cmd.parent?.opts().json };
        await withDb(async (db) => {
          const campaignB = opts.campaignB ?? opts.campaign;
          const ma = await manifestOf(db, opts.campaign, a);
          const mb = await manifestOf(db, campaignB, b);
          const d = diffManifests(ma.manifest, mb.manifest, campaignB === opts.campaign);
          if (opts.json) return printJson({ campaignA: opts.campaign, campaignB, ...d });
          console.log(
            `A ${a} (step ${d.a.trainerStep}, ${d.a.tasks} tasks)  B ${b} (step ${d.b.trainerStep}, ${d.b.tasks} tasks): ` +
              (d.sameRoot ? 'the same manifest' : 'different manifests'),
          );
          console.log(
            `steps: ${Object.entries(d.counts)
              .filter(([, n]) => n > 0)
              .map(([k, n]) => `${n} ${k}`)
              .join(', ')}`,
          );
          for (const s of d.steps) {
            const who = (x?: { runId: string; source: string; tasks: number }) =>
              x ? `${x.runId} (${x.source}, ${x.tasks} tasks)` : '-';
            console.log(
              `step ${s.step}: ${s.status}  A ${who(s.a)}  B ${who(s.b)}` +
                (s.status !== 'only-a' && s.status !== 'only-b' && (s.onlyA.length || s.onlyB.length)
                  ? `  only A: ${few(s.onlyA)}  only B: ${few(s.onlyB)}`
                  : ''),
            );
          }
          if (d.tasksOnlyA.length) console.log(`tasks only in A: ${few(d.tasksOnlyA)}`);
          if (d.tasksOnlyB.length) console.log(`tasks only in B: ${few(d.tasksOnlyB)}`);
        });
      },
    );
}
