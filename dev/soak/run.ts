// The chaos soak (`npm run soak`): a campaign through the gateway with the chaos trainer and the
// stand-in generator with its faults on, while a seeded injector kills rods processes, stops
// PostgreSQL, Kafka and Temporal, and writes poison to the reward topic. At the end it checks
// the invariants and returns one JSON report. Runs on a private stack (see private-stack.ts):
// process.env must already point at it when this module is imported.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { CampaignStatus } from '../../domain/campaign-state.js';
import { workflowIds } from '../../domain/ids.js';
import { rotateCertificates, services as stackServices, up as stackUp } from '../../infra/stack/cli.js';
import { activeController, kafkaNodes } from '../../infra/stack/kafka.js';
import { servedFingerprint, untilServing } from '../../infra/stack/secure.js';
import { encode } from '../../platform/codec/registry.js';
import { openKafka, withAdmin } from '../../platform/kafka/client.js';
import { REWARDS_TOPIC } from '../../platform/kafka/topology.js';
import { lastPlannedStep } from '../../platform/store/campaign-plans.js';
import { createPool } from '../../platform/store/db.js';
import { temporalClient } from '../../platform/temporal/connect.js';
import { freeServicePort } from '../../platform/util/free-port.js';
import { mapBomb, rewardsArrayBomb, stringBomb } from '../../test/support/codec/bombs.js';
import { countByKind, type Fault, type FaultKind, faultKindsFor, planFaults } from './faults.js';
import { holdsTransaction } from './freeze.js';
import {
  acceptedGroups,
  auditClean,
  candidatesOnce,
  checkpointsRecorded,
  deadLettersExact,
  exactlyOnce,
  type Invariant,
  type PoisonRecord,
  replayEqualsLive,
  stepsClosedInOrder,
} from './invariants.js';
import { Supervisor } from './processes.js';
import { ChaosTrainer } from './trainer.js';

export interface SoakOptions {
  steps: number;
  seed: number;
  out: string;
  root: string;
  perCategory: number;
  batchesPerStep: number;
  perKind?: number;
  longOutageMs?: number;
  /** The trainer saves (and reports) a checkpoint every this many steps, and after a refused step. */
  checkpointEvery?: number;
  /** Kafka nodes of the private stack (1, or 3 for the replicated cluster). */
  kafkaNodes: number;
  /** The private stack is the secured one (infra/stack/secure.ts); the gateway serves HTTPS. */
  secure: boolean;
  log: (line: string) => void;
}

export interface FaultRecord {
  kind: FaultKind;
  atStep: number;
  target: string;
  downS: number;
  startedAt: number;
  endedAt: number;
  error?: string;
}

export interface SoakReport {
  steps: number;
  seed: number;
  kafka_nodes: number;
  secure: boolean;
  campaignId: string;
  faults_by_kind: Record<FaultKind, number>;
  invariants: Record<string, boolean>;
  evidence: Record<string, string>;
  max_step_stall_s: number;
  max_step_stall_step: number;
  max_step_stall_cause: string;
  median_step_s: number;
  wall_s: number;
  trainer: {
    batches: number;
    sends: number;
    one_shot_batches: number;
    checkpoints: number;
    refused_steps: number[];
    longest_checkpoint_wait_s: number;
    unknown_committed: number;
    unknown_lost: number;
    groups_accepted: number;
  };
  process_starts: Record<string, number>;
  unexpected_exits: { name: string; code: number | null; signal: string | null; atStep: number }[];
  faults: FaultRecord[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Retries `f` through outages until it answers or the deadline passes. */
async function patiently<T>(what: string, f: () => Promise<T>, timeoutMs = 10 * 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await f();
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`${what}: ${(e as Error).message}`);
      await sleep(1000);
    }
  }
}

export async function runSoak(opts: SoakOptions): Promise<SoakReport> {
  const t0 = Date.now();
  const logDir = path.join(opts.out, 'logs');
  mkdirSync(logDir, { recursive: true });
  const log = opts.log;
  const plan = planFaults({
    steps: opts.steps,
    seed: opts.seed,
    perKind: opts.perKind,
    longOutageMs: opts.longOutageMs,
    kinds: faultKindsFor(opts),
  });
  log(`fault plan: ${plan.length} faults over ${opts.steps} steps (${JSON.stringify(countByKind(plan))})`);

  log('starting the private stack (PostgreSQL, Kafka, Temporal, executor) ...');
  const services = new Map(stackServices().map((s) => [s.name, s]));
  await stackUp([...services.values()]);

  const token = randomBytes(16).toString('hex');
  const gatewayPort = await freeServicePort();
  const standinPort = await freeServicePort();
  const taskQueue = `rods-soak-${randomUUID().slice(0, 8)}`;
  const sup = new Supervisor(opts.root, logDir, {
    RODS_TASK_QUEUE: taskQueue,
    RODS_GATEWAY_TOKENS: token,
    RODS_SINK_DIR: path.join(opts.out, 'pool-sink'),
    // The stand-in is the worker's `default` generator endpoint; the campaign only names it.
    RODS_GENERATOR_BASE_URL: `http://127.0.0.1:${standinPort}/v1`,
    // A frozen process's open transaction is ended by the server well within the freeze.
    RODS_PG_IDLE_IN_TRANSACTION_MS: '8000',
  });
  const db = createPool({ application: 'rods-soak', max: 4 });
  let trainerStep = 0;
  const stepTimes: { step: number; start: number; end: number }[] = [];
  const faults: FaultRecord[] = [];
  const poison: PoisonRecord[] = [];
  try {
    // The generator answers some requests with 503, 429 or malformed JSON, as a loaded vLLM would.
    sup.start({
      name: 'standin',
      bin: 'rods-dev',
      args: [
        'standin-generator',
        '--port',
        String(standinPort),
        '--seed',
        String(opts.seed),
        '--fail-rate',
        '0.05',
        '--rate-limit-rate',
        '0.05',
        '--malformed-rate',
        '0.05',
        '--quiet',
      ],
    });
    sup.start({ name: 'worker', args: ['worker', '--task-queue', taskQueue] });
    for (const i of [0, 1])
      sup.start({ name: `aggregator-${i}`, args: ['aggregator', '--session-timeout-ms', '6000'] });
    sup.start({ name: 'relay', args: ['relay', '--name', 'soak'] });
    sup.start({
      name: 'gateway',
      args: ['gateway', '--port', String(gatewayPort), '--task-queue', taskQueue],
    });
    // Secured: HTTPS with the stack's certificate, for the name it carries (its CA is trusted
    // through NODE_EXTRA_CA_CERTS, set when the soak started).
    const gw = opts.secure ? `https://localhost:${gatewayPort}` : `http://127.0.0.1:${gatewayPort}`;
    await patiently('the gateway did not come up', async () => {
      const r = await fetch(`${gw}/healthz`);
      if (!r.ok) throw new Error(`healthz ${r.status}`);
    });
    await patiently('the stand-in generator did not come up', async () => {
      const r = await fetch(`http://127.0.0.1:${standinPort}/v1/models`);
      if (!r.ok) throw new Error(`models ${r.status}`);
    });

    const example = JSON.parse(
      readFileSync(path.join(opts.root, 'dev/examples/campaign.standin.json'), 'utf8'),
    ) as Record<string, unknown>;
    const { campaignId: _c, name: _n, ...config } = example;
    config.seeds = { perCategory: opts.perCategory };
    const campaignId = `soak-${opts.seed}-${randomUUID().slice(0, 6)}`;
    await patiently('creating the campaign', async () => {
      const r = await fetch(`${gw}/v1/campaigns`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ campaignId, name: 'chaos soak', config }),
      });
      if (r.status !== 201) throw new Error(`${r.status} ${await r.text()}`);
    });
    log(`campaign ${campaignId}: seeding ${opts.perCategory * 4} BFCL tasks ...`);
    const trainer = new ChaosTrainer({
      gatewayUrl: gw,
      token,
      campaignId,
      seed: opts.seed,
      batchesPerStep: opts.batchesPerStep,
    });
    await patiently('the pool was not seeded', async () => {
      if ((await trainer.pool()).length === 0) throw new Error('empty pool');
    });

    const producer = await openKafka({ clientId: 'rods-soak-poison' }).producer({ idempotent: true });
    const writePoison = async (n: number): Promise<string> => {
      const kinds = ['bad-magic', 'non-finite-reward', 'unknown-campaign'] as const;
      const kind = kinds[n % kinds.length]!;
      const value =
        kind === 'bad-magic'
          ? randomBytes(64)
          : encode('RolloutGroupScored', {
              eventId: randomUUID(),
              campaignId: kind === 'unknown-campaign' ? `no-such-campaign-${n}` : campaignId,
              taskId: `poison-task-${n}`,
              step: 1,
              policyVersion: 'poison',
              rewards: kind === 'non-finite-reward' ? [0.5, Number.NaN] : [0.5, 0.25],
              producedAt: Date.now(),
            } as never);
      const sent = await patiently('writing poison', () =>
        producer.send(REWARDS_TOPIC, [{ key: `poison-${n}`, value }]),
      );
      const s = sent[0]!;
      poison.push({ kind, partition: s.partition, offset: s.baseOffset! });
      return `${kind} at ${s.partition}/${s.baseOffset}`;
    };

    // An array, a string and a map bomb: each dead-lettered declared-length, nothing killed.
    const writeBombs = async (n: number): Promise<string> => {
      const t = { campaignId, taskId: `bomb-task-${n}`, eventId: randomUUID() };
      const bombs = [
        ['array', rewardsArrayBomb(t)],
        ['string', stringBomb({ ...t, eventId: randomUUID() })],
        ['map', mapBomb({ ...t, eventId: randomUUID() })],
      ] as const;
      const at: string[] = [];
      for (const [what, value] of bombs) {
        const sent = await patiently('writing a bomb', () =>
          producer.send(REWARDS_TOPIC, [{ key: `bomb-${n}-${what}`, value }]),
        );
        const r = sent[0]!;
        poison.push({ kind: 'declared-length', partition: r.partition, offset: r.baseOffset! });
        at.push(`${what} (${value.length} B) at ${r.partition}/${r.baseOffset}`);
      }
      return at.join(', ');
    };
    const kafka = services.get('kafka')!;
    /** kill -9 of one node of the cluster; it is started again after the fault's down time. */
    const killNode = async (f: Fault, controller: boolean): Promise<string> => {
      // The whole cluster first (a node an earlier fault killed may still be starting).
      await stackUp([kafka]);
      const nodes = kafkaNodes();
      const ctl = activeController(nodes);
      const others = nodes.filter((x) => x.id !== ctl && x.pid());
      const pick = controller
        ? nodes.find((x) => x.id === ctl)
        : others[f.instance % Math.max(1, others.length)];
      if (!pick)
        throw new Error(controller ? 'no active controller found' : 'no broker besides the controller runs');
      const pid = pick.pid();
      if (!pid) throw new Error(`node ${pick.id} does not run`);
      process.kill(pid, 'SIGKILL');
      while (pick.pid()) await sleep(100);
      await sleep(f.downMs);
      // up() finds the cluster answering and starts the node that is down (kafkaService.ready).
      await stackUp([kafka]);
      return `node ${pick.id} (kill -9)${controller ? ', the active controller' : `, controller ${ctl ?? '?'} left running`}`;
    };
    /** SIGSTOP of an aggregator inside an open transaction (waits up to 30 s for one), then SIGCONT. */
    const freeze = async (f: Fault): Promise<string> => {
      const name = `aggregator-${f.instance}`;
      const deadline = Date.now() + 30_000;
      let inTx = false;
      for (;;) {
        const pid = sup.pid(name);
        if (pid && (await holdsTransaction(db, pid, 'rods-aggregator').catch(() => false))) {
          sup.signal(name, 'SIGSTOP');
          inTx = true;
          break;
        }
        if (Date.now() > deadline) {
          sup.signal(name, 'SIGSTOP');
          break;
        }
        await sleep(5);
      }
      await sleep(f.downMs);
      sup.signal(name, 'SIGCONT');
      return `${name} (SIGSTOP ${inTx ? 'inside a transaction' : 'between transactions: none opened within 30 s'})`;
    };

    // Faults that kill or restart Kafka nodes take turns (the injector's and the trainer loop's
    // late publish): two at once restart the same node twice, and the second start fails.
    let kafkaTurn: Promise<void> = Promise.resolve();
    const takeKafkaTurn = async (): Promise<() => void> => {
      const before = kafkaTurn;
      let release = () => {};
      kafkaTurn = new Promise<void>((r) => {
        release = r;
      });
      await before;
      return release;
    };
    const KAFKA_FAULTS: readonly string[] = [
      'kafka-outage',
      'kill-broker',
      'kill-controller',
      'rotate-certs',
    ];

    // A new server certificate: the stack's services present it (rotateCertificates waits for
    // each), then the gateway, which polls its files.
    const rotate = async (): Promise<string> => {
      const r = await rotateCertificates([...services.values()]);
      const t = Date.now();
      const url = new URL(gw);
      await untilServing('the gateway', () => servedFingerprint(url.hostname, Number(url.port)), r.after);
      return `server certificate ${r.before.slice(0, 11)} -> ${r.after.slice(0, 11)}: ${Object.entries(
        r.services,
      )
        .map(([k, v]) => `${k} ${v.split(' and ')[0]}`)
        .join('; ')}; the gateway presents it after ${((Date.now() - t) / 1000).toFixed(1)} s`;
    };

    const faultRun = async (f: Fault, n: number): Promise<FaultRecord> => {
      const release = KAFKA_FAULTS.includes(f.kind) ? await takeKafkaTurn() : () => {};
      try {
        return await faultBody(f, n);
      } finally {
        release();
      }
    };
    const faultBody = async (f: Fault, n: number): Promise<FaultRecord> => {
      const rec: FaultRecord = {
        kind: f.kind,
        atStep: f.atStep,
        target: '',
        downS: f.downMs / 1000,
        startedAt: Date.now(),
        endedAt: 0,
      };
      const kill = async (name: string) => {
        rec.target = name;
        await sup.kill9(name);
        await sleep(f.downMs);
        sup.restart(name);
      };
      const outage = async (name: string) => {
        const s = services.get(name)!;
        rec.target = `${name} (${f.hard ? 'kill -9' : 'stop'})`;
        const pid = s.pid();
        if (f.hard && pid) {
          process.kill(pid, 'SIGKILL');
          while (s.pid()) await sleep(100);
        } else await s.stop();
        await sleep(f.downMs);
        await stackUp([s]);
      };
      try {
        switch (f.kind) {
          case 'kill-worker':
            await kill('worker');
            break;
          case 'kill-aggregator':
            await kill(`aggregator-${f.instance}`);
            break;
          case 'kill-relay':
            await kill('relay');
            break;
          case 'kill-gateway':
            await kill('gateway');
            break;
          case 'kill-executor':
            await outage('executor');
            rec.target = 'executor (kill -9)';
            break;
          case 'postgres-outage':
            await outage('postgres');
            break;
          case 'kafka-outage':
            await outage('kafka');
            break;
          case 'temporal-outage':
            await outage('temporal');
            break;
          case 'poison':
            rec.target = await writePoison(n);
            break;
          case 'bomb':
            rec.target = await writeBombs(n);
            break;
          case 'freeze':
            rec.target = await freeze(f);
            break;
          case 'kill-broker':
            rec.target = await killNode(f, false);
            break;
          case 'kill-controller':
            rec.target = await killNode(f, true);
            break;
          case 'rotate-certs':
            rec.target = await rotate();
            break;
          case 'late-publish':
            // Carried out by the trainer's loop (it spans four steps).
            break;
        }
      } catch (e) {
        rec.error = (e as Error).message.slice(0, 300);
      }
      rec.endedAt = Date.now();
      return rec;
    };

    let trainerDone = false;
    // Faults the trainer's loop carries out itself.
    const TRAINER_FAULTS: readonly string[] = ['late-publish', 'refused-step'];
    const injector = (async () => {
      let n = 0;
      for (const f of plan) {
        if (TRAINER_FAULTS.includes(f.kind)) continue;
        while (trainerStep < f.atStep && !trainerDone) await sleep(100);
        await sleep(f.delayMs);
        const rec = await faultRun(f, n++);
        faults.push(rec);
        log(
          `  fault at step ${f.atStep}: ${f.kind} ${rec.target}${f.downMs ? ` for ${(f.downMs / 1000).toFixed(1)} s` : ''}${rec.error ? ` FAILED: ${rec.error}` : ''}`,
        );
      }
    })();

    // A late publish: the worker and every broker down while step S is sent (its batches fall
    // back to ingestion workflows no worker runs: 202, published: false), the brokers back, steps
    // S+1..S+3 sent (published at once), then the worker back: step S's groups reach the
    // aggregator three steps after the same tasks' later groups, past the stale window.
    const lates = plan.filter((f) => f.kind === 'late-publish');
    let late: { rec: FaultRecord; until: number } | undefined;
    const lateBegin = async (f: Fault, step: number) => {
      const rec: FaultRecord = {
        kind: f.kind,
        atStep: step,
        target: '',
        downS: f.downMs / 1000,
        startedAt: Date.now(),
        endedAt: 0,
      };
      try {
        await sup.kill9('worker');
        for (const node of kafkaNodes()) {
          const pid = node.pid();
          if (pid) process.kill(pid, 'SIGKILL');
        }
        while (kafka.pid() || kafkaNodes().some((x) => x.pid())) await sleep(100);
        rec.target = `worker and all ${opts.kafkaNodes} broker(s) (kill -9) while step ${step} was sent; published after steps ${step + 1}-${step + 3}`;
      } catch (e) {
        rec.error = (e as Error).message.slice(0, 300);
      }
      late = { rec, until: step + 3 };
    };
    const lateBrokersBack = async (f: Fault) => {
      await sleep(f.downMs);
      await stackUp([kafka]).catch((e: Error) => {
        if (late) late.rec.error = `brokers not back: ${e.message}`.slice(0, 300);
      });
    };
    const lateEnd = () => {
      sup.restart('worker');
      late!.rec.endedAt = Date.now();
      faults.push(late!.rec);
      log(
        `  fault at step ${late!.rec.atStep}: late-publish ${late!.rec.target}${late!.rec.error ? ` FAILED: ${late!.rec.error}` : ''}`,
      );
      late = undefined;
    };

    const planned = () => lastPlannedStep(db, campaignId);
    const refusals = plan.filter((f) => f.kind === 'refused-step');
    const checkpointEvery = opts.checkpointEvery ?? 5;
    try {
      for (let step = 1; step <= opts.steps; step++) {
        const start = Date.now();
        trainerStep = step;
        const due = late ? undefined : lates.find((f) => f.atStep <= step);
        let kafkaReleased: (() => void) | undefined;
        if (due) {
          lates.splice(lates.indexOf(due), 1);
          kafkaReleased = await takeKafkaTurn();
          await lateBegin(due, step);
        }
        // A refused step (not inside a late publish, whose worker is down); a checkpoint right after it.
        const refuse = late || due ? undefined : refusals.find((f) => f.atStep <= step);
        let r: { groups: number; batches: number };
        if (refuse) {
          refusals.splice(refusals.indexOf(refuse), 1);
          const rec: FaultRecord = {
            kind: 'refused-step',
            atStep: step,
            target: '',
            downS: 0,
            startedAt: Date.now(),
            endedAt: 0,
          };
          try {
            r = { groups: await trainer.refusedStep(step), batches: 1 };
            rec.target = `step ${step}'s closing batch (422), checkpoint soak-ckpt-${step} saved after it`;
          } catch (e) {
            rec.error = (e as Error).message.slice(0, 300);
            r = await trainer.step(step);
          }
          rec.endedAt = Date.now();
          faults.push(rec);
          log(
            `  fault at step ${step}: refused-step ${rec.target}${rec.error ? ` FAILED: ${rec.error}` : ''}`,
          );
        } else r = await trainer.step(step);
        if (refuse || step % checkpointEvery === 0) trainer.saveCheckpoint(step);
        if (due) {
          await lateBrokersBack(due);
          kafkaReleased?.();
        }
        if (late && step === late.until) lateEnd();
        // Within a late publish, no step is planned until the worker is back: the trainer runs on.
        if (late) {
          stepTimes.push({ step, start, end: Date.now() });
          log(
            `step ${step}/${opts.steps}: ${r.groups} groups in ${r.batches} batches (not waiting: late publish)`,
          );
          continue;
        }
        await patiently(
          `step ${step} was not planned`,
          async () => {
            if ((await planned()) < step) throw new Error('not yet');
          },
          20 * 60_000,
        );
        stepTimes.push({ step, start, end: Date.now() });
        log(
          `step ${step}/${opts.steps}: ${r.groups} groups in ${r.batches} batches, ${((Date.now() - start) / 1000).toFixed(1)} s`,
        );
      }
    } finally {
      trainerDone = true;
      await injector;
      await producer.disconnect().catch(() => {});
    }
    log(`waiting for the trainer's ${trainer.checkpoints.length} checkpoint reports to be answered ...`);
    await trainer.flushCheckpoints();

    // Stop the campaign: running syntheses finish, then the workflow completes. A leaked slot
    // would keep it running for ever.
    log('stopping the campaign and waiting for it to complete ...');
    const final = await patiently(
      'the campaign did not complete after stop',
      async () => {
        const { client, close } = await temporalClient();
        try {
          const h = client.workflow.getHandle(workflowIds.campaign(campaignId));
          const d = await h.describe();
          if (d.status.name === 'RUNNING') {
            await h.executeUpdate('stop', { args: [{ reason: 'soak over' }] }).catch(() => {});
            throw new Error('still running');
          }
          return {
            status: d.status.name,
            result: (await h.result().catch(() => null)) as CampaignStatus | null,
          };
        } finally {
          await close();
        }
      },
      10 * 60_000,
    ).catch((e: Error) => ({ status: `not completed: ${e.message}`, result: null }));

    // Let both aggregators drain the reward topic, so every poison record has been judged.
    await patiently('the aggregators did not drain the reward topic', async () => {
      const lag = await withAdmin(async (a) => {
        const ends = await a.fetchTopicOffsets(REWARDS_TOPIC);
        const done = await a.fetchCommittedOffsets('rods-aggregator', REWARDS_TOPIC);
        return ends.reduce((n, e) => {
          const c = done.find((d) => d.partition === e.partition)?.offset;
          return n + Number(e.high) - Number(c ?? e.low);
        }, 0);
      });
      if (lag > 0) throw new Error(`lag ${lag}`);
    });

    log('checking the invariants ...');
    const acc = await acceptedGroups(db, campaignId, trainer.log);
    const running = final.result?.running;
    const inv: Record<string, Invariant> = {
      every_group_counted_once: await exactlyOnce(db, campaignId, acc.groups),
      steps_closed_in_order: await stepsClosedInOrder(db, campaignId, opts.steps),
      no_leaked_synthesis_slot: {
        ok: final.status === 'COMPLETED' && Object.keys(running ?? {}).length === 0,
        detail: `campaign workflow ${final.status}; running syntheses at the end: ${JSON.stringify(running ?? null)}`,
      },
      candidates_injected_or_queued_once: await candidatesOnce(db, campaignId),
      // Replays build scratch schemas: the owner role's work.
      replay_equals_live: await (async () => {
        const owner = createPool({
          application: 'rods-soak-replay',
          max: 2,
          connectionString: process.env.RODS_MIGRATE_DATABASE_URL || undefined,
        });
        try {
          return await replayEqualsLive(owner, campaignId);
        } finally {
          await owner.end();
        }
      })(),
      audit_clean: await auditClean(db, campaignId),
      dead_letters_exactly_the_poison: await deadLettersExact(REWARDS_TOPIC, poison, (letters) =>
        writeFileSync(path.join(opts.out, 'dead-letters.json'), `${JSON.stringify(letters, null, 1)}\n`),
      ),
      no_batch_refused: (() => {
        // But the refused-step fault's own.
        const refused = trainer.log.filter(
          (e) => e.outcome === 'refused' && !trainer.refusedSteps.includes(e.step),
        );
        return {
          ok: refused.length === 0,
          detail: `${refused.length} of ${trainer.log.length} batches refused (and ${trainer.refusedSteps.length} refused on purpose: steps ${trainer.refusedSteps.join(', ') || 'none'})${refused
            .slice(0, 3)
            .map((e) => `; ${e.batchId}: ${e.error}`)
            .join('')}`,
        };
      })(),
      checkpoints_recorded_and_verified: await checkpointsRecorded(db, campaignId, trainer.checkpoints),
      every_fault_injected: {
        ok: faults.length === plan.length && faults.every((f) => !f.error),
        detail: `${faults.length}/${plan.length} faults carried out${
          faults.some((f) => f.error)
            ? `; failed: ${faults
                .filter((f) => f.error)
                .map((f) => `${f.kind}: ${f.error}`)
                .join('; ')}`
            : ''
        }`,
      },
    };

    // The longest step, start of rollouts to its plan, and what was broken meanwhile.
    const spans = stepTimes.map((s) => ({ ...s, d: (s.end - s.start) / 1000 }));
    const worst = spans.reduce((a, b) => (b.d > a.d ? b : a), spans[0]!);
    const during = faults.filter((f) => f.startedAt <= worst.end && f.endedAt >= worst.start - 5000);
    const sorted = spans.map((s) => s.d).sort((a, b) => a - b);
    const atStep = (t: number) => stepTimes.find((s) => s.start <= t && t <= s.end)?.step ?? trainerStep;
    const batches = new Set(trainer.log.map((e) => `${e.step}/${e.batchId}`));
    return {
      steps: opts.steps,
      seed: opts.seed,
      kafka_nodes: opts.kafkaNodes,
      secure: opts.secure,
      campaignId,
      faults_by_kind: countByKind(faults.filter((f) => !f.error)),
      invariants: Object.fromEntries(Object.entries(inv).map(([k, v]) => [k, v.ok])),
      evidence: Object.fromEntries(Object.entries(inv).map(([k, v]) => [k, v.detail])),
      max_step_stall_s: Number(worst.d.toFixed(1)),
      max_step_stall_step: worst.step,
      max_step_stall_cause: during.length
        ? during.map((f) => `${f.kind} ${f.target}${f.downS ? ` (${f.downS.toFixed(1)} s)` : ''}`).join(', ')
        : 'no fault (the step itself)',
      median_step_s: Number((sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(2)),
      wall_s: Math.round((Date.now() - t0) / 1000),
      trainer: {
        batches: batches.size,
        sends: trainer.log.reduce((n, e) => n + e.attempts, 0),
        one_shot_batches: trainer.log.filter((e) => e.client === 'one-shot').length,
        checkpoints: trainer.checkpoints.length,
        refused_steps: trainer.refusedSteps,
        longest_checkpoint_wait_s: Math.round(
          Math.max(0, ...trainer.checkpoints.map((c) => ((c.recordedAt ?? Date.now()) - c.savedAt) / 1000)),
        ),
        unknown_committed: acc.unknownCommitted,
        unknown_lost: acc.unknownLost,
        groups_accepted: acc.groups.length,
      },
      process_starts: Object.fromEntries(sup.starts),
      unexpected_exits: sup.unexpectedExits.map((e) => ({
        name: e.name,
        code: e.code,
        signal: e.signal,
        atStep: atStep(e.at),
      })),
      faults,
    };
  } finally {
    await sup.stopAll();
    await db.end().catch(() => {});
    writeFileSync(path.join(opts.out, 'faults.json'), `${JSON.stringify(faults, null, 2)}\n`);
  }
}
