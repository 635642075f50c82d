"""rods for a ``transformers`` Trainer: the TRL adapter's pieces under their earlier names.

``RodsRewardRecorder`` is ``rods_client.trl.RodsRewards`` and ``RodsCallback`` is
``rods_client.trl.RodsCallback`` (reports each step once, through the durable spool). Train on
``rods_client.trl.RodsPool(...).dataset``: the map-style ``RodsPoolDataset`` below keeps its length
from when the data loader was built (TRL's and transformers' samplers fix it then), so a task
injected after training starts is never drawn from it; it is kept for code written against it.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional

from . import RodsClient
from ._common import pool_row
from .trl import RodsCallback, RodsRewards

RodsRewardRecorder = RodsRewards

__all__ = ["RodsPoolDataset", "RodsRewardRecorder", "RodsCallback"]


class RodsPoolDataset:
    """The active pool as a map-style dataset (never grows: use rods_client.trl.RodsPool)."""

    def __init__(self, client: RodsClient, min_tasks: int = 1):
        warnings.warn("rods: RodsPoolDataset never draws tasks injected after the data loader is built; "
                      "train on rods_client.trl.RodsPool(client, args).dataset", DeprecationWarning, stacklevel=2)
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

    def close(self) -> None:
        pass

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Dict[str, Any]:
        if not self.rows:
            raise IndexError("the rods pool is empty")
        return self.rows[int(index) % len(self.rows)]
