"""rods as a verl curriculum sampler (verl's experimental ``AbstractCurriculumSampler`` contract).

verl builds the sampler as ``cls(data_source=train_dataset, data_config=config.data)`` when
``data.sampler.class_path``/``class_name`` name it, asserts it is an ``AbstractSampler`` (this
class subclasses verl's when verl is importable), needs ``data.dataloader_num_workers=0``, and
calls ``update(batch)`` with each step's ``DataProto`` after the step is scored.

* ``__iter__`` yields, per training batch, ``data.train_batch_size`` dataset indices of tasks in
  the campaign's current pool (pulled at each batch; a 304 when unchanged). A pool task that the
  dataset lacks (a generated one) is appended through ``data_source.add_task(task) -> index`` when
  the dataset has that method, and skipped (counted in ``skipped``) otherwise.
* ``update(batch)`` sums each row's ``token_level_scores`` into its sequence reward and reports
  them per task as step ``batch.meta_info["global_steps"]``.

A row's rods task id is ``extra_info["rods_task_id"]`` (``data.sampler.rods.task_id_key`` renames
it). Gateway, token and campaign: ``data.sampler.rods.{gateway_url,token,campaign}`` or
RODS_GATEWAY_URL, RODS_TOKEN, RODS_CAMPAIGN. ``verl_row(entry, index)`` turns a pool entry into a
row of verl's RL parquet. Example: clients/python/examples/verl_sampler.py.
"""

from __future__ import annotations

import random
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

from . import RodsClient
from ._common import RewardBuffer, pool_row

try:  # verl imports torch; without it the class keeps the same methods on a plain base
    from verl.experimental.dataset.sampler import AbstractCurriculumSampler as _SamplerBase
except ImportError:  # pragma: no cover - exercised only where verl is absent
    _SamplerBase = object  # type: ignore[misc,assignment]

__all__ = ["RodsCurriculumSampler", "verl_row"]


def verl_row(entry: Mapping[str, Any], index: int) -> Dict[str, Any]:
    """A pool entry as a row of verl's RL parquet (chat prompt, rule reward, rods task id)."""
    row = pool_row(entry)
    return {
        "data_source": "rods",
        "prompt": row["prompt"],
        "reward_model": {"style": "rule", "ground_truth": str(row["task"].get("ground_truth"))},
        "extra_info": {"index": index, "rods_task_id": row["rods_task_id"]},
    }


def _get(config: Any, key: str, default: Any = None) -> Any:
    if config is None:
        return default
    value = config.get(key, default) if hasattr(config, "get") else getattr(config, key, default)
    return default if value is None else value


def _row_task_id(row: Any, key: str) -> Optional[str]:
    if not isinstance(row, Mapping):
        return None
    extra = row.get("extra_info")
    if isinstance(extra, Mapping) and extra.get(key) is not None:
        return str(extra[key])
    return None if row.get(key) is None else str(row[key])


def _sequence_scores(scores: Any) -> List[float]:
    """One reward per row: token-level scores summed over the response (a tensor or lists)."""
    if hasattr(scores, "sum") and hasattr(scores, "tolist"):
        return [float(x) for x in scores.sum(-1).tolist()]
    return [float(sum(row)) if isinstance(row, (list, tuple)) else float(row) for row in scores]


class RodsCurriculumSampler(_SamplerBase):  # type: ignore[misc,valid-type]
    def __init__(self, data_source: Any, data_config: Any, client: Optional[RodsClient] = None):
        rods_cfg = _get(_get(data_config, "sampler"), "rods", {})
        self.data_source = data_source
        self.client = client or RodsClient.from_env(_get(rods_cfg, "gateway_url"), _get(rods_cfg, "token"),
                                                    _get(rods_cfg, "campaign"))
        self.task_id_key = str(_get(rods_cfg, "task_id_key", "rods_task_id"))
        self.batch_size = int(_get(data_config, "train_batch_size", 0) or _get(data_config, "gen_batch_size", 0))
        if self.batch_size <= 0:
            raise ValueError("rods: data.train_batch_size must be set for the rods curriculum sampler")
        self.seed = int(_get(data_config, "seed", 0) or 0)
        self._index: Dict[str, int] = {}
        for i, task_id in enumerate(self._dataset_task_ids()):
            if task_id is not None:
                self._index.setdefault(task_id, i)
        # verl sizes the run from len(dataloader) once; the pool changes under a fixed length.
        self.steps_per_epoch = int(_get(rods_cfg, "steps_per_epoch", 0)) or max(1, len(data_source) // self.batch_size)
        self.draws = 0
        self.skipped = 0
        self.pool_version: Optional[int] = None
        self.reports: List[Dict[str, Any]] = []

    def _dataset_task_ids(self) -> Sequence[Optional[str]]:
        if hasattr(self.data_source, "task_ids"):
            return list(self.data_source.task_ids())
        frame = getattr(self.data_source, "dataframe", None)  # verl's RLHFDataset: no tokenizing
        if frame is not None and "extra_info" in getattr(frame, "column_names", []):
            return [_row_task_id({"extra_info": e}, self.task_id_key) for e in frame["extra_info"]]
        return [_row_task_id(self.data_source[i], self.task_id_key) for i in range(len(self.data_source))]

    def __len__(self) -> int:
        return self.steps_per_epoch * self.batch_size

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.steps_per_epoch):
            yield from self._draw()

    def _draw(self) -> List[int]:
        pool = self.client.fetch_pool()
        self.pool_version = pool.get("version")
        candidates: List[int] = []
        for entry in pool.get("tasks", []):
            task_id = entry["taskId"]
            if task_id not in self._index:
                if not hasattr(self.data_source, "add_task"):
                    self.skipped += 1
                    continue
                self._index[task_id] = int(self.data_source.add_task(entry))
            candidates.append(self._index[task_id])
        if not candidates:
            raise RuntimeError(f"rods: no task of pool version {self.pool_version} is in the training dataset")
        rng = random.Random(f"{self.seed}:{self.draws}")
        self.draws += 1
        # Distinct tasks while the pool has enough, then with replacement.
        picked = rng.sample(candidates, min(self.batch_size, len(candidates)))
        picked += rng.choices(candidates, k=self.batch_size - len(picked))
        return picked

    def update(self, batch: Any) -> None:
        extra = batch.non_tensor_batch.get("extra_info")
        if extra is not None:
            task_ids = [_row_task_id({"extra_info": e}, self.task_id_key) for e in extra]
        else:
            task_ids = [None if t is None else str(t) for t in batch.non_tensor_batch.get(self.task_id_key, [])]
        buffer = RewardBuffer()
        buffer.add_many(task_ids, _sequence_scores(batch.batch["token_level_scores"]))
        groups = buffer.take()
        if not groups:
            return
        step = int(batch.meta_info.get("global_steps", len(self.reports) + 1))
        answer = self.client.report_step(step, groups, policy_version=f"verl-step-{step}")
        self.reports.append({"step": step, "groups": len(groups), "answer": answer})
