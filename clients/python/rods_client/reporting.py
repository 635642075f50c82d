"""Reporting steps without ever losing one, blocking training or stopping it.

``StepReporter`` is what every trainer adapter reports through:

* ``report(step, groups, policy_version)`` writes the step's report to a **durable spool** (one
  JSON file per step, written to a temporary name, fsynced and renamed) and returns; a
  background thread sends the spooled reports **in step order**, each until the gateway has
  accepted it. A trainer killed at any point loses nothing it reported: a new reporter on the
  same spool folder sends what was left, in order, first.
* Sending retries without end while the gateway is unreachable, rate-limits (429) or asks for a
  retry (503), with exponential backoff that honours Retry-After, and while it answers 401, 403
  or 404 (an operator can fix a token or a campaign name; the report waits instead of being
  dropped). A report the gateway can never take (422 invalid, 409 behind the last closed step)
  is moved to ``rejected/`` with the gateway's problem, logged and counted.
* A step the gateway already holds is never an error: the same body again is answered as a
  duplicate; a step already closed or accepted with another body (a run resumed from a
  checkpoint re-trains steps it had reported) is logged and counted as ``conflicts``.
* Idempotent per step: the spool remembers the highest step the gateway accepted and the steps
  waiting to be sent, so a resumed run's second report of a step is skipped (``skipped``), never
  sent twice. A step with no reward group is reported all the same (an empty closing batch), so
  it closes and the campaign never waits for it.
* ``strict=True`` makes ``report`` wait for the gateway and raise ``RodsError`` on a report it
  refuses, for a user who wants training to stop then.

Errors are logged on the ``rods_client`` logger and counted in ``stats``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import RodsClient, RodsError, backoff_delay, is_retryable

__all__ = ["StepReporter", "default_spool_dir"]

log = logging.getLogger("rods_client")

# 401/403/404: a token or campaign the operator can still fix; 422 step-out-of-window: the
# campaign has not caught up yet. The report waits for them instead of being dropped.
_WAIT_STATUSES = frozenset({401, 403, 404})
_WAIT_TYPES = frozenset({"urn:rods:problem:step-out-of-window"})
# The gateway holds the step already (closed, or accepted with another body).
_HELD_TYPES = frozenset({"urn:rods:problem:batch-conflict", "urn:rods:problem:step-closed"})


def default_spool_dir(campaign: str, root: Optional[str] = None) -> str:
    """``$RODS_SPOOL_DIR/<campaign>``, else ``<root>/rods-spool/<campaign>``, else under ~/.cache/rods."""
    base = os.environ.get("RODS_SPOOL_DIR")
    if base:
        return os.path.join(base, campaign)
    if root:
        return os.path.join(root, "rods-spool", campaign)
    return os.path.join(os.path.expanduser("~"), ".cache", "rods", "spool", campaign)


def _write_atomic(path: str, data: Mapping[str, Any]) -> None:
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, allow_nan=False, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    # The rename itself survives a crash only once the folder is synced.
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class StepReporter:
    def __init__(self, client: RodsClient, spool_dir: str, strict: bool = False, backoff: float = 0.5,
                 max_backoff: float = 30.0,
                 on_sent: Optional[Callable[[int, Dict[str, Any]], None]] = None):
        self.client = client
        self.spool_dir = spool_dir
        self.strict = strict
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.on_sent = on_sent
        self.stats: Dict[str, int] = {"queued": 0, "sent": 0, "duplicates": 0, "conflicts": 0, "retries": 0,
                                      "rejected": 0, "skipped": 0, "resumed": 0}
        self.last_error: Optional[str] = None
        # Seconds report() took on the caller's thread (the spool write), for the adapters' timings.
        self.report_seconds: List[float] = []
        self._pending_dir = os.path.join(spool_dir, "pending")
        self._rejected_dir = os.path.join(spool_dir, "rejected")
        for folder in (self._pending_dir, self._rejected_dir):
            os.makedirs(folder, exist_ok=True)
        self._state_path = os.path.join(spool_dir, "state.json")
        self._cond = threading.Condition()
        self._acked = self._read_acked()
        self._pending: List[int] = sorted(self._spooled_steps())
        self.stats["resumed"] = len(self._pending)
        self._results: Dict[int, Any] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"rods-reporter-{client.campaign}", daemon=True)
        self._thread.start()
        if self._pending:
            log.info("rods: %d spooled report(s) of campaign %s from an earlier run, sent first (steps %d..%d)",
                     len(self._pending), client.campaign, self._pending[0], self._pending[-1])

    # -- the spool ---------------------------------------------------------------------------

    def _read_acked(self) -> int:
        try:
            with open(self._state_path, encoding="utf-8") as f:
                state = json.load(f)
        except FileNotFoundError:
            return 0
        if state.get("campaign") not in (None, self.client.campaign):
            raise ValueError(f"rods: the spool {self.spool_dir} belongs to campaign {state.get('campaign')}, "
                             f"not {self.client.campaign}")
        return int(state.get("acked", 0))

    def _spooled_steps(self) -> List[int]:
        steps = []
        for name in os.listdir(self._pending_dir):
            if name.endswith(".json") and not name.startswith("."):
                steps.append(int(name[:-5]))
        return steps

    def _pending_path(self, step: int) -> str:
        return os.path.join(self._pending_dir, f"{step:012d}.json")

    @property
    def acked(self) -> int:
        """The highest step the gateway has accepted (or holds) from this spool."""
        return self._acked

    @property
    def pending(self) -> List[int]:
        with self._cond:
            return list(self._pending)

    def holds(self, step: int) -> bool:
        """Whether this spool reported ``step`` already (accepted, or waiting to be sent)."""
        with self._cond:
            return step <= self._acked or step in self._pending

    # -- the caller's side -------------------------------------------------------------------

    def report(self, step: int, groups: Mapping[str, Sequence[float]], policy_version: str,
               batch_id: Optional[str] = None) -> bool:
        """Spools step ``step``'s report (closing the step) and returns at once; False when this
        spool had reported the step already (a resumed run), which is then not sent again."""
        started = time.perf_counter()
        step = int(step)
        if step < 1:
            raise ValueError(f"rods: steps count from 1 (got {step})")
        for task_id, rewards in groups.items():
            if not all(math.isfinite(float(r)) for r in rewards):
                raise ValueError(f"rods: step {step}: a reward of task {task_id} is not a finite number: {list(rewards)}")
        body = RodsClient.step_body(step, groups, policy_version, batch_id, close=True)
        with self._cond:
            if self._closed:
                raise RuntimeError("rods: the reporter is closed")
            if step <= self._acked or step in self._pending:
                self.stats["skipped"] += 1
                log.info("rods: step %d of campaign %s was reported before (a resumed run): not sent again",
                         step, self.client.campaign)
                return False
            if self._pending and step < self._pending[-1]:
                log.warning("rods: step %d reported after step %d: sent in step order", step, self._pending[-1])
        _write_atomic(self._pending_path(step), {"step": step, "body": body, "queuedAt": time.time()})
        with self._cond:
            self._pending.append(step)
            self._pending.sort()
            self.stats["queued"] += 1
            self._cond.notify_all()
        self.report_seconds.append(time.perf_counter() - started)
        if self.strict:
            result = self._wait_for(step)
            if isinstance(result, RodsError):
                raise result
        return True

    def _wait_for(self, step: int) -> Any:
        with self._cond:
            while step not in self._results:
                self._cond.wait()
            return self._results.pop(step)

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Waits until every spooled report was sent; False if ``timeout`` seconds passed first
        (what is left stays in the spool and is sent by the next reporter on this folder)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def close(self, timeout: Optional[float] = 60.0) -> bool:
        """Flushes (up to ``timeout``), then stops the sender. True when nothing is left unsent."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        if not done:
            log.warning("rods: %d report(s) of campaign %s still unsent in %s (steps %s); they are sent when "
                        "training restarts with this spool", len(self._pending), self.client.campaign,
                        self.spool_dir, self._pending[:5])
        return done

    # -- the sender --------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                step = self._pending[0]
            self._send(step)

    def _send(self, step: int) -> None:
        with open(self._pending_path(step), encoding="utf-8") as f:
            body = json.load(f)["body"]
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = self.client.post_step(step, body, retries=0)
                if answer.get("duplicate"):
                    self.stats["duplicates"] += 1
                self.stats["sent"] += 1
                self._done(step, answer)
                if self.on_sent:
                    self.on_sent(step, answer)
                return
            except RodsError as e:
                kind = str(e.problem.get("type", ""))
                if kind in _HELD_TYPES:
                    self.stats["conflicts"] += 1
                    log.warning("rods: step %d of campaign %s is held by the gateway already (%s): kept as it is",
                                step, self.client.campaign, e)
                    self._done(step, {"held": True, "problem": e.problem})
                    return
                waits = is_retryable(e) or e.status in _WAIT_STATUSES or kind in _WAIT_TYPES
                if not waits:
                    self.stats["rejected"] += 1
                    self.last_error = str(e)
                    log.error("rods: the gateway refused step %d of campaign %s: %s (kept in %s)", step,
                              self.client.campaign, e, self._rejected_dir)
                    _write_atomic(os.path.join(self._rejected_dir, f"{step:012d}.json"),
                                  {"step": step, "body": body, "problem": e.problem, "status": e.status})
                    self._done(step, e)
                    return
                self.stats["retries"] += 1
                self.last_error = str(e)
                delay = backoff_delay(attempt, self.backoff, self.max_backoff, e.retry_after)
                level = logging.WARNING if attempt == 1 or attempt % 10 == 0 else logging.DEBUG
                log.log(level, "rods: step %d of campaign %s not sent (%s); retrying in %.1f s (attempt %d)", step,
                        self.client.campaign, e, delay, attempt)
                # New reports notify the condition too: wait out the whole delay unless closed.
                until = time.monotonic() + delay
                with self._cond:
                    while not self._closed and time.monotonic() < until:
                        self._cond.wait(until - time.monotonic())
                    if self._closed:
                        return

    def _done(self, step: int, result: Any) -> None:
        with self._cond:
            if step > self._acked:
                self._acked = step
                _write_atomic(self._state_path, {"campaign": self.client.campaign, "acked": self._acked})
            try:
                os.unlink(self._pending_path(step))
            except FileNotFoundError:
                pass
            self._pending.remove(step)
            if self.strict:
                self._results[step] = result
            self._cond.notify_all()
