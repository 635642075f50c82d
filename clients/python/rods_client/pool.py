"""The campaign's active pool as a trainer process holds it: the newest version, refreshed by a
background thread that long-polls the gateway (``GET .../pool?wait=``, a 304 while unchanged), so
that nothing on the training thread waits on HTTP; while the gateway is away, training goes on
with the version it has."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from . import RodsClient, RodsError

log = logging.getLogger("rods_client")

__all__ = ["LivePool"]


class LivePool:
    def __init__(self, client: RodsClient, poll_seconds: int = 20, start_timeout: float = 300.0,
                 refresh: bool = True):
        self.client = client
        self.poll_seconds = poll_seconds
        self.refresh_errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._latest = self._first(start_timeout)
        if refresh:
            threading.Thread(target=self._run, name=f"rods-pool-{client.campaign}", daemon=True).start()

    def _first(self, timeout: float) -> Tuple[int, List[Dict[str, Any]]]:
        """The first pool with tasks (a new campaign's pool appears once its workflow seeded it)."""
        deadline = time.monotonic() + timeout
        while True:
            pool = self.client.fetch_pool()
            if pool.get("tasks"):
                return int(pool["version"]), list(pool["tasks"])
            if time.monotonic() > deadline:
                raise RuntimeError(f"rods: campaign {self.client.campaign} has no pool after {timeout:.0f} s")
            time.sleep(1.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                pool = self.client.fetch_pool(wait=self.poll_seconds)
                if pool.get("tasks"):
                    with self._lock:
                        if int(pool["version"]) != self._latest[0]:
                            self._latest = (int(pool["version"]), list(pool["tasks"]))
            except RodsError as e:  # the gateway away: keep training on the pool we have
                self.refresh_errors += 1
                log.warning("rods: pool refresh failed (%s); training goes on with pool version %s", e,
                            self._latest[0])
                self._stop.wait(min(30.0, 2.0 * self.refresh_errors))
            except Exception as e:  # noqa: BLE001 - never let the refresher die
                self.refresh_errors += 1
                log.exception("rods: pool refresh failed: %s", e)
                self._stop.wait(5.0)

    def latest(self) -> Tuple[int, List[Dict[str, Any]]]:
        """(version, pool entries) of the newest pool seen."""
        with self._lock:
            return self._latest

    @property
    def version(self) -> Optional[int]:
        return self._latest[0]

    def close(self) -> None:
        self._stop.set()
