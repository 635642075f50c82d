"""Live environments: one per episode, so that a tool call costs one call.

Through /execute, a trainer's environment sends the whole history of an episode with every new
call, and the executor replays it on fresh instances: the k-th call of an episode runs k calls.
A session keeps the episode's instances alive in a process of its own (a child of the same fork
server as /execute's runs, with the same memory limit): each call runs once, on the state the
earlier calls left.

  POST   /sessions             {involved_classes, initial_config?, long_context?}  201 {session, idle_timeout_s}
  POST   /sessions/ID/calls    {calls: ["name(arg=value)", ...], timeout_ms?}     200 {results, closed?}
  DELETE /sessions/ID                                                             204

A call's result is the entry /execute records for it ({call, ok, text, result?, kind?, error?}).
A call that runs past its time limit kills the session's process: that call and the ones after it
answer the reason, `closed` says the session is gone, and later requests to it get 404. A session
idle for RODS_EXECUTOR_SESSION_IDLE_S is closed; at most RODS_EXECUTOR_MAX_SESSIONS are open (a
503 with Retry-After beyond). A client whose session is gone (closed, expired, or the executor
restarted) opens a new one and replays the episode's calls: the session is a cache of the state,
never its only copy.
"""

from __future__ import annotations

import json
import resource
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from executor import environment, sandbox
from executor.environment import DepthExceeded, RequestError, allowed_methods, execute_call, instantiate, validate

IDLE_SETTING = "RODS_EXECUTOR_SESSION_IDLE_S"
MAX_SETTING = "RODS_EXECUTOR_MAX_SESSIONS"


class SessionError(Exception):
    def __init__(self, status: int, message: str, setting: str | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.setting, self.retry_after = status, message, setting, retry_after


def _child(conn: Connection, body: bytes, limits: sandbox.Limits) -> None:
    sandbox._die_with_parent()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), sandbox._CHILD_RECURSION_LIMIT))
    if limits.memory_mb > 0:
        limit = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        request = json.loads(body)
        if not isinstance(request, dict):
            raise RequestError("the request body must be a JSON object")
        unknown = sorted(set(request) - {"involved_classes", "initial_config", "long_context"}
                         - environment.RECORD_FIELDS - {"ground_truth"})
        if unknown:
            raise RequestError(f"unknown field(s) {', '.join(unknown)}; a session takes involved_classes, "
                               "initial_config and long_context")
        classes, config, _, long_context = validate({"ground_truth": [], **request})
        instances = instantiate(classes, config, long_context)
        methods = allowed_methods(classes)
    except RequestError as e:
        conn.send(("invalid", str(e)))
        return
    except MemoryError:
        conn.send(("invalid", f"the environment needed more than {limits.memory_mb} MB ({sandbox.MEMORY_SETTING})"))
        return
    conn.send(("ready", None))
    while True:
        try:
            source = conn.recv()
        except (EOFError, OSError):
            return
        try:
            entry = execute_call(source, methods, instances, limits.max_depth)
        except DepthExceeded as e:
            entry = {"call": source, "ok": False, "kind": "limit",
                     "error": f"the result {e} ({environment.DEPTH_SETTING})", "text": "Error during execution: too deep"}
        text = json.dumps(entry, separators=(",", ":"), allow_nan=False)
        if len(text) > limits.max_turn_bytes:
            text = json.dumps({"call": source, "ok": False, "kind": "limit",
                               "error": f"the result is larger than {limits.max_turn_bytes} bytes as JSON "
                                        f"({sandbox.TURN_SETTING})", "text": "Error during execution: result too large"})
        conn.send_bytes(text.encode())


@dataclass
class Session:
    id: str
    proc: Any
    conn: Connection
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: int = 0

    def kill(self) -> None:
        try:
            self.conn.close()
        finally:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)


class Sessions:
    """The open sessions of one executor; a reaper thread closes the idle ones."""

    def __init__(self, limits: sandbox.Limits, idle_s: int, max_sessions: int) -> None:
        self.limits, self.idle_s, self.max_sessions = limits, idle_s, max_sessions
        self._open: dict[str, Session] = {}
        self._gone: dict[str, str] = {}  # recently closed: why (a 404 that says so)
        self._lock = threading.Lock()
        self.opened = 0
        self.expired = 0
        threading.Thread(target=self._reap, name="rods-session-reaper", daemon=True).start()

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)

    def open(self, body: bytes, timeout_s: float, retry_after: int) -> Session:
        with self._lock:
            if len(self._open) >= self.max_sessions:
                raise SessionError(503, f"all {self.max_sessions} sessions are open ({MAX_SETTING}); close finished "
                                        f"episodes' sessions (DELETE /sessions/ID) or try again later", MAX_SETTING,
                                   retry_after)
        parent, child = sandbox._ctx.Pipe(duplex=True)
        proc = sandbox._ctx.Process(target=_child, args=(child, body, self.limits), daemon=True)
        proc.start()
        child.close()
        session = Session(secrets.token_hex(12), proc, parent)
        try:
            if not parent.poll(timeout_s):
                raise SessionError(504, f"the environment did not start within {round(timeout_s * 1000)} ms")
            event, data = parent.recv()
        except (EOFError, OSError):
            session.kill()
            raise SessionError(500, f"executor failure: the session process died at start (exit code {proc.exitcode})") from None
        except SessionError:
            session.kill()
            raise
        if event != "ready":
            session.kill()
            raise SessionError(400, data)
        with self._lock:
            self._open[session.id] = session
            self.opened += 1
        return session

    def _get(self, sid: str) -> Session:
        with self._lock:
            session = self._open.get(sid)
            if session is None:
                why = self._gone.get(sid, "no such session (never opened, or the executor restarted)")
                raise SessionError(404, f"session {sid}: {why}; open a new one and replay the episode's calls")
            return session

    def _drop(self, session: Session, why: str) -> None:
        with self._lock:
            if self._open.pop(session.id, None) is not None:
                self._gone[session.id] = why
                while len(self._gone) > 4 * self.max_sessions:  # the oldest reasons are forgotten
                    self._gone.pop(next(iter(self._gone)))
        session.kill()

    def call(self, sid: str, calls: list[str], timeout_s: float) -> tuple[list[bytes], str | None]:
        """The calls' result entries (JSON text each), and why the session closed if it did."""
        session = self._get(sid)
        with session.lock:
            session.last_used = time.monotonic()
            if sid not in self._open:
                raise SessionError(404, f"session {sid}: {self._gone.get(sid, 'closed')}")
            out: list[bytes] = []
            closed: str | None = None
            deadline = time.monotonic() + timeout_s
            for source in calls:
                if closed is not None:
                    out.append(_failed(source, closed))
                    continue
                try:
                    session.conn.send(source)
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not session.conn.poll(remaining):
                        closed = (f"time limit of {round(timeout_s * 1000)} ms exceeded during this call; "
                                  "the session's process was killed")
                    else:
                        out.append(session.conn.recv_bytes())
                        session.calls += 1
                        sandbox.count_calls(1)
                        continue
                except (EOFError, OSError):
                    session.proc.join(1)
                    closed = f"the session's process died during this call (exit code {session.proc.exitcode})"
                out.append(_failed(source, closed))
                self._drop(session, closed)
            session.last_used = time.monotonic()
            return out, closed

    def close(self, sid: str) -> None:
        session = self._get(sid)
        with session.lock:
            self._drop(session, "closed by its client")

    def _reap(self) -> None:
        while True:
            time.sleep(max(1.0, min(30.0, self.idle_s / 4)))
            now = time.monotonic()
            with self._lock:
                idle = [s for s in self._open.values() if now - s.last_used > self.idle_s and not s.lock.locked()]
            for s in idle:
                self.expired += 1
                self._drop(s, f"closed after {self.idle_s} s idle ({IDLE_SETTING})")


def _failed(source: str, reason: str) -> bytes:
    return json.dumps({"call": source, "ok": False, "kind": "execution", "error": reason,
                       "text": f"Error during execution: {reason}"}, separators=(",", ":")).encode()


def response(results: list[bytes], closed: str | None) -> list[bytes]:
    chunks = [b'{"results":[']
    for i, r in enumerate(results):
        if i:
            chunks.append(b",")
        chunks.append(r)
    chunks.append(b"]" + (b',"closed":' + json.dumps(closed).encode() if closed else b"") + b"}")
    return chunks
