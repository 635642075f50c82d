"""What the trainer adapters share: a per-step reward buffer and a pool task's prompt."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, Optional


class RewardBuffer:
    """The rewards seen since the last report, grouped by rods task id (insertion order kept)."""

    def __init__(self) -> None:
        self._groups: Dict[str, List[float]] = {}

    def add(self, task_id: Optional[str], reward: Any) -> None:
        # Rows without a rods task id (a mixed dataset) or without a reward are not rods' to count.
        if task_id is None or reward is None:
            return
        value = float(reward)
        if math.isnan(value):
            return
        self._groups.setdefault(str(task_id), []).append(value)

    def add_many(self, task_ids: Iterable[Optional[str]], rewards: Iterable[Any]) -> None:
        for task_id, reward in zip(task_ids, rewards):
            self.add(task_id, reward)

    def take(self) -> Dict[str, List[float]]:
        groups, self._groups = self._groups, {}
        return groups

    def __len__(self) -> int:
        return len(self._groups)


def first_turn(task: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The chat messages of a BFCL multi-turn task's first user turn (the prompt to generate from)."""
    question = task.get("question") or []
    if question and isinstance(question[0], list):
        return [dict(m) for m in question[0]]
    if question and isinstance(question[0], dict):
        return [dict(m) for m in question]
    return []


def pool_row(entry: Mapping[str, Any]) -> Dict[str, Any]:
    """One pool entry as a training row: the prompt plus the ids the reward hooks report under."""
    task = entry.get("task") or {}
    return {
        "prompt": first_turn(task),
        "rods_task_id": entry["taskId"],
        "rods_origin": entry.get("origin"),
        "rods_category": entry.get("category"),
        "task": task,
    }
