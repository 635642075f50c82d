"""rods for a ``transformers`` Trainer, and so for TRL's ``GRPOTrainer``.

Three pieces, used together (clients/python/examples/trl_grpo.py):

* ``RodsPoolDataset``: the campaign's active pool as a map-style dataset of rows ``{"prompt",
  "rods_task_id", "rods_origin", "rods_category", "task"}``; ``refresh()`` swaps in a newer
  pool version (a 304 when there is none).
* ``RodsRewardRecorder``: wraps a TRL reward function; it records each reward under the row's
  ``rods_task_id`` (TRL passes dataset columns to reward functions as keyword arguments).
* ``RodsCallback``: a ``TrainerCallback`` whose ``on_step_end`` reports the recorded rewards as
  the step ``state.global_step`` and refreshes the dataset.

Give ``GRPOConfig(remove_unused_columns=False)`` so ``rods_task_id`` reaches the reward function.
Without ``transformers`` installed the callback is a plain object with the same hooks.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from . import RodsClient
from ._common import RewardBuffer, pool_row

try:  # the callback subclasses transformers' when it is installed (it imports without torch)
    from transformers import TrainerCallback as _CallbackBase
except ImportError:  # pragma: no cover - exercised only where transformers is absent
    _CallbackBase = object  # type: ignore[misc,assignment]

__all__ = ["RodsPoolDataset", "RodsRewardRecorder", "RodsCallback"]


class RodsPoolDataset:
    """The active pool as a map-style dataset (``len`` and indexing, as a torch sampler needs)."""

    def __init__(self, client: RodsClient, min_tasks: int = 1):
        self.client = client
        self.min_tasks = min_tasks
        self.version: Optional[int] = None
        self.rows: List[Dict[str, Any]] = []
        self.refresh()

    def refresh(self, wait: float = 0) -> bool:
        """Pulls the pool; True when a newer version replaced the rows."""
        pool = self.client.fetch_pool(wait=wait)
        if pool.get("version") == self.version:
            return False
        self.version = pool.get("version")
        self.rows = [pool_row(t) for t in pool.get("tasks", [])]
        return True

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Dict[str, Any]:
        if not self.rows:
            raise IndexError("the rods pool is empty")
        # A sampler draws indices for a whole epoch up front; after a refresh to a smaller pool
        # those still name a row (another task of the current pool) instead of failing.
        return self.rows[int(index) % len(self.rows)]


class RodsRewardRecorder:
    """A TRL reward function that calls ``reward_fn`` and records its rewards for rods."""

    def __init__(self, reward_fn: Callable[..., List[Optional[float]]], buffer: Optional[RewardBuffer] = None):
        self.reward_fn = reward_fn
        self.buffer = buffer or RewardBuffer()
        # TRL logs a reward function under its __name__.
        self.__name__ = getattr(reward_fn, "__name__", "rods_reward")

    def __call__(self, prompts: Any = None, completions: Any = None, **kwargs: Any) -> List[Optional[float]]:
        task_ids = kwargs.get("rods_task_id")
        if task_ids is None:
            raise ValueError(
                "rods: the reward function got no rods_task_id column; give the trainer "
                "remove_unused_columns=False and a RodsPoolDataset (or a dataset with that column)"
            )
        rewards = self.reward_fn(prompts=prompts, completions=completions, **kwargs)
        self.buffer.add_many(task_ids, rewards)
        return rewards


class RodsCallback(_CallbackBase):  # type: ignore[misc,valid-type]
    """Reports each optimizer step's recorded rewards to rods and refreshes the pool dataset."""

    def __init__(self, client: RodsClient, recorder: RodsRewardRecorder, dataset: Optional[RodsPoolDataset] = None,
                 policy_version: Optional[Callable[[Any], str]] = None):
        self.client = client
        self.recorder = recorder
        self.dataset = dataset
        self.policy_version = policy_version or (lambda state: f"step-{state.global_step}")
        self.reports: List[Dict[str, Any]] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        groups = self.recorder.buffer.take()
        if groups:
            answer = self.client.report_step(int(state.global_step), groups,
                                             policy_version=self.policy_version(state))
            self.reports.append({"step": int(state.global_step), "groups": len(groups), "answer": answer})
        if self.dataset is not None:
            self.dataset.refresh()
        return control
