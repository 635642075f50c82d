import { ExecutorClient, SEED_CATEGORIES } from './activities/executor-client.js';
import { answerPlan, answerParams } from './standin/synth.js';
import { Rng } from './standin/rng.js';
const ex = new ExecutorClient();
for (const cat of SEED_CATEGORIES) {
  const seeds = await ex.seeds(cat, 100, 100);
  let ok = 0, n = 0, mut = 0;
  for (const seed of seeds) for (const r of [1, 2]) {
    const plan = answerPlan({ seed }, new Rng(`p${r}${seed.id}`));
    const out = answerParams({ plan, seed }, new Rng(`q${r}${seed.id}`));
    if (out.rules.length) mut++;
    const res = await ex.execute({ involved_classes: seed.involved_classes, initial_config: out.initial_config, ground_truth: out.ground_truth, long_context: cat === 'long_context' });
    n++; if (res.ok) ok++; else console.log(' ', seed.id, res.failure?.call, '->', res.failure?.reason, out.rules);
  }
  console.log(cat, '(seeds 100-199)', ok, '/', n, 'mutated', mut);
}
