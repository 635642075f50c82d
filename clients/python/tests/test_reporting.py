"""The durable report spool (rods_client.reporting) against the real gateway.

Faults come from a small proxy in front of the real gateway that answers a scripted number of
requests itself (503 or 429 with Retry-After, or a dropped connection) and forwards the rest; a
gateway that is down is a closed port. The proxy also serves POST .../checkpoints itself, by the
gateway's contract for it: 201 recorded, 200 the same body again, 409 checkpoint-conflict (the id
with another body), 422 (invalid, or unknown-checkpoint for a resumedFrom it never recorded) and
503 checkpoint-ahead with Retry-After while a step up to the checkpoint's is not closed (closed:
the steps whose closing report it saw the gateway accept or hold, and, with ``skip_after``, a step
never closed once that many later steps closed: the campaign's ingestion.missingSteps move-on,
whose StepSkipped closes it). ``checkpoint_route`` makes it answer every checkpoint with that
status instead, as an older gateway without the route does (403 for a campaign token).
"""

import hashlib
import http.server
import json
import logging
import os
import re
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
        # The checkpoint side: recorded bodies by id, every checkpoint POST as (body, status), the
        # steps closed through this proxy with their groups, and the first step a checkpoint needs
        # closed (None: the first one closed here; earlier steps are other tests').
        self.checkpoints = {}
        self.checkpoint_posts = []
        self.closed = {}
        self.closed_from = None
        # The missing-step policy move-on: a step not closed is skipped (closed, with no tasks) once
        # this many later steps closed (None: never).
        self.skip_after = None
        self.skipped = set()
        # A status every checkpoint is answered with instead of the contract (an older gateway).
        self.checkpoint_route = None
        self.lock = threading.Lock()
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
                if self.command == "POST" and self.path.endswith("/checkpoints") and proxy.checkpoint_route:
                    # What a gateway older than checkpoints answers a campaign token for the route.
                    status = proxy.checkpoint_route
                    with proxy.lock:
                        proxy.checkpoint_posts.append((json.loads(body), status))
                    self._answer(status, {"type": "urn:rods:problem:insufficient-scope", "title": "Forbidden",
                                          "status": status, "detail": f"the token's scopes do not grant POST {self.path}"},
                                 "application/problem+json")
                    return
                if self.command == "POST" and self.path.endswith("/checkpoints"):
                    status, answer = proxy.checkpoint(json.loads(body))
                    self._answer(status, answer, "application/problem+json" if status >= 400 else "application/json",
                                 retry_after=1 if status == 503 else None)
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
                proxy.saw_step(self.path, body, status, data)
                self.send_response(status)
                for k in ("Content-Type", "ETag", "Retry-After"):
                    if headers.get(k):
                        self.send_header(k, headers[k])
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _answer(self, status, answer, content_type, retry_after=None):
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()

    _STEP_PATH = re.compile(r"/steps/(\d+)/rollouts$")
    _ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")

    def saw_step(self, path, body, status, data):
        """A step the gateway accepted or holds (closed): what a checkpoint of a later step needs."""
        m = self._STEP_PATH.search(path)
        if not m or not body:
            return
        sent = json.loads(body)
        held = status == 409 and json.loads(data).get("type") in ("urn:rods:problem:step-closed",
                                                                  "urn:rods:problem:batch-conflict")
        if (status in (200, 202) and sent.get("close")) or held:
            with self.lock:
                self.closed[int(m.group(1))] = [g["taskId"] for g in sent["groups"]]
                if self.skip_after is not None:
                    first = self.closed_from if self.closed_from is not None else min(self.closed)
                    for missing in range(first, max(self.closed)):
                        if missing not in self.closed and sum(s > missing for s in self.closed) >= self.skip_after:
                            self.closed[missing] = []
                            self.skipped.add(missing)

    def checkpoint(self, body):
        """POST /v1/campaigns/{c}/checkpoints as the gateway's contract has it: (status, answer)."""
        def problem(status, kind, detail):
            return status, {"type": f"urn:rods:problem:{kind}", "title": kind, "status": status, "detail": detail}

        with self.lock:
            answer = self._checkpoint(body, problem)
            self.checkpoint_posts.append((body, answer[0]))
            return answer

    def _checkpoint(self, body, problem):
        step = body.get("step")
        ids_ok = all(isinstance(body.get(k), str) and self._ID.match(body[k]) for k in ("checkpointId", "runId"))
        retrained = body.get("retrainedSteps")
        if (not ids_ok or not isinstance(step, int) or step < 1 or not isinstance(retrained, list)
                or body.get("resumedFrom") is not None and not self._ID.match(str(body["resumedFrom"]))
                or body.get("digest") is not None and not re.match(r"^sha256:[0-9a-f]{64}$", str(body["digest"]))
                or [r["step"] for r in retrained] != sorted({r["step"] for r in retrained})
                or any(not isinstance(g.get("taskId"), str) or not isinstance(g.get("rollouts"), int)
                       for r in retrained for g in r["groups"])):
            return problem(422, "validation", f"invalid checkpoint {body}")
        recorded = self.checkpoints.get(body["checkpointId"])
        if recorded is not None and recorded != body:
            return problem(409, "checkpoint-conflict", f"checkpoint {body['checkpointId']} has another body")
        if body.get("resumedFrom") is not None and body["resumedFrom"] not in self.checkpoints:
            return problem(422, "unknown-checkpoint", f"no checkpoint {body['resumedFrom']}")
        first = self.closed_from if self.closed_from is not None else min(self.closed, default=step)
        if any(s not in self.closed for s in range(first, step + 1)):
            return problem(503, "checkpoint-ahead", f"steps up to {step} are not all closed")
        self.checkpoints[body["checkpointId"]] = body
        groups = [t for s, tasks in self.closed.items() if first <= s <= step for t in tasks]
        root = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        return (201 if recorded is None else 200), {"checkpointId": body["checkpointId"], "manifestRoot": root,
                                                    "tasks": len(set(groups)), "groups": len(groups),
                                                    "duplicate": recorded is not None}


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


# -- checkpoints -----------------------------------------------------------------------------


def checkpoint_paths(proxy):
    """The proxy's POSTs as ("step", n) and ("checkpoint", id), in the order they arrived."""
    out, bodies = [], iter(b for b, _ in proxy.checkpoint_posts)
    for path in proxy.posts:
        if path.endswith("/checkpoints"):
            out.append(("checkpoint", next(bodies)["checkpointId"]))
        else:
            out.append(("step", int(path.split("/steps/")[1].split("/")[0])))
    return out


def test_a_checkpoint_is_sent_after_the_reports_up_to_its_step_and_before_later_ones(reporting_client, proxy,
                                                                                      tmp_path):
    a, b, c = fresh_steps(reporting_client, 3)
    task = task_ids(reporting_client, 1)[0]
    proxy.closed_from = a
    # The first request waits out a 503 (Retry-After 1): everything below is spooled meanwhile,
    # checkpoints before the reports of their steps, in no order.
    proxy.faults = [("503", 1)]
    reporter = StepReporter(client_for(reporting_client, proxy.url), str(tmp_path), backoff=0.01, max_backoff=2)
    reporter.report(a, {task: [0.5, 1.0]}, policy_version="p")
    reporter.checkpoint(b, "run-1-step-b", "run-1")
    reporter.report(c, {task: [0.5, 1.0]}, policy_version="p")
    reporter.report(b, {task: [0.5, 1.0]}, policy_version="p")
    reporter.checkpoint(a, "run-1-step-a", "run-1", digest="sha256:" + "ab" * 32)
    assert reporter.pending_checkpoints == ["run-1-step-a", "run-1-step-b"]
    assert reporter.close(timeout=60) is True
    assert checkpoint_paths(proxy) == [("step", a), ("step", a), ("checkpoint", "run-1-step-a"), ("step", b),
                                       ("checkpoint", "run-1-step-b"), ("step", c)]
    assert [status for _, status in proxy.checkpoint_posts] == [201, 201]  # never ahead of the closed steps
    assert reporter.stats["checkpoints"] == 2 and reporter.stats["sent"] == 3 and reporter.stats["rejected"] == 0
    body = proxy.checkpoints["run-1-step-a"]
    assert body == {"checkpointId": "run-1-step-a", "runId": "run-1", "step": a, "resumedFrom": None,
                    "digest": "sha256:" + "ab" * 32, "retrainedSteps": []}
    assert os.listdir(tmp_path / "checkpoints") == []


def test_a_restarted_reporter_sends_a_leftover_checkpoint_in_order(reporting_client, proxy, tmp_path):
    a, b = fresh_steps(reporting_client, 2)
    task = task_ids(reporting_client, 1)[0]
    proxy.closed_from = a
    down = StepReporter(client_for(reporting_client, closed_port_url()), str(tmp_path), backoff=0.05, max_backoff=0.2)
    down.report(a, {task: [0.0, 1.0]}, policy_version="p")
    down.checkpoint(a, "run-2-step-a", "run-2")
    down.report(b, {task: [0.0, 1.0]}, policy_version="p")
    assert down.close(timeout=0.5) is False and down.stats["checkpoints"] == 0
    assert os.listdir(tmp_path / "checkpoints") == [f"{a:012d}.run-2-step-a.json"]

    up = StepReporter(client_for(reporting_client, proxy.url), str(tmp_path))
    assert up.stats["resumed"] == 2
    assert up.close(timeout=60) is True
    assert checkpoint_paths(proxy) == [("step", a), ("checkpoint", "run-2-step-a"), ("step", b)]
    assert up.stats["checkpoints"] == 1 and "run-2-step-a" in proxy.checkpoints
    assert os.listdir(tmp_path / "checkpoints") == []


def test_a_resumed_runs_retrained_steps_go_in_its_next_checkpoint_once(reporting_client, proxy, tmp_path):
    s1, s2, s3, s4, s5 = fresh_steps(reporting_client, 5)
    t1, t2 = task_ids(reporting_client, 2)
    proxy.closed_from = s1
    via_proxy = client_for(reporting_client, proxy.url)
    first = StepReporter(via_proxy, str(tmp_path))
    first.report(s1, {t1: [0.5, 0.5]}, policy_version="run-1")
    first.checkpoint(s1, "run-1-step-1", "run-1")
    first.report(s2, {t1: [0.5, 0.5]}, policy_version="run-1")
    first.report(s3, {t1: [0.5, 0.5]}, policy_version="run-1")
    assert first.close(timeout=60) is True
    assert first.stats["retrained"] == 0 and proxy.checkpoints["run-1-step-1"]["retrainedSteps"] == []
    # Another process reported s4 (with other rewards): the resumed run's report of it is held.
    via_proxy.report_step(s4, {t2: [1.0]}, policy_version="elsewhere")

    # Resumed from the checkpoint of s1: s2 and s3 are trained again (the spool skips them), s4 too.
    resumed = StepReporter(via_proxy, str(tmp_path))
    assert resumed.report(s2, {t1: [0.0, 1.0, 1.0], t2: [1.0]}, policy_version="run-2") is False
    assert resumed.report(s3, {t2: [0.0, 0.0]}, policy_version="run-2") is False
    assert resumed.report(s4, {t1: [0.0, 1.0]}, policy_version="run-2") is True
    assert resumed.retrained[:2] == [s2, s3]  # s4's once the gateway answers it
    resumed.checkpoint(s4, "run-2-step-4", "run-2", resumed_from="run-1-step-1")
    resumed.report(s5, {t1: [1.0, 1.0]}, policy_version="run-2")
    resumed.checkpoint(s5, "run-2-step-5", "run-2", resumed_from="run-1-step-1")
    assert resumed.close(timeout=60) is True
    assert resumed.stats["skipped"] == 2 and resumed.stats["conflicts"] == 1 and resumed.stats["retrained"] == 3
    assert resumed.stats["checkpoints"] == 2 and resumed.stats["rejected"] == 0
    assert proxy.checkpoints["run-2-step-4"]["resumedFrom"] == "run-1-step-1"
    assert proxy.checkpoints["run-2-step-4"]["retrainedSteps"] == [
        {"step": s2, "groups": [{"taskId": t1, "rollouts": 3}, {"taskId": t2, "rollouts": 1}]},
        {"step": s3, "groups": [{"taskId": t2, "rollouts": 2}]},
        {"step": s4, "groups": [{"taskId": t1, "rollouts": 2}]},
    ]
    # Each retrained step in exactly one checkpoint: the next one has none, and none are left over.
    assert proxy.checkpoints["run-2-step-5"]["retrainedSteps"] == [] and resumed.retrained == []
    assert os.listdir(tmp_path / "retrained") == []
    again = StepReporter(via_proxy, str(tmp_path))
    assert again.close(timeout=60) is True and len(proxy.checkpoint_posts) == 3


def test_retrained_steps_survive_a_crash_before_their_checkpoint_is_answered(reporting_client, proxy, tmp_path):
    s1, s2, s3 = fresh_steps(reporting_client, 3)
    task = task_ids(reporting_client, 1)[0]
    proxy.closed_from = s1
    first = StepReporter(client_for(reporting_client, proxy.url), str(tmp_path))
    for s in (s1, s2):
        first.report(s, {task: [0.5]}, policy_version="run-1")
    assert first.close(timeout=60) is True
    # The resumed run trains s2 again and saves a checkpoint at s3, but the gateway is down, then it dies.
    down = StepReporter(client_for(reporting_client, closed_port_url()), str(tmp_path), backoff=0.05, max_backoff=0.2)
    assert down.report(s2, {task: [1.0, 0.0]}, policy_version="run-2") is False
    down.report(s3, {task: [1.0, 0.0]}, policy_version="run-2")
    down.checkpoint(s3, "run-2-step-3", "run-2")
    assert down.close(timeout=0.5) is False
    assert os.listdir(tmp_path / "retrained") == [f"{s2:012d}.{down.session}.json"]

    # The next process on the spool sends the dead run's checkpoint with the dead run's retrained step.
    up = StepReporter(client_for(reporting_client, proxy.url), str(tmp_path))
    assert up.close(timeout=60) is True
    assert proxy.checkpoints["run-2-step-3"]["retrainedSteps"] == [{"step": s2, "groups": [{"taskId": task,
                                                                                            "rollouts": 2}]}]
    assert os.listdir(tmp_path / "retrained") == [] and up.stats["checkpoints"] == 1


def test_a_checkpoint_ahead_of_the_closed_steps_is_retried(reporting_client, proxy, tmp_path):
    a, b = fresh_steps(reporting_client, 2)
    task = task_ids(reporting_client, 1)[0]
    proxy.closed_from = a
    reporter = StepReporter(client_for(reporting_client, proxy.url), str(tmp_path), backoff=0.05, max_backoff=2)
    # Steps a and b are another process's to report: the checkpoint waits until both are closed.
    reporter.checkpoint(b, "run-3-step-b", "run-3")
    deadline = time.monotonic() + 30
    while not proxy.checkpoint_posts and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [status for _, status in proxy.checkpoint_posts] == [503]
    other = client_for(reporting_client, proxy.url)
    for s in (a, b):
        other.report_step(s, {task: [0.5, 0.5]}, policy_version="p")
    assert reporter.close(timeout=60) is True
    statuses = [status for _, status in proxy.checkpoint_posts]
    assert statuses[0] == 503 and statuses[-1] == 201 and set(statuses[1:-1]) <= {503}
    assert reporter.stats["retries"] == len(statuses) - 1 and reporter.stats["checkpoints"] == 1
    assert reporter.stats["rejected"] == 0 and "run-3-step-b" in proxy.checkpoints


def test_a_checkpoint_id_recorded_with_another_body_is_counted_and_dropped(reporting_client, proxy, tmp_path):
    a, b = fresh_steps(reporting_client, 2)
    task = task_ids(reporting_client, 1)[0]
    proxy.closed_from = a
    via_proxy = client_for(reporting_client, proxy.url)
    via_proxy.report_step(a, {task: [0.5]}, policy_version="p")
    recorded = via_proxy.post_checkpoint(RodsClient.checkpoint_body("run-4-step-a", "run-4", a))
    assert recorded["duplicate"] is False
    assert via_proxy.post_checkpoint(RodsClient.checkpoint_body("run-4-step-a", "run-4", a))["duplicate"] is True

    reporter = StepReporter(via_proxy, str(tmp_path))
    reporter.checkpoint(a, "run-4-step-a", "run-4", digest="sha256:" + "0" * 64)  # the same id, another body
    reporter.report(b, {task: [1.0]}, policy_version="p")  # and the reports after it go on
    assert reporter.close(timeout=60) is True
    assert reporter.stats["conflicts"] == 1 and reporter.stats["checkpoints"] == 0 and reporter.stats["rejected"] == 0
    assert reporter.stats["sent"] == 1 and [s for _, s in proxy.checkpoint_posts] == [201, 200, 409]
    assert proxy.checkpoints["run-4-step-a"]["digest"] is None  # the gateway keeps what it recorded
    assert os.listdir(tmp_path / "checkpoints") == [] and os.listdir(tmp_path / "rejected") == []


def test_a_refused_checkpoint_is_kept_aside_and_a_bad_one_is_refused_at_once(reporting_client, proxy, tmp_path):
    (a,) = fresh_steps(reporting_client, 1)
    task = task_ids(reporting_client, 1)[0]
    proxy.closed_from = a
    reporter = StepReporter(client_for(reporting_client, proxy.url), str(tmp_path))
    reporter.report(a, {task: [0.5]}, policy_version="p")
    reporter.checkpoint(a, "run-5-step-a", "run-5", resumed_from="never-recorded")  # 422 unknown-checkpoint
    assert reporter.close(timeout=60) is True
    assert reporter.stats["rejected"] == 1 and reporter.stats["checkpoints"] == 0
    kept = json.loads((tmp_path / "rejected" / f"{a:012d}.ckpt-run-5-step-a.json").read_text())
    assert kept["status"] == 422 and kept["problem"]["type"] == "urn:rods:problem:unknown-checkpoint"
    with pytest.raises(ValueError, match="checkpoint_id"):
        reporter.checkpoint(a, "no spaces", "run-5")
    with pytest.raises(ValueError, match="digest"):
        reporter.checkpoint(a, "run-5-x", "run-5", digest="md5:00")


# -- checkpoints that wait -------------------------------------------------------------------


def wait_until(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_later_reports_go_on_while_a_checkpoint_waits_for_a_step_only_they_can_close(reporting_client, proxy,
                                                                                     tmp_path):
    steps = fresh_steps(reporting_client, 8)
    s1, s2, later = steps[0], steps[1], steps[2:]
    task = task_ids(reporting_client, 1)[0]
    proxy.closed_from = s1
    proxy.skip_after = 3  # ingestion.missingSteps move-on after 3 later steps closed
    reporter = StepReporter(client_for(reporting_client, proxy.url), str(tmp_path), backoff=0.05, max_backoff=0.2)
    reporter.report(s1, {task: [0.5, 1.0]}, policy_version="p")
    reporter.report(s2, {"no-such-task": [0.5, 1.0]}, policy_version="p")  # 422: never in the pool
    reporter.checkpoint(s2, "run-8-step-2", "run-8")
    for s in later:
        reporter.report(s, {task: [0.5, 1.0]}, policy_version="p")
    # Step s2 closes only once 3 later steps closed: they must not wait for the checkpoint.
    assert reporter.close(timeout=30) is True, f"still pending: steps {reporter.pending}, checkpoints " \
                                               f"{reporter.pending_checkpoints}"
    order = checkpoint_paths(proxy)
    statuses = [status for _, status in proxy.checkpoint_posts]
    assert [s for kind, s in order if kind == "step"] == steps  # each report once, in step order
    # First sent once s1 and s2 were answered; the later steps went while it waited.
    assert order[:3] == [("step", s1), ("step", s2), ("checkpoint", "run-8-step-2")]
    assert statuses[0] == 503 and statuses[-1] == 201 and set(statuses[1:-1]) <= {503}
    recorded = [i for i, p in enumerate(order) if p == ("checkpoint", "run-8-step-2")][statuses.index(201)]
    assert {("step", s) for s in later[:3]} <= set(order[:recorded])
    assert proxy.skipped == {s2} and proxy.checkpoints["run-8-step-2"]["retrainedSteps"] == []
    assert reporter.stats["rejected"] == 1 and reporter.stats["sent"] == 7 and reporter.stats["checkpoints"] == 1
    assert reporter.stats["parked"] == 1 and reporter.waiting() == []
    assert json.loads((tmp_path / "rejected" / f"{s2:012d}.json").read_text())["status"] == 422
    assert os.listdir(tmp_path / "checkpoints") == [] and os.listdir(tmp_path / "pending") == []


def test_an_older_gateway_answering_403_for_checkpoints_holds_no_report(reporting_client, proxy, tmp_path, caplog):
    a, b, c = fresh_steps(reporting_client, 3)
    task = task_ids(reporting_client, 1)[0]
    proxy.closed_from = a
    proxy.checkpoint_route = 403  # no checkpoint route: the campaign token's scope check answers first
    caplog.set_level(logging.DEBUG, logger="rods_client")
    via_proxy = client_for(reporting_client, proxy.url)
    reporter = StepReporter(via_proxy, str(tmp_path), backoff=0.01, max_backoff=0.05)
    reporter.report(a, {task: [0.5]}, policy_version="p")
    reporter.checkpoint(a, "run-9-step-a", "run-9")
    reporter.report(b, {task: [0.5]}, policy_version="p")
    reporter.report(c, {task: [0.5]}, policy_version="p")
    assert wait_until(lambda: not reporter.pending), f"the reports after the checkpoint are held: {reporter.pending}"
    assert [s for kind, s in checkpoint_paths(proxy) if kind == "step"] == [a, b, c]
    assert reporter.stats["sent"] == 3 and reporter.stats["rejected"] == 0 and reporter.stats["checkpoints"] == 0
    # The checkpoint waits (an operator may yet fix a token), retried, and says why.
    assert wait_until(lambda: reporter.waiting() and reporter.waiting()[0]["attempts"] >= 21)
    assert reporter.close(timeout=0.1) is False
    (waiting,) = reporter.waiting()
    assert waiting["checkpointId"] == "run-9-step-a" and waiting["step"] == a and waiting["status"] == 403
    assert waiting["type"] == "urn:rods:problem:insufficient-scope" and "checkpoints" in waiting["detail"]
    assert time.time() - 60 < waiting["since"] <= time.time() and reporter.stats["parked"] == 1
    attempts = waiting["attempts"]
    assert len(proxy.checkpoint_posts) == attempts
    # Logged at WARNING on the first attempt and every LOG_EVERY-th, not each time.
    parks = [r for r in caplog.records if "run-9-step-a" in r.getMessage() and " waits: " in r.getMessage()]
    assert len(parks) == attempts
    loud = [r for r in parks if r.levelno == logging.WARNING]
    assert len(loud) == 1 + attempts // StepReporter.LOG_EVERY
    spooled = json.loads((tmp_path / "checkpoints" / f"{a:012d}.run-9-step-a.json").read_text())
    assert spooled["parked"]["status"] == 403 and spooled["parked"]["attempts"] == attempts // 10 * 10

    # The gateway is upgraded: the next reporter on the spool records the checkpoint.
    proxy.checkpoint_route = None
    upgraded = StepReporter(via_proxy, str(tmp_path))
    assert upgraded.close(timeout=30) is True
    assert upgraded.stats["checkpoints"] == 1 and "run-9-step-a" in proxy.checkpoints
    assert proxy.checkpoint_posts[-1][1] == 201 and os.listdir(tmp_path / "checkpoints") == []


def test_a_parked_checkpoint_survives_a_restart_and_claims_its_retrained_steps_once(reporting_client, proxy,
                                                                                    tmp_path):
    a, b, c, d, e = fresh_steps(reporting_client, 5)
    task = task_ids(reporting_client, 1)[0]
    proxy.closed_from = a
    proxy.skip_after = 3
    via_proxy = client_for(reporting_client, proxy.url)
    first = StepReporter(via_proxy, str(tmp_path))
    first.report(a, {task: [0.5]}, policy_version="run-10")
    assert first.close(timeout=60) is True
    # A run started again from scratch trains a again (skipped, recorded as retrained), its report
    # of b is refused, and it saves a checkpoint at b: ahead of the closed steps until b is skipped.
    resumed = StepReporter(via_proxy, str(tmp_path), backoff=0.05, max_backoff=0.2)
    assert resumed.report(a, {task: [1.0, 0.0]}, policy_version="run-11") is False
    resumed.report(b, {"no-such-task": [0.5]}, policy_version="run-11")
    resumed.checkpoint(b, "run-11-step-b", "run-11")
    assert wait_until(lambda: [s for _, s in proxy.checkpoint_posts] == [503])
    assert resumed.close(timeout=0.2) is False  # killed, as far as the spool can tell
    path = tmp_path / "checkpoints" / f"{b:012d}.run-11-step-b.json"
    left = json.loads(path.read_text())
    assert os.listdir(tmp_path / "retrained") == [f"{a:012d}.{resumed.session}.json"]

    # The next process on the spool sends the parked checkpoint as it was spooled, and the reports
    # of later steps while it waits: they close b (skipped), and then the checkpoint is recorded.
    restarted = StepReporter(via_proxy, str(tmp_path), backoff=0.05, max_backoff=0.2)
    for s in (c, d, e):
        restarted.report(s, {task: [0.5, 1.0]}, policy_version="run-12")
    assert restarted.close(timeout=30) is True, f"still pending: steps {restarted.pending}, checkpoints " \
                                                f"{restarted.pending_checkpoints}"
    assert [s for kind, s in checkpoint_paths(proxy) if kind == "step"][-3:] == [c, d, e]
    statuses = [s for _, s in proxy.checkpoint_posts]
    assert statuses[-1] == 201 and set(statuses[:-1]) == {503}
    # The parked checkpoint survived in its spool file: its claims, and since when and why it waited.
    assert [step for step, _ in left["claims"]] == [a]
    assert left["parked"]["attempts"] >= 1 and left["parked"]["type"] == "urn:rods:problem:checkpoint-ahead"
    (parked,) = resumed.waiting()
    assert parked["checkpointId"] == "run-11-step-b" and parked["status"] == 503 and parked["since"] == \
        left["parked"]["since"]
    # Every attempt sent the same body, and the retrained step went in it once.
    bodies = [body for body, _ in proxy.checkpoint_posts]
    assert all(body == bodies[0] for body in bodies)
    assert proxy.checkpoints["run-11-step-b"]["retrainedSteps"] == [{"step": a, "groups": [{"taskId": task,
                                                                                            "rollouts": 2}]}]
    assert restarted.stats["checkpoints"] == 1 and restarted.stats["parked"] == 1 and restarted.stats["sent"] == 3
    assert os.listdir(tmp_path / "retrained") == [] and os.listdir(tmp_path / "checkpoints") == []
    again = StepReporter(via_proxy, str(tmp_path))
    assert again.close(timeout=10) is True and len(proxy.checkpoint_posts) == len(statuses)
