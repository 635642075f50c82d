import { ExecutorClient, SEED_CATEGORIES } from '/work/main/activities/executor-client.js';
import { answerPlan, answerParams } from '/work/main/standin/synth.js';
import { Rng } from '/work/main/standin/rng.js';
const client = new ExecutorClient();
const reps = Number(process.argv[2] ?? 1);
for (const cat of SEED_CATEGORIES) {
  const seeds = await client.seeds(cat, 100);
  let ok = 0, n = 0;
  const fails: string[] = [];
  for (const seed of seeds) for (let r = 0; r < reps; r++) {
    const rng = new Rng(`m:${seed.id}:${r}`);
    const plan = answerPlan({ seed }, rng.fork('plan'));
    const out = answerParams({ plan, seed }, rng.fork('params'));
    const res = await client.execute({ involved_classes: seed.involved_classes, initial_config: out.initial_config, ground_truth: out.ground_truth, long_context: cat === 'long_context' });
    n++;
    if (res.ok) ok++; else fails.push(`${seed.id}#${r}: ${res.failure?.call} -> ${res.failure?.reason} | rules: ${out.rules.join('; ')} | ${plan.narrative.slice(plan.narrative.indexOf('follows'))}`);
  }
  console.log(cat, ok, '/', n, (ok / n * 100).toFixed(1) + '%');
  for (const f of fails.slice(0, 15)) console.log('  ', f);
}
