"""One execution request, run in a process of its own with a time limit and a memory limit.

Each request gets a fresh child of a fork server that has the environment modules preloaded
(so a child starts in milliseconds): no state is shared between requests (the environment
classes also keep module-level state that some methods mutate), a call that runs too long is
stopped by killing its process, and the HTTP server's threads are never forked.

The child sends each finished turn as JSON text; the supervisor keeps those bytes (never the
objects) within per-turn and per-request limits and a budget shared by all requests, so one
request cannot grow the supervisor without bound.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import resource
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from executor import bfcl, environment
from executor.environment import RequestError, run

_ctx = multiprocessing.get_context("forkserver")
_ctx.set_forkserver_preload(
    [
        "ctypes",  # _die_with_parent
        "executor.sandbox",  # a run's own code: imported once here, not in every run
        "executor.environment",
        *(f"{bfcl.MODULE_PREFIX}.{module}" for module in bfcl.CLASS_MODULES.values()),
    ]
)


@dataclass(frozen=True)
class Limits:
    """What one run may produce; the names are the settings that set them (executor/README.md)."""

    max_turn_bytes: int = 4 * 1024 * 1024
    max_result_bytes: int = 16 * 1024 * 1024
    max_depth: int = 1000
    memory_mb: int = 1024


TURN_SETTING = "RODS_EXECUTOR_MAX_TURN_BYTES"
RESULT_SETTING = "RODS_EXECUTOR_MAX_RESULT_BYTES"
HELD_SETTING = "RODS_EXECUTOR_MAX_HELD_BYTES"
MEMORY_SETTING = "RODS_EXECUTOR_MEMORY_MB"

# The request was parsed by the supervisor within Python's default limit (about 1000 levels);
# copying and loading it nests a few frames per level. Bounded so C-level recursion (json,
# repr) stays well inside the 8 MB main-thread stack.
_CHILD_RECURSION_LIMIT = 5000


_calls_lock = threading.Lock()
_calls_executed = 0


def count_calls(n: int) -> None:
    """Counts calls run by this executor (GET /health: calls_executed)."""
    global _calls_executed
    with _calls_lock:
        _calls_executed += n


def calls_executed() -> int:
    with _calls_lock:
        return _calls_executed


class Budget:
    """Bytes the supervisor holds for all requests at once (bodies and turn results)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self.held + n > self.limit:
                return False
            self.held += n
            return True

    def give_back(self, n: int) -> None:
        with self._lock:
            self.held -= n


class Reservation:
    """One request's share of a Budget; released once its response is written."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.held = 0

    def take(self, n: int) -> bool:
        if not self.budget.take(n):
            return False
        self.held += n
        return True

    def release(self) -> None:
        self.budget.give_back(self.held)
        self.held = 0


def _die_with_parent() -> None:
    """Ends this run when the fork server exits, which it does once the supervisor is gone and
    no run holds its "alive" pipe; without this a killed supervisor left CPU-bound runs going."""
    try:
        from multiprocessing import forkserver

        server = forkserver._forkserver  # type: ignore[attr-defined]
        if server._forkserver_alive_fd is not None:
            os.close(server._forkserver_alive_fd)  # a run starts no processes of its own
            server._forkserver_alive_fd = None
    except (AttributeError, OSError):
        pass
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: RLIMIT_CPU still ends the run


def _child(conn: Connection, body: bytes, limits: Limits, cpu_s: int) -> None:
    _die_with_parent()
    # The supervisor kills a run at its time limit; if the supervisor is gone (kill -9), this ends it.
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard == resource.RLIM_INFINITY or hard > cpu_s + 1:  # else a stricter limit is set already
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), _CHILD_RECURSION_LIMIT))
    if limits.memory_mb > 0:
        limit = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    total = 0

    def progress(event: str, data: Any) -> None:
        nonlocal total
        if event != "turn":
            conn.send((event, data))
            return
        try:
            text = _turn_text(data, limits.max_turn_bytes, limits.max_depth).encode()
        except environment.TooLarge:
            raise environment.LimitExceeded(
                TURN_SETTING,
                f"turn {data['turn']}'s results and state are larger than {limits.max_turn_bytes} bytes "
                f"as JSON ({TURN_SETTING})",
            ) from None
        total += len(text)
        if total > limits.max_result_bytes:
            raise environment.LimitExceeded(RESULT_SETTING, _result_message(data["turn"], limits))
        failed = next(
            (
                {"turn": data["turn"], "index": i, "call": r["call"], "reason": r["error"], "kind": r["kind"]}
                for i, r in enumerate(data["results"])
                if not r["ok"]
            ),
            None,
        )
        conn.send(("turn", {"turn": data["turn"], "bytes": len(text), "failure": failed}))
        conn.send_bytes(text)

    try:
        request = json.loads(body)
        request.pop("timeout_ms", None)
        del body
        result = run(request, progress=progress, max_depth=limits.max_depth, keep_turns=False)
        conn.send(("done", {"ok": result["ok"], "failure": result["failure"]}))
    except RequestError as e:
        conn.send(("invalid", str(e)))
    except environment.LimitExceeded as e:
        conn.send(("limit", {"setting": e.setting, "error": str(e)}))
    except MemoryError:
        message = f"the run needed more than {limits.memory_mb} MB ({MEMORY_SETTING})"
        conn.send(("limit", {"setting": MEMORY_SETTING, "error": message}))
    except BaseException:
        conn.send(("crash", traceback.format_exc(limit=8)))
    finally:
        conn.close()


def _turn_text(turn: dict[str, Any], max_bytes: int, max_depth: int) -> str:
    # run() checked the nesting iteratively (max_depth, plus the turn's own 3 levels): within
    # the run's recursion limit the C encoder is safe, and 5x faster than the iterative one.
    if max_depth + 64 < sys.getrecursionlimit():
        text = json.dumps(turn, separators=(",", ":"), allow_nan=False)
        if len(text) > max_bytes:
            raise environment.TooLarge(max_bytes)
        return text
    return environment.encode(turn, max_bytes=max_bytes)


def _result_message(turn: int, limits: Limits) -> str:
    return (
        f"the results and states up to turn {turn} are larger than {limits.max_result_bytes} bytes "
        f"as JSON ({RESULT_SETTING})"
    )


class Outcome:
    """What the supervisor saw: an HTTP status and a JSON body (as chunks of JSON text)."""

    def __init__(
        self, status: int, chunks: list[bytes], *, setting: str | None = None, retry_after: int | None = None
    ) -> None:
        self.status = status
        self.chunks = chunks
        self.setting = setting
        self.retry_after = retry_after

    @classmethod
    def of(cls, status: int, body: dict[str, Any], **kw: Any) -> Outcome:
        return cls(status, [json.dumps(body, separators=(",", ":"), allow_nan=False).encode()], **kw)

    @classmethod
    def error(cls, status: int, message: str, setting: str | None = None, retry_after: int | None = None) -> Outcome:
        body: dict[str, Any] = {"error": message}
        if setting is not None:
            body["limit"] = setting
        return cls.of(status, body, setting=setting, retry_after=retry_after)

    @property
    def body(self) -> Any:
        return json.loads(b"".join(self.chunks))


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def _response(ok: bool, failure: Any, turns: list[bytes], stopped: Any = None) -> list[bytes]:
    chunks = [b'{"ok":' + _dumps(ok) + b',"failure":' + _dumps(failure) + b',"turns":[']
    for i, t in enumerate(turns):
        if i:
            chunks.append(b",")
        chunks.append(t)
    chunks.append(b"]" + (b',"stopped":' + _dumps(stopped) if stopped is not None else b"") + b"}")
    return chunks


def execute(
    body: bytes,
    timeout_s: float,
    limits: Limits,
    reservation: Reservation | None = None,
    retry_after: int = 5,
) -> Outcome:
    """Runs the request in `body` (JSON text) in a fresh child; kills it when `timeout_s` has
    passed or when its output passes a limit. Turn results are taken from `reservation`
    (released by the caller once the response is written)."""
    reservation = reservation or Reservation(Budget(sys.maxsize))
    parent, child = _ctx.Pipe(duplex=False)
    cpu_s = math.ceil(timeout_s) + 2
    proc = _ctx.Process(target=_child, args=(child, body, limits, cpu_s), daemon=True)
    proc.start()
    child.close()
    turns: list[bytes] = []
    total = 0
    first_failure: dict[str, Any] | None = None
    current: dict[str, Any] | None = None
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not parent.poll(remaining):
                proc.kill()
                return _stopped(
                    turns,
                    first_failure,
                    current,
                    f"time limit of {round(timeout_s * 1000)} ms exceeded during this call; "
                    "the environment process was killed",
                )
            try:
                event, data = parent.recv()
                if event == "turn":
                    n = data["bytes"]
                    if n > limits.max_turn_bytes:  # the child checks too; a supervisor does not trust it
                        return Outcome.error(
                            422,
                            f"turn {data['turn']} is larger than {limits.max_turn_bytes} bytes ({TURN_SETTING})",
                            TURN_SETTING,
                        )
                    if total + n > limits.max_result_bytes:
                        return Outcome.error(422, _result_message(data["turn"], limits), RESULT_SETTING)
                    if not reservation.take(n):
                        return Outcome.error(
                            503,
                            f"the executor holds {reservation.budget.held} of its {reservation.budget.limit} bytes "
                            f"for requests in flight ({HELD_SETTING}); try again later",
                            HELD_SETTING,
                            retry_after,
                        )
                    turns.append(parent.recv_bytes(n))
                    total += n
                    current = None
                    if first_failure is None:
                        first_failure = data["failure"]
                    continue
            except EOFError:
                proc.join(5)
                return _stopped(
                    turns,
                    first_failure,
                    current,
                    f"the environment process died during this call (exit code {proc.exitcode})",
                )
            if event == "call":
                current = data
                count_calls(1)
            elif event == "done":
                return Outcome(200, _response(data["ok"], data["failure"], turns))
            elif event == "invalid":
                return Outcome.error(400, data)
            elif event == "limit":
                return Outcome.error(422, data["error"], data["setting"])
            else:  # crash outside any call: a bug of ours, not of the request
                return Outcome.error(500, f"executor failure: {data}")
    finally:
        parent.close()
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        proc.close()


def _stopped(
    turns: list[bytes], first_failure: dict[str, Any] | None, current: dict[str, Any] | None, reason: str
) -> Outcome:
    if current is None:
        return Outcome.error(500, f"executor failure outside any call: {reason}")
    failure = first_failure or {**current, "reason": reason, "kind": "execution"}
    # The turns that finished are reported; the unfinished turn's calls died with the process.
    return Outcome(200, _response(False, failure, turns, {**current, "reason": reason}))


def self_test() -> None:
    """Starts the fork server and runs one call through it (raises if that does not work)."""
    body = json.dumps({"involved_classes": ["MathAPI"], "ground_truth": [["add(a=1, b=2)"]]}).encode()
    outcome = execute(body, 60, Limits(memory_mb=0))
    if outcome.status != 200 or not outcome.body.get("ok"):
        raise RuntimeError(f"executor self-test failed: {outcome.status} {outcome.body}")
