// The pool's evolution: the state after a sequence of decisions. Versions: a planning function
// stamps its whole change set with pool.version + 1 (see policy.ts), so the version increments
// once per applied change set however its events are grouped on replay. applyDecisions is
// deterministic (same pool, same decisions: same pool). A decision whose effect is already in the
// pool is a no-op (a re-delivered change set changes nothing); one that skips a version, or would
// change the pool under an older version, is refused.
import { seedLineage } from '../lineage.js';
import { isMembershipDecision, type PoolDecision, PoolDecisionError } from './decisions.js';
import { compareIds, compareQueued, type PoolMember, type PoolState } from './state.js';

/**
 * The pool after the decisions, folded in order (the input is not modified). Deterministic;
 * decisions whose effect is already in the pool change nothing (a change set delivered twice has
 * the effect of one). Throws PoolDecisionError for a decision that skips a pool version, one that
 * would change the pool under an older version, the pruning of a human seed, or a generated
 * task without parents.
 */
export function applyDecisions(pool: PoolState, decisions: readonly PoolDecision[]): PoolState {
  let version = pool.version;
  const members = new Map<string, PoolMember>(pool.members.map((m) => [m.taskId, m]));
  let queue = pool.queue;
  let queueChanged = false;
  let useful = pool.useful ?? 0;
  const removeQueued = (candidateId: string) => {
    const next = queue.filter((q) => q.candidateId !== candidateId);
    if (next.length !== queue.length) {
      queue = next;
      queueChanged = true;
    }
  };

  for (const d of decisions) {
    let stale = false;
    if (isMembershipDecision(d)) {
      if (!Number.isSafeInteger(d.poolVersion)) {
        throw new PoolDecisionError(`${d.kind} ${d.taskId}: pool version ${d.poolVersion} is not an integer`);
      }
      if (d.poolVersion > version + 1) {
        throw new PoolDecisionError(
          `${d.kind} ${d.taskId}: decision for pool version ${d.poolVersion} but the pool is at version ${version}; a change set is missing`,
        );
      }
      stale = d.poolVersion < version;
    }
    const staleChange = () => {
      if (stale) {
        throw new PoolDecisionError(
          `${d.kind} ${(d as { taskId: string }).taskId}: decision of pool version ${(d as { poolVersion: number }).poolVersion} would change the pool at version ${version}`,
        );
      }
    };
    switch (d.kind) {
      case 'seed': {
        const m = members.get(d.taskId);
        if (m) {
          if (m.origin !== 'seed') {
            throw new PoolDecisionError(`seed ${d.taskId}: the pool already holds it as a generated task`);
          }
          break;
        }
        staleChange();
        members.set(d.taskId, {
          taskId: d.taskId,
          origin: 'seed',
          category: d.category,
          parents: [],
          ...seedLineage(d.taskId),
          injectedAtStep: d.step,
        });
        break;
      }
      case 'inject': {
        removeQueued(d.candidateId);
        if (members.has(d.taskId)) break;
        staleChange();
        if (d.parents.length === 0) {
          throw new PoolDecisionError(`inject ${d.taskId}: a generated task needs its parents (seed first)`);
        }
        members.set(d.taskId, {
          taskId: d.taskId,
          origin: 'generated',
          category: d.category,
          parents: [...d.parents],
          rootSeedId: d.rootSeedId,
          depth: d.depth,
          injectedAtStep: d.step,
          candidateId: d.candidateId,
          parentPhi: d.parentPhi,
        });
        break;
      }
      case 'retire': {
        if (!members.has(d.taskId)) break;
        staleChange();
        members.delete(d.taskId);
        break;
      }
      case 'prune': {
        const m = members.get(d.taskId);
        if (!m) break;
        if (m.origin !== 'generated') {
          throw new PoolDecisionError(`prune ${d.taskId}: human seeds are never pruned`);
        }
        staleChange();
        members.delete(d.taskId);
        break;
      }
      case 'select': {
        const m = members.get(d.taskId);
        if (!m || (m.lastSelectedStep !== undefined && m.lastSelectedStep >= d.step)) break;
        members.set(d.taskId, { ...m, lastSelectedStep: d.step });
        break;
      }
      case 'enqueue': {
        const c = d.candidate;
        if (members.has(c.taskId) || queue.some((q) => q.candidateId === c.candidateId)) break;
        queue = [...queue, { ...c, parents: [...c.parents] }];
        queueChanged = true;
        break;
      }
      case 'discard':
        removeQueued(d.candidateId);
        break;
      case 'observe': {
        const m = members.get(d.taskId);
        if (!m) break;
        members.set(d.taskId, {
          ...m,
          lastStats: d.stats,
          firstObservedStep: m.firstObservedStep ?? d.stats.lastStep,
          ...(m.firstBoundaryStep === undefined && d.stats.band === 'boundary'
            ? { firstBoundaryStep: d.stats.lastStep }
            : {}),
        });
        if (d.useful) useful++;
        break;
      }
      default: {
        const never: never = d;
        throw new PoolDecisionError(`unknown decision ${JSON.stringify(never)}`);
      }
    }
    if (isMembershipDecision(d) && d.poolVersion > version) version = d.poolVersion;
  }

  return {
    version,
    members: [...members.values()].sort((a, b) => compareIds(a.taskId, b.taskId)),
    queue: queueChanged ? [...queue].sort(compareQueued) : [...pool.queue],
    // Kept absent until a first useful task, so states recorded before read the same.
    ...(useful > 0 ? { useful } : {}),
  };
}
