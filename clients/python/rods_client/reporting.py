"""Reporting steps and checkpoints without ever losing one, blocking training or stopping it.

``StepReporter`` is what every trainer adapter reports through:

* ``report(step, groups, policy_version)`` writes the step's report to a **durable spool** (one
  JSON file per step, written to a temporary name, fsynced and renamed) and returns; a
  background thread sends the spooled reports **in step order**, each until the gateway has
  accepted it. A trainer killed at any point loses nothing it reported: a new reporter on the
  same spool folder sends what was left, in order, first.
* ``checkpoint(step, checkpoint_id, run_id, resumed_from, digest)`` spools a saved checkpoint the
  same way. The sender first posts it once every spooled report of a step up to ``step`` has
  been answered (so the gateway can record what the checkpoint was trained on, and its
  retrained steps are known), before the reports of later steps. The gateway records it only
  once the campaign has closed every step up to it; before that it answers 503
  checkpoint-ahead. A checkpoint the gateway answers with a retry (checkpoint-ahead or any
  retryable status, 429, unreachable, 401, 403 or 404 other than "no such route") is
  **parked** until its next attempt (backoff honouring Retry-After) and never holds the
  reports of later steps: they go on meanwhile (a campaign's missing-step policy may need
  them closed before it closes the step the checkpoint waits for), and the sender comes back
  to the checkpoint when its attempt is due. Checkpoints go in order among themselves (a later
  one may resume from an earlier one): the next is first sent once the parked one is answered.
  ``waiting()`` lists the parked checkpoints (attempts, since when, the gateway's last
  problem), ``stats["parked"]`` counts them; each is logged at WARNING when it is first parked
  and every ``LOG_EVERY``-th attempt.
* Reports are sent one at a time in step order, each retried without end while the gateway is
  unreachable, rate-limits (429) or asks for a retry (503), with exponential backoff that
  honours Retry-After, and while it answers 401, 403 or 404 (an operator can fix a token or a
  campaign name; the report waits instead of being dropped). A report the gateway can never
  take (422 invalid, 409 behind the last closed step) is moved to ``rejected/`` with the
  gateway's problem, logged and counted; so is a checkpoint it refuses (422, also for a
  ``resumed_from`` it never recorded) or cannot record (404 no such route: a gateway older than
  checkpoints).
* A step the gateway already holds is never an error: the same body again is answered as a
  duplicate; a step already closed or accepted with another body (a run resumed from a
  checkpoint re-trains steps it had reported) is logged and counted as ``conflicts``. So is a
  checkpoint id the gateway recorded with another body (409 checkpoint-conflict), then dropped.
* Idempotent per step: the spool remembers the highest step the gateway accepted and the steps
  waiting to be sent, so a resumed run's second report of a step is skipped (``skipped``), never
  sent twice. A step with no reward group is reported all the same (an empty closing batch), so
  it closes and the campaign never waits for it.
* Retrained steps: what a resumed run trains again is not lost to rods. A step skipped as
  reported before, or held by the gateway, is recorded (``retrained/``, one file per step and
  reporter: the tasks and rollout counts trained) and goes, once, in the ``retrainedSteps`` of
  this reporter's next checkpoint of a step at or after it. The list is fixed when the
  checkpoint is first sent (by then every report up to its step has been answered), kept in its
  spool file so a retry sends the same body, and the records are removed only once the gateway
  has answered: a crash in between loses nothing. Records of a reporter that died without a
  later checkpoint describe training no checkpoint holds; the next reporter drops them.
* ``strict=True`` makes ``report`` and ``checkpoint`` wait for the gateway's final answer (a
  parked checkpoint keeps ``checkpoint`` waiting) and raise ``RodsError`` on one it refuses, for
  a user who wants training to stop then.

The spool folder: ``state.json`` (the highest step accepted), ``pending/<step:012d>.json`` (a
report waiting to be sent), ``checkpoints/<step:012d>.<checkpointId>.json`` (a checkpoint waiting
to be sent or parked: its body, claims and, once parked, ``parked``: since when, attempts and the
gateway's last problem, so a restarted reporter tells how long it has waited),
``retrained/<step:012d>.<reporter>.json`` and ``rejected/`` (reports as ``<step:012d>.json``,
checkpoints as ``<step:012d>.ckpt-<checkpointId>.json``).

Errors are logged on the ``rods_client`` logger and counted in ``stats``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import stat
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import RodsClient, RodsError, backoff_delay, is_retryable

__all__ = ["StepReporter", "default_spool_dir", "new_run_id", "check_id", "checkpoint_digest", "CHECKPOINT_RECORD",
           "write_checkpoint_record", "read_checkpoint_record", "resumed_checkpoint_id"]

log = logging.getLogger("rods_client")

# 401/403/404: a token or campaign the operator can still fix; 422 step-out-of-window: the
# campaign has not caught up yet. The report waits for them instead of being dropped.
_WAIT_STATUSES = frozenset({401, 403, 404})
_WAIT_TYPES = frozenset({"urn:rods:problem:step-out-of-window"})
# The gateway holds the step already (closed, or accepted with another body).
_HELD_TYPES = frozenset({"urn:rods:problem:batch-conflict", "urn:rods:problem:step-closed"})
# The checkpoint id is recorded with another body.
_CHECKPOINT_CONFLICT = "urn:rods:problem:checkpoint-conflict"
# The gateway's answer to a path it has no route for (an older gateway, without checkpoints).
_NO_ROUTE = "urn:rods:problem:not-found"

_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


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


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def check_id(what: str, value: Any, max_length: int = 128) -> str:
    """``value`` if it is an id the gateway takes (checkpoint and run ids), else ValueError."""
    if not isinstance(value, str) or not _ID.match(value) or len(value) > max_length:
        raise ValueError(f"rods: {what} must be 1 to {max_length} letters, digits, '.', '_' or '-' (got {value!r})")
    return value


# -- checkpoints: what the adapters share ------------------------------------------------------

# The file an adapter writes into each checkpoint folder: what it reported of that checkpoint, so
# a run resumed from the folder knows the checkpoint id it resumes from.
CHECKPOINT_RECORD = "rods-checkpoint.json"


def new_run_id() -> str:
    """A training process's run id: ``run-`` and 12 hex digits."""
    return f"run-{uuid.uuid4().hex[:12]}"


def checkpoint_digest(folder: str, skip: Sequence[str] = (CHECKPOINT_RECORD,)) -> str:
    """``sha256:<hex>`` over a checkpoint folder's regular files (symbolic links not followed).

    Files in the order of their relative paths ('/'-separated, sorted as strings); per file, its
    path in UTF-8, a NUL, its size in decimal, a NUL, then its bytes (read 1 MiB at a time), so no
    two folders hash alike by moving bytes between a name and a content. Names in ``skip`` (at any
    depth) are left out: the record written after hashing must not change the digest.
    """
    files: List[Tuple[str, str]] = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in names:
            if name in skip:
                continue
            path = os.path.join(root, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                files.append((os.path.relpath(path, folder).replace(os.sep, "/"), path))
    h = hashlib.sha256()
    for rel, path in sorted(files):
        with open(path, "rb") as f:
            h.update(rel.encode("utf-8") + b"\0" + str(os.fstat(f.fileno()).st_size).encode() + b"\0")
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                h.update(chunk)
    return "sha256:" + h.hexdigest()


def write_checkpoint_record(folder: str, record: Mapping[str, Any]) -> str:
    """Writes ``rods-checkpoint.json`` into a checkpoint folder (atomically); its path."""
    path = os.path.join(folder, CHECKPOINT_RECORD)
    _write_atomic(path, record)
    return path


def read_checkpoint_record(folder: str) -> Optional[Dict[str, Any]]:
    """The ``rods-checkpoint.json`` of a checkpoint folder, or None when it has none (or it is unreadable)."""
    try:
        with open(os.path.join(folder, CHECKPOINT_RECORD), encoding="utf-8") as f:
            record = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("rods: unreadable %s in %s: %s", CHECKPOINT_RECORD, folder, e)
        return None
    return record if isinstance(record, dict) and isinstance(record.get("checkpointId"), str) else None


def resumed_checkpoint_id(folder: str, campaign: str) -> Optional[str]:
    """The checkpoint id recorded in a checkpoint folder a run resumes from, for ``resumed_from``.

    None (with a warning) when the folder has no record (saved before rods reported checkpoints,
    or by a run killed between the save and its report) or one of another campaign, which this
    campaign's gateway would refuse as an unknown checkpoint.
    """
    record = read_checkpoint_record(folder)
    if record is None:
        log.warning("rods: the checkpoint %s a run resumes from has no %s: its checkpoints are reported as "
                    "trained from scratch (resumedFrom null)", folder, CHECKPOINT_RECORD)
        return None
    if record.get("campaign") not in (None, campaign):
        log.warning("rods: the checkpoint %s was reported to campaign %s, not %s: resumedFrom left null", folder,
                    record.get("campaign"), campaign)
        return None
    return str(record["checkpointId"])


class StepReporter:
    # A report or checkpoint that waits is logged at WARNING on its first attempt and every
    # LOG_EVERY-th one after (DEBUG between).
    LOG_EVERY = 10

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
                                      "rejected": 0, "skipped": 0, "resumed": 0, "checkpoints": 0, "retrained": 0,
                                      "parked": 0}
        self.last_error: Optional[str] = None
        # Seconds report() took on the caller's thread (the spool write), for the adapters' timings.
        self.report_seconds: List[float] = []
        # This reporter's id in the spool: the retrained steps it records go in its own checkpoints.
        self.session = uuid.uuid4().hex[:12]
        self._pending_dir = os.path.join(spool_dir, "pending")
        self._rejected_dir = os.path.join(spool_dir, "rejected")
        self._checkpoints_dir = os.path.join(spool_dir, "checkpoints")
        self._retrained_dir = os.path.join(spool_dir, "retrained")
        for folder in (self._pending_dir, self._rejected_dir, self._checkpoints_dir, self._retrained_dir):
            os.makedirs(folder, exist_ok=True)
        self._state_path = os.path.join(spool_dir, "state.json")
        self._cond = threading.Condition()
        self._acked = self._read_acked()
        self._pending: List[int] = sorted(self._spooled_steps())
        # Checkpoints waiting to be sent: (step, queuedAt, file name, checkpoint id, reporter session).
        # Checkpoints the gateway answered with a retry, by file name: attempts, since (wall clock),
        # the last status, problem type and detail, and when the next attempt is due (monotonic).
        self._parked: Dict[str, Dict[str, Any]] = {}
        self._checkpoints: List[Tuple[int, float, str, str, Optional[str]]] = sorted(self._spooled_checkpoints())
        # The report at the head that waits to be retried: step -> (attempts, next attempt due).
        self._step_retry: Dict[int, Tuple[int, float]] = {}
        # A checkpoint was parked since the last report attempt: a ready report goes before its retry.
        self._report_owed = False
        self._retrained: Dict[Tuple[int, Optional[str]], Dict[str, Any]] = self._load_retrained()
        self.stats["resumed"] = len(self._pending)
        self._results: Dict[Any, Any] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"rods-reporter-{client.campaign}", daemon=True)
        self._thread.start()
        if self._pending:
            log.info("rods: %d spooled report(s) of campaign %s from an earlier run, sent first (steps %d..%d)",
                     len(self._pending), client.campaign, self._pending[0], self._pending[-1])
        if self._checkpoints:
            log.info("rods: %d spooled checkpoint(s) of campaign %s from an earlier run, sent in order (%s)",
                     len(self._checkpoints), client.campaign, ", ".join(c[3] for c in self._checkpoints[:5]))

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

    def _spooled_checkpoints(self) -> List[Tuple[int, float, str, str, Optional[str]]]:
        found = []
        for name in os.listdir(self._checkpoints_dir):
            if name.endswith(".json") and not name.startswith("."):
                with open(os.path.join(self._checkpoints_dir, name), encoding="utf-8") as f:
                    record = json.load(f)
                found.append((int(record["step"]), float(record.get("queuedAt", 0)), name,
                              str(record["body"]["checkpointId"]), record.get("session")))
                parked = record.get("parked")
                if isinstance(parked, dict):
                    # Parked by an earlier reporter: tried again at once, its attempts counted on.
                    self._parked[name] = {"attempts": int(parked.get("attempts", 0)),
                                          "since": float(parked.get("since", 0)), "status": parked.get("status"),
                                          "type": parked.get("type"), "detail": parked.get("detail"), "due": 0.0}
        return found

    def _load_retrained(self) -> Dict[Tuple[int, Optional[str]], Dict[str, Any]]:
        """The retrained records of the spool that a waiting checkpoint of their reporter will take."""
        records: Dict[Tuple[int, Optional[str]], Dict[str, Any]] = {}
        dropped = []
        for name in sorted(os.listdir(self._retrained_dir)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            path = os.path.join(self._retrained_dir, name)
            with open(path, encoding="utf-8") as f:
                record = json.load(f)
            key = (int(record["step"]), record.get("session"))
            if self._claimable(*key):
                records[key] = dict(record, file=name)
            else:
                dropped.append(key[0])
                _unlink(path)
        if dropped:
            log.info("rods: dropped the retrained steps %s of an earlier run of campaign %s: it saved no checkpoint "
                     "after them, so no checkpoint holds that training", dropped[:10], self.client.campaign)
        return records

    def _claimable(self, step: int, session: Optional[str]) -> bool:
        """Whether a retrained record of ``session`` at ``step`` can still go in a checkpoint: this
        reporter's, or an earlier one's with a checkpoint of a step at or after it still waiting."""
        if session is None:
            return False
        return session == self.session or any(c[4] == session and c[0] >= step for c in self._checkpoints)

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

    @property
    def pending_checkpoints(self) -> List[str]:
        """The ids of the checkpoints waiting to be sent, in sending order."""
        with self._cond:
            return [c[3] for c in self._checkpoints]

    def waiting(self) -> List[Dict[str, Any]]:
        """The checkpoints the gateway answered with a retry, in sending order: ``checkpointId``,
        ``step``, ``attempts`` (counted across reporters on this spool), ``since`` (when it was first
        parked, seconds since the epoch), ``retryIn`` (seconds until the next attempt), and the
        gateway's last answer: ``status`` (0: unreachable), ``type`` and ``detail`` of its problem.
        A 503 checkpoint-ahead there names the steps the campaign has not closed yet."""
        with self._cond:
            now = time.monotonic()
            out = []
            for step, _, name, checkpoint_id, _ in self._checkpoints:
                p = self._parked.get(name)
                if p is not None:
                    out.append({"checkpointId": checkpoint_id, "step": step, "attempts": p["attempts"],
                                "since": p["since"], "retryIn": max(0.0, p["due"] - now), "status": p["status"],
                                "type": p["type"], "detail": p["detail"]})
            return out

    @property
    def retrained(self) -> List[int]:
        """The retrained steps recorded and not yet answered in a checkpoint."""
        with self._cond:
            return sorted(step for step, _ in self._retrained)

    def holds(self, step: int) -> bool:
        """Whether this spool reported ``step`` already (accepted, or waiting to be sent)."""
        with self._cond:
            return step <= self._acked or step in self._pending

    # -- the caller's side -------------------------------------------------------------------

    def report(self, step: int, groups: Mapping[str, Sequence[float]], policy_version: str,
               batch_id: Optional[str] = None) -> bool:
        """Spools step ``step``'s report (closing the step) and returns at once; False when this
        spool had reported the step already (a resumed run), which is then not sent again but
        recorded as retrained for the next checkpoint."""
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
                skipped = True
            else:
                skipped = False
                if self._pending and step < self._pending[-1]:
                    log.warning("rods: step %d reported after step %d: sent in step order", step, self._pending[-1])
        if skipped:
            self._record_retrained(step, self.session, body["groups"])
            return False
        _write_atomic(self._pending_path(step), {"step": step, "body": body, "queuedAt": time.time(),
                                                 "session": self.session})
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

    def checkpoint(self, step: int, checkpoint_id: str, run_id: str, resumed_from: Optional[str] = None,
                   digest: Optional[str] = None) -> None:
        """Spools a saved checkpoint of step ``step`` and returns at once; it is sent after every
        spooled report of a step up to ``step``, with the steps retrained since this reporter's
        previous checkpoint (see the module doc); while the gateway has it wait, the reports of
        later steps go on (``waiting()``). ``resumed_from``: the checkpoint id the run resumed from
        (None for a run started from scratch); ``digest``: ``sha256:<64 hex>``. With
        ``strict=True``, waits for the gateway's final answer and raises ``RodsError`` on a refusal."""
        step = int(step)
        if step < 1:
            raise ValueError(f"rods: steps count from 1 (got {step})")
        check_id("checkpoint_id", checkpoint_id)
        check_id("run_id", run_id)
        if resumed_from is not None:
            check_id("resumed_from", resumed_from)
        if digest is not None and not (isinstance(digest, str) and _DIGEST.match(digest)):
            raise ValueError(f"rods: a checkpoint digest is 'sha256:' and 64 lowercase hex digits (got {digest!r})")
        name = f"{step:012d}.{checkpoint_id}.json"
        with self._cond:
            if self._closed:
                raise RuntimeError("rods: the reporter is closed")
            if any(c[3] == checkpoint_id for c in self._checkpoints):
                log.warning("rods: checkpoint %s of campaign %s is spooled already: not spooled again", checkpoint_id,
                            self.client.campaign)
                return
        queued_at = time.time()
        # retrainedSteps is filled in when the checkpoint is first sent: by then every report of a
        # step up to its own has been answered, held ones included ("claims": null until then).
        body = RodsClient.checkpoint_body(checkpoint_id, run_id, step, resumed_from, digest)
        _write_atomic(os.path.join(self._checkpoints_dir, name),
                      {"step": step, "body": body, "claims": None, "session": self.session, "queuedAt": queued_at})
        with self._cond:
            self._checkpoints.append((step, queued_at, name, checkpoint_id, self.session))
            self._checkpoints.sort()
            self._cond.notify_all()
        if self.strict:
            result = self._wait_for(("checkpoint", checkpoint_id))
            if isinstance(result, RodsError):
                raise result

    def _record_retrained(self, step: int, session: Optional[str], groups: Sequence[Mapping[str, Any]]) -> None:
        """Records that ``session``'s run trained ``step`` again (the tasks and their rollout counts)."""
        with self._cond:
            if not self._claimable(step, session):
                log.debug("rods: step %d retrained by a run that saved no checkpoint since: not recorded", step)
                return
        record = {"step": step, "session": session, "recordId": uuid.uuid4().hex, "recordedAt": time.time(),
                  "groups": [{"taskId": str(g["taskId"]), "rollouts": len(g.get("rewards") or [])} for g in groups]}
        name = f"{step:012d}.{session}.json"
        _write_atomic(os.path.join(self._retrained_dir, name), record)
        with self._cond:
            self._retrained[(step, session)] = dict(record, file=name)
            self.stats["retrained"] += 1

    def _wait_for(self, key: Any) -> Any:
        with self._cond:
            while key not in self._results:
                self._cond.wait()
            return self._results.pop(key)

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Waits until every spooled report and checkpoint was answered; False if ``timeout`` seconds
        passed first (what is left stays in the spool and is sent by the next reporter on this folder).
        A checkpoint still waiting (``waiting()``) keeps it waiting, not the reports."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending or self._checkpoints:
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
            if self._pending:
                log.warning("rods: %d report(s) of campaign %s still unsent in %s (steps %s); they are sent when "
                            "training restarts with this spool", len(self._pending), self.client.campaign,
                            self.spool_dir, self._pending[:5])
            if self._checkpoints:
                log.warning("rods: %d checkpoint(s) of campaign %s still unsent in %s (%s); they are sent when "
                            "training restarts with this spool", len(self._checkpoints), self.client.campaign,
                            self.spool_dir, ", ".join(c[3] for c in self._checkpoints[:5]))
            for w in self.waiting()[:5]:
                log.warning("rods: checkpoint %s (step %d) of campaign %s has waited since %s (%d attempt(s)): "
                            "the gateway's last answer was %s %s: %s", w["checkpointId"], w["step"],
                            self.client.campaign, time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(w["since"])),
                            w["attempts"], w["status"], w["type"], w["detail"])
        return done

    # -- the sender --------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    job, wake = self._next_job(time.monotonic())
                    if job is not None:
                        break
                    # New reports and checkpoints notify; otherwise sleep until a retry is due.
                    self._cond.wait(None if wake is None else max(0.0, wake - time.monotonic()))
            kind, item = job
            if kind == "checkpoint":
                self._send_checkpoint(item)
            else:
                self._send(item)

    def _next_job(self, now: float) -> Tuple[Optional[Tuple[str, Any]], Optional[float]]:
        """What the sender does next (under the lock): ``(("step", n) | ("checkpoint", entry), None)``,
        or ``(None, when)`` with the monotonic time the next retry is due (None: nothing to do).

        Reports go one at a time in step order, the first one until the gateway answers it for
        good. The first waiting checkpoint (they go in order among themselves) goes once every
        spooled report of a step up to its own has been answered (ties: the report first), before
        the reports of later steps; once parked it waits for its next attempt without holding them,
        and a report that is ready gets a turn between two of its attempts."""
        step = self._pending[0] if self._pending else None
        step_due = self._step_retry.get(step, (0, 0.0))[1] if step is not None else 0.0
        wake: Optional[float] = None
        if self._checkpoints:
            entry = self._checkpoints[0]
            if step is None or step > entry[0]:
                parked = self._parked.get(entry[2])
                due = parked["due"] if parked is not None else 0.0
                if due > now:
                    wake = due
                elif not (parked is not None and self._report_owed and step is not None and step_due <= now):
                    return ("checkpoint", entry), None
        if step is not None:
            if step_due <= now:
                return ("step", step), None
            wake = step_due if wake is None else min(wake, step_due)
        return None, wake

    @staticmethod
    def _step_waits(e: RodsError) -> bool:
        kind = str(e.problem.get("type", ""))
        if kind in _HELD_TYPES:
            return False
        return is_retryable(e) or e.status in _WAIT_STATUSES or kind in _WAIT_TYPES

    @staticmethod
    def _checkpoint_waits(e: RodsError) -> bool:
        # 503 checkpoint-ahead is retryable like any 503. A 404 without a route is not a campaign
        # an operator will fix: the gateway records no checkpoints, so the checkpoint is set aside.
        if e.status == 404 and e.problem.get("type") == _NO_ROUTE:
            return False
        return is_retryable(e) or e.status in _WAIT_STATUSES

    def _send(self, step: int) -> None:
        """One attempt at the report of ``step``: its final answer, or its next attempt scheduled."""
        with open(self._pending_path(step), encoding="utf-8") as f:
            spooled = json.load(f)
        body = spooled["body"]
        try:
            result: Any = self.client.post_step(step, body, retries=0)
        except RodsError as e:
            result = e
        with self._cond:
            self._report_owed = False
        if isinstance(result, RodsError) and self._step_waits(result):
            e = result
            attempt = self._step_retry.get(step, (0, 0.0))[0] + 1
            delay = self._delay(attempt, e.retry_after)
            self.stats["retries"] += 1
            self.last_error = str(e)
            level = logging.WARNING if attempt == 1 or attempt % self.LOG_EVERY == 0 else logging.DEBUG
            log.log(level, "rods: step %d of campaign %s not sent (%s); retrying in %.1f s (attempt %d)", step,
                    self.client.campaign, e, delay, attempt)
            with self._cond:
                self._step_retry[step] = (attempt, time.monotonic() + delay)
            return
        if not isinstance(result, RodsError):
            if result.get("duplicate"):
                self.stats["duplicates"] += 1
            self.stats["sent"] += 1
            self._done(step, result)
            if self.on_sent:
                self.on_sent(step, result)
            return
        e = result
        if str(e.problem.get("type", "")) in _HELD_TYPES:
            self.stats["conflicts"] += 1
            log.warning("rods: step %d of campaign %s is held by the gateway already (%s): kept as it is",
                        step, self.client.campaign, e)
            # The run that spooled it trained the step again: its next checkpoint says so.
            self._record_retrained(step, spooled.get("session"), body.get("groups") or [])
            self._done(step, {"held": True, "problem": e.problem})
            return
        self.stats["rejected"] += 1
        self.last_error = str(e)
        log.error("rods: the gateway refused step %d of campaign %s: %s (kept in %s)", step,
                  self.client.campaign, e, self._rejected_dir)
        _write_atomic(os.path.join(self._rejected_dir, f"{step:012d}.json"),
                      {"step": step, "body": body, "problem": e.problem, "status": e.status})
        self._done(step, e)

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        return backoff_delay(attempt, self.backoff, self.max_backoff, retry_after)

    def _done(self, step: int, result: Any) -> None:
        if not isinstance(result, RodsError):
            # An earlier attempt refused, killed before the report left pending/: not refused now.
            _unlink(os.path.join(self._rejected_dir, f"{step:012d}.json"))
        with self._cond:
            if step > self._acked:
                self._acked = step
                _write_atomic(self._state_path, {"campaign": self.client.campaign, "acked": self._acked})
            try:
                os.unlink(self._pending_path(step))
            except FileNotFoundError:
                pass
            self._pending.remove(step)
            self._step_retry.pop(step, None)
            if self.strict:
                self._results[step] = result
            self._cond.notify_all()

    def _send_checkpoint(self, entry: Tuple[int, float, str, str, Optional[str]]) -> None:
        """One attempt at a checkpoint: its final answer, or parked until its next attempt."""
        step, _, name, checkpoint_id, session = entry
        path = os.path.join(self._checkpoints_dir, name)
        with open(path, encoding="utf-8") as f:
            spooled = json.load(f)
        if spooled.get("claims") is None:
            # Fixed once, before the first attempt: a retry after a lost answer sends the same body.
            with self._cond:
                records = sorted((r for (s, sess), r in self._retrained.items() if sess == session and s <= step),
                                 key=lambda r: r["step"])
            spooled["body"]["retrainedSteps"] = [{"step": r["step"], "groups": r["groups"]} for r in records]
            spooled["claims"] = [[r["step"], r["recordId"]] for r in records]
            _write_atomic(path, spooled)
        body = spooled["body"]
        try:
            result: Any = self.client.post_checkpoint(body, retries=0)
        except RodsError as e:
            result = e
        if isinstance(result, RodsError) and self._checkpoint_waits(result):
            self._park(entry, path, spooled, result)
            return
        rejected = os.path.join(self._rejected_dir, f"{step:012d}.ckpt-{checkpoint_id}.json")
        if not isinstance(result, RodsError):
            if result.get("duplicate"):
                self.stats["duplicates"] += 1
            self.stats["checkpoints"] += 1
            _unlink(rejected)  # left by an earlier attempt refused, killed before the checkpoint left the spool
        elif result.status == 409 and result.problem.get("type") == _CHECKPOINT_CONFLICT:
            self.stats["conflicts"] += 1
            log.warning("rods: checkpoint %s of campaign %s is recorded by the gateway with another body (%s): "
                        "dropped", checkpoint_id, self.client.campaign, result)
        else:
            self.stats["rejected"] += 1
            self.last_error = str(result)
            hint = (" (this gateway records no checkpoints: an older version?)"
                    if result.status == 404 and result.problem.get("type") == _NO_ROUTE else "")
            log.error("rods: the gateway refused checkpoint %s of campaign %s: %s%s (kept in %s)", checkpoint_id,
                      self.client.campaign, result, hint, self._rejected_dir)
            _write_atomic(rejected, {"step": step, "body": body, "problem": result.problem, "status": result.status})
        with self._cond:
            # The retrained steps went in this checkpoint's answered report: never in another one.
            for claimed_step, record_id in spooled["claims"]:
                record = self._retrained.get((claimed_step, session))
                if record is not None and record["recordId"] == record_id:
                    _unlink(os.path.join(self._retrained_dir, record["file"]))
                    del self._retrained[(claimed_step, session)]
            _unlink(path)
            self._checkpoints.remove(entry)
            self._parked.pop(name, None)
            if self.strict:
                self._results[("checkpoint", checkpoint_id)] = result
            self._cond.notify_all()

    def _park(self, entry: Tuple[int, float, str, str, Optional[str]], path: str, spooled: Dict[str, Any],
              e: RodsError) -> None:
        """The gateway answered a checkpoint with a retry: it waits for its next attempt (backoff,
        never sooner than Retry-After) while the sender goes on with the reports of later steps."""
        step, _, name, checkpoint_id, _ = entry
        with self._cond:
            before = self._parked.get(name)
        first = before is None or not before.get("here")
        attempt = (before["attempts"] if before is not None else 0) + 1
        delay = self._delay(attempt, e.retry_after)
        since = before["since"] if before is not None else time.time()
        kind = str(e.problem.get("type") or "")
        detail = str(e.problem.get("detail") or e.problem.get("title") or e)
        self.stats["retries"] += 1
        if first:
            self.stats["parked"] += 1
        self.last_error = str(e)
        loud = first or attempt % self.LOG_EVERY == 0
        if loud:
            # In the spool file too, so a restarted reporter tells how long the checkpoint has waited.
            spooled["parked"] = {"since": since, "attempts": attempt, "status": e.status, "type": kind,
                                 "detail": detail}
            _write_atomic(path, spooled)
        log.log(logging.WARNING if loud else logging.DEBUG,
                "rods: checkpoint %s (step %d) of campaign %s waits: %s; the reports of later steps go on, the "
                "checkpoint is retried in %.1f s (attempt %d, waiting since %s)", checkpoint_id, step,
                self.client.campaign, e, delay, attempt,
                time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since)))
        with self._cond:
            self._parked[name] = {"attempts": attempt, "since": since, "status": e.status, "type": kind,
                                  "detail": detail, "due": time.monotonic() + delay, "here": True}
            self._report_owed = True
            self._cond.notify_all()
