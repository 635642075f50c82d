"""rods as a slime ``DataSource`` (``--data-source-path rods_client.slime.RodsDataSource``).

slime builds it as ``cls(args)`` and calls ``get_samples(n)`` for ``n`` prompt groups (each a list
of ``args.n_samples_per_prompt`` samples), ``add_samples(groups)`` to hand back aborted groups,
``save(rollout_id)`` / ``load(rollout_id)`` with its checkpoints, and ``len()``.

* ``get_samples`` serves handed-back groups first, then draws tasks from the campaign's pool
  (``GET .../batch``, seeded per draw). Each sample's ``prompt`` is the task's first user turn,
  ``label`` the task's ground truth as JSON and ``metadata`` holds ``rods_task_id`` and the task.
* ``report_rewards`` is a reward post-process hook (``--custom-reward-post-process-path
  rods_client.slime.report_rewards``): it reports each group's rewards to rods as step
  ``rollout_id + 1`` and returns slime's default (raw, GRPO group-normalized) rewards.

Gateway, token and campaign: ``args.rods_gateway_url``, ``args.rods_token``, ``args.rods_campaign``
or RODS_GATEWAY_URL, RODS_TOKEN, RODS_CAMPAIGN. Example: clients/python/examples/slime_data_source.py.
"""

from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import RodsClient
from ._common import RewardBuffer, first_turn

try:  # slime imports torch; without it the class keeps the same methods on a plain base
    from slime.rollout.data_source import DataSource as _DataSourceBase
    from slime.utils.types import Sample as _SlimeSample
except ImportError:  # pragma: no cover - exercised only where slime is absent
    _DataSourceBase = object  # type: ignore[misc,assignment]
    _SlimeSample = None

__all__ = ["RodsDataSource", "report_rewards", "PlainSample"]


@dataclass
class PlainSample:
    """The fields of slime's ``Sample`` this adapter sets and reads, where slime is absent."""

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


class RodsDataSource(_DataSourceBase):  # type: ignore[misc,valid-type]
    def __init__(self, args: Any, client: Optional[RodsClient] = None, sample_cls: Any = None):
        self.args = args
        self.client = client or _client(args)
        self.sample_cls = sample_cls or _SlimeSample or PlainSample
        self.n_samples_per_prompt = int(getattr(args, "n_samples_per_prompt", 1) or 1)
        self.seed = int(getattr(args, "rollout_seed", 0) or 0)
        self.buffer: List[List[Any]] = []
        self.draws = 0
        self.sample_group_index = 0
        self.sample_index = 0

    def get_samples(self, num_samples: int) -> List[List[Any]]:
        groups = self.buffer[:num_samples]
        self.buffer = self.buffer[num_samples:]
        missing = num_samples - len(groups)
        while missing > 0:
            batch = self.client.fetch_batch(missing, seed=self.seed * 1_000_003 + self.draws)
            self.draws += 1
            tasks = batch.get("tasks", [])
            if not tasks:
                raise RuntimeError("rods: the campaign's pool is empty")
            for entry in tasks:  # a truncated answer holds fewer: draw again for the rest
                groups.append(self._group(entry))
            missing = num_samples - len(groups)
        return groups

    def _group(self, entry: Dict[str, Any]) -> List[Any]:
        task = entry.get("task") or {}
        prototype = self.sample_cls()
        prototype.prompt = first_turn(task)
        prototype.label = json.dumps(task.get("ground_truth"))
        prototype.metadata = {"rods_task_id": entry["taskId"], "rods_category": entry.get("category"),
                              "rods_origin": entry.get("origin"), "task": task}
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

    def _state_path(self, rollout_id: Any) -> Optional[str]:
        root = getattr(self.args, "save", None) if rollout_id is not None else None
        return None if not root else os.path.join(root, f"rollout/rods_data_source_{rollout_id}.json")

    def save(self, rollout_id: Any) -> None:
        path = self._state_path(rollout_id)
        if path is None:
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"draws": self.draws, "sample_group_index": self.sample_group_index,
                       "sample_index": self.sample_index}, f)

    def load(self, rollout_id: Any = None) -> None:
        root = getattr(self.args, "load", None) or getattr(self.args, "save", None)
        if rollout_id is None or not root:
            return
        path = os.path.join(root, f"rollout/rods_data_source_{rollout_id}.json")
        if not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        self.draws = int(state["draws"])
        self.sample_group_index = int(state["sample_group_index"])
        self.sample_index = int(state["sample_index"])

    def __len__(self) -> int:
        return len(self.client.fetch_pool().get("tasks", [])) + len(self.buffer)


def _reward_value(sample: Any, args: Any) -> float:
    if hasattr(sample, "get_reward_value"):
        return float(sample.get_reward_value(args))
    reward = sample.reward
    if isinstance(reward, dict):
        reward = reward[getattr(args, "reward_key", None)]
    return float(reward)


_reported_steps: List[int] = []
_clients: Dict[Tuple[Any, ...], RodsClient] = {}


def report_rewards(args: Any, samples: List[Any]) -> Tuple[List[float], List[float]]:
    """slime's reward post-process hook: reports the rollout's rewards, then normalizes as slime does."""
    flat = [s for group in samples for s in group] if samples and isinstance(samples[0], list) else list(samples)
    raw = [_reward_value(s, args) for s in flat]
    rollout_ids = {s.rollout_id for s in flat if getattr(s, "rollout_id", None) is not None}
    # slime annotates every sample with its rollout id (from 0); rods steps count from 1.
    if rollout_ids:
        step = max(rollout_ids) + 1
    else:
        step = _reported_steps[-1] + 1 if _reported_steps else 1
    key = (getattr(args, "rods_gateway_url", None), getattr(args, "rods_token", None), getattr(args, "rods_campaign", None))
    client = _clients.setdefault(key, _client(args))
    buffer = RewardBuffer()
    buffer.add_many([(s.metadata or {}).get("rods_task_id") for s in flat], raw)
    groups = buffer.take()
    if groups:
        client.report_step(step, groups, policy_version=f"slime-rollout-{step - 1}")
        _reported_steps.append(step)
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
