"""The executor's HTTP API (JSON over HTTP/1.1, standard library only).

  GET  /health                                   {ok, bfcl_eval_version, classes, categories, python, pid}
  GET  /seeds?category=C[&limit=N][&offset=M]    {category, total, offset, seeds: [task record]}
  POST /execute {involved_classes, initial_config, ground_truth, long_context?, timeout_ms?}
                                                 {ok, failure, turns: [{turn, results, state}]}
  POST /evaluations/task {taskId, category, endpoint: {baseUrl, model, apiKey?}, maxStepsPerTurn?, timeoutS?}
                                                 {taskId, category, valid, errorType, error, turns, ...}

Errors are JSON objects {error, limit?} with 400 (malformed JSON or request), 404, 405, 411,
413 (body over the size limit), 422 (a run's output over a limit), 503 with Retry-After (no
execution slot or no memory budget free in time) or 500 (a bug of ours); `limit` names the
setting that refused the request. See executor/README.md.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import json
import math
import os
import platform
import signal
import ssl
import sys
import threading
import time
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from executor import bfcl, evaluation, sandbox, sessions
from executor.environment import DEPTH_SETTING


BODY_SETTING = "RODS_EXECUTOR_MAX_BODY_BYTES"
SLOT_SETTING = "RODS_EXECUTOR_SLOT_WAIT_MS"
EVAL_CONCURRENCY_SETTING = "RODS_EXECUTOR_MAX_EVALUATIONS"
EVAL_TIMEOUT_SETTING = "RODS_EXECUTOR_EVAL_TIMEOUT_S"


def _env_int(name: str, default: int, minimum: int | None = None) -> int:
    raw = os.environ.get(name, "")
    try:
        value = int(raw) if raw.strip() else default
    except ValueError:
        sys.exit(f"executor: {name} must be an integer, got {raw!r}")
    if minimum is not None and value < minimum:
        sys.exit(f"executor: {name} must be at least {minimum}, got {value}")
    return value


class Settings:
    def __init__(self) -> None:
        self.host = os.environ.get("RODS_EXECUTOR_HOST", "127.0.0.1")
        self.port = _env_int("RODS_EXECUTOR_PORT", 7300)
        # default and largest time limit of one /execute request
        self.timeout_ms = _env_int("RODS_EXECUTOR_TIMEOUT_MS", 10_000)
        self.max_timeout_ms = max(self.timeout_ms, _env_int("RODS_EXECUTOR_MAX_TIMEOUT_MS", 60_000))
        self.max_body = _env_int(BODY_SETTING, 2 * 1024 * 1024)
        self.memory_mb = _env_int("RODS_EXECUTOR_MEMORY_MB", 1024)
        self.concurrency = _env_int("RODS_EXECUTOR_CONCURRENCY", max(2, os.cpu_count() or 2))
        # how long a request waits for a free execution slot before a 503
        self.slot_wait_ms = _env_int(SLOT_SETTING, 15_000, 0)
        # what one run may produce (results and states as JSON), and how deep it may nest
        self.max_turn_bytes = _env_int(sandbox.TURN_SETTING, 4 * 1024 * 1024, 1)
        self.max_result_bytes = _env_int(sandbox.RESULT_SETTING, 16 * 1024 * 1024, 1)
        self.max_depth = _env_int(DEPTH_SETTING, 1000, 1)
        # request bodies and turn results held at once, over all requests
        self.max_held_bytes = _env_int(sandbox.HELD_SETTING, 256 * 1024 * 1024, 1)
        # the bearer token every request but /health must carry (the worker reads the same file)
        self.token_file = os.environ.get(TOKEN_SETTING, "")
        # HTTPS with this certificate and key (PEM files), re-read when the certificate changes
        self.tls_cert = os.environ.get("RODS_EXECUTOR_TLS_CERT", "")
        self.tls_key = os.environ.get("RODS_EXECUTOR_TLS_KEY", "")
        # live environments (executor/sessions.py): closed after this long idle; at most this many
        self.session_idle_s = _env_int(sessions.IDLE_SETTING, 300, 1)
        self.max_sessions = _env_int(sessions.MAX_SETTING, 256, 1)
        # POST /evaluations/task: at most this many at once (they mostly wait on the endpoint),
        # and the default and largest time limit of one
        self.max_evaluations = _env_int(EVAL_CONCURRENCY_SETTING, 8, 1)
        self.eval_timeout_s = _env_int(EVAL_TIMEOUT_SETTING, 1800, 1)

    def limits(self) -> sandbox.Limits:
        return sandbox.Limits(
            max_turn_bytes=self.max_turn_bytes,
            max_result_bytes=self.max_result_bytes,
            max_depth=self.max_depth,
            memory_mb=self.memory_mb,
        )


# Bodies up to this size are read and dropped before a 413 so that the client, still sending,
# gets the response rather than a reset connection; larger ones are refused at once.
_DRAIN_LIMIT = 64 * 1024 * 1024
DEFAULT_SEED_LIMIT = 100


class ApiError(Exception):
    def __init__(self, status: int, message: str, setting: str | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.setting = setting
        self.retry_after = retry_after


class Slots:
    """Executions at once; a request waits for one at most `wait_s`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.busy = 0
        self.waiting = 0
        self._cond = threading.Condition()

    def acquire(self, wait_s: float) -> bool:
        deadline = time.monotonic() + wait_s
        with self._cond:
            self.waiting += 1
            try:
                while self.busy >= self.size:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                self.busy += 1
                return True
            finally:
                self.waiting -= 1

    def release(self) -> None:
        with self._cond:
            self.busy -= 1
            self._cond.notify()


TOKEN_SETTING = "RODS_EXECUTOR_TOKEN_FILE"


class Token:
    """The bearer token of RODS_EXECUTOR_TOKEN_FILE, re-read when the file changes (a rotation
    needs no restart); a file that cannot be read keeps the token in use."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._value = b""
        if not self._reload():
            sys.exit(f"executor: {TOKEN_SETTING}: cannot read {path}")
        if not self._value:
            sys.exit(f"executor: {TOKEN_SETTING}: {path} is empty")

    def _reload(self) -> bool:
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                with open(self.path, "rb") as f:
                    value = f.read().strip()
                if value:
                    self._value, self._stamp = value, stamp
            return True
        except OSError:
            return False

    def accepts(self, header: str | None) -> bool:
        with self._lock:
            self._reload()
            value = self._value
        if not header or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[len("Bearer "):].strip().encode(), value)


class Evaluations:
    """At most `size` evaluations at once; one more is refused at once (503), not queued: an
    evaluation waits on its endpoint for minutes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.running = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        with self._lock:
            if self.running >= self.size:
                return False
            self.running += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.running -= 1


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "rods-executor"
    timeout = 60  # seconds a client may take to send a request
    settings: Settings
    slots: Slots
    budget: sandbox.Budget
    token: Token | None
    sessions: sessions.Sessions
    evaluations: Evaluations

    # ---- plumbing ----

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (BaseHTTPRequestHandler's name)
        sys.stderr.write(f"{self.log_date_time_string()} {format % args}\n")

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _route logs one line per request, with its duration


    def _send(self, outcome: sandbox.Outcome, close: bool = False) -> None:
        self._status = outcome.status
        self._limit = outcome.setting
        self.send_response(outcome.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(sum(len(c) for c in outcome.chunks)))
        if outcome.retry_after is not None:
            self.send_header("Retry-After", str(outcome.retry_after))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        for chunk in outcome.chunks:  # a large result is written as it is held, never joined
            self.wfile.write(chunk)

    def _route(self, method: str) -> None:
        started = time.monotonic()
        self._status = 0
        self._limit: str | None = None
        self._body_pending = method in ("POST", "PUT")
        self._held = sandbox.Reservation(self.budget)
        url = urlsplit(self.path)
        routes = {
            "/health": {"GET": self._health},
            "/seeds": {"GET": self._seeds},
            "/execute": {"POST": self._execute},
            "/sessions": {"POST": self._open_session},
            "/evaluations/task": {"POST": self._evaluate_task},
        }
        try:
            # /health stays open for liveness probes; it tells nothing a caller could use.
            if self.token is not None and url.path != "/health" and not self.token.accepts(
                self.headers.get("Authorization")
            ):
                raise ApiError(401, f"missing or wrong bearer token (the executor's {TOKEN_SETTING})", TOKEN_SETTING)
            handlers = routes.get(url.path) or self._session_routes(url.path)
            if handlers is None:
                raise ApiError(404, f"no such endpoint {url.path}; endpoints: {', '.join(routes)}, "
                                    "/sessions/ID, /sessions/ID/calls")
            handler = handlers.get(method)
            if handler is None:
                raise ApiError(405, f"{url.path} takes {', '.join(handlers)}, not {method}")
            result = handler(parse_qs(url.query, keep_blank_values=True))
            self._send(result if isinstance(result, sandbox.Outcome) else sandbox.Outcome.of(*result))
        except ApiError as e:
            # A request whose body was not read cannot share the connection with the next one; a
            # small one is read first, so that the client (over TLS above all) gets the answer
            # rather than a connection reset under the bytes it is still sending.
            if self._body_pending and e.status != 413:
                raw = self.headers.get("Content-Length", "")
                if raw.isdigit() and int(raw) <= self.settings.max_body:
                    self._drain(int(raw))
            self._send(
                sandbox.Outcome.error(e.status, e.message, e.setting, e.retry_after),
                close=self._body_pending or e.status == 413,
            )
        except Exception as e:  # a bug of ours
            traceback.print_exc()
            self._send(sandbox.Outcome.error(500, f"executor failure: {type(e).__name__}: {e}"), close=True)
        finally:
            self._held.release()
            ms = round((time.monotonic() - started) * 1000)
            limit = f" ({self._limit})" if self._limit else ""
            self.log_message("%s %s %s%s %d ms", method, url.path, self._status, limit, ms)

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._route("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._route("DELETE")

    # ---- endpoints ----

    def _health(self, _query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        return 200, {
            "ok": True,
            "bfcl_eval_version": bfcl.version(),
            "classes": list(bfcl.CLASS_MODULES),
            "categories": {c: len(bfcl.seeds(c)) for c in bfcl.CATEGORIES},
            "python": platform.python_version(),
            "pid": os.getpid(),
            "load": {
                "slots": self.slots.size,
                "busy": self.slots.busy,
                "waiting": self.slots.waiting,
                "held_bytes": self.budget.held,
                "sessions": len(self.sessions),
                "max_sessions": self.sessions.max_sessions,
                # POST /evaluations/task running now, and at most
                "evaluations": self.evaluations.running,
                "max_evaluations": self.evaluations.size,
            },
            # calls run since start (a replayed history counts each of its calls)
            "calls_executed": sandbox.calls_executed(),
            "sessions_opened": self.sessions.opened,
            "sessions_expired": self.sessions.expired,
        }

    def _seeds(self, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        def one(name: str) -> str | None:
            values = query.get(name)
            if values is None:
                return None
            if len(values) > 1:
                raise ApiError(400, f"query parameter {name} given {len(values)} times")
            return values[0]

        def count(name: str, default: int) -> int:
            raw = one(name)
            if raw is None:
                return default
            if not raw.isdigit():
                raise ApiError(400, f"{name} must be a non-negative integer, got {raw!r}")
            return int(raw)

        unknown = sorted(set(query) - {"category", "limit", "offset"})
        if unknown:
            raise ApiError(400, f"unknown query parameter(s) {', '.join(unknown)}; known: category, limit, offset")
        category = one("category")
        if category not in bfcl.CATEGORIES:
            raise ApiError(
                400,
                f"category must be one of {', '.join(bfcl.CATEGORIES)}"
                + (f", got {category!r}" if category is not None else " (missing)"),
            )
        limit = count("limit", DEFAULT_SEED_LIMIT)
        offset = count("offset", 0)
        records = bfcl.seeds(category)
        return 200, {
            "category": category,
            "total": len(records),
            "offset": offset,
            "seeds": list(records[offset : offset + limit]),
        }

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise ApiError(411, "chunked request bodies are not supported; send Content-Length")
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise ApiError(411, "Content-Length is required")
        if not raw.isdigit():
            raise ApiError(400, f"bad Content-Length {raw!r}")
        length = int(raw)
        limit = self.settings.max_body
        if length > limit:
            self._drain(length)
            raise ApiError(
                413, f"request body of {length} bytes exceeds the limit of {limit} bytes ({BODY_SETTING})", BODY_SETTING
            )
        if not self._held.take(length):
            self._drain(length)
            raise ApiError(
                503,
                f"the executor holds {self.budget.held} of its {self.budget.limit} bytes for requests in flight "
                f"({sandbox.HELD_SETTING}); try again later",
                sandbox.HELD_SETTING,
                self._retry_after(),
            )
        body = self.rfile.read(length)
        self._body_pending = False
        if len(body) != length:
            raise ApiError(400, f"request body ended after {len(body)} of {length} bytes")
        return body

    def _drain(self, length: int) -> None:
        if length > _DRAIN_LIMIT:
            return
        remaining = length
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 1 << 16))
            if not chunk:
                break
            remaining -= len(chunk)

    def _retry_after(self) -> int:
        """Seconds a refused client should wait: about one run's default time limit."""
        return max(1, math.ceil(self.settings.timeout_ms / 1000))

    def _json_object(self, body: bytes) -> dict[str, Any]:
        try:
            request = json.loads(body)
        except UnicodeDecodeError as e:
            raise ApiError(400, f"malformed JSON: the body is not UTF-8 ({e.reason} at byte {e.start})") from None
        except json.JSONDecodeError as e:
            raise ApiError(400, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        except RecursionError:
            raise ApiError(400, "the request JSON nests deeper than the parser allows (about 1000 levels)") from None
        if not isinstance(request, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return request

    def _json_body(self) -> tuple[bytes, dict[str, Any], float]:
        """The request body, parsed (an object), and its time limit in seconds."""
        body = self._read_body()
        request = self._json_object(body)
        timeout_ms = request.get("timeout_ms", self.settings.timeout_ms)
        if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms <= 0:
            raise ApiError(400, "timeout_ms must be a positive integer (milliseconds)")
        return body, request, min(timeout_ms, self.settings.max_timeout_ms) / 1000

    def _slot(self) -> None:
        wait_ms = self.settings.slot_wait_ms
        if not self.slots.acquire(wait_ms / 1000):
            raise ApiError(
                503,
                f"all {self.slots.size} execution slots stayed busy for {wait_ms} ms ({SLOT_SETTING}); try again later",
                SLOT_SETTING,
                self._retry_after(),
            )

    def _execute(self, _query: dict[str, list[str]]) -> sandbox.Outcome:
        body, request, timeout_s = self._json_body()
        del request  # the run parses the body again in its own process; the supervisor keeps bytes
        self._slot()
        try:
            return sandbox.execute(body, timeout_s, self.settings.limits(), self._held, retry_after=self._retry_after())
        finally:
            self.slots.release()

    # ---- evaluation (executor/evaluation.py) ----

    def _evaluate_task(self, _query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        """Scores one task with bfcl-eval's own inference loop and checker against the request's
        OpenAI-compatible endpoint. The endpoint failing is a 502 (504 past timeoutS), never
        valid=false; the apiKey appears in no answer and no log line."""
        request = self._json_object(self._read_body())
        known = {"taskId", "category", "endpoint", "maxStepsPerTurn", "timeoutS"}
        unknown = sorted(set(request) - known)
        if unknown:
            raise ApiError(400, f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        task_id, category, endpoint = request.get("taskId"), request.get("category"), request.get("endpoint")
        if not isinstance(task_id, str) or not task_id:
            raise ApiError(400, "taskId must be a non-empty string")
        if category not in bfcl.CATEGORIES:
            raise ApiError(400, f"category must be one of {', '.join(bfcl.CATEGORIES)}, got {category!r}")
        if not isinstance(endpoint, dict):
            raise ApiError(400, "endpoint must be an object {baseUrl, model, apiKey?}")
        extra = sorted(set(endpoint) - {"baseUrl", "model", "apiKey"})
        if extra:
            raise ApiError(400, f"unknown endpoint field(s) {', '.join(extra)}; known: baseUrl, model, apiKey")
        base_url, model, api_key = endpoint.get("baseUrl"), endpoint.get("model"), endpoint.get("apiKey")
        if not isinstance(base_url, str) or not urlsplit(base_url).scheme in ("http", "https") or not urlsplit(base_url).netloc:
            raise ApiError(400, "endpoint.baseUrl must be an http(s) URL such as http://127.0.0.1:7400/v1")
        if not isinstance(model, str) or not model:
            raise ApiError(400, "endpoint.model must be a non-empty string")
        if api_key is not None and not isinstance(api_key, str):
            raise ApiError(400, "endpoint.apiKey must be a string when given")
        steps = request.get("maxStepsPerTurn")
        if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool)
                                  or not 1 <= steps <= evaluation.BFCL_MAX_STEPS):
            raise ApiError(400, f"maxStepsPerTurn must be an integer from 1 to {evaluation.BFCL_MAX_STEPS} "
                                "(bfcl-eval's own limit)")
        timeout_s = request.get("timeoutS", self.settings.eval_timeout_s)
        if (not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or not math.isfinite(timeout_s)
                or timeout_s <= 0):
            raise ApiError(400, "timeoutS must be a positive number (seconds)")
        timeout_s = min(float(timeout_s), float(self.settings.eval_timeout_s))
        if not self.evaluations.try_acquire():
            raise ApiError(503, f"{self.settings.max_evaluations} evaluations are running "
                                f"({EVAL_CONCURRENCY_SETTING}); try again later", EVAL_CONCURRENCY_SETTING, 5)
        where = f"endpoint {base_url} (model {model!r})"
        try:
            result = evaluation.evaluate_task(
                task_id, category, evaluation.Endpoint(base_url, model, api_key), steps, timeout_s
            )
        except evaluation.UnknownTask as e:
            raise ApiError(404, str(e)) from None
        except evaluation.EndpointError as e:
            status = 504 if e.timeout else 502
            raise ApiError(status, evaluation.scrub(
                f"task {task_id} not scored: {where} failed: {evaluation._cap(str(e), 1000)}", api_key)) from None
        except Exception as e:  # a bug of ours (or of bfcl's): logged without the key
            sys.stderr.write(evaluation.scrub(traceback.format_exc(), api_key))
            raise ApiError(500, evaluation.scrub(
                f"task {task_id} not scored: executor failure: {type(e).__name__}: {evaluation._cap(str(e), 1000)}",
                api_key)) from None
        finally:
            self.evaluations.release()
        return 200, result

    # ---- sessions (executor/sessions.py) ----

    def _session_routes(self, path: str) -> dict[str, Any] | None:
        parts = path.split("/")
        if len(parts) == 3 and parts[1] == "sessions" and parts[2]:
            return {"DELETE": lambda _q: self._close_session(parts[2])}
        if len(parts) == 4 and parts[1] == "sessions" and parts[2] and parts[3] == "calls":
            return {"POST": lambda _q: self._session_calls(parts[2])}
        return None

    def _session_outcome(self, e: sessions.SessionError) -> ApiError:
        return ApiError(e.status, e.message, e.setting, e.retry_after)

    def _open_session(self, _query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        body, request, timeout_s = self._json_body()
        body = json.dumps({k: v for k, v in request.items() if k != "timeout_ms"}).encode()
        self._slot()
        try:
            session = self.sessions.open(body, timeout_s, self._retry_after())
        except sessions.SessionError as e:
            raise self._session_outcome(e) from None
        finally:
            self.slots.release()
        return 201, {"session": session.id, "idle_timeout_s": self.settings.session_idle_s}

    def _session_calls(self, sid: str) -> sandbox.Outcome:
        _body, request, timeout_s = self._json_body()
        calls = request.get("calls")
        if not isinstance(calls, list) or not calls or not all(isinstance(c, str) for c in calls):
            raise ApiError(400, "calls must be a non-empty array of call strings")
        unknown = sorted(set(request) - {"calls", "timeout_ms"})
        if unknown:
            raise ApiError(400, f"unknown field(s) {', '.join(unknown)}; a session call has calls and timeout_ms")
        self._slot()
        try:
            results, closed = self.sessions.call(sid, calls, timeout_s)
        except sessions.SessionError as e:
            raise self._session_outcome(e) from None
        finally:
            self.slots.release()
        return sandbox.Outcome(200, sessions.response(results, closed))

    def _close_session(self, sid: str) -> sandbox.Outcome:
        try:
            self.sessions.close(sid)
        except sessions.SessionError as e:
            raise self._session_outcome(e) from None
        return sandbox.Outcome(204, [])


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    tls: "TlsFiles | None" = None

    def finish_request(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        # The TLS handshake runs here, in the request's own thread: a slow or silent client holds
        # only its thread, never the accepting loop.
        if self.tls is not None:
            try:
                request = self.tls.context().wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return  # a client that does not speak TLS, or refuses our certificate: nothing to answer
        super().finish_request(request, client_address)


class TlsFiles:
    """The server's certificate and key; a new context when the certificate file changes (a
    rotation needs no restart). A file that cannot be read keeps the context in use."""

    def __init__(self, cert: str, key: str) -> None:
        self.cert, self.key = cert, key
        self._stamp: tuple[float, int] | None = None
        self._context: ssl.SSLContext | None = None
        self._lock = threading.Lock()
        self.context()  # fail at start on unusable files

    def context(self) -> ssl.SSLContext:
        with self._lock:
            try:
                st = os.stat(self.cert)
                stamp = (st.st_mtime, st.st_size)
                if stamp != self._stamp:
                    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                    ctx.load_cert_chain(self.cert, self.key)
                    self._context, self._stamp = ctx, stamp
            except (OSError, ssl.SSLError):
                if self._context is None:
                    raise
            assert self._context is not None
            return self._context


def serve(settings: Settings) -> None:
    # Beyond loopback, anyone who reaches the port could run calls: only with a token.
    if not is_loopback(settings.host) and not settings.token_file:
        sys.exit(
            f"executor: refusing to listen on {settings.host} (beyond loopback) without authentication; "
            f"set {TOKEN_SETTING} to a file holding a token (the worker reads the same file) or listen on 127.0.0.1"
        )
    for category in bfcl.CATEGORIES:  # fail at start, not at the first request, if data is missing
        bfcl.seeds(category)
    for name in bfcl.CLASS_MODULES:
        bfcl.public_methods(name)
    sandbox.self_test()  # starts the fork server and proves a run end to end
    slots = Slots(settings.concurrency)
    budget = sandbox.Budget(settings.max_held_bytes)
    token = Token(settings.token_file) if settings.token_file else None
    live = sessions.Sessions(settings.limits(), settings.session_idle_s, settings.max_sessions)
    handler = type(
        "BoundHandler",
        (Handler,),
        {"settings": settings, "slots": slots, "budget": budget, "token": token, "sessions": live,
         "evaluations": Evaluations(settings.max_evaluations)},
    )
    httpd = Server((settings.host, settings.port), handler)
    if bool(settings.tls_cert) != bool(settings.tls_key):
        sys.exit("executor: RODS_EXECUTOR_TLS_CERT and RODS_EXECUTOR_TLS_KEY (--tls-cert, --tls-key) go together")
    if settings.tls_cert:
        try:
            httpd.tls = TlsFiles(settings.tls_cert, settings.tls_key)
        except (OSError, ssl.SSLError) as e:
            sys.exit(f"executor: cannot use the TLS certificate {settings.tls_cert} and key {settings.tls_key}: {e}")
    scheme = "https" if httpd.tls else "http"
    print(
        f"rods executor (bfcl-eval {bfcl.version()}) listening on {scheme}://{settings.host}:{settings.port} "
        f"pid {os.getpid()}; time limit {settings.timeout_ms} ms, body limit {settings.max_body} bytes, "
        f"{settings.concurrency} concurrent executions (slot wait {settings.slot_wait_ms} ms), result limits "
        f"{settings.max_turn_bytes}/{settings.max_result_bytes} bytes per turn/request, depth {settings.max_depth}, "
        f"{settings.max_held_bytes} bytes held at most; "
        f"{'bearer token required' if token else 'no token (loopback only)'}",
        file=sys.stderr,
        flush=True,
    )
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m executor", description="rods environment executor (bfcl-eval)")
    parser.add_argument("--host", help="listen address (default $RODS_EXECUTOR_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port (default $RODS_EXECUTOR_PORT or 7300)")
    parser.add_argument("--token-file", help=f"file holding the bearer token (default ${TOKEN_SETTING})")
    parser.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate (default $RODS_EXECUTOR_TLS_CERT)")
    parser.add_argument("--tls-key", help="the certificate's PEM key (default $RODS_EXECUTOR_TLS_KEY)")
    parser.add_argument("--tag", help="a label for the command line (the stack finds its own process by it); ignored")
    args = parser.parse_args(argv)
    settings = Settings()
    if args.host:
        settings.host = args.host
    if args.port is not None:
        settings.port = args.port
    if args.token_file:
        settings.token_file = args.token_file
    if args.tls_cert:
        settings.tls_cert = args.tls_cert
    if args.tls_key:
        settings.tls_key = args.tls_key
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(settings)
