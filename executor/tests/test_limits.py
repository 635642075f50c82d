"""The executor's limits over HTTP, each on a server of its own (a free port, its own settings):
no request grows the supervisor without bound, waits for a slot for ever, or gets a 500 for
deeply nested state; every refusal is a 4xx (or a 503 with Retry-After) naming its setting."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, **settings: str) -> None:
        self.port = _free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", **settings}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "executor", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_until(self._answers, 60, "the executor answers /health")

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode()  # type: ignore[union-attr]
            raise RuntimeError(f"executor exited: {err[-2000:]}")
        try:
            return self.get("/health")[0] == 200
        except OSError:
            return False

    def request(
        self, method: str, path: str, body: Any = None, timeout: float = 120
    ) -> tuple[int, dict[str, str], Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, data, {"Content-Type": "application/json"} if data else {})
            res = conn.getresponse()
            raw = res.read()
            return res.status, {k.lower(): v for k, v in res.getheaders()}, json.loads(raw)
        finally:
            conn.close()

    def get(self, path: str) -> tuple[int, dict[str, str], Any]:
        return self.request("GET", path, timeout=5)

    def execute(self, body: Any) -> tuple[int, dict[str, str], Any]:
        return self.request("POST", "/execute", body)

    def peak_rss_kb(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()  # type: ignore[union-attr]


def wait_until(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()  # default limits
    yield s
    s.stop()


def fs_request(contents: dict[str, Any], *turns: list[str]) -> dict[str, Any]:
    return {
        "involved_classes": ["GorillaFileSystem"],
        "initial_config": {"GorillaFileSystem": {"root": {"alex": {"type": "directory", "contents": contents}}}},
        "ground_truth": list(turns),
    }


BIG_FILE = {"big.txt": {"type": "file", "content": "x" * 1_750_000}}


def dir_depth(tree: dict[str, Any]) -> int:
    """Directories below `tree` along its only chain (iteratively: the chain is deep)."""
    depth = 0
    while True:
        subdirs = [v for v in tree["contents"].values() if "contents" in v]
        if not subdirs:
            return depth
        tree = subdirs[0]
        depth += 1


def assert_refused(answer: tuple[int, dict[str, str], Any], status: int, setting: str) -> dict[str, Any]:
    got, _headers, body = answer
    assert got == status, body
    assert body["limit"] == setting
    assert setting in body["error"]
    return body


def test_a_large_state_over_many_turns_is_refused_and_the_supervisor_stays_small(server: Server) -> None:
    # ~1.75 MB of state, kept after each of 400 turns: 700 MB of results (the supervisor grew to
    # 2 GB before results were bounded).
    request = fs_request(BIG_FILE, *[["pwd()"]] * 400)
    body = assert_refused(server.execute(request), 422, "RODS_EXECUTOR_MAX_RESULT_BYTES")
    assert "larger than 16777216 bytes" in body["error"]
    # the body (1.75 MB), at most 16 MiB of turn results and the interpreter: far below 256 MB
    assert server.peak_rss_kb() < 256 * 1024
    # one turn of the same state is fine
    status, _, ok = server.execute(fs_request(BIG_FILE, ["pwd()"]))
    assert status == 200 and ok["ok"] is True
    assert len(ok["turns"][0]["state"]["GorillaFileSystem"]["root"]["contents"]["big.txt"]["content"]) == 1_750_000


def test_one_turn_over_the_turn_limit_is_refused(server: Server) -> None:
    # three copies of a 1.75 MB file make one turn of about 7 MB (the limit is 4 MiB)
    request = fs_request(
        BIG_FILE,
        [f"cp(source='big.txt', destination='c{i}.txt')" for i in range(3)],
    )
    body = assert_refused(server.execute(request), 422, "RODS_EXECUTOR_MAX_TURN_BYTES")
    assert "turn 0" in body["error"]


def test_400_nested_directories_made_by_calls_execute(server: Server) -> None:
    calls = [c for i in range(400) for c in (f"mkdir(dir_name='d{i}')", f"cd(folder='d{i}')")]
    status, _, body = server.execute(fs_request({}, calls, ["pwd()"]))
    assert status == 200, body
    assert body["ok"] is True
    assert dir_depth(body["turns"][1]["state"]["GorillaFileSystem"]["root"]) == 400
    assert body["turns"][1]["results"][0]["result"]["current_working_directory"].count("/") == 401


def test_400_nested_directories_in_the_initial_config_execute(server: Server) -> None:
    tree: dict[str, Any] = {}
    for i in range(400):
        tree = {f"d{i}": {"type": "directory", "contents": tree}}
    status, _, body = server.execute(fs_request(tree, ["ls()"]))
    assert status == 200, body
    assert dir_depth(body["turns"][0]["state"]["GorillaFileSystem"]["root"]) == 400


def test_state_nested_past_the_depth_limit_is_refused(server: Server) -> None:
    calls = [c for i in range(600) for c in (f"mkdir(dir_name='d{i}')", f"cd(folder='d{i}')")]
    body = assert_refused(server.execute(fs_request({}, calls)), 422, "RODS_EXECUTOR_MAX_DEPTH")
    assert "the state of GorillaFileSystem after turn 0 nests deeper than 1000 levels" in body["error"]


def test_a_request_waits_for_a_slot_only_so_long() -> None:
    s = Server(RODS_EXECUTOR_CONCURRENCY="1", RODS_EXECUTOR_SLOT_WAIT_MS="300")

    def hold() -> None:
        try:
            s.execute(
                {
                    "involved_classes": ["MathAPI"],
                    "ground_truth": [["power(base=7, exponent=1000000000000)"]],
                    "timeout_ms": 60_000,
                }
            )
        except (OSError, http.client.HTTPException):  # the server is stopped under it
            pass

    holding = threading.Thread(target=hold)
    holding.start()
    try:
        wait_until(lambda: s.get("/health")[2].get("load", {}).get("busy") == 1, 10, "the one slot is busy")
        status, headers, body = s.execute({"involved_classes": ["MathAPI"], "ground_truth": [["add(a=1, b=2)"]]})
        assert status == 503, body
        assert body["limit"] == "RODS_EXECUTOR_SLOT_WAIT_MS"
        assert "all 1 execution slots stayed busy for 300 ms" in body["error"]
        assert int(headers["retry-after"]) >= 1
        load = s.get("/health")[2]["load"]
        assert (load["slots"], load["busy"], load["waiting"]) == (1, 1, 0)
        assert load["held_bytes"] > 0  # the running request's body
    finally:
        s.stop()
        holding.join()
    # The slot was busy while the second request was refused (load above); how the holding run
    # ended (stopped with the server, or out of memory first on a slow machine) is not the point.


def test_the_supervisor_holds_at_most_its_budget() -> None:
    s = Server(RODS_EXECUTOR_MAX_HELD_BYTES=str(3 * 1024 * 1024))
    try:
        # the 1.75 MB body fits the budget; its first turn (another 1.75 MB) does not
        body = assert_refused(s.execute(fs_request(BIG_FILE, ["pwd()"])), 503, "RODS_EXECUTOR_MAX_HELD_BYTES")
        assert "try again later" in body["error"]
        # a refused request gives back what it held: small requests still run
        status, _, ok = s.execute(fs_request({}, ["pwd()"]))
        assert status == 200 and ok["ok"] is True
        # (released just after each response is written)
        wait_until(lambda: s.get("/health")[2]["load"]["held_bytes"] == 0, 10, "nothing is held")
    finally:
        s.stop()


def test_a_body_over_the_limit_names_the_setting(server: Server) -> None:
    request = fs_request({"f": {"type": "file", "content": "x" * (3 * 1024 * 1024)}}, ["pwd()"])
    assert_refused(server.execute(request), 413, "RODS_EXECUTOR_MAX_BODY_BYTES")


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_killed_supervisor_leaves_no_run_behind() -> None:
    s = Server()
    helpers = _children(s.proc.pid)  # the fork server and multiprocessing's resource tracker
    runs: list[int] = []
    holding = threading.Thread(
        target=lambda: pytest.raises(
            OSError,
            s.execute,
            {
                "involved_classes": ["MathAPI"],
                "ground_truth": [["power(base=7, exponent=1000000000000)"]],
                "timeout_ms": 60_000,
            },
        )
    )
    holding.start()
    try:
        wait_until(lambda: bool(runs.extend([r for h in helpers for r in _children(h)]) or runs), 10, "the run started")
        s.proc.kill()  # kill -9: no cleanup of its own
        s.proc.wait()
        wait_until(lambda: not any(_alive(p) for p in runs + helpers), 20, "the run and the helpers are gone")
    finally:
        holding.join()
        for p in runs + helpers:  # started by this test; only left over if it failed
            if _alive(p):
                os.kill(p, 9)
        s.proc.stderr.close()  # type: ignore[union-attr]
