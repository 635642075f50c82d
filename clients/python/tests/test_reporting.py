"""The durable report spool (rods_client.reporting) against the real gateway.

Faults come from a small proxy in front of the real gateway that answers a scripted number of
requests itself (503 or 429 with Retry-After, or a dropped connection) and forwards the rest; a
gateway that is down is a closed port.
"""

import http.server
import json
import os
import socket
import threading
import time
import urllib.request

import pytest

from rods_client import RodsClient, RodsError, backoff_delay
from rods_client.reporting import StepReporter


class FaultProxy:
    def __init__(self, target):
        self.target = target.rstrip("/")
        self.faults = []  # ("503" | "429" | "drop", retry_after)
        self.requests = 0
        self.posts = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _handle(self):
                proxy.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if self.command == "POST":
                    proxy.posts.append(self.path)
                if proxy.faults:
                    kind, retry_after = proxy.faults.pop(0)
                    if kind == "drop":
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    problem = json.dumps({"type": "urn:rods:problem:unavailable", "title": "injected",
                                          "status": int(kind), "detail": "injected by the test"}).encode()
                    self.send_response(int(kind))
                    self.send_header("Content-Type", "application/problem+json")
                    self.send_header("Retry-After", str(retry_after))
                    self.send_header("Content-Length", str(len(problem)))
                    self.end_headers()
                    self.wfile.write(problem)
                    return
                req = urllib.request.Request(proxy.target + self.path, data=body, method=self.command)
                for k in ("Authorization", "Content-Type", "If-None-Match"):
                    if self.headers.get(k):
                        req.add_header(k, self.headers[k])
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        status, headers, data = resp.status, resp.headers, resp.read()
                except urllib.error.HTTPError as e:
                    status, headers, data = e.code, e.headers, e.read()
                self.send_response(status)
                for k in ("Content-Type", "ETag", "Retry-After"):
                    if headers.get(k):
                        self.send_header(k, headers[k])
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def closed_port_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture()
def proxy(reporting_client):
    p = FaultProxy(reporting_client.base_url)
    yield p
    p.close()


def client_for(base, url):
    return RodsClient(url, base.token, base.campaign, timeout=5, retries=0)


_next_step = [0]


def fresh_steps(base, n):
    """Steps this test alone uses: after the last closed step of the campaign."""
    if _next_step[0] == 0:
        _next_step[0] = 1
    first = _next_step[0]
    _next_step[0] += n
    return list(range(first, first + n))


def task_ids(base, n=2):
    return [t["taskId"] for t in base.fetch_pool()["tasks"][:n]]


def test_reports_survive_a_reporter_that_never_reached_the_gateway(reporting_client, tmp_path):
    steps = fresh_steps(reporting_client, 3)
    tasks = task_ids(reporting_client)
    down = StepReporter(client_for(reporting_client, closed_port_url()), str(tmp_path), backoff=0.05, max_backoff=0.2)
    started = time.perf_counter()
    for s in steps:
        assert down.report(s, {t: [0.25, 0.75] for t in tasks}, policy_version=f"p-{s}") is True
    assert time.perf_counter() - started < 5  # report() never waited for the unreachable gateway
    assert down.close(timeout=0.5) is False
    assert down.stats["retries"] > 0 and down.stats["sent"] == 0
    assert sorted(os.listdir(tmp_path / "pending")) == [f"{s:012d}.json" for s in steps]

    # The next run on the same spool sends them first, in step order, each once.
    up = StepReporter(client_for(reporting_client, reporting_client.base_url), str(tmp_path))
    assert up.stats["resumed"] == 3
    assert up.flush(timeout=60) is True
    assert up.stats["sent"] == 3 and up.stats["duplicates"] == 0 and up.acked == steps[-1]
    assert os.listdir(tmp_path / "pending") == []
    # The gateway holds exactly these bodies: the same one again is a duplicate.
    again = reporting_client.report_step(steps[1], {t: [0.25, 0.75] for t in tasks}, policy_version=f"p-{steps[1]}")
    assert again["duplicate"] is True
    up.close()


def test_retries_honour_retry_after_and_a_dropped_connection(reporting_client, proxy, tmp_path):
    (step,) = fresh_steps(reporting_client, 1)
    proxy.faults = [("503", 1), ("429", 1), ("drop", 0)]
    reporter = StepReporter(client_for(reporting_client, proxy.url), str(tmp_path), backoff=0.01, max_backoff=5)
    started = time.monotonic()
    reporter.report(step, {task_ids(reporting_client, 1)[0]: [1.0, 0.0]}, policy_version="p")
    assert reporter.flush(timeout=60) is True
    waited = time.monotonic() - started
    assert reporter.stats["retries"] == 3 and reporter.stats["sent"] == 1
    assert len(proxy.posts) == 4
    # The two answers asked for a second each; the backoff alone would have waited 0.01-0.04 s.
    assert waited >= 2.0
    reporter.close()


def test_backoff_never_shorter_than_retry_after_and_capped():
    for attempt in range(1, 12):
        d = backoff_delay(attempt, 0.5, 30.0)
        assert 0.25 * min(1, 2 ** (attempt - 1)) <= d <= 30.0
        assert backoff_delay(attempt, 0.5, 30.0, retry_after=7.0) >= 7.0
    assert backoff_delay(1, 0.5, 30.0, retry_after=3600.0) == 30.0


def test_a_resumed_run_does_not_send_a_reported_step_twice(reporting_client, tmp_path):
    steps = fresh_steps(reporting_client, 2)
    task = task_ids(reporting_client, 1)[0]
    first = StepReporter(reporting_client, str(tmp_path))
    for s in steps:
        first.report(s, {task: [0.5, 0.5]}, policy_version="run-1")
    assert first.close(timeout=60) is True
    resumed = StepReporter(reporting_client, str(tmp_path))
    # The resumed run trains steps[1] again, with other rewards: not sent, never a 409.
    assert resumed.report(steps[1], {task: [0.0, 1.0]}, policy_version="run-2") is False
    assert resumed.stats["skipped"] == 1
    (nxt,) = fresh_steps(reporting_client, 1)
    assert resumed.report(nxt, {task: [0.0, 1.0]}, policy_version="run-2") is True
    assert resumed.close(timeout=60) is True
    assert resumed.stats["sent"] == 1 and resumed.stats["conflicts"] == 0


def test_a_step_the_gateway_holds_with_another_body_is_kept_not_fatal(reporting_client, tmp_path):
    (step,) = fresh_steps(reporting_client, 1)
    task = task_ids(reporting_client, 1)[0]
    reporting_client.report_step(step, {task: [1.0, 1.0]}, policy_version="elsewhere")
    reporter = StepReporter(reporting_client, str(tmp_path))
    reporter.report(step, {task: [0.0, 0.0]}, policy_version="here")
    assert reporter.close(timeout=60) is True
    assert reporter.stats["conflicts"] == 1 and reporter.stats["rejected"] == 0 and reporter.acked == step


def test_a_step_without_rods_rows_still_closes(reporting_client, tmp_path):
    (step,) = fresh_steps(reporting_client, 1)
    reporter = StepReporter(reporting_client, str(tmp_path))
    reporter.report(step, {}, policy_version="p")
    assert reporter.close(timeout=60) is True
    answer = reporting_client.report_step(step, {}, policy_version="p")
    assert answer["duplicate"] is True and answer["groups"] == 0 and answer["close"] is True


def test_a_refused_report_is_kept_aside_and_later_steps_go_on_unless_strict(reporting_client, tmp_path):
    bad, good = fresh_steps(reporting_client, 2)
    task = task_ids(reporting_client, 1)[0]
    reporter = StepReporter(reporting_client, str(tmp_path / "lenient"))
    reporter.report(bad, {task: [0.5, 1.5]}, policy_version="p")  # 1.5: out of [0, 1], a 422
    reporter.report(good, {task: [0.5, 1.0]}, policy_version="p")
    assert reporter.close(timeout=60) is True
    assert reporter.stats["rejected"] == 1 and reporter.stats["sent"] == 1
    kept = json.loads((tmp_path / "lenient" / "rejected" / f"{bad:012d}.json").read_text())
    assert kept["status"] == 422 and kept["body"]["groups"][0]["rewards"] == [0.5, 1.5]

    (strict_step,) = fresh_steps(reporting_client, 1)
    strict = StepReporter(reporting_client, str(tmp_path / "strict"), strict=True)
    with pytest.raises(RodsError) as refused:
        strict.report(strict_step, {task: [2.0]}, policy_version="p")
    assert refused.value.status == 422
    with pytest.raises(ValueError, match="not a finite number"):
        strict.report(strict_step + 1, {task: [float("nan")]}, policy_version="p")
    strict.close(timeout=5)
