"""rods for TRL's ``GRPOTrainer``: train on the live pool, report every step once.

Three pieces (clients/python/examples/trl_grpo.py puts them together in a dozen lines):

* ``RodsPool(client, args)`` is the campaign's active pool as a ``datasets.IterableDataset``
  (``pool.dataset``). A map-style dataset cannot serve rods: TRL's sampler fixes its length when
  the data loader is built, so a task injected later would never be drawn. The stream draws, per
  generation batch, ``generation_batch_size // num_generations`` distinct tasks of the newest
  pool version (with replacement only when the pool is smaller). A background thread long-polls
  the gateway for new versions, so the training thread never waits on HTTP; accelerate fetches
  one batch ahead, so a new version is drawn from one batch after it arrives. With several
  processes, rank 0 hands its version to every rank at each batch (``torch.distributed``), so
  all ranks draw the same tasks in the same order from the same version, as TRL's sharding of the
  stream requires. Needs ``GRPOConfig(shuffle_dataset=False)`` (TRL's default shuffles through a
  1,000-row buffer and keeps drawing removed tasks) and ``max_steps``.
  Rows: ``prompt`` (the task's first user turn), ``rods_task_id``, ``rods_pool_version``,
  ``rods_category``, ``rods_origin``, ``task`` (the BFCL record, JSON) and ``environment`` (its
  ``rods_client.bfcl`` environment name, for ``environment_factory=environment_factories()``).
* ``RodsRewards(reward_fn)`` wraps a reward function (sync or async) and records each reward
  under its row's ``rods_task_id`` for the step it trains (``trainer_state.global_step + 1``).
  Evaluation rewards (the model in eval mode) are kept apart, never reported as a step, and
  written to ``<output_dir>/rods-evaluation.json``; see the class.
* ``RodsCallback(client, rewards)`` reports at each optimizer step's end: the rewards of every
  rank gathered, reported once (by rank 0) through a durable spool (``rods_client.reporting``:
  retried with backoff, never blocking or stopping training unless ``strict=True``), a step
  without rods rows closed all the same, and after a resume from a checkpoint a step the spool
  had reported is not sent again. The spool is ``<output_dir>/rods-spool/<campaign>`` unless
  ``spool_dir`` or ``RODS_SPOOL_DIR`` says otherwise; it travels with the checkpoints.

  It also reports each checkpoint the Trainer saves (``on_save``, rank 0), so rods records what
  each checkpoint was trained on. A process has one run id (``run-`` and 12 hex digits, made at
  ``on_train_begin``, or ``run_id=``); the checkpoint of step N is ``<run id>-step-N``, and
  ``rods-checkpoint.json`` in its folder says so (with the campaign, run, step, the checkpoint
  resumed from and the digest). A run resumed from a checkpoint (``state.global_step > 0`` at
  ``on_train_begin``) reads that file in ``<output_dir>/checkpoint-<global_step>`` and reports
  every checkpoint of its own as resumed from it (or ``resumed_from=``), with the steps it trained
  again (``rods_client.reporting``: retrainedSteps). ``checkpoint_digest=True`` adds a SHA-256 over
  the folder's files (``rods_client.reporting.checkpoint_digest``; it reads the whole checkpoint
  on the training thread, so it is off by default). Where transformers 5.24 does this
  (transformers/trainer.py): ``train()`` resolves ``resume_from_checkpoint=True`` to the last
  ``checkpoint-N`` (:1554-1557); ``_inner_training_loop`` loads the checkpoint's trainer state in
  ``_init_training_state`` (called at :1612, the load at :1697) before ``on_train_begin`` (:1653);
  a step's ``on_step_end`` (:1957) comes before ``_maybe_log_save_evaluate`` (:1958), whose
  ``_save_checkpoint`` (:2285) writes ``<output_dir>/checkpoint-<global_step>`` (:3370-3376,
  ``PREFIX_CHECKPOINT_DIR = "checkpoint"``, trainer_utils.py:266) before ``on_save`` (:2286).
  TRL 1.16's ``GRPOTrainer._save_checkpoint`` (grpo_trainer.py:3384-3395) writes its own files
  around transformers' and returns before that ``on_save`` too.

``RodsCallback.timings()`` gives what rods added to the training thread (the report's spool
write with the gather, the stream's batch hand-over) as p50/p99 milliseconds; it is written to
``<output_dir>/rods-timings.json`` at the end of training.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from . import RodsClient
from ._common import first_turn
from .bfcl import environment_name
from .pool import LivePool
from .reporting import (StepReporter, check_id, checkpoint_digest, default_spool_dir, new_run_id,
                        resumed_checkpoint_id, write_checkpoint_record)

try:
    from transformers import TrainerCallback as _CallbackBase
except ImportError:  # pragma: no cover - exercised only where transformers is absent
    _CallbackBase = object  # type: ignore[misc,assignment]
try:
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
except ImportError:  # pragma: no cover
    PREFIX_CHECKPOINT_DIR = "checkpoint"

__all__ = ["RodsPool", "RodsRewards", "AsyncRodsRewards", "RodsCallback", "pool_rows"]

log = logging.getLogger("rods_client")


def _dist():
    """torch.distributed when a process group of more than one process is up, else None."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return None
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    return None


def _rank() -> int:
    dist = _dist()
    if dist is not None:
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def pool_rows(pool: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A pool answer's tasks as training rows (the columns of RodsPool's stream)."""
    version = int(pool.get("version") or 0)
    rows = []
    for entry in pool.get("tasks", []):
        task = entry.get("task") or {}
        rows.append({
            "prompt": [{"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
                       for m in first_turn(task)],
            "rods_task_id": str(entry["taskId"]),
            "rods_pool_version": version,
            "rods_category": str(entry.get("category") or ""),
            "rods_origin": str(entry.get("origin") or ""),
            "task": json.dumps(task, sort_keys=True),
            "environment": environment_name(task),
        })
    return rows


def _percentiles(values: Sequence[float]) -> Dict[str, Optional[float]]:
    if not values:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] * 1000

    return {"n": len(ordered), "p50_ms": round(at(0.5), 3), "p99_ms": round(at(0.99), 3),
            "max_ms": round(ordered[-1] * 1000, 3)}


class RodsPool:
    """The live pool as an endless stream of training rows (see the module doc)."""

    def __init__(self, client: RodsClient, args: Any = None, prompts_per_batch: Optional[int] = None,
                 seed: Optional[int] = None, poll_seconds: int = 20, start_timeout: float = 300.0):
        if prompts_per_batch is None:
            if args is None:
                raise ValueError("rods: give RodsPool the GRPOConfig (or prompts_per_batch)")
            if getattr(args, "shuffle_dataset", False):
                raise ValueError("rods: set GRPOConfig(shuffle_dataset=False): TRL's shuffle buffers 1,000 rows of "
                                 "the stream and would keep drawing tasks the pool has retired")
            prompts_per_batch = int(args.generation_batch_size) // int(args.num_generations)
        self.client = client
        self.prompts_per_batch = max(1, int(prompts_per_batch))
        self.seed = int(seed if seed is not None else getattr(args, "seed", 0) or 0)
        self.poll_seconds = poll_seconds
        self.rank = _rank()
        # Rank 0 keeps the newest pool; every rank keeps the version all agreed on at the last batch.
        self._live = LivePool(client, poll_seconds, start_timeout) if self.rank == 0 else None
        self._rows: Dict[int, List[Dict[str, Any]]] = {}
        self._agreed: Optional[Tuple[int, List[Dict[str, Any]]]] = None
        self.handover_seconds: List[float] = []
        # The pool version of every batch drawn, in order (the same list on every rank).
        self.batch_versions: List[int] = []

    @property
    def refresh_errors(self) -> int:
        return self._live.refresh_errors if self._live else 0

    def _newest(self) -> Tuple[int, List[Dict[str, Any]]]:
        assert self._live is not None
        version, entries = self._live.latest()
        if version not in self._rows:
            self._rows = {version: pool_rows({"version": version, "tasks": entries})}
        return version, self._rows[version]

    def close(self) -> None:
        if self._live:
            self._live.close()

    @property
    def version(self) -> Optional[int]:
        return self._agreed[0] if self._agreed else None

    def _agree(self) -> Tuple[int, List[Dict[str, Any]]]:
        """The pool every rank draws this batch from: rank 0's newest, handed to the others."""
        mine = self._newest() if self.rank == 0 else None
        dist = _dist()
        if dist is None:
            assert mine is not None
            self._agreed = mine
            return mine
        previous = self._agreed[0] if self._agreed else None
        if self.rank == 0:
            assert mine is not None
            message: List[Any] = [(mine[0], mine[1] if mine[0] != previous else None)]
        else:
            message = [None]
        dist.broadcast_object_list(message, src=0)
        version, rows = message[0]
        if rows is None:
            assert self._agreed is not None and self._agreed[0] == version
            rows = self._agreed[1]
        self._agreed = (version, rows)
        return self._agreed

    def rows(self) -> Iterator[Dict[str, Any]]:
        """The stream: per batch, distinct tasks of one pool version, the same on every rank."""
        batch = 0
        while True:
            started = time.perf_counter()
            version, rows = self._agree()
            rng = random.Random(f"{self.seed}:{batch}")
            n = self.prompts_per_batch
            picked = rng.sample(rows, min(n, len(rows)))
            if len(picked) < n:
                picked += rng.choices(rows, k=n - len(picked))
            self.batch_versions.append(version)
            self.handover_seconds.append(time.perf_counter() - started)
            batch += 1
            yield from picked

    @property
    def dataset(self):
        """The stream as the ``datasets.IterableDataset`` GRPOTrainer takes."""
        from datasets import Features, IterableDataset, List as ListFeature, Value

        features = Features({
            "prompt": ListFeature({"role": Value("string"), "content": Value("string")}),
            "rods_task_id": Value("string"),
            "rods_pool_version": Value("int64"),
            "rods_category": Value("string"),
            "rods_origin": Value("string"),
            "task": Value("string"),
            "environment": Value("string"),
        })
        # datasets fingerprints the generator and its arguments with dill: give it a module function
        # and a string, and let the string find this pool (threads and sockets do not pickle).
        key = f"{self.client.campaign}:{id(self)}"
        _POOLS[key] = self
        return IterableDataset.from_generator(_stream, features=features, gen_kwargs={"pool": key})


_POOLS: Dict[str, RodsPool] = {}


def _stream(pool: str) -> Iterator[Dict[str, Any]]:
    yield from _POOLS[pool].rows()


def _is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` returns a coroutine, as TRL decides it (trl/trainer/utils.py:247-263:
    functions, partials and callable instances whose ``__call__`` is async)."""
    try:
        from trl.trainer.utils import is_async_callable
    except ImportError:  # pragma: no cover - exercised only where TRL is absent
        import functools as _functools
        import inspect as _inspect

        while isinstance(fn, _functools.partial):
            fn = fn.func
        return _inspect.iscoroutinefunction(fn) or _inspect.iscoroutinefunction(getattr(fn, "__call__", None))
    return bool(is_async_callable(fn))


class RodsRewards:
    """A TRL reward function that calls ``reward_fn`` and records its rewards for rods, per step.

    An async ``reward_fn`` gives an async wrapper, which TRL awaits with its other async reward
    functions (grpo_trainer.py:1621-1661). Rewards computed while the model is in evaluation mode
    (TRL's ``prediction_step`` calls the reward functions too, grpo_trainer.py:3294-3295; TRL itself
    tells the modes apart by ``self.model.training``, :1536) are not a training step's: they are
    kept in ``evaluations`` (one entry per evaluation batch, after the step it followed) and never
    reported as a step; an evaluation set needs no ``rods_task_id`` column. A reward function
    called without ``trainer_state`` cannot be filed under a step and is refused: TRL's
    experimental async GRPO passes none (trl/experimental/async_grpo/async_rollout_worker.py:
    1026-1037).
    """

    def __new__(cls, reward_fn: Callable[..., Any]) -> "RodsRewards":
        if cls is RodsRewards and _is_async_callable(reward_fn):
            cls = AsyncRodsRewards
        return super().__new__(cls)

    def __init__(self, reward_fn: Callable[..., Any]):
        self.reward_fn = reward_fn
        self.__name__ = getattr(reward_fn, "__name__", "rods_reward")  # TRL logs a reward under its name
        self._lock = threading.Lock()
        self._by_step: Dict[int, List[Tuple[str, float]]] = {}
        self.versions_by_step: Dict[int, List[int]] = {}
        # Evaluation batches: {"afterStep", "rewards": [(task id or None, reward)]}.
        self.evaluations: List[Dict[str, Any]] = []

    def _phase(self, kwargs: Mapping[str, Any]) -> Tuple[bool, int]:
        """(evaluating, the trainer's global step) of this call."""
        state = kwargs.get("trainer_state")
        if state is None:
            raise ValueError("rods: the reward function got no trainer_state, so rods cannot tell which step its "
                             "rewards belong to. TRL's GRPOTrainer passes it (grpo_trainer.py:1588); TRL's "
                             "experimental async GRPO does not (async_rollout_worker.py:1026-1037): train with "
                             "GRPOTrainer, or report the steps yourself with rods_client.reporting.StepReporter")
        # log_metric is the trainer's bound method (grpo_trainer.py:1594): its model says the mode.
        model = getattr(getattr(kwargs.get("log_metric"), "__self__", None), "model", None)
        evaluating = model is not None and not bool(getattr(model, "training", True))
        if not evaluating and kwargs.get("rods_task_id") is None:
            raise ValueError("rods: the reward function got no rods_task_id column: train on RodsPool(...).dataset "
                             "(or a dataset with that column) and keep GRPOConfig(remove_unused_columns=False)")
        return evaluating, int(getattr(state, "global_step", 0) or 0)

    def _record(self, phase: Tuple[bool, int], kwargs: Mapping[str, Any], rewards: Sequence[Any]) -> None:
        evaluating, global_step = phase
        task_ids = kwargs.get("rods_task_id") or [None] * len(rewards)
        pairs: List[Tuple[Optional[str], float]] = []
        for task_id, reward in zip(task_ids, rewards):
            if reward is None:
                continue
            value = float(reward)
            if math.isnan(value) or math.isinf(value):
                continue
            pairs.append((None if task_id is None else str(task_id), value))
        with self._lock:
            if evaluating:
                self.evaluations.append({"afterStep": global_step, "rewards": pairs})
                return
            step = global_step + 1
            self._by_step.setdefault(step, []).extend((t, v) for t, v in pairs if t is not None)
            versions = kwargs.get("rods_pool_version") or []
            if versions:
                self.versions_by_step.setdefault(step, []).extend(sorted(set(int(v) for v in versions)))

    def __call__(self, prompts: Any = None, completions: Any = None, **kwargs: Any) -> List[Optional[float]]:
        phase = self._phase(kwargs)
        rewards = self.reward_fn(prompts=prompts, completions=completions, **kwargs)
        self._record(phase, kwargs, rewards)
        return rewards

    def take(self, through_step: int) -> List[Tuple[str, float]]:
        """The recorded (task id, reward) pairs of steps up to ``through_step``, removed from the buffer."""
        with self._lock:
            steps = [s for s in self._by_step if s <= through_step]
            out: List[Tuple[str, float]] = []
            for s in sorted(steps):
                out.extend(self._by_step.pop(s))
            return out


class AsyncRodsRewards(RodsRewards):
    """RodsRewards of an async reward function (what ``RodsRewards(async_fn)`` makes)."""

    async def __call__(self, prompts: Any = None, completions: Any = None,  # type: ignore[override]
                       **kwargs: Any) -> List[Optional[float]]:
        phase = self._phase(kwargs)
        rewards = await self.reward_fn(prompts=prompts, completions=completions, **kwargs)
        self._record(phase, kwargs, rewards)
        return rewards


class RodsCallback(_CallbackBase):  # type: ignore[misc,valid-type]
    """Reports each optimizer step's rewards to rods once, and each saved checkpoint, from rank 0,
    through a durable spool."""

    def __init__(self, client: RodsClient, rewards: RodsRewards, pool: Optional[RodsPool] = None,
                 spool_dir: Optional[str] = None, strict: bool = False,
                 policy_version: Optional[Callable[[Any], str]] = None, flush_timeout: float = 120.0,
                 run_id: Optional[str] = None, resumed_from: Optional[str] = None,
                 checkpoint_digest: bool = False):
        if run_id is not None:
            check_id("run_id", run_id, max_length=100)  # "<run id>-step-<N>" stays a checkpoint id
        if resumed_from is not None:
            check_id("resumed_from", resumed_from)
        self.client = client
        self.rewards = rewards
        self.pool = pool
        self.spool_dir = spool_dir
        self.strict = strict
        self.policy_version = policy_version or (lambda state: f"step-{state.global_step}")
        self.flush_timeout = flush_timeout
        self.reporter: Optional[StepReporter] = None
        self.step_seconds: List[float] = []
        self.reported: List[Dict[str, Any]] = []
        self.run_id = run_id
        self.resumed_from = resumed_from
        self._resumed_from_given = resumed_from is not None
        self.checkpoint_digest = checkpoint_digest
        # What on_save reported, one dict per checkpoint (the record written into its folder, and the folder).
        self.checkpoints: List[Dict[str, Any]] = []
        self.save_seconds: List[float] = []
        self._output_dir: Optional[str] = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.pool is not None and getattr(args, "shuffle_dataset", False):
            raise ValueError("rods: set GRPOConfig(shuffle_dataset=False) when training on RodsPool")
        self._output_dir = getattr(args, "output_dir", None)
        if self.run_id is None:  # one per process: a second train() in it keeps it
            self.run_id = new_run_id()
        if state.is_world_process_zero and not self._resumed_from_given:
            # The Trainer loaded the checkpoint's state before this call (see the module doc), so
            # global_step is the step of the checkpoint it resumes from.
            step = int(state.global_step or 0)
            self.resumed_from = None
            if step > 0 and self._output_dir:
                folder = os.path.join(self._output_dir, f"{PREFIX_CHECKPOINT_DIR}-{step}")
                self.resumed_from = resumed_checkpoint_id(folder, self.client.campaign)
        if state.is_world_process_zero and self.reporter is None:
            folder = self.spool_dir or default_spool_dir(self.client.campaign, self._output_dir)
            self.reporter = StepReporter(self.client, folder, strict=self.strict)
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        dist = _dist()
        if self.checkpoint_digest and dist is not None:
            # Every rank writes its own rng_state_<rank>.pth into the folder (trainer.py:3516-3519)
            # and nothing waits for them before on_save: hash once all are there.
            dist.barrier()
        step = int(state.global_step)
        if not state.is_world_process_zero or self.reporter is None or step < 1:
            return control
        started = time.perf_counter()
        output_dir = getattr(args, "output_dir", None) or self._output_dir or "."
        folder = os.path.join(output_dir, f"{PREFIX_CHECKPOINT_DIR}-{step}")
        run_id = self.run_id or new_run_id()
        self.run_id = run_id
        record: Dict[str, Any] = {"campaign": self.client.campaign, "checkpointId": f"{run_id}-step-{step}",
                                  "runId": run_id, "step": step, "resumedFrom": self.resumed_from, "digest": None}
        if os.path.isdir(folder):
            if self.checkpoint_digest:
                record["digest"] = checkpoint_digest(folder)
            write_checkpoint_record(folder, record)
        else:
            log.warning("rods: on_save found no checkpoint folder %s: checkpoint %s reported without its record",
                        folder, record["checkpointId"])
        self.reporter.checkpoint(step, record["checkpointId"], run_id, resumed_from=self.resumed_from,
                                 digest=record["digest"])
        self.checkpoints.append(dict(record, folder=folder))
        self.save_seconds.append(time.perf_counter() - started)
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        step = int(state.global_step)
        mine = self.rewards.take(step)
        dist = _dist()
        if dist is not None:
            gathered: List[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, mine)
            pairs = [p for part in gathered for p in part]
        else:
            pairs = mine
        if self.reporter is not None:
            groups: Dict[str, List[float]] = {}
            for task_id, reward in pairs:
                groups.setdefault(task_id, []).append(reward)
            sent = self.reporter.report(step, groups, policy_version=self.policy_version(state))
            self.reported.append({"step": step, "groups": len(groups),
                                  "rewards": sum(len(v) for v in groups.values()), "spooled": sent,
                                  "poolVersions": sorted(set(self.rewards.versions_by_step.pop(step, [])))})
        self.step_seconds.append(time.perf_counter() - started)
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.pool is not None:
            self.pool.close()
        if self.reporter is not None:
            self.reporter.close(self.flush_timeout)
            log.info("rods: reports of campaign %s: %s", self.client.campaign, self.reporter.stats)
        if self._output_dir and _rank() == 0:
            os.makedirs(self._output_dir, exist_ok=True)
            with open(os.path.join(self._output_dir, "rods-timings.json"), "w", encoding="utf-8") as f:
                json.dump(self.timings(), f, indent=1)
            if self.rewards.evaluations:
                with open(os.path.join(self._output_dir, "rods-evaluation.json"), "w", encoding="utf-8") as f:
                    json.dump(self.evaluation_summary(), f, indent=1)
        return control

    def evaluation_summary(self) -> List[Dict[str, Any]]:
        """The evaluation rewards of this process (never reported as a step), per evaluation: the
        step it followed, how many rewards, their mean, and the mean per rods task."""
        by_step: Dict[int, List[Tuple[Optional[str], float]]] = {}
        for batch in self.rewards.evaluations:
            by_step.setdefault(batch["afterStep"], []).extend(batch["rewards"])
        out = []
        for step, pairs in sorted(by_step.items()):
            tasks: Dict[str, List[float]] = {}
            for task_id, value in pairs:
                if task_id is not None:
                    tasks.setdefault(task_id, []).append(value)
            out.append({"afterStep": step, "rewards": len(pairs),
                        "mean": sum(v for _, v in pairs) / len(pairs) if pairs else None,
                        "taskMeans": {t: sum(v) / len(v) for t, v in sorted(tasks.items())}})
        return out

    def timings(self) -> Dict[str, Any]:
        """What rods added to the training thread, and the reporter's counters."""
        return {
            "stepEnd": _percentiles(self.step_seconds),
            "spoolWrite": _percentiles(self.reporter.report_seconds if self.reporter else []),
            "checkpointSave": _percentiles(self.save_seconds),
            "poolHandover": _percentiles(self.pool.handover_seconds if self.pool else []),
            "reports": dict(self.reporter.stats) if self.reporter else None,
            "poolRefreshErrors": self.pool.refresh_errors if self.pool else None,
            "evaluationBatches": len(self.rewards.evaluations),
            "offTrainingThread": ["sending reports and checkpoints (spool thread)",
                                  "pool long-poll (refresher thread, rank 0)"],
        }
