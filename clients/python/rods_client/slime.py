"""rods for slime (THUDM/slime): the campaign's live pool as slime's data source, each rollout's
rewards reported once as the rollout's step.

    python train.py ... \\
        --data-source-path rods_client.slime.RodsDataSource \\
        --custom-rollout-log-function-path rods_client.slime.log_rollout_data \\
        --apply-chat-template --n-samples-per-prompt 8 --rollout-batch-size 32

What slime's own code does, read at THUDM/slime 624b824 (2026-08-21), and how this follows it:

* slime builds the data source as ``cls(args)`` in its rollout manager (slime/ray/rollout.py:383-384) and
  calls ``get_samples(n)`` for ``n`` prompt groups of ``args.n_samples_per_prompt`` samples each
  (slime/rollout/data_source.py:17-46). ``RodsDataSource.get_samples`` makes one pool request (a 304
  when the pool has not changed) and draws ``n`` distinct tasks of it.
* slime's default rollout sends ``tokenizer.encode(sample.prompt, add_special_tokens=False)``
  (slime/rollout/sglang_rollout.py:61): the prompt must be the text after the chat template. As
  slime's Dataset does (slime/utils/data.py:233-276), with ``--apply-chat-template`` the prompt is
  ``tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True,
  **apply_chat_template_kwargs)`` with the task's functions as ``tools`` (unless ``--tool-key`` is
  empty), and the tools are kept in ``metadata[tool_key]``; without it the prompt is the first
  user turn's text. The tokenizer is ``args.hf_checkpoint``'s.
* ``Sample.rollout_id`` groups the samples of one trajectory (slime/utils/types.py:99-106); it is
  left unset, and slime numbers it. The step is the rollout's: slime's training loop runs
  ``for rollout_id in range(args.start_rollout_id, args.num_rollout)`` (train.py:49) and hands each
  rollout's samples, with their raw rewards, to ``--custom-rollout-log-function-path`` as
  ``log_rollout_data(rollout_id, args, samples, metrics, rollout_time)`` (slime/observability/
  rollout_metrics.py:256-260, slime/ray/rollout.py:506). ``log_rollout_data`` reports step
  ``rollout_id + 1`` through the durable spool (rods_client.reporting; ``<args.save>/rods-spool``),
  never blocking the rollout, and returns False so slime's own logging runs too.
* ``save(rollout_id)`` / ``load(rollout_id)`` keep the draw counter with slime's checkpoints
  (train.py:79-80 saves after the model; placement_group.py:221-222 loads ``start_rollout_id - 1``);
  a resumed run's rollouts that the spool had reported are not sent again.
* ``save(rollout_id)`` is also the checkpoint's report: slime calls it (through
  ``RolloutManager.save``, slime/ray/rollout.py:530-531, the process that runs
  ``log_rollout_data``) once ``actor_model.save_model(rollout_id)`` has returned (train.py:71-80;
  actor_group.py:151-153 waits for every actor's save). The checkpoint holds steps up to
  ``rollout_id + 1`` and is reported through the same spool (when ``log_rollout_data`` reports the
  rollouts), in order with them, as
  ``<run id>-step-<rollout_id + 1>`` (one run id per process, ``run-`` and 12 hex digits, or
  ``args.rods_run_id``); the saved state file records it, and ``load`` of a resumed run reads it
  back as the checkpoint every later one resumes from (or ``args.rods_resumed_from``), with the rollouts
  it trains again (``rods_client.reporting``: retrainedSteps). No digest: the Megatron checkpoint
  is written by the training actors, on other nodes and, with ``--async-save``, later.

``report_rewards`` (``--custom-reward-post-process-path``) keeps slime's GRPO normalization for code
written against it; it reports nothing (slime does not tell it the step).
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import RodsClient
from ._common import first_turn
from .bfcl import openai_tools
from .reporting import StepReporter, check_id, default_spool_dir, new_run_id

try:  # slime imports torch; without it the classes keep the same methods on plain bases
    from slime.rollout.data_source import DataSource as _DataSourceBase
    from slime.utils.types import Sample as _SlimeSample
except ImportError:  # pragma: no cover - exercised only where slime is absent
    _DataSourceBase = object  # type: ignore[misc,assignment]
    _SlimeSample = None

__all__ = ["RodsDataSource", "log_rollout_data", "flush", "report_rewards", "SampleMirror"]


@dataclass
class SampleMirror:
    """The fields of slime's ``Sample`` (slime/utils/types.py:93-151) this adapter sets and reads,
    used only where slime is not installed (it is not on PyPI)."""

    group_index: Optional[int] = None
    index: Optional[int] = None
    rollout_id: Optional[int] = None
    prompt: Any = ""
    label: Optional[str] = None
    reward: Any = None
    metadata: Dict[str, Any] = field(default_factory=dict)


def _client(args: Any) -> RodsClient:
    return RodsClient.from_env(getattr(args, "rods_gateway_url", None), getattr(args, "rods_token", None),
                               getattr(args, "rods_campaign", None))


def _chat_kwargs(args: Any) -> Dict[str, Any]:
    kwargs = getattr(args, "apply_chat_template_kwargs", None) or {}
    if isinstance(kwargs, str):  # slime takes it as JSON on the command line
        kwargs = json.loads(kwargs)
    return dict(kwargs)


class RodsDataSource(_DataSourceBase):  # type: ignore[misc,valid-type]
    def __init__(self, args: Any, client: Optional[RodsClient] = None, sample_cls: Any = None, tokenizer: Any = None):
        self.args = args
        self.client = client or _client(args)
        self.sample_cls = sample_cls or _SlimeSample or SampleMirror
        self.n_samples_per_prompt = int(getattr(args, "n_samples_per_prompt", 1) or 1)
        self.seed = int(getattr(args, "rollout_seed", 0) or 0)
        self.buffer: List[List[Any]] = []
        self.draws = 0
        self.sample_group_index = 0
        self.sample_index = 0
        self.pool_version: Optional[int] = None
        self._tokenizer = tokenizer
        self.run_id = check_id("rods_run_id", getattr(args, "rods_run_id", None) or new_run_id(), max_length=100)
        self.resumed_from: Optional[str] = getattr(args, "rods_resumed_from", None)
        self.checkpoints: List[Dict[str, Any]] = []

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.args.hf_checkpoint, trust_remote_code=True)
        return self._tokenizer

    def get_samples(self, num_samples: int) -> List[List[Any]]:
        groups = self.buffer[:num_samples]
        self.buffer = self.buffer[num_samples:]
        missing = num_samples - len(groups)
        if missing <= 0:
            return groups
        pool = self.client.fetch_pool()  # one request a call: a 304 while the pool is unchanged
        tasks = pool.get("tasks") or []
        if not tasks:
            raise RuntimeError(f"rods: the pool of campaign {self.client.campaign} is empty")
        self.pool_version = pool.get("version")
        rng = random.Random(f"{self.seed}:{self.draws}")
        self.draws += 1
        picked = rng.sample(tasks, min(missing, len(tasks)))
        picked += rng.choices(tasks, k=missing - len(picked))
        groups.extend(self._group(entry) for entry in picked)
        return groups

    def prompt(self, task: Dict[str, Any]) -> Tuple[Any, List[Dict[str, Any]]]:
        """The sample's prompt as slime's Dataset would make it, and the task's tools."""
        messages = first_turn(task)
        tool_key = getattr(self.args, "tool_key", "tools")
        tools = openai_tools(task) if tool_key else []
        if not getattr(self.args, "apply_chat_template", False):
            return "\n".join(str(m.get("content") or "") for m in messages), tools
        text = self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                                  add_generation_prompt=True, **_chat_kwargs(self.args))
        return text, tools

    def _group(self, entry: Dict[str, Any]) -> List[Any]:
        task = entry.get("task") or {}
        prototype = self.sample_cls()
        prototype.prompt, tools = self.prompt(task)
        prototype.label = json.dumps(task.get("ground_truth"))
        prototype.metadata = {"rods_task_id": entry["taskId"], "rods_category": entry.get("category"),
                              "rods_origin": entry.get("origin"), "rods_pool_version": self.pool_version, "task": task}
        tool_key = getattr(self.args, "tool_key", "tools")
        if tool_key:
            prototype.metadata[tool_key] = tools
        group = []
        for _ in range(self.n_samples_per_prompt):
            sample = copy.deepcopy(prototype)
            sample.group_index = self.sample_group_index
            sample.index = self.sample_index
            self.sample_index += 1
            group.append(sample)
        self.sample_group_index += 1
        return group

    def add_samples(self, samples: List[List[Any]]) -> None:
        self.buffer.extend(samples)

    def _state_path(self, root: Optional[str], rollout_id: Any) -> Optional[str]:
        if rollout_id is None or not root:
            return None
        return os.path.join(root, f"rollout/rods_data_source_{rollout_id}.json")

    def save(self, rollout_id: Any) -> None:
        path = self._state_path(getattr(self.args, "save", None), rollout_id)
        if path is None:
            return
        state: Dict[str, Any] = {"draws": self.draws, "sample_group_index": self.sample_group_index,
                                 "sample_index": self.sample_index}
        # The checkpoint is reported where this process reports the rollouts (log_rollout_data ran
        # before, in the same rollout): without that hook no step of it would ever be sent.
        reporter = _existing_reporter(self.args)
        if reporter is not None:
            step = int(rollout_id) + 1
            state["checkpoint"] = {"campaign": reporter.client.campaign, "checkpointId": f"{self.run_id}-step-{step}",
                                   "runId": self.run_id, "step": step, "resumedFrom": self.resumed_from,
                                   "digest": None}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(state, f)
        if reporter is not None:
            checkpoint = state["checkpoint"]
            reporter.checkpoint(checkpoint["step"], checkpoint["checkpointId"], self.run_id,
                                resumed_from=self.resumed_from)
            self.checkpoints.append(checkpoint)

    def load(self, rollout_id: Any = None) -> None:
        root = getattr(self.args, "load", None) or getattr(self.args, "save", None)
        path = self._state_path(root, rollout_id)
        if path is None or not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        self.draws = int(state["draws"])
        self.sample_group_index = int(state["sample_group_index"])
        self.sample_index = int(state["sample_index"])
        checkpoint = state.get("checkpoint") or {}
        if getattr(self.args, "rods_resumed_from", None) is None and checkpoint.get("checkpointId"):
            # A state saved before rods reported checkpoints has none: resumedFrom stays null.
            if checkpoint.get("campaign") in (None, self.client.campaign):
                self.resumed_from = str(checkpoint["checkpointId"])

    def __len__(self) -> int:
        return len(self.client.fetch_pool().get("tasks", [])) + len(self.buffer)


def _reward_value(sample: Any, args: Any) -> Optional[float]:
    if hasattr(sample, "get_reward_value"):
        value = sample.get_reward_value(args)
    else:
        value = sample.reward
        if isinstance(value, dict):
            value = value[getattr(args, "reward_key", None)]
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


_reporters: Dict[Tuple[Any, ...], StepReporter] = {}
_reporters_lock = threading.Lock()


def _reporter_key(args: Any) -> Tuple[Any, ...]:
    return (getattr(args, "rods_gateway_url", None), getattr(args, "rods_token", None),
            getattr(args, "rods_campaign", None), getattr(args, "save", None))


def _existing_reporter(args: Any) -> Optional[StepReporter]:
    with _reporters_lock:
        return _reporters.get(_reporter_key(args))


def _reporter(args: Any) -> StepReporter:
    key = _reporter_key(args)
    with _reporters_lock:
        if key not in _reporters:
            client = _client(args)
            folder = getattr(args, "rods_spool_dir", None) or default_spool_dir(client.campaign, getattr(args, "save", None))
            _reporters[key] = StepReporter(client, folder, strict=bool(getattr(args, "rods_strict", False)))
        return _reporters[key]


def log_rollout_data(rollout_id: int, args: Any, samples: List[Any], rollout_extra_metrics: Any = None,
                     rollout_time: Any = None) -> bool:
    """slime's rollout log hook: reports the rollout's raw rewards per task as step rollout_id + 1."""
    flat = [s for group in samples for s in group] if samples and isinstance(samples[0], list) else list(samples)
    groups: Dict[str, List[float]] = {}
    for s in flat:
        task_id = (getattr(s, "metadata", None) or {}).get("rods_task_id")
        value = _reward_value(s, args)
        if task_id is not None and value is not None:
            groups.setdefault(str(task_id), []).append(value)
    _reporter(args).report(int(rollout_id) + 1, groups, policy_version=f"slime-rollout-{int(rollout_id)}")
    return False


def flush(timeout: Optional[float] = None) -> bool:
    """Waits until every rollout reported in this process was sent (False when ``timeout`` passed)."""
    with _reporters_lock:
        reporters = list(_reporters.values())
    return all(r.flush(timeout) for r in reporters)


def report_rewards(args: Any, samples: List[Any]) -> Tuple[List[float], List[float]]:
    """slime's reward post-process hook with its default GRPO normalization (reports nothing)."""
    flat = [s for group in samples for s in group] if samples and isinstance(samples[0], list) else list(samples)
    raw = [_reward_value(s, args) or 0.0 for s in flat]
    return raw, _normalized(args, flat, raw)


def _normalized(args: Any, flat: List[Any], raw: List[float]) -> List[float]:
    """GRPO group normalization as slime applies it by default (mean, then std for grpo/gspo/cispo)."""
    estimator = getattr(args, "advantage_estimator", None)
    if estimator not in ("grpo", "gspo", "cispo", "reinforce_plus_plus_baseline") or not getattr(
            args, "rewards_normalization", False):
        return list(raw)
    by_group: Dict[Any, List[int]] = {}
    for i, s in enumerate(flat):
        by_group.setdefault(getattr(s, "group_index", None), []).append(i)
    out = list(raw)
    divide = estimator in ("grpo", "gspo", "cispo") and getattr(args, "grpo_std_normalization", False)
    for members in by_group.values():
        values = [raw[i] for i in members]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
        for i in members:
            out[i] = (raw[i] - mean) / (std + 1e-6) if divide else raw[i] - mean
    return out
