"""One execution request, run in a process of its own with a time limit and a memory limit.

Each request gets a fresh child of a fork server that has the environment modules preloaded
(so a child starts in milliseconds): no state is shared between requests (the environment
classes also keep module-level state that some methods mutate), a call that runs too long is
stopped by killing its process, and the HTTP server's threads are never forked.
"""

from __future__ import annotations

import multiprocessing
import resource
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from executor import bfcl
from executor.environment import RequestError, run

_ctx = multiprocessing.get_context("forkserver")
_ctx.set_forkserver_preload(
    [
        "executor.environment",
        *(f"{bfcl.MODULE_PREFIX}.{module}" for module in bfcl.CLASS_MODULES.values()),
    ]
)


def _child(conn: Connection, request: Any, memory_mb: int) -> None:
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        result = run(request, progress=lambda event, data: conn.send((event, data)))
        conn.send(("done", {"ok": result["ok"], "failure": result["failure"]}))
    except RequestError as e:
        conn.send(("invalid", str(e)))
    except BaseException:
        conn.send(("crash", traceback.format_exc(limit=8)))
    finally:
        conn.close()


class Outcome:
    """What the supervisor saw: an HTTP status and a JSON body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body


def execute(request: Any, timeout_s: float, memory_mb: int) -> Outcome:
    """Runs `request` in a fresh child; kills it when `timeout_s` has passed."""
    parent, child = _ctx.Pipe(duplex=False)
    proc = _ctx.Process(target=_child, args=(child, request, memory_mb), daemon=True)
    proc.start()
    child.close()
    turns: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not parent.poll(remaining):
                proc.kill()
                return _stopped(
                    turns,
                    current,
                    f"time limit of {round(timeout_s * 1000)} ms exceeded during this call; "
                    "the environment process was killed",
                )
            try:
                event, data = parent.recv()
            except EOFError:
                proc.join(5)
                return _stopped(
                    turns, current, f"the environment process died during this call (exit code {proc.exitcode})"
                )
            if event == "call":
                current = data
            elif event == "turn":
                turns.append(data)
                current = None
            elif event == "done":
                return Outcome(200, {"ok": data["ok"], "failure": data["failure"], "turns": turns})
            elif event == "invalid":
                return Outcome(400, {"error": data})
            else:  # crash outside any call: a bug of ours, not of the request
                return Outcome(500, {"error": f"executor failure: {data}"})
    finally:
        parent.close()
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        proc.close()


def _stopped(turns: list[dict[str, Any]], current: dict[str, Any] | None, reason: str) -> Outcome:
    if current is None:
        return Outcome(500, {"error": f"executor failure outside any call: {reason}"})
    failure = next(
        (
            {"turn": t["turn"], "index": i, "call": r["call"], "reason": r["error"], "kind": r["kind"]}
            for t in turns
            for i, r in enumerate(t["results"])
            if not r["ok"]
        ),
        {**current, "reason": reason, "kind": "execution"},
    )
    # The turns that finished are reported; the unfinished turn's calls died with the process.
    return Outcome(200, {"ok": False, "failure": failure, "turns": turns, "stopped": {**current, "reason": reason}})


def self_test() -> None:
    """Starts the fork server and runs one call through it (raises if that does not work)."""
    outcome = execute({"involved_classes": ["MathAPI"], "ground_truth": [["add(a=1, b=2)"]]}, 60, 0)
    if outcome.status != 200 or not outcome.body.get("ok"):
        raise RuntimeError(f"executor self-test failed: {outcome.status} {outcome.body}")

