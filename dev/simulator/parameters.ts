// Every parameter of the SIMULATED trainer (model.ts) and of `npm run dev -- experiment` (experiment.ts),
// in one place, each with the reason for its value. They were set from the assumptions stated in
// dev/simulator/README.md before any experiment was run, and are not tuned on its results.
// Logit units: a task's per-turn success is sigmoid(z); z = shared skill + memorisation − difficulty.

export interface SimParameters {
  /** Seed tasks per BFCL category in the training pool. */
  trainPerCategory: number;
  /** Held-out tasks per BFCL category, never in the pool. */
  heldOutPerCategory: number;
  /** Tasks sampled from the pool per training step (the GRPO batch, B). */
  batchTasks: number;
  /** Training steps of an experiment run. */
  steps: number;
  /** Steps between two held-out evaluations (the curve in the report). */
  evalEvery: number;
  /** Mean of a task's latent difficulty (logit of per-turn failure against the untrained policy). */
  difficultyMean: number;
  /** Standard deviation of the latent difficulty. */
  difficultySd: number;
  /** Logit a task moves per unit of its group's reward standard deviation (the GRPO step size). */
  learningRate: number;
  /** Share of an update that stays with the trained task itself (memorisation). */
  memorisation: number;
  /** Share of an update that each of the task's API classes receives (shared by every task of the class). */
  classTransfer: number;
  /** Share of an update that the task's category (its structure: base, miss_func, ...) receives. */
  structureTransfer: number;
  /** Standard deviation (logit) of a child's success around the one the generator aimed at. */
  generatorNoiseSd: number;
  /** Share of synthesis runs whose candidate passes the gates and re-execution. */
  gatePass: number;
  /** Share of gate-passing candidates that are flawed (ambiguous or unsolvable), with the coherence rewrite. */
  flawedShare: number;
  /** The same share without the coherence rewrite (ablation.rewrite false). */
  flawedShareNoRewrite: number;
  /** Share of flawed candidates the judge rejects. */
  judgeCatchesFlawed: number;
  /** Share of sound candidates the judge rejects all the same. */
  judgeRejectsSound: number;
}

export const PARAMETERS: Readonly<SimParameters> = Object.freeze({
  trainPerCategory: 100,
  heldOutPerCategory: 100,
  batchTasks: 64,
  steps: 100,
  evalEvery: 5,
  difficultyMean: 2,
  difficultySd: 2,
  learningRate: 1,
  memorisation: 1,
  classTransfer: 0.005,
  structureTransfer: 0.0025,
  generatorNoiseSd: 0.75,
  gatePass: 0.6,
  flawedShare: 0.15,
  flawedShareNoRewrite: 0.35,
  judgeCatchesFlawed: 0.8,
  judgeRejectsSound: 0.1,
});

/** Why each parameter has its value (printed in the experiment's report). */
export const REASONS: Readonly<Record<keyof SimParameters, string>> = Object.freeze({
  trainPerCategory:
    'BFCL ships 200 multi-turn tasks per category and a campaign seeds 100 of them (4 categories: 400 seeds).',
  heldOutPerCategory: 'The other 100 per category are the held-out set: 400 tasks never trained on.',
  batchTasks:
    'A GRPO batch of 64 prompts is a common size for a 7B-class model on 8 GPUs; 64 x 16 = 1,024 rollouts per step for every policy.',
  steps:
    '100 steps of 64 tasks visit each of the 400 seeds about 16 times: long enough for memorisation to show, and the default run (5 policies x 10 seeds) stays near a minute on 2 cores.',
  evalEvery: 'Every 5 steps gives 20 points per curve, enough to see its shape.',
  difficultyMean:
    'A median per-turn success of sigmoid(-2) = 12%: with 3-4 chained turns a 7B-class model solves roughly 5-10% of BFCL multi-turn tasks.',
  difficultySd:
    'A wide spread (2 logits): BFCL tasks range from one simple call to long dependent chains, so many tasks are near zero, few in the middle and a few already solved.',
  learningRate:
    'A group with the largest spread a [0, 1] reward can have (std 0.5) moves its own task by 0.5 logit: a visible but not instant gain per visit, as one GRPO step gives.',
  memorisation:
    'The whole update applies to the trained task itself: training on a prompt raises its own success most (its exact wording and state are fitted).',
  classTransfer:
    'About 150 of the 800 tasks share any one API class; a pass over them moves the class by ~0.75 of one own update, so held-out skill grows slowly, as reported gains of GRPO on BFCL (a few to ~15 points) suggest.',
  structureTransfer:
    'Half the class transfer: the category shapes the dialogue (missing function, missing parameter, long context) but less than the APIs used.',
  generatorNoiseSd:
    "The generator aims a child at its parent's measured success but cannot set difficulty exactly: 0.75 logit moves a 50% task to 33-67%.",
  gatePass:
    'Gates (schema, structure, near-duplicates) and fresh re-execution reject about 40% of candidates of a capable generator.',
  flawedShare:
    'Of candidates that execute cleanly, about 1 in 7 is still ambiguous or unsolvable from its wording (a flaw only a reader finds).',
  flawedShareNoRewrite:
    'Turns written alone, without the coherence rewrite, leave references and values unexplained: about twice as many flawed candidates.',
  judgeCatchesFlawed: 'An LLM judge catches most but not all flawed candidates.',
  judgeRejectsSound: 'An LLM judge also rejects a few sound candidates (false rejections).',
});

/**
 * A flawed task is unsolvable: its difficulty is this many logits (sigmoid(-50) ~ 0), so its
 * groups have zero variance and the burn-in rule retires it once observed.
 */
export const FLAWED_DIFFICULTY = 50;
