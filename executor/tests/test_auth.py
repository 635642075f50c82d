"""The executor's bearer token (RODS_EXECUTOR_TOKEN_FILE), on servers of their own: every endpoint
but /health refuses a request without the file's current token, a rotated file is taken without a
restart, and the executor will not listen beyond loopback without a token."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_limits import ROOT, Server

SEED_REQUEST = {
    "involved_classes": ["GorillaFileSystem"],
    "initial_config": {"GorillaFileSystem": {"root": {"alex": {"type": "directory", "contents": {}}}}},
    "ground_truth": [["pwd()"]],
}


def _with_auth(server: Server, token: str | None, method: str, path: str, body: object = None) -> int:
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        conn.request(method, path, json.dumps(body).encode() if body is not None else None, headers)
        res = conn.getresponse()
        res.read()
        return res.status
    finally:
        conn.close()


def test_every_endpoint_but_health_needs_the_current_token(tmp_path: Path) -> None:
    token_file = tmp_path / "executor.token"
    token_file.write_text("first-token\n")
    s = Server(RODS_EXECUTOR_TOKEN_FILE=str(token_file))
    try:
        assert s.get("/health")[0] == 200  # liveness probes carry no token
        status, _, body = s.get("/seeds?category=base&limit=1")
        assert status == 401
        assert body["limit"] == "RODS_EXECUTOR_TOKEN_FILE"
        assert "first-token" not in body["error"]
        assert _with_auth(s, "wrong", "GET", "/seeds?category=base&limit=1") == 401
        assert _with_auth(s, "first-token", "GET", "/seeds?category=base&limit=1") == 200
        assert _with_auth(s, None, "POST", "/execute", SEED_REQUEST) == 401
        assert _with_auth(s, "first-token", "POST", "/execute", SEED_REQUEST) == 200
        session = {"involved_classes": ["MathAPI"]}
        assert _with_auth(s, None, "POST", "/sessions", session) == 401
        assert _with_auth(s, "first-token", "POST", "/sessions", session) == 201
        assert _with_auth(s, None, "POST", "/sessions/any/calls", {"calls": ["add(a=1, b=2)"]}) == 401
        assert _with_auth(s, None, "DELETE", "/sessions/any") == 401

        token_file.write_text("second-token\n")  # rotated: the old token is refused at once
        assert _with_auth(s, "first-token", "GET", "/seeds?category=base&limit=1") == 401
        assert _with_auth(s, "second-token", "GET", "/seeds?category=base&limit=1") == 200
    finally:
        s.stop()


def _start(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "executor", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    r = _start("--host", "0.0.0.0", "--port", "0")
    assert r.returncode != 0
    assert "beyond loopback" in r.stderr and "RODS_EXECUTOR_TOKEN_FILE" in r.stderr


def test_refuses_an_empty_or_missing_token_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    r = _start("--port", "0", RODS_EXECUTOR_TOKEN_FILE=str(empty))
    assert r.returncode != 0 and "is empty" in r.stderr
    r = _start("--port", "0", RODS_EXECUTOR_TOKEN_FILE=str(tmp_path / "absent"))
    assert r.returncode != 0 and "cannot read" in r.stderr
