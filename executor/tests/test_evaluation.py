"""POST /evaluations/task (executor/evaluation.py): bfcl-eval's own multi-turn inference loop and
checker against an OpenAI-compatible endpoint. The endpoint here is a tiny in-test server that
plays one task's BFCL ground truth (or answers without calls): what it answers is known, so
bfcl's checker must say valid for the ground truth and not for silence; an endpoint that fails is
an HTTP error, never valid=false; the apiKey reaches no log line."""

from __future__ import annotations

import ast
import http.client
import inspect
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from executor import bfcl
from test_limits import ROOT, wait_until

API_KEY = "sk-rods-test-9f1c2b7d0e"


def _task(task_id: str) -> dict[str, Any]:
    category = task_id.removeprefix("multi_turn_").rsplit("_", 1)[0]
    return next(t for t in bfcl.seeds(category) if t["id"] == task_id)


def _tool_call(call: str, classes: list[str], n: int) -> dict[str, Any]:
    """A ground-truth call string as an OpenAI tool call, by parsing (positional arguments get
    their parameter names from the method's signature); nothing is evaluated."""
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    name = node.func.id
    args: dict[str, Any] = {}
    if node.args:
        method = next(getattr(bfcl.load_class(c), name) for c in classes if hasattr(bfcl.load_class(c), name))
        params = [p for p in inspect.signature(method).parameters if p != "self"]
        args.update({params[i]: ast.literal_eval(a) for i, a in enumerate(node.args)})
    args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
    return {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


class Policy(ThreadingHTTPServer):
    """Chat completions for one task: mode "truth" answers each turn's ground-truth calls, then
    (after their tool results) plain text; mode "silent" always plain text."""

    task: dict[str, Any]
    mode = "truth"
    marker: Path
    requests = 0
    auth: list[str]


class PolicyHandler(BaseHTTPRequestHandler):
    server: Policy

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests += 1
        self.server.auth.append(self.headers.get("Authorization", ""))
        messages = body["messages"]
        # /<task id>/v1/chat/completions names the task (concurrent requests); /v1/... the server's
        parts = self.path.strip("/").split("/")
        task = _task(parts[0]) if parts[0] != "v1" else self.server.task
        if self.server.mode == "slow":
            time.sleep(3)
        if self.server.mode == "context":  # vLLM's answer to a conversation past the model's length
            raw = json.dumps({"object": "error", "type": "BadRequestError", "param": "input_tokens", "code": 400,
                              "message": "This model's maximum context length is 16384 tokens. However, your prompt "
                                         "contains at least 16385 input tokens."}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return
        users = sum(1 for m in messages if m["role"] == "user")
        message: dict[str, Any] = {"role": "assistant", "content": "Done."}
        if self.server.mode == "loop":  # calls for ever
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{len(messages)}", "type": "function", "function": {"name": "pwd", "arguments": "{}"}}]}
        elif self.server.mode == "hostile" and messages[-1]["role"] == "user":
            # a tool "name" that is Python code: bfcl pastes it into a string it eval()s
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_0", "type": "function",
                "function": {"name": f"__import__('pathlib').Path({str(self.server.marker)!r}).touch", "arguments": "{}"}}]}
        elif self.server.mode == "truth" and messages[-1]["role"] == "user":
            # each question turn of these tasks is one user message; a miss_func turn that brings
            # functions is bfcl's own user message
            calls = task["ground_truth"][users - 1]
            if calls:
                classes = task["involved_classes"]
                message = {"role": "assistant", "content": None,
                           "tool_calls": [_tool_call(c, classes, i) for i, c in enumerate(calls)]}
        answer = {
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        }
        raw = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Executor:
    """The executor on a free port, its stdout and stderr in one log file we can read."""

    def __init__(self, log: Path, **settings: str) -> None:
        self.port = _free_port()
        self.log = log
        self.out = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "executor", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", **settings},
            stdout=self.out, stderr=subprocess.STDOUT,
        )
        wait_until(self._answers, 60, "the executor answers /health")

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"executor exited: {self.log.read_text()[-2000:]}")
        try:
            return self.post("/health", None, method="GET")[0] == 200
        except OSError:
            return False

    def post(self, path: str, body: Any, method: str = "POST") -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
            conn.request(method, path, data, {"Content-Type": "application/json"} if data else {})
            res = conn.getresponse()
            return res.status, json.loads(res.read())
        finally:
            conn.close()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.out.close()


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory):
    e = Executor(tmp_path_factory.mktemp("eval") / "executor.log")
    yield e
    e.stop()


@pytest.fixture(scope="module")
def policy():
    server = Policy(("127.0.0.1", 0), PolicyHandler)
    server.auth = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def evaluate(executor: Executor, policy: Policy, task_id: str, by_path: bool = False, **extra: Any) -> tuple[int, Any]:
    category = task_id.removeprefix("multi_turn_").rsplit("_", 1)[0]
    base = f"http://127.0.0.1:{policy.server_address[1]}" + (f"/{task_id}" if by_path else "")
    endpoint = {"baseUrl": f"{base}/v1", "model": "ckpt-7", "apiKey": API_KEY}
    return executor.post("/evaluations/task", {"taskId": task_id, "category": category, "endpoint": endpoint, **extra})


# a base task, a miss_func task (functions arrive at a later turn) and a miss_param task
@pytest.mark.parametrize("task_id", ["multi_turn_base_0", "multi_turn_miss_func_0", "multi_turn_miss_param_0"])
def test_the_ground_truth_is_valid_per_bfcls_checker(executor: Executor, policy: Policy, task_id: str) -> None:
    policy.task, policy.mode = _task(task_id), "truth"
    status, result = evaluate(executor, policy, task_id)
    assert status == 200, result
    assert result["valid"] is True, result
    assert result["errorType"] is None and result["error"] is None
    task = policy.task
    assert result["turns"] == len(task["question"])
    assert result["toolCalls"] == sum(len(t) for t in task["ground_truth"])
    assert result["promptTokens"] > 0 and result["completionTokens"] > 0
    assert result["bfclEvalVersion"] == "2026.3.23" and result["model"] == "ckpt-7"
    assert result["taskId"] == task_id and isinstance(result["durationMs"], int)
    # the same task again starts from fresh environment instances: still valid
    status, again = evaluate(executor, policy, task_id)
    assert status == 200 and again["valid"] is True, again


def test_concurrent_requests_and_the_same_task_twice_do_not_share_environments(
    executor: Executor, policy: Policy
) -> None:
    policy.mode = "truth"
    ids = ["multi_turn_base_1", "multi_turn_base_2", "multi_turn_long_context_1", "multi_turn_base_1",
           "multi_turn_base_1"]
    results: list[tuple[int, Any]] = [(0, None)] * len(ids)

    def run(i: int) -> None:
        results[i] = evaluate(executor, policy, ids[i], by_path=True)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for task_id, (status, result) in zip(ids, results):
        assert status == 200 and result["valid"] is True and result["taskId"] == task_id, result
    status, health = executor.post("/health", None, method="GET")
    assert status == 200 and health["load"]["evaluations"] == 0 and health["load"]["max_evaluations"] == 8


def test_a_run_leaves_no_environment_instances_behind(policy: Policy) -> None:
    from executor import evaluation

    policy.task, policy.mode = _task("multi_turn_miss_func_0"), "truth"
    endpoint = evaluation.Endpoint(f"http://127.0.0.1:{policy.server_address[1]}/v1", "ckpt-7", API_KEY)
    assert evaluation.evaluate_task("multi_turn_miss_func_0", "miss_func", endpoint)["valid"] is True
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # loaded by evaluation by now

    assert not [k for k in vars(multi_turn_utils) if k.startswith("rods_eval_")]


def test_past_timeout_s_the_task_is_not_scored(executor: Executor, policy: Policy) -> None:
    policy.task, policy.mode = _task("multi_turn_base_0"), "slow"
    started = time.monotonic()
    status, result = evaluate(executor, policy, "multi_turn_base_0", timeoutS=1)
    assert status == 504, result
    assert "timeoutS" in result["error"] and time.monotonic() - started < 3
    policy.mode = "truth"


def test_beyond_max_evaluations_a_request_is_refused_at_once(policy: Policy, tmp_path: Path) -> None:
    small = Executor(tmp_path / "small.log", RODS_EXECUTOR_MAX_EVALUATIONS="1")
    try:
        policy.task, policy.mode = _task("multi_turn_base_0"), "slow"
        first: list[Any] = []
        running = threading.Thread(target=lambda: first.append(evaluate(small, policy, "multi_turn_base_0", timeoutS=2)))
        running.start()
        wait_until(lambda: small.post("/health", None, method="GET")[1]["load"]["evaluations"] == 1, 10, "one runs")
        status, result = evaluate(small, policy, "multi_turn_base_0")
        assert status == 503 and "RODS_EXECUTOR_MAX_EVALUATIONS" in result["error"], result
        running.join()
        assert first[0][0] == 504
    finally:
        policy.mode = "truth"
        small.stop()


def test_an_answer_without_calls_is_not_valid(executor: Executor, policy: Policy) -> None:
    policy.task, policy.mode = _task("multi_turn_base_0"), "silent"
    status, result = evaluate(executor, policy, "multi_turn_base_0")
    assert status == 200, result
    assert result["valid"] is False
    assert result["errorType"] == "multi_turn:empty_turn_model_response"
    assert "empty" in result["error"] and result["toolCalls"] == 0


def test_a_conversation_past_the_context_is_a_wrong_answer_not_an_endpoint_failure(
        executor: Executor, policy: Policy) -> None:
    policy.task, policy.mode = _task("multi_turn_base_0"), "context"
    try:
        status, result = evaluate(executor, policy, "multi_turn_base_0")
    finally:
        policy.mode = "truth"
    assert status == 200, result
    assert result["valid"] is False and result["errorType"] == "rods:context_length_exceeded", result
    assert "maximum context length is 16384" in result["error"]


def test_a_step_limit_ends_the_task_as_bfcls_force_quit(executor: Executor, policy: Policy) -> None:
    policy.task, policy.mode = _task("multi_turn_base_0"), "loop"
    before = policy.requests
    status, result = evaluate(executor, policy, "multi_turn_base_0", maxStepsPerTurn=3)
    assert status == 200, result
    assert result["valid"] is False and result["errorType"] == "multi_turn:force_terminated", result
    assert policy.requests - before == 4  # N + 1 queries, then the force quit (base_handler.py:321-323)
    # without maxStepsPerTurn bfcl's own limit of 20 applies: 21 queries, then its force quit
    before = policy.requests
    status, result = evaluate(executor, policy, "multi_turn_base_0")
    assert status == 200 and result["errorType"] == "multi_turn:force_terminated", result
    assert policy.requests - before == 21 and result["turns"] == 1
    status, result = evaluate(executor, policy, "multi_turn_base_0", maxStepsPerTurn=21)
    assert status == 400 and "maxStepsPerTurn" in result["error"]


def test_a_tool_call_that_is_code_is_refused_not_run(executor: Executor, policy: Policy, tmp_path: Path) -> None:
    policy.task, policy.mode, policy.marker = _task("multi_turn_base_0"), "hostile", tmp_path / "pwned"
    status, result = evaluate(executor, policy, "multi_turn_base_0")
    assert status == 200 and result["valid"] is False, result
    assert not policy.marker.exists()


def test_an_unreachable_endpoint_is_an_http_error_not_a_wrong_answer(executor: Executor) -> None:
    port = _free_port()  # nothing listens there
    body = {"taskId": "multi_turn_base_0", "category": "base",
            "endpoint": {"baseUrl": f"http://127.0.0.1:{port}/v1", "model": "ckpt-7", "apiKey": API_KEY}}
    status, result = executor.post("/evaluations/task", body)
    assert status == 502, result
    assert f"127.0.0.1:{port}" in result["error"] and "not scored" in result["error"]
    assert API_KEY not in json.dumps(result)


def test_an_endpoint_error_is_an_http_error(executor: Executor, policy: Policy) -> None:
    body = {"taskId": "multi_turn_base_0", "category": "base",
            "endpoint": {"baseUrl": f"http://127.0.0.1:{executor.port}/nothing", "model": "m", "apiKey": API_KEY}}
    status, result = executor.post("/evaluations/task", body)  # the executor itself answers 404 there
    assert status == 502 and "HTTP 404" in result["error"], result
    assert API_KEY not in json.dumps(result)


def test_unknown_tasks_and_malformed_bodies(executor: Executor, policy: Policy) -> None:
    status, result = evaluate(executor, policy, "multi_turn_base_9999")
    assert status == 404 and "multi_turn_base_9999" in result["error"]
    status, result = executor.post("/evaluations/task", {"taskId": "multi_turn_base_0", "category": "base",
                                                         "endpoint": {"baseUrl": "http://x/v1", "model": "m"},
                                                         "category2": 1})
    assert status == 400 and "category2" in result["error"]
    assert executor.post("/evaluations/task", b"{not json")[0] == 400
    status, result = executor.post("/evaluations/task", {"taskId": "multi_turn_base_0", "category": "basic",
                                                         "endpoint": {"baseUrl": "http://x/v1", "model": "m"}})
    assert status == 400 and "base, miss_func, miss_param, long_context" in result["error"]
    status, result = executor.post("/evaluations/task", {"taskId": "multi_turn_base_0", "category": "base",
                                                         "endpoint": {"baseUrl": "x", "model": "m"}})
    assert status == 400 and "baseUrl" in result["error"]


def test_the_api_key_is_sent_and_never_logged(executor: Executor, policy: Policy) -> None:
    policy.task, policy.mode = _task("multi_turn_base_0"), "truth"
    assert evaluate(executor, policy, "multi_turn_base_0")[0] == 200
    assert f"Bearer {API_KEY}" in policy.auth  # it did reach the endpoint
    log = executor.log.read_text()
    assert "/evaluations/task 200" in log  # the log is captured
    assert API_KEY not in log
