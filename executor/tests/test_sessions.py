"""Sessions over HTTP (executor/sessions.py): one live environment per episode, each call run once,
the same results as /execute's replay; a call past its time limit ends the session and says why;
idle sessions are closed; the number open is bounded."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from executor import bfcl
from test_limits import Server, wait_until

SLOW = "power(base=7, exponent=1000000000000)"


def call(server: Server, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, data, {"Content-Type": "application/json"} if data else {})
        res = conn.getresponse()
        raw = res.read()
        return res.status, json.loads(raw) if raw else None
    finally:
        conn.close()


def executed(server: Server) -> int:
    return server.get("/health")[2]["calls_executed"]


@pytest.fixture(scope="module")
def server():
    s = Server(RODS_EXECUTOR_SESSION_IDLE_S="2", RODS_EXECUTOR_MAX_SESSIONS="3")
    yield s
    s.stop()


def test_an_episode_runs_each_call_once_with_the_results_of_a_replay(server: Server) -> None:
    task = next(t for t in bfcl.seeds("base") if len(t["involved_classes"]) == 2)
    status, opened = call(server, "POST", "/sessions", task)  # a whole task record is a session request
    assert status == 201 and opened["idle_timeout_s"] == 2
    sid = opened["session"]
    before = executed(server)
    texts = []
    calls = [c for turn in task["ground_truth"] for c in turn]
    for c in calls:  # one request per call, as a trainer's tool calls come
        status, answer = call(server, "POST", f"/sessions/{sid}/calls", {"calls": [c]})
        assert status == 200 and "closed" not in answer
        texts.append(answer["results"][0]["text"])
    assert executed(server) - before == len(calls)  # each once, not the history again
    status, _, replay = server.execute({**{k: task[k] for k in ("involved_classes", "initial_config")},
                                        "ground_truth": task["ground_truth"]})
    assert status == 200
    assert texts == [r["text"] for t in replay["turns"] for r in t["results"]]
    assert call(server, "DELETE", f"/sessions/{sid}") == (204, None)
    status, gone = call(server, "POST", f"/sessions/{sid}/calls", {"calls": [calls[0]]})
    assert status == 404 and "closed by its client" in gone["error"] and "replay" in gone["error"]


def test_a_call_past_its_time_limit_ends_the_session_and_the_next_one_starts_clean(server: Server) -> None:
    status, opened = call(server, "POST", "/sessions", {"involved_classes": ["MathAPI"]})
    sid = opened["session"]
    status, answer = call(server, "POST", f"/sessions/{sid}/calls",
                          {"calls": ["add(a=1, b=2)", SLOW, "add(a=2, b=2)"], "timeout_ms": 500})
    assert status == 200
    first, slow, after = answer["results"]
    assert first["ok"] and first["text"] == json.dumps({"result": 3})
    assert not slow["ok"] and "time limit of 500 ms exceeded" in slow["error"]
    assert not after["ok"] and after["error"] == slow["error"]  # not run: the process is gone
    assert "killed" in answer["closed"]
    status, gone = call(server, "POST", f"/sessions/{sid}/calls", {"calls": ["add(a=1, b=1)"]})
    assert status == 404 and "time limit" in gone["error"]
    status, fresh = call(server, "POST", "/sessions", {"involved_classes": ["MathAPI"]})
    assert status == 201
    assert call(server, "POST", f"/sessions/{fresh['session']}/calls", {"calls": ["add(a=2, b=2)"]})[1][
        "results"][0]["text"] == json.dumps({"result": 4})
    call(server, "DELETE", f"/sessions/{fresh['session']}")


def test_idle_sessions_are_closed_and_at_most_the_limit_are_open(server: Server) -> None:
    opened = [call(server, "POST", "/sessions", {"involved_classes": ["MathAPI"]}) for _ in range(3)]
    assert [s for s, _ in opened] == [201, 201, 201]
    status, refused = call(server, "POST", "/sessions", {"involved_classes": ["MathAPI"]})
    assert status == 503 and refused["limit"] == "RODS_EXECUTOR_MAX_SESSIONS"
    sid = opened[0][1]["session"]
    wait_until(lambda: server.get("/health")[2]["load"]["sessions"] == 0, 30, "the idle sessions are closed")
    status, gone = call(server, "POST", f"/sessions/{sid}/calls", {"calls": ["add(a=1, b=1)"]})
    assert status == 404 and "idle" in gone["error"]
    assert call(server, "POST", "/sessions", {"involved_classes": ["MathAPI"]})[0] == 201


@pytest.mark.parametrize(
    "path,body,expected",
    [
        ("/sessions", {"involved_classes": ["Nope"]}, "unknown class"),
        ("/sessions", {"involved_classes": ["MathAPI"], "extra": 1}, "unknown field"),
        ("/sessions/abc/calls", {"calls": []}, "non-empty array"),
        ("/sessions/abc/calls", {"calls": ["add(a=1, b=2)"], "turn": 0}, "unknown field"),
    ],
)
def test_bad_session_requests_are_400(server: Server, path: str, body: Any, expected: str) -> None:
    status, answer = call(server, "POST", path, body)
    assert status == 400 and expected in answer["error"]


def test_an_unknown_session_is_404_and_says_what_to_do(server: Server) -> None:
    status, answer = call(server, "POST", "/sessions/0123abc/calls", {"calls": ["add(a=1, b=2)"]})
    assert status == 404 and "open a new one" in answer["error"]
    assert call(server, "DELETE", "/sessions/0123abc")[0] == 404
