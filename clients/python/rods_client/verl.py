"""rods for verl 0.9 (its v1 trainer, ``python -m verl.trainer.main_ppo``): the live pool as the
prompt dataset, each step's rewards reported once from the replay buffer, a reward for rods rows.

verl removed ``AbstractCurriculumSampler`` and ``data.sampler.*`` in May 2026 (verl #6302; absent
from 0.8.0, 0.9.0 and 0.9.1). Its plug points now, read in verl 0.9.1's installed source:

* ``data.custom_cls.path=pkg://rods_client.verl data.custom_cls.name=RodsDataset``: verl builds the
  dataset as ``cls(data_files=, tokenizer=, processor=, config=data, max_samples=)``
  (trainer/ppo/utils.py:129-135) and fixes the run's length from ``len(dataset)`` when its data
  loader is built (trainer/ppo/v1/trainer_base.py:765), so a dataset that grows is never read
  further. ``RodsDataset`` (with ``data.shuffle=false``: verl's shuffling sampler would hold a
  permutation of the whole virtual length) has a fixed virtual length and serves, whatever index it is asked for,
  the next task of the campaign's newest pool (``data.train_batch_size`` distinct tasks per batch
  while the pool has them; a background thread long-polls the gateway), so tasks injected while
  verl trains are trained on. Its draw counter is in ``state_dict()``, which verl saves in each
  checkpoint's data.pt (torchdata's StatefulDataLoader, with ``data.dataloader_num_workers=0``). The
  validation dataset (``data_files == data.val_files``) is the pool as it was at start.
* ``trainer.v1.sampler.custom_sampler.path=pkg://rods_client.verl ...name=RodsReplayBuffer``: verl
  builds its replay buffer with six keyword arguments (trainer_base.py:139-185) and calls
  ``sample(global_steps, partition_id, batch_size)`` once per local update with verl's own
  ``global_steps`` (trainer_base.py:567-571), which a resume from ``global_step_N`` restarts at
  N + 1 (trainer_base.py:876, :454). ``RodsReplayBuffer`` samples as verl's does, then reads the
  sampled trajectories' ``rm_scores`` and ``extra_info`` from TransferQueue and reports the
  step's rewards per task through the durable spool (``sampler_kwargs.spool_dir``); a step
  reported before the resume is not sent again, and a step without rods rows closes all the same.
  It keeps what verl gives only its own buffer (DAPO's group filter, trainer_base.py:163-184) and
  reports the groups DAPO drops with the step; for an async trainer it is built on verl's
  ``ReplayBufferAsync`` (staleness eviction, replay_buffer.py:520-529).
  The rewards must be in TransferQueue when the group is sampled: verl's streaming reward path
  (a reward function, or a reward model with its own resource pool); with a colocated reward
  model verl scores after sampling (trainer_base.py:576-579) and rods would report zeros.
* ``trainer.checkpoint_callback_class=rods_client.verl.RodsCheckpointCallback``: verl builds the
  class named there with ``cls(config=config)`` in the trainer's constructor
  (trainer/ppo/checkpoint_callback.py:66-82, trainer_base.py:122), before it loads a checkpoint
  (``_load_checkpoint`` in ``init_workers``, trainer_base.py:392), and calls its
  ``on_save(trainer=, global_step=, checkpoint_dir=, async_save=)`` on the driver after each save
  of ``<default_local_dir>/global_step_N`` (trainer_base.py:948-1029: the worker groups' saves
  return first; with ``async_save`` the files may still be in flight, :1014-1019).
  ``RodsCheckpointCallback`` reports the checkpoint through the replay buffer's spool
  (``trainer.replay_buffer``, trainer_base.py:131), in order with the step reports, as
  ``<run id>-step-N`` and writes ``rods-checkpoint.json`` into the folder. The run resumed from
  is found as verl finds it (``trainer.resume_mode``: ``auto`` reads
  ``latest_checkpointed_iteration.txt`` of ``default_local_dir``, utils/checkpoint/
  checkpoint_manager.py:222-252; ``resume_path`` is ``trainer.resume_from_path``;
  trainer_base.py:850-876), and its record names the checkpoint this run's checkpoints resume
  from. ``sampler_kwargs.checkpoint_digest=true`` adds a SHA-256 over the folder's files as the
  driver sees them (not with ``async_save``; shards on other nodes are not in it).
* ``reward.custom_reward_function.path=pkg://rods_client.verl ...name=compute_score`` (the
  ``reward.`` prefix: main_ppo ignores the top-level key): verl's default scorer raises
  ``NotImplementedError`` for ``data_source="rods"`` (utils/reward_score/__init__.py:107).
  ``compute_score`` scores a rods row's response with BFCL's check of its first user turn: the
  ``<tool_call>`` blocks of the response run in the rods environment executor and pass when the
  state and results match the ground truth's (rods_client.bfcl.turn_scores); other rows go to
  verl's ``default_compute_score``.

Gateway, token and campaign: ``data.rods.{gateway_url,token,campaign}`` (dataset) and
``trainer.v1.sampler.sampler_kwargs.{gateway_url,token,campaign}`` (replay buffer), else
RODS_GATEWAY_URL, RODS_TOKEN and RODS_CAMPAIGN. Example: clients/python/examples/verl_ppo.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import RodsClient
from ._common import first_turn
from .bfcl import ExecutorClient, environment_class, openai_tools, response_calls, turn_scores
from .pool import LivePool
from .reporting import (StepReporter, checkpoint_digest, default_spool_dir, new_run_id, resumed_checkpoint_id,
                        write_checkpoint_record)

try:  # verl and torch are the trainer's; without them the classes keep their methods on plain bases
    import torch
    from torch.utils.data import Dataset as _DatasetBase
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None  # type: ignore[assignment]
    _DatasetBase = object  # type: ignore[misc,assignment]
try:
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer as _ReplayBufferBase
    from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync as _ReplayBufferAsyncBase
except ImportError:  # pragma: no cover - exercised only where verl is absent
    _ReplayBufferBase = object  # type: ignore[misc,assignment]
    _ReplayBufferAsyncBase = None  # type: ignore[misc,assignment]
try:
    from verl.trainer.ppo.checkpoint_callback import CheckpointCallback as _CheckpointCallbackBase
except ImportError:  # pragma: no cover - exercised only where verl is absent
    _CheckpointCallbackBase = object  # type: ignore[misc,assignment]

__all__ = ["RodsDataset", "RodsReplayBuffer", "RodsReplayBufferAsync", "RodsCheckpointCallback", "RodsBfclAgentLoop",
           "BfclTool", "compute_score", "AGENT_NAME", "DATA_SOURCE"]

log = logging.getLogger("rods_client")

DATA_SOURCE = "rods"
AGENT_NAME = "rods_bfcl_agent"  # RodsBfclAgentLoop in verl's agent loop registry


def _get(config: Any, key: str, default: Any = None) -> Any:
    if config is None:
        return default
    value = config.get(key, default) if hasattr(config, "get") else getattr(config, key, default)
    return default if value is None else value


def _client_from(cfg: Any) -> RodsClient:
    return RodsClient.from_env(_get(cfg, "gateway_url"), _get(cfg, "token"), _get(cfg, "campaign"))


def verl_row(entry: Mapping[str, Any], index: int, version: Optional[int], agent_name: str = AGENT_NAME
             ) -> Dict[str, Any]:
    """A pool entry as the row verl's RLHFDataset.__getitem__ returns (rl_dataset.py:386-411), with
    the agent loop verl runs it in (``agent_name``, agent_loop.py:610-612)."""
    task = entry.get("task") or {}
    row: Dict[str, Any] = {
        "data_source": DATA_SOURCE,
        "agent_name": agent_name,
        "raw_prompt": [{"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
                       for m in first_turn(task)],
        "reward_model": {"style": "rule", "ground_truth": json.dumps(task.get("ground_truth"))},
        "extra_info": {"index": index, "rods_task_id": str(entry["taskId"]), "rods_pool_version": version,
                       "task": json.dumps(task, sort_keys=True)},
        "index": index,
        "tools_kwargs": {},
        "interaction_kwargs": {},
    }
    if torch is not None:  # "make sure DataProto.batch is not empty" (rl_dataset.py:395-397)
        row["dummy_tensor"] = torch.tensor([0], dtype=torch.uint8)
    return row


class RodsDataset(_DatasetBase):  # type: ignore[misc,valid-type]
    """The live pool as verl's prompt dataset (``data.custom_cls``)."""

    def __init__(self, data_files: Any = None, tokenizer: Any = None, config: Any = None, processor: Any = None,
                 max_samples: int = -1, client: Optional[RodsClient] = None):
        rods_cfg = _get(config, "rods", {})
        val_files = _get(config, "val_files")
        self.validation = val_files is not None and data_files == val_files and data_files != _get(config, "train_files")
        if not self.validation and _get(config, "shuffle", True):
            # verl's RandomSampler (trainer/ppo/utils.py:140-168) would build randperm of the
            # virtual length at every iter() and resume (torchdata sampler.py:47, :72): 1.96 GB
            # more at batch 512. The pool draws are random already.
            raise ValueError("rods: set data.shuffle=false with RodsDataset: each batch is already a seeded "
                             "random draw of the live pool, and verl's shuffling sampler would hold a "
                             "permutation of the dataset's virtual length (batch size x 100,000) in memory")
        self.client = client or _client_from(rods_cfg)
        self.batch_size = int(_get(config, "gen_batch_size", 0) or _get(config, "train_batch_size", 0) or 1)
        self.seed = int(_get(config, "seed", 0) or 0)
        self.poll_seconds = int(_get(rods_cfg, "poll_seconds", 20))
        self.agent_name = str(_get(rods_cfg, "agent_name", AGENT_NAME))
        self.draws = 0
        self._lock = threading.Lock()
        self._live = LivePool(self.client, self.poll_seconds, float(_get(rods_cfg, "start_timeout", 300)),
                              refresh=not self.validation)
        self._batch: List[Dict[str, Any]] = []
        if self.validation:
            version, tasks = self._live.latest()
            self._fixed = [verl_row(t, i, version, self.agent_name) for i, t in enumerate(tasks)]
            self.length = len(self._fixed)
        else:
            self._fixed = []
            self.length = int(_get(rods_cfg, "virtual_length", 0) or self.batch_size * 100_000)

    @property
    def refresh_errors(self) -> int:
        return self._live.refresh_errors

    def close(self) -> None:
        self._live.close()

    @property
    def version(self) -> int:
        return self._live.latest()[0]

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Dict[str, Any]:
        if self.validation:
            return self._fixed[int(index) % len(self._fixed)]
        with self._lock:
            if not self._batch:
                # A batch's worth of distinct tasks of the newest pool, seeded by the draw count so
                # that a run resumed from a checkpoint draws as it would have.
                version, tasks = self._live.latest()
                rng = random.Random(f"{self.seed}:{self.draws // self.batch_size}")
                picked = rng.sample(tasks, min(self.batch_size, len(tasks)))
                picked += rng.choices(tasks, k=self.batch_size - len(picked))
                self._batch = [verl_row(t, 0, version, self.agent_name) for t in picked]
            row = self._batch.pop(0)
            self.draws += 1
        row = dict(row, index=int(index))
        row["extra_info"] = dict(row["extra_info"], index=int(index))
        return row

    # torchdata's StatefulDataLoader saves these in verl's data.pt (num_workers=0).
    def state_dict(self) -> Dict[str, Any]:
        return {"draws": self.draws}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        with self._lock:
            self.draws = int(state.get("draws", 0))
            self._batch = []


def _to_float(value: Any) -> float:
    if hasattr(value, "sum") and hasattr(value, "tolist"):
        return float(value.sum())
    if isinstance(value, (list, tuple)):
        return float(sum(value))
    return float(value)


def _builtin_kwargs(kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """What verl's ``_build_replay_buffer`` gives its own buffer and not a custom one
    (trainer_base.py:163-184: DAPO's ``filter_groups_metric``, failed-group refill, and the sync
    buffer's batch sizes), computed by the trainer's own methods: ``refill_fn`` is the trainer's
    bound ``_add_prompts_to_generate`` (:161). Without it (a buffer built by hand) nothing."""
    trainer = getattr(kwargs.get("refill_fn"), "__self__", None)
    if trainer is None or not hasattr(trainer, "_resolve_filter_groups_metric"):
        return {}
    metric = trainer._resolve_filter_groups_metric()
    refill_failed = bool(trainer.config.trainer.v1.sampler.get("sync_refill_failed_groups", False))
    out: Dict[str, Any] = {"filter_groups_metric": metric, "sync_refill_failed_groups": refill_failed}
    if kwargs.get("trainer_mode", "sync") == "sync":
        filter_groups = trainer.config.algorithm.get("filter_groups", None)
        train_batch_size = trainer.config.data.train_batch_size
        out.update(
            train_batch_size=train_batch_size,
            gen_batch_size=1 if metric is not None or refill_failed
            else (trainer.config.data.get("gen_batch_size", None) or train_batch_size),
            max_inflight_gen_batches=filter_groups.get("max_inflight_gen_batches", 1) if metric is not None else 1,
        )
    return out


class RodsReplayBuffer(_ReplayBufferBase):  # type: ignore[misc,valid-type]
    """verl's replay buffer, reporting each training step's rewards per rods task once.

    Built for an async trainer (``trainer_mode`` other than ``sync``), it is a
    ``RodsReplayBufferAsync``: verl's ``ReplayBufferAsync`` with its staleness eviction, ``wait``
    strategy, refill and the methods the hybrid switch needs (trainer_separate_async.py:104-111).
    It gets what verl gives its own buffer and not a custom one (DAPO's group filter: see
    ``_builtin_kwargs``), and the groups DAPO's filter drops (deleted from TransferQueue by
    ``_clear_groups``, replay_buffer.py:241-259) are reported with the step's rewards: those are
    the too-easy and too-hard groups the boundary is made of."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "RodsReplayBuffer":
        mode = kwargs.get("trainer_mode", args[0] if args else "sync")
        if cls is RodsReplayBuffer and mode != "sync" and _ReplayBufferAsyncBase is not None:
            cls = RodsReplayBufferAsync
        return super().__new__(cls)

    def __init__(self, *args: Any, sampler_kwargs: Any = None, client: Optional[RodsClient] = None,
                 tq: Any = None, **kwargs: Any):
        for key, value in _builtin_kwargs(kwargs).items():
            kwargs.setdefault(key, value)
        super().__init__(*args, sampler_kwargs=sampler_kwargs, **kwargs)
        cfg = sampler_kwargs or {}
        self.client = client or _client_from(cfg)
        trainer_config = kwargs.get("trainer_config") or (args[1] if len(args) > 1 else {})
        # parameter_sync_step local updates each sample part of one global step (trainer_base.py:535-549).
        self.updates_per_step = int(_get(trainer_config, "parameter_sync_step", 1) or 1)
        folder = _get(cfg, "spool_dir") or default_spool_dir(self.client.campaign, _get(cfg, "checkpoint_dir"))
        self.reporter = StepReporter(self.client, str(folder), strict=bool(_get(cfg, "strict", False)))
        self._tq = tq
        self._parts: Dict[int, Tuple[int, Dict[str, List[float]]]] = {}
        # Rewards of the groups DAPO's filter dropped, by the step that dropped them.
        self._dropped: Dict[int, Dict[str, List[float]]] = {}
        self.dropped_groups = 0

    @property
    def tq(self) -> Any:
        if self._tq is None:
            import transfer_queue

            self._tq = transfer_queue
        return self._tq

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        if partition_id == "train":
            self._record(int(global_steps), batch)
        return batch, metrics

    def _rewards(self, keys: List[str], partition_id: str, into: Dict[str, List[float]]) -> Dict[str, List[float]]:
        """The rods rows' rewards of these trajectories, by task id (rows of other datasets skipped)."""
        if keys:
            data = self.tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores", "extra_info"])
            for extra, scores in zip(data["extra_info"], data["rm_scores"]):
                task_id = (extra or {}).get("rods_task_id") if isinstance(extra, Mapping) else None
                if task_id is not None:
                    into.setdefault(str(task_id), []).append(_to_float(scores))
        return into

    def _evict_terminal_groups(self, global_steps: int, partition_id: str, eviction_reasons: Any) -> Any:
        # Read before verl clears them: the DAPO-dropped groups' rewards (stale and failed groups are
        # not the step's: an older policy's, or none).
        dapo_uids = eviction_reasons[1]
        if partition_id == "train" and dapo_uids:
            keys = [k for k in self.partitions[partition_id] if k.split("_")[0] in dapo_uids]
            self._rewards(keys, partition_id, self._dropped.setdefault(int(global_steps), {}))
            self.dropped_groups += len(dapo_uids)
        return super()._evict_terminal_groups(global_steps, partition_id, eviction_reasons)

    def _record(self, step: int, batch: Any) -> None:
        keys = [k for k, tag in zip(batch.keys, batch.tags) if not (tag or {}).get("is_padding")]
        groups = self._rewards(keys, batch.partition_id, {})
        calls, merged = self._parts.pop(step, (0, {}))
        for earlier_or_now in [s for s in self._dropped if s <= step]:
            for task_id, rewards in self._dropped.pop(earlier_or_now).items():
                merged.setdefault(task_id, []).extend(rewards)
        for task_id, rewards in groups.items():
            merged.setdefault(task_id, []).extend(rewards)
        calls += 1
        for earlier in [s for s in self._parts if s < step]:  # a step verl left early: report what it had
            self.reporter.report(earlier, self._parts.pop(earlier)[1], policy_version=f"verl-step-{earlier}")
        if calls < self.updates_per_step:
            self._parts[step] = (calls, merged)
            return
        self.reporter.report(step, merged, policy_version=f"verl-step-{step}")


if _ReplayBufferAsyncBase is not None:

    class RodsReplayBufferAsync(RodsReplayBuffer, _ReplayBufferAsyncBase):  # type: ignore[misc,valid-type]
        """RodsReplayBuffer on verl's ReplayBufferAsync (what ``RodsReplayBuffer(trainer_mode=<async>)`` makes)."""
else:  # pragma: no cover - exercised only where verl is absent
    RodsReplayBufferAsync = RodsReplayBuffer  # type: ignore[misc,assignment]


def _resume_folder(trainer_config: Any) -> Optional[str]:
    """The ``global_step_N`` folder verl's ``_load_checkpoint`` will resume from (trainer_base.py:850-876), read
    before it loads it and before this run saves anything; None for a run from scratch."""
    mode = _get(trainer_config, "resume_mode", "auto")
    if mode == "resume_path":
        folder = _get(trainer_config, "resume_from_path")
        return os.path.abspath(str(folder)) if folder else None
    if mode != "auto":
        return None
    root = os.path.abspath(str(_get(trainer_config, "default_local_dir", "checkpoints")))
    try:  # find_latest_ckpt_path (checkpoint_manager.py:222-252), without importing torch
        with open(os.path.join(root, "latest_checkpointed_iteration.txt"), "rb") as f:
            iteration = int(f.read().decode())
    except (OSError, ValueError):
        return None
    folder = os.path.join(root, f"global_step_{iteration}")
    return folder if os.path.exists(folder) else None


class RodsCheckpointCallback(_CheckpointCallbackBase):  # type: ignore[misc,valid-type]
    """verl's checkpoint callback (``trainer.checkpoint_callback_class``): reports each checkpoint."""

    def __init__(self, config: Any = None, run_id: Optional[str] = None, resumed_from: Optional[str] = None):
        self.config = config
        trainer_config = _get(config, "trainer", {})
        kwargs = _get(_get(_get(trainer_config, "v1", {}), "sampler", {}), "sampler_kwargs", {})
        self.run_id = run_id or _get(kwargs, "run_id") or new_run_id()
        self.checkpoint_digest = bool(_get(kwargs, "checkpoint_digest", False))
        self._resumed_from = resumed_from
        # verl builds this before it loads a checkpoint: the folder it will resume from is the latest now.
        self._resume_folder = None if resumed_from is not None else _resume_folder(trainer_config)
        self._resolved = resumed_from is not None
        self.checkpoints: List[Dict[str, Any]] = []

    def resumed_from(self, campaign: str) -> Optional[str]:
        """The checkpoint id this run resumed from (read from its folder's record once)."""
        if not self._resolved:
            self._resolved = True
            if self._resume_folder is not None:
                self._resumed_from = resumed_checkpoint_id(self._resume_folder, campaign)
        return self._resumed_from

    def on_save(self, trainer: Any = None, global_step: int = 0, checkpoint_dir: str = "", async_save: bool = False,
                **kwargs: Any) -> None:
        reporter = getattr(getattr(trainer, "replay_buffer", None), "reporter", None)
        if not isinstance(reporter, StepReporter):
            log.warning("rods: checkpoint %s not reported: the replay buffer is not rods_client.verl.RodsReplayBuffer",
                        checkpoint_dir)
            return
        step = int(global_step)
        if step < 1:
            return
        resumed_from = self.resumed_from(reporter.client.campaign)
        record: Dict[str, Any] = {"campaign": reporter.client.campaign, "checkpointId": f"{self.run_id}-step-{step}",
                                  "runId": self.run_id, "step": step, "resumedFrom": resumed_from, "digest": None}
        if checkpoint_dir and os.path.isdir(checkpoint_dir):
            if self.checkpoint_digest and not async_save:
                record["digest"] = checkpoint_digest(checkpoint_dir)
            write_checkpoint_record(checkpoint_dir, record)
        reporter.checkpoint(step, record["checkpointId"], self.run_id, resumed_from=resumed_from,
                            digest=record["digest"])
        self.checkpoints.append(dict(record, folder=checkpoint_dir))


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> Any:
    """verl's reward function for rods rows; others go to verl's default.

    An episode of ``rods_bfcl_agent`` gets BFCL's progress reward of the whole episode: the mean
    over the task's user turns of BFCL's check of each (``rods_client.bfcl.turn_scores``) on the
    calls the agent loop ran per turn, which verl's reward loop hands over in ``extra_info`` (the
    agent loop's ``extra_fields``, naive.py:44-46). A single-turn row (another agent loop) gets
    the check of the first turn on the response's ``<tool_call>`` blocks."""
    if data_source != DATA_SOURCE:
        from verl.utils.reward_score import default_compute_score

        return default_compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    extra_info = extra_info or {}
    task = json.loads(extra_info["task"])
    calls = extra_info.get("rods_calls")
    single_turn = calls is None
    if single_turn:
        calls = [response_calls(solution_str)]
    scores = turn_scores(task, calls) if task.get("ground_truth") else []
    if single_turn:
        scores = scores[:1]
    return {"score": float(sum(scores) / len(scores)) if scores else 0.0,
            "tool_calls": sum(len(t) for t in calls)}


try:  # verl's agent loop (verl.experimental.agent_loop, imported by its rollout workers)
    from verl.experimental.agent_loop.agent_loop import register as _register_agent_loop
    from verl.experimental.agent_loop.tool_agent_loop import AgentState as _AgentState
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop as _ToolAgentLoopBase
    from verl.tools.base_tool import BaseTool as _BaseToolBase
    from verl.tools.schemas import OpenAIFunctionToolSchema as _ToolSchema
    from verl.tools.schemas import ToolResponse as _ToolResponse
except ImportError:  # pragma: no cover - exercised only where verl is absent
    _ToolAgentLoopBase = _BaseToolBase = object  # type: ignore[misc,assignment]
    _AgentState = _ToolSchema = _ToolResponse = None  # type: ignore[assignment]

    def _register_agent_loop(name: str) -> Any:
        return lambda cls: cls


class _Episode:
    """One BFCL episode's live environment in the rods executor, its calls run in order."""

    def __init__(self, task: Mapping[str, Any], executor_url: Optional[str] = None):
        self.task = dict(task)
        self.env = environment_class(tuple(sorted(set(task["involved_classes"]))))(ExecutorClient(executor_url))
        self.env.reset(task=self.task)
        self._lock: Optional[asyncio.Lock] = None

    async def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        # verl gathers a turn's calls concurrently (tool_agent_loop.py:316-321); BFCL runs them in
        # order on one state. The lock is FIFO and the calls reach it in the order they were made.
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await asyncio.to_thread(self.env._call, name, dict(arguments))

    def close(self) -> None:
        self.env._close_session()


class BfclTool(_BaseToolBase):  # type: ignore[misc,valid-type]
    """One BFCL function as a verl tool (the ``BaseTool`` contract of tool_agent_loop.py:483-496),
    run in the episode's live environment (``agent_data._rods_episode``). Built per episode from
    the task's function documents, not from ``multi_turn.tool_config_path``."""

    def __init__(self, schema: Mapping[str, Any]):  # BaseTool.__init__ prints the schema: not called
        self.config: Dict[str, Any] = {}
        self.tool_schema = _ToolSchema.model_validate(dict(schema))
        self.name = self.tool_schema.function.name

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> Tuple[str, Any]:
        return instance_id or self.name, _ToolResponse()

    async def execute(self, instance_id: str, parameters: Dict[str, Any], **kwargs: Any) -> Tuple[Any, float, Dict]:
        episode: _Episode = kwargs["agent_data"]._rods_episode
        return _ToolResponse(text=await episode.call(self.name, parameters)), 0.0, {}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        return None


@_register_agent_loop(AGENT_NAME)
class RodsBfclAgentLoop(_ToolAgentLoopBase):  # type: ignore[misc,valid-type]
    """verl's tool agent loop on a BFCL multi-turn task (the rows of ``RodsDataset`` name it in
    ``agent_name``; verl routes a row to the agent loop it names, agent_loop.py:661-691).

    verl's ``ToolAgentLoop`` generates, parses the policy's tool calls with
    ``multi_turn.format`` (hermes: ``<tool_call>`` blocks) and appends the tool results with
    ``response_mask`` 0 (tool_agent_loop.py:234-411). Here its tools are the task's BFCL
    functions (the ones the task does not exclude, and not yet those a miss_func task withholds),
    run in the rods environment executor with one live environment per episode
    (``RODS_EXECUTOR_URL``). Where verl's loop ends because the policy answered without a tool
    call, this one delivers the task's next user turn as BFCL does (a user message, with
    ``response_mask`` 0), with the documents of the functions that arrive at that turn (their
    calls are refused before it), until the last turn is answered; verl's own limits
    (``response_length``, ``multi_turn.max_assistant_turns``, ``max_user_turns``) still end the
    episode. The calls made per user turn go to ``extra_fields["rods_calls"]``, which verl's
    reward loop hands to ``compute_score`` as ``extra_info["rods_calls"]``: the episode's BFCL
    progress reward. Registered with verl's agent loop registry when rods_client.verl is
    imported, which verl's rollout worker does when it loads ``data.custom_cls``
    (agent_loop.py:509).
    """

    async def run(self, sampling_params: Dict[str, Any], **kwargs: Any) -> Any:
        extra = kwargs.get("extra_info") or {}
        task = extra.get("task")
        task = json.loads(task) if isinstance(task, str) else task
        if not isinstance(task, Mapping) or not task.get("involved_classes"):
            raise ValueError(f"rods: {AGENT_NAME} needs a rods row (extra_info.task is the BFCL task record); "
                             f"got extra_info keys {sorted(extra)}")
        self._episode = _Episode(task, _get(_get(self.data_config, "rods", {}), "executor_url"))
        try:
            output = await super().run(sampling_params, **kwargs)
        finally:
            await asyncio.to_thread(self._episode.close)
        output.extra_fields["rods_calls"] = self._episode.env.calls
        output.extra_fields["rods_user_turns"] = min(self._episode.env._turn + 1, len(task.get("question") or []))
        return output

    def _offer(self, agent_data: Any, turn: int) -> None:
        tools = {t["function"]["name"]: BfclTool(t) for t in openai_tools(self._episode.task, turn=turn)}
        agent_data._active_tools = tools
        if turn == 0:  # what the chat template renders; later functions arrive in a user message
            agent_data._active_tool_schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True)
                                               for t in tools.values()]

    async def _handle_pending_state(self, agent_data: Any, sampling_params: Dict[str, Any]) -> Any:
        agent_data._rods_episode = self._episode
        self._offer(agent_data, 0)
        return await super()._handle_pending_state(agent_data, sampling_params)

    async def _handle_generating_state(self, agent_data: Any, sampling_params: Dict[str, Any],
                                       ignore_termination: bool = False) -> Any:
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        if state != _AgentState.TERMINATED or self._at_a_limit(agent_data, ignore_termination):
            return state
        return await self._next_user_turn(agent_data)  # answered without a tool call: the turn is over

    def _at_a_limit(self, agent_data: Any, ignore_termination: bool) -> bool:
        """The checks that end verl's loop before it looks for tool calls (tool_agent_loop.py:289-295)."""
        return ((not ignore_termination and len(agent_data.response_mask) >= self.response_length)
                or bool(self.max_assistant_turns and agent_data.assistant_turns >= self.max_assistant_turns)
                or bool(self.max_user_turns and agent_data.user_turns >= self.max_user_turns))

    async def _next_user_turn(self, agent_data: Any) -> Any:
        env = self._episode.env
        text = env._next_user_message()
        if text is None:
            return _AgentState.TERMINATED
        self._offer(agent_data, env._turn)
        previous = list(agent_data.messages)
        agent_data.messages.append({"role": "user", "content": text})
        # As verl appends tool results (tool_agent_loop.py:383-399): the rendered message's tokens
        # are the prompt's continuation, masked out of the loss.
        merged, response_mask, response_logprobs = await self.ct_merge_context_msg(
            previous, agent_data.messages, agent_data.prompt_ids, agent_data.response_mask,
            agent_data.response_logprobs if agent_data.response_logprobs else None,
            tools=agent_data._active_tool_schemas)
        if len(response_mask) >= self.response_length:
            return _AgentState.TERMINATED
        agent_data.prompt_ids = merged.token_ids
        agent_data.response_mask = response_mask
        if agent_data.response_logprobs:
            agent_data.response_logprobs = response_logprobs or []
        agent_data.user_turns += 1
        return _AgentState.GENERATING
