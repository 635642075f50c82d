"""The executor's HTTP API (JSON over HTTP/1.1, standard library only).

  GET  /health                                   {ok, bfcl_eval_version, classes, categories, python, pid}
  GET  /seeds?category=C[&limit=N][&offset=M]    {category, total, offset, seeds: [task record]}
  POST /execute {involved_classes, initial_config, ground_truth, long_context?, timeout_ms?}
                                                 {ok, failure, turns: [{turn, results, state}]}

Errors are JSON objects {error} with 400 (malformed JSON or request), 404, 405, 411, 413
(body over the size limit) or 500. See executor/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import threading
import time
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from executor import bfcl, sandbox


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw.strip() else default
    except ValueError:
        sys.exit(f"executor: {name} must be an integer, got {raw!r}")


class Settings:
    def __init__(self) -> None:
        self.host = os.environ.get("RODS_EXECUTOR_HOST", "127.0.0.1")
        self.port = _env_int("RODS_EXECUTOR_PORT", 7300)
        # default and largest time limit of one /execute request
        self.timeout_ms = _env_int("RODS_EXECUTOR_TIMEOUT_MS", 10_000)
        self.max_timeout_ms = max(self.timeout_ms, _env_int("RODS_EXECUTOR_MAX_TIMEOUT_MS", 60_000))
        self.max_body = _env_int("RODS_EXECUTOR_MAX_BODY_BYTES", 2 * 1024 * 1024)
        self.memory_mb = _env_int("RODS_EXECUTOR_MEMORY_MB", 1024)
        self.concurrency = _env_int("RODS_EXECUTOR_CONCURRENCY", max(2, os.cpu_count() or 2))


# Bodies up to this size are read and dropped before a 413 so that the client, still sending,
# gets the response rather than a reset connection; larger ones are refused at once.
_DRAIN_LIMIT = 64 * 1024 * 1024
DEFAULT_SEED_LIMIT = 100


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "rods-executor"
    timeout = 60  # seconds a client may take to send a request
    settings: Settings
    slots: threading.BoundedSemaphore

    # ---- plumbing ----

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (BaseHTTPRequestHandler's name)
        sys.stderr.write(f"{self.log_date_time_string()} {format % args}\n")

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _route logs one line per request, with its duration


    def _send(self, status: int, body: dict[str, Any], close: bool = False) -> None:
        data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        self._status = status
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        started = time.monotonic()
        self._status = 0
        self._body_pending = method in ("POST", "PUT")
        url = urlsplit(self.path)
        routes = {
            "/health": {"GET": self._health},
            "/seeds": {"GET": self._seeds},
            "/execute": {"POST": self._execute},
        }
        try:
            handlers = routes.get(url.path)
            if handlers is None:
                raise ApiError(404, f"no such endpoint {url.path}; endpoints: {', '.join(routes)}")
            handler = handlers.get(method)
            if handler is None:
                raise ApiError(405, f"{url.path} takes {', '.join(handlers)}, not {method}")
            status, body = handler(parse_qs(url.query, keep_blank_values=True))
            self._send(status, body)
        except ApiError as e:
            # A request whose body was not read cannot share the connection with the next one.
            self._send(e.status, {"error": e.message}, close=self._body_pending or e.status == 413)
        except Exception as e:  # a bug of ours
            traceback.print_exc()
            self._send(500, {"error": f"executor failure: {type(e).__name__}: {e}"}, close=True)
        finally:
            ms = round((time.monotonic() - started) * 1000)
            self.log_message("%s %s %s %d ms", method, url.path, self._status, ms)

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
            if length <= _DRAIN_LIMIT:
                remaining = length
                while remaining > 0:
                    chunk = self.rfile.read(min(remaining, 1 << 16))
                    if not chunk:
                        break
                    remaining -= len(chunk)
            raise ApiError(413, f"request body of {length} bytes exceeds the limit of {limit} bytes")
        body = self.rfile.read(length)
        self._body_pending = False
        if len(body) != length:
            raise ApiError(400, f"request body ended after {len(body)} of {length} bytes")
        return body

    def _execute(self, _query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        body = self._read_body()
        try:
            request = json.loads(body)
        except UnicodeDecodeError as e:
            raise ApiError(400, f"malformed JSON: the body is not UTF-8 ({e.reason} at byte {e.start})") from None
        except json.JSONDecodeError as e:
            raise ApiError(400, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        except RecursionError:
            raise ApiError(400, "malformed JSON: nested too deeply") from None
        if not isinstance(request, dict):
            raise ApiError(400, "the request body must be a JSON object")
        timeout_ms = request.pop("timeout_ms", self.settings.timeout_ms)
        if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms <= 0:
            raise ApiError(400, "timeout_ms must be a positive integer (milliseconds)")
        timeout_ms = min(timeout_ms, self.settings.max_timeout_ms)
        with self.slots:
            outcome = sandbox.execute(request, timeout_ms / 1000, self.settings.memory_mb)
        return outcome.status, outcome.body


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(settings: Settings) -> None:
    for category in bfcl.CATEGORIES:  # fail at start, not at the first request, if data is missing
        bfcl.seeds(category)
    for name in bfcl.CLASS_MODULES:
        bfcl.public_methods(name)
    sandbox.self_test()  # starts the fork server and proves a run end to end
    slots = threading.BoundedSemaphore(settings.concurrency)
    handler = type("BoundHandler", (Handler,), {"settings": settings, "slots": slots})
    httpd = Server((settings.host, settings.port), handler)
    print(
        f"rods executor (bfcl-eval {bfcl.version()}) listening on http://{settings.host}:{settings.port} "
        f"pid {os.getpid()}; time limit {settings.timeout_ms} ms, body limit {settings.max_body} bytes, "
        f"{settings.concurrency} concurrent executions",
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
    parser.add_argument("--tag", help="a label for the command line (the stack finds its own process by it); ignored")
    args = parser.parse_args(argv)
    settings = Settings()
    if args.host:
        settings.host = args.host
    if args.port is not None:
        settings.port = args.port
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(settings)
