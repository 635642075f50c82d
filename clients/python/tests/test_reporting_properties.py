"""Property-based test of the report spool (rods_client.reporting.StepReporter): random trainings
against a model of the gateway's contract, with refused and held steps, checkpoints (resumed from
earlier ones, carrying the steps a resumed run trained again), gateway outages and kills of the
trainer process at any operation of the spool or the client.

A kill is simulated: every file operation of the reporting module that changes the spool (rename
into place, unlink, fsync) and every request of the client is a kill point; at the chosen one it
raises ``Killed``, a BaseException nothing in the reporter catches, so the thread doing it (the
sender, or the trainer in ``report``/``checkpoint``) dies mid-operation, and from then on every
such operation of that process raises too, as if the process were gone. The test then abandons the
reporter and starts a new one on the same spool folder, as a restarted trainer does, and the
trainer resumes from one of its saved checkpoints.

Examples: ``RODS_PROPERTY_EXAMPLES`` (default 100, a few seconds; the chaos soak runs thousands).
Run alone (from the checkout, on its own rods_client): ``PYTHONPATH=clients/python
.stack/client-venv/bin/python -m pytest clients/python/tests/test_reporting_properties.py``.
"""

import copy
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from rods_client import RodsClient, RodsError
from rods_client import reporting
from rods_client.reporting import StepReporter

EXAMPLES = int(os.environ.get("RODS_PROPERTY_EXAMPLES", "100"))
# Hypothesis's own cache (its examples database is off below) outside the checkout.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "rods-hypothesis"))
CAMPAIGN = "model-campaign"
POOL = ("t1", "t2", "t3")
# Retries within milliseconds: Retry-After is capped by max_backoff.
BACKOFF, MAX_BACKOFF = 0.0005, 0.002
_HELD = ("urn:rods:problem:batch-conflict", "urn:rods:problem:step-closed")
_FINAL_CHECKPOINT = (200, 201, 409, 422)


class Killed(BaseException):
    """The trainer process was killed (kill -9) at this operation."""


class Process:
    """One trainer process: it dies at its ``countdown``-th kill point once armed, or when killed."""

    def __init__(self, countdown=None):
        self.lock = threading.Lock()
        self.countdown = countdown
        self.dead = False

    def point(self, what):
        with self.lock:
            if self.dead:
                raise Killed(what)
            if self.countdown is not None:
                self.countdown -= 1
                if self.countdown <= 0:
                    self.dead = True
                    raise Killed(what)

    def kill(self):
        with self.lock:
            self.dead = True


class GatewayContractModel:
    """A model of the gateway's contract for step reports and checkpoints, in process, with no HTTP.

    Why a model and not the gateway: thousands of random sequences with kills need a gateway whose
    steps close in microseconds and whose every answer can be checked at the moment it is given;
    the real gateway closes steps through Kafka and the aggregator (seconds per step). The real
    gateway's side of these rules is tested in the TypeScript integration tests
    (entry/gateway/gateway.int.test.ts: duplicates, batch-conflict, step-closed;
    entry/gateway/limits.int.test.ts: step-behind; stages/aggregator/missing-step.int.test.ts: the
    move-on and wait policies; entry/gateway/checkpoints.int.test.ts and
    checkpoints-history.int.test.ts: the checkpoint route's 503, 409 and 422 rules and random
    training histories) and end to end with checkpoints in clients/python/trl.e2e.test.ts;
    tests/test_reporting.py runs the reporter against the real gateway.

    The rules, as entry/gateway/ingest.ts and entry/gateway/routes/checkpoints.ts answer:

    * a step's batch: the same (step, batch id) with the same body again is a 200 duplicate, with
      another body a 409 batch-conflict; a closed step a 409 step-closed; a new step behind the last
      closed one a 409 step-behind; a task never in the pool a 422; else it is accepted, and its
      closing batch closes the step (here at once).
    * missing steps (``policy``): under ``move-on`` a step not closed is closed as skipped once
      ``after`` later steps have closed; under ``wait`` it never closes.
    * a checkpoint: its id recorded with the same body is a 200 duplicate, with another a 409
      checkpoint-conflict; while a step up to its own is not closed, 503 checkpoint-ahead with
      Retry-After; a ``resumedFrom`` never recorded, 422 unknown-checkpoint; else 201 recorded.
    * outages: the next requests in ``outage`` fail, each with its status (0: unreachable).

    Not modelled: the forward window (422 step-out-of-window; the trainer's steps are consecutive).
    ``on_step`` and ``on_checkpoint`` are called with each request as it arrives, for checks of the
    spool at that moment.
    """

    def __init__(self, policy, after):
        self.lock = threading.Lock()
        self.policy, self.after = policy, after
        self.batches = {}  # step -> (batch id, body) accepted
        self.closed = {}  # step -> "batch" | "skipped"
        self.checkpoints = {}  # id -> recorded body
        self.outage = []  # statuses of the next failing requests
        self.step_posts = []  # the reporter's: (step, body, status, problem type)
        self.checkpoint_posts = []  # the reporter's: (body, status, problem type)
        self.log = []  # both, in order: ("step", step, status) | ("checkpoint", id, status)
        self.on_step = self.on_checkpoint = None

    @staticmethod
    def _problem(status, kind, detail):
        return status, {"type": f"urn:rods:problem:{kind}", "title": kind, "status": status, "detail": detail}

    def _fail(self):
        status = self.outage.pop(0)
        if status == 0:
            return 0, {"title": "gateway unreachable: [Errno 111] Connection refused"}
        return self._problem(status, "unavailable", "injected outage")

    def post_step(self, step, body):
        with self.lock:
            if self.on_step:
                self.on_step(step, body)
            status, answer = self._fail() if self.outage else self._step(step, body)
            self.step_posts.append((step, copy.deepcopy(body), status, answer.get("type")))
            self.log.append(("step", step, status))
        if status >= 400 or status == 0:
            raise RodsError(status, answer, 1.0 if status in (429, 503) else None)
        return answer

    def _step(self, step, body):
        held = self.batches.get(step)
        if held is not None and held[0] == body["batchId"]:
            if held[1] == body:
                return 200, {"duplicate": True, "groups": len(body["groups"]), "close": True}
            return self._problem(409, "batch-conflict", f"batch {body['batchId']} of step {step} has another body")
        if step in self.closed:
            return self._problem(409, "step-closed", f"step {step} is already closed")
        if self.closed and step < max(self.closed):
            return self._problem(409, "step-behind", f"step {step} is behind the last closed step")
        unknown = [g["taskId"] for g in body["groups"] if g["taskId"] not in POOL]
        if unknown:
            return self._problem(422, "validation", f"tasks not in the pool: {unknown}")
        self.batches[step] = (body["batchId"], copy.deepcopy(body))
        if body.get("close"):
            self._close(step, "batch")
        return 202, {"duplicate": False, "groups": len(body["groups"]), "close": bool(body.get("close"))}

    def _close(self, step, how):
        self.closed[step] = how
        while self.policy == "move-on":
            skip = [m for m in range(1, max(self.closed)) if m not in self.closed
                    and sum(1 for s in self.closed if s > m) >= self.after]
            if not skip:
                break
            for m in skip:
                self.closed[m] = "skipped"

    def post_checkpoint(self, body):
        with self.lock:
            if self.on_checkpoint:
                self.on_checkpoint(body)
            status, answer = self._fail() if self.outage else self._checkpoint(body)
            self.checkpoint_posts.append((copy.deepcopy(body), status, answer.get("type")))
            self.log.append(("checkpoint", body["checkpointId"], status))
        if status >= 400 or status == 0:
            raise RodsError(status, answer, 2.0 if status in (429, 503) else None)
        return answer

    def _checkpoint(self, body):
        steps = [r["step"] for r in body["retrainedSteps"]]
        if steps != sorted(set(steps)) or any(s > body["step"] or s < 1 for s in steps):
            return self._problem(422, "validation", f"invalid retrainedSteps {steps}")
        recorded = self.checkpoints.get(body["checkpointId"])
        if recorded is not None:
            if recorded != body:
                return self._problem(409, "checkpoint-conflict", f"{body['checkpointId']} has another body")
            return 200, {"checkpointId": body["checkpointId"], "duplicate": True}
        if self.blocked(body["step"]):
            return self._problem(503, "checkpoint-ahead", f"steps up to {body['step']} are not all closed")
        if body.get("resumedFrom") is not None and body["resumedFrom"] not in self.checkpoints:
            return self._problem(422, "unknown-checkpoint", f"no checkpoint {body['resumedFrom']}")
        self.checkpoints[body["checkpointId"]] = copy.deepcopy(body)
        return 201, {"checkpointId": body["checkpointId"], "duplicate": False}

    def blocked(self, step):
        return any(s not in self.closed for s in range(1, step + 1))

    # Another process of the campaign.
    def foreign_step(self, step, same_batch_id):
        with self.lock:
            if step not in self.closed and step not in self.batches:
                body = RodsClient.step_body(step, {"t1": [1.0]}, "elsewhere",
                                            batch_id=None if same_batch_id else f"elsewhere-{step}")
                self._step(step, body)

    def foreign_checkpoint(self, checkpoint_id, step):
        with self.lock:
            if checkpoint_id not in self.checkpoints:
                self.checkpoints[checkpoint_id] = RodsClient.checkpoint_body(checkpoint_id, "elsewhere", step,
                                                                            digest="sha256:" + "f" * 64)


class ModelClient:
    """What StepReporter needs of RodsClient, answered by the model; each request is two kill
    points: before it leaves, and after the gateway answered but before the answer is read."""

    def __init__(self, gateway, process):
        self.campaign = CAMPAIGN
        self.gateway, self.process = gateway, process

    def _call(self, handle):
        self.process.point("request")
        try:
            answer = handle()
        except RodsError:
            self.process.point("answer")
            raise
        self.process.point("answer")
        return answer

    def post_step(self, step, body, retries=None):
        return self._call(lambda: self.gateway.post_step(step, copy.deepcopy(body)))

    def post_checkpoint(self, body, retries=None):
        return self._call(lambda: self.gateway.post_checkpoint(copy.deepcopy(body)))


class SpoolWatch:
    """The reporting module's ``os``: renames into place, unlinks and fsyncs are kill points of the
    current process (fsync without syncing: a kill is simulated, not a power cut), and every file
    renamed into or unlinked from the spool is logged in order with its content."""

    def __init__(self, root, caller):
        self.root, self.caller = root, caller
        self.process = Process()
        self.lock = threading.Lock()
        self.events = []  # (seq, "write" | "unlink", folder, name, content)

    def __getattr__(self, name):
        return getattr(os, name)

    def _point(self, what):
        t = threading.current_thread()
        if t is self.caller or t.name == f"rods-reporter-{CAMPAIGN}":
            self.process.point(what)

    def _where(self, path):
        rel = os.path.relpath(path, self.root)
        folder, name = os.path.split(rel)
        return folder, name

    @staticmethod
    def _read(path):
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _apply(self, kind, path, content, operation):
        folder, name = self._where(path)
        with self.lock:  # logged in the order the operations took effect
            operation()
            self.events.append((len(self.events), kind, folder, name, content))

    def fsync(self, fd):
        self._point("fsync")

    def replace(self, src, dst):
        self._point(f"rename {dst}")
        self._apply("write", dst, self._read(src), lambda: os.replace(src, dst))

    def unlink(self, path):
        self._point(f"unlink {path}")
        self._apply("unlink", path, self._read(path), lambda: os.unlink(path))

    def listing(self, folder):
        return [n for n in os.listdir(os.path.join(self.root, folder)) if n.endswith(".json") and not n.startswith(".")]


@contextmanager
def watched_spool(root, caller):
    """The reporting module's ``os`` replaced by a SpoolWatch; sender threads' exceptions other than
    Killed collected; the rods_client logger quiet (a parked checkpoint retried every millisecond)."""
    watch = SpoolWatch(root, caller)
    errors = []
    hook, logger = threading.excepthook, logging.getLogger("rods_client")
    level = logger.level

    def excepthook(args):
        if not issubclass(args.exc_type, Killed):
            errors.append(args)

    reporting.os = watch
    threading.excepthook = excepthook
    logger.setLevel(logging.CRITICAL)
    try:
        yield watch, errors
    finally:
        reporting.os = os
        threading.excepthook = hook
        logger.setLevel(level)


class Trainer:
    """A trainer that reports each step and saves checkpoints through a StepReporter, is killed or
    restarted, and resumes from one of its saved checkpoints (or from scratch)."""

    def __init__(self, gateway, watch, root):
        self.gateway, self.watch, self.root = gateway, watch, root
        self.runs = self.kills = 0
        self.saved = []  # (checkpoint id, step): the checkpoint folders saved
        self.retrained = []  # (reporter session, step): steps trained again, as the reporter learnt
        self.reporter = None
        self.resume_on_death = 0  # which saved checkpoint a killed process resumes from
        self.start(None, None)

    def start(self, resume, die_at):
        """A new process (dying at its ``die_at``-th kill point, startup included) resumed from
        ``resume`` (checkpoint id, step), or from scratch."""
        while True:
            self.runs += 1
            self.run_id = f"r{self.runs}"
            self.t = resume[1] if resume else 0
            self.resumed_from = resume[0] if resume else None
            self.checkpointed = set()
            process = Process(die_at or None)
            self.watch.process = process
            self.process = process
            try:
                self.reporter = StepReporter(ModelClient(self.gateway, process), self.root, backoff=BACKOFF,
                                             max_backoff=MAX_BACKOFF)
                return
            except Killed:
                note(f"killed while starting run {self.run_id}")
                self.reporter, die_at = None, None

    def stop(self, kill):
        """Kills the process (or closes its reporter) and waits until its sender thread is gone."""
        r = self.reporter
        if kill or self.process.dead:
            self.kills += 1
            self.process.kill()
            if r is not None:
                with r._cond:
                    r._closed = True  # a sender waiting for work ends as it would with the process
                    r._cond.notify_all()
        elif r is not None:
            r.close(timeout=0)
        if r is not None:
            r._thread.join(10)
            assert not r._thread.is_alive(), "the old sender thread is still running"
        self.reporter = None

    def restart(self, kill, resume_index, die_at):
        self.stop(kill)
        resume = None
        if resume_index >= 0 and self.saved:
            resume = self.saved[-1 - resume_index % len(self.saved)]
        note(f"restart ({'kill' if kill else 'close'}) from {resume}, dying at {die_at}")
        self.start(resume, die_at)

    def call(self, what, *args, **kwargs):
        try:
            return getattr(self.reporter, what)(*args, **kwargs)
        except Killed:
            return Killed

    def step(self, kind):
        self.t += 1
        groups = {"ok": {POOL[self.t % 3]: [0.5, float(self.runs % 2)], POOL[(self.t + 1) % 3]: [1.0]},
                  "refused": {"not-in-pool": [0.5]}, "empty": {}}[kind]
        if self.call("report", self.t, groups, policy_version=self.run_id) is False:
            self.retrained.append((self.reporter.session, self.t))  # skipped: reported before

    def checkpoint(self):
        if self.t < 1 or self.t in self.checkpointed:
            return
        checkpoint_id = f"{self.run_id}-step-{self.t}"
        self.checkpointed.add(self.t)
        # As the adapters do: the checkpoint's folder (with its rods-checkpoint.json) is saved
        # before the checkpoint is spooled, so a run may resume from one that was never reported.
        self.saved.append((checkpoint_id, self.t))
        self.call("checkpoint", self.t, checkpoint_id, self.run_id, resumed_from=self.resumed_from)

    def settle(self, timeout=3.0):
        """Until every report was answered and the first checkpoint, if any, is parked."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.process.dead:
            r = self.reporter
            if not r.pending:
                head, parked = r.pending_checkpoints[:1], r.waiting()[:1]
                if not head or [w["checkpointId"] for w in parked] == head:
                    return
            time.sleep(0.001)


def _step_of(name):
    return int(name.split(".")[0])


_ACTIONS = {
    "step": st.tuples(st.just("step"), st.sampled_from(["ok", "ok", "ok", "refused", "empty"])),
    "checkpoint": st.tuples(st.just("checkpoint")),
    # Another process closes the step after next (or the one after): the trainer's report of it is held.
    "foreign_step": st.tuples(st.just("foreign_step"), st.integers(1, 2), st.booleans()),
    # Another process records the id of the trainer's next checkpoint with another body: a 409.
    "foreign_checkpoint": st.tuples(st.just("foreign_checkpoint")),
    "outage": st.tuples(st.just("outage"), st.lists(st.sampled_from([0, 503, 429, 403, 401]), min_size=1,
                                                    max_size=8)),
    # The process dies at its n-th kill point from now, then resumes from a saved checkpoint.
    "arm": st.tuples(st.just("arm"), st.integers(1, 40), st.integers(-1, 4)),
    # Killed or closed now; the next process resumes from a saved checkpoint (-1: from scratch)
    # and dies at its n-th kill point (0: not), its start included.
    "restart": st.tuples(st.just("restart"), st.booleans(), st.integers(-1, 4), st.integers(0, 8)),
    # The sender catches up: every report answered, the first checkpoint answered or parked.
    "settle": st.tuples(st.just("settle")),
}
_WEIGHTS = ["step"] * 10 + ["checkpoint"] * 4 + ["arm"] * 2 + ["foreign_step", "foreign_checkpoint", "outage",
                                                                 "restart", "settle"]


@st.composite
def trainings(draw):
    policy = draw(st.sampled_from(["move-on", "wait"]))
    after = draw(st.integers(1, 3))
    action = st.sampled_from(_WEIGHTS).flatmap(lambda kind: _ACTIONS[kind])
    return policy, after, draw(st.lists(action, min_size=5, max_size=60))


def check_spool(gateway, watch, root, final_waiting, violations, retrained):
    """The invariants, once the last reporter is stopped."""
    assert not violations, violations
    assert watch.listing("pending") == [], "a report was never answered"

    writes = {}  # (folder, name) -> [contents]
    for _, kind, folder, name, content in watch.events:
        if kind == "write":
            writes.setdefault((folder, name), []).append(content)
    rejected = set(watch.listing("rejected"))

    # Reports: spooled once with one body, every post of it that body, in step order, each answered.
    posts = {}
    for step, body, status, kind in gateway.step_posts:
        posts.setdefault(step, []).append((body, status, kind))
    for (folder, name), contents in writes.items():
        if folder != "pending":
            continue
        step, body = _step_of(name), contents[0]["body"]
        assert all(c["body"] == body for c in contents), f"step {step} spooled with two bodies"
        sent = posts.get(step)
        assert sent, f"step {step} was spooled and never sent"
        assert all(b == body for b, _, _ in sent), f"step {step} sent with another body than it was spooled with"
        _, status, kind = sent[-1]
        if status in (200, 202):
            assert gateway.batches[step] == (body["batchId"], body), f"step {step} accepted, not held by the model"
        elif status == 409 and kind in _HELD:
            assert f"{step:012d}.json" not in rejected
            retrained.append((contents[0]["session"], step))  # held: trained again by its run
        else:
            assert status in (409, 422), f"step {step}: last answer {status} {kind} is not a final one"
            kept = json.load(open(os.path.join(root, "rejected", f"{step:012d}.json"), encoding="utf-8"))
            assert kept["body"] == body and kept["status"] == status

    # Retrained records: every version written, and when it stopped being the file's content.
    records = {}  # record id -> (step, session, groups, written seq, gone seq)
    current = {}  # file name -> record id
    for seq, kind, folder, name, content in watch.events:
        if folder != "retrained":
            continue
        before = current.pop(name, None)
        if before is not None:
            records[before] = records[before][:4] + (seq,)
        if kind == "write":
            current[name] = content["recordId"]
            records[content["recordId"]] = (content["step"], content["session"], content["groups"], seq, None)

    # Checkpoints: body fixed (retrainedSteps once, with its claims), sent with it, answered.
    claimed_by = {}
    fixed_at = {}  # checkpoint file name -> seq claims were fixed
    spooled = {}
    for seq, kind, folder, name, content in watch.events:
        if folder != "checkpoints" or kind != "write":
            continue
        first = spooled.setdefault(name, content)
        assert content["session"] == first["session"] and content["step"] == first["step"]
        body = dict(content["body"], retrainedSteps=first["body"]["retrainedSteps"])
        assert body == first["body"], f"checkpoint {name}: its body changed in the spool"
        if content["claims"] is None:
            assert name not in fixed_at, f"checkpoint {name}: its claims were fixed, then dropped"
            continue
        if name not in fixed_at:
            fixed_at[name] = seq
            spooled[name] = content
            for _, record_id in content["claims"]:
                claimed_by.setdefault(record_id, set()).add(content["body"]["checkpointId"])
        else:
            assert content["claims"] == spooled[name]["claims"], f"checkpoint {name}: its claims changed"
            assert content["body"] == spooled[name]["body"], f"checkpoint {name}: its body changed"
    for record_id, holders in claimed_by.items():
        assert len(holders) == 1, f"retrained record {record_id} claimed by {sorted(holders)}"

    answers = {}
    for body, status, kind in gateway.checkpoint_posts:
        answers.setdefault(body["checkpointId"], []).append((body, status, kind))
    left = set(watch.listing("checkpoints"))
    blocking = [m for m in range(1, max(gateway.closed, default=0) + 1) if m not in gateway.closed]
    for name, content in spooled.items():
        checkpoint_id, step = content["body"]["checkpointId"], content["step"]
        for step_claimed, record_id in content["claims"] or []:
            r = records[record_id]
            assert r[1] == content["session"] and r[0] == step_claimed <= step, f"{name} claims {record_id}"
        if content["claims"] is not None:
            assert content["body"]["retrainedSteps"] == [{"step": records[i][0], "groups": records[i][2]}
                                                         for _, i in content["claims"]]
        sent = answers.get(checkpoint_id, [])
        assert all(b == content["body"] for b, _, _ in sent), f"checkpoint {checkpoint_id} sent with another body"
        if name in left:
            # Still waiting: only under `wait`, for a step the model never closes.
            assert gateway.policy == "wait" and blocking and step >= blocking[0], \
                f"checkpoint {checkpoint_id} (step {step}) still waits; open steps {blocking[:5]}"
            continue
        assert sent and sent[-1][1] in _FINAL_CHECKPOINT, f"checkpoint {checkpoint_id} was never answered"
        status = sent[-1][1]
        if status == 422:
            kept = json.load(open(os.path.join(root, "rejected", f"{step:012d}.ckpt-{checkpoint_id}.json"),
                                  encoding="utf-8"))
            assert kept["body"] == content["body"]
        elif status in (200, 201):
            assert gateway.checkpoints[checkpoint_id] == content["body"]
    if left:
        assert final_waiting and final_waiting[0]["type"] == "urn:rods:problem:checkpoint-ahead", final_waiting

    # No retrained record lost: each one a checkpoint of its run fixed its claims after (while the
    # record was there) is claimed, once; none claimed by an answered checkpoint is left behind.
    for record_id, (step, session, _, written, gone) in records.items():
        should = [n for n, c in spooled.items() if n in fixed_at and c["session"] == session and c["step"] >= step
                  and written < fixed_at[n] and (gone is None or fixed_at[n] < gone)]
        if should:
            assert record_id in claimed_by, f"retrained record {record_id} (step {step}) lost: {should} fixed without it"
    # Every step trained again (skipped as reported, or held) goes in a checkpoint of its run at
    # or after it, if that run spooled one.
    claims_of = {}
    for content in spooled.values():
        for step, _ in content["claims"] or []:
            claims_of.setdefault(content["session"], set()).add(step)
    for session, step in retrained:
        later = [c["body"]["checkpointId"] for n, c in spooled.items()
                 if c["session"] == session and c["step"] >= step and n in fixed_at]
        if later:
            assert step in claims_of.get(session, ()), f"retrained step {step} of {session} in none of {later}"
    answered = {c["body"]["checkpointId"] for n, c in spooled.items() if n not in left}
    for name in watch.listing("retrained"):
        holders = claimed_by.get(current.get(name), set())
        assert not holders & answered, f"retrained record {name} left behind by its answered checkpoint {holders}"


@settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(trainings())
def test_the_spool_keeps_its_guarantees_through_kills_outages_and_checkpoints_that_wait(training):
    policy, after, actions = training
    root = tempfile.mkdtemp(prefix="rods-spool-property-")
    try:
        run_training(root, policy, after, actions)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_training(root, policy, after, actions):
    gateway = GatewayContractModel(policy, after)
    violations = []

    with watched_spool(root, threading.current_thread()) as (watch, errors):
        def on_step(step, body):
            # In step order: every report of an earlier step answered before this one is sent.
            earlier = [s for s in map(_step_of, watch.listing("pending")) if s < step]
            if earlier:
                violations.append(f"step {step} sent before the reports of steps {earlier}")

        def on_checkpoint(body):
            step = body["step"]
            ahead = [s for s in map(_step_of, watch.listing("pending")) if s <= step]
            if ahead:
                violations.append(f"checkpoint {body['checkpointId']} sent before the reports of steps {ahead}")
            # In order among checkpoints: none spooled before it, of an earlier step, unanswered.
            first_write = {}
            with watch.lock:
                events = list(watch.events)
            for seq, kind, folder, name, _ in events:
                if folder == "checkpoints" and kind == "write":
                    first_write.setdefault(name, seq)
            mine = f"{step:012d}.{body['checkpointId']}.json"
            for name in watch.listing("checkpoints"):
                if name != mine and name in first_write and mine in first_write and \
                        first_write[name] < first_write[mine] and _step_of(name) <= step:
                    violations.append(f"checkpoint {body['checkpointId']} sent before {name} was answered")

        gateway.on_step, gateway.on_checkpoint = on_step, on_checkpoint
        trainer = Trainer(gateway, watch, root)
        for action in actions:
            note(f"{action} at step {trainer.t} of {trainer.run_id}")
            kind = action[0]
            if kind == "step":
                trainer.step(action[1])
            elif kind == "checkpoint":
                trainer.checkpoint()
            elif kind == "foreign_step":
                gateway.foreign_step(trainer.t + action[1], action[2])
            elif kind == "foreign_checkpoint":
                gateway.foreign_checkpoint(f"{trainer.run_id}-step-{trainer.t + 1}", trainer.t + 1)
            elif kind == "outage":
                with gateway.lock:
                    gateway.outage = list(action[1])
            elif kind == "arm":
                with trainer.process.lock:
                    trainer.process.countdown = action[1]
                trainer.resume_on_death = action[2]
            elif kind == "restart":
                trainer.restart(action[1], action[2], action[3])
            elif kind == "settle":
                trainer.settle()
            if trainer.process.dead:
                trainer.restart(True, trainer.resume_on_death, 0)

        # The end: no more kills or outages; the trainer trains on past every step the model and
        # the spool have seen (so a move-on policy closes every missing step), then its reporter settles.
        with gateway.lock:
            gateway.outage = []
        with trainer.process.lock:
            trainer.process.countdown = None
        if trainer.process.dead:
            trainer.restart(True, 0, 0)
        with gateway.lock:
            top = max([trainer.t, trainer.reporter.acked, *trainer.reporter.pending, *gateway.closed,
                       *gateway.batches])
        while trainer.t < top + after:
            trainer.step("ok")
        deadline = time.monotonic() + 10
        r = trainer.reporter
        while True:
            waiting = r.waiting()
            head = r.pending_checkpoints[:1]
            if not r.pending and (not head or (policy == "wait" and waiting and waiting[0]["checkpointId"] == head[0]
                                               and waiting[0]["type"] == "urn:rods:problem:checkpoint-ahead"
                                               and gateway.blocked(waiting[0]["step"]))):
                break
            assert time.monotonic() < deadline, (f"the reporter never settled: pending {r.pending}, checkpoints "
                                                 f"{r.pending_checkpoints}, waiting {waiting}, closed "
                                                 f"{sorted(gateway.closed)}")
            time.sleep(0.001)
        final_waiting = r.waiting()
        trainer.stop(kill=False)
        note(f"closed {sorted(gateway.closed.items())}; posts {len(gateway.step_posts)} steps, "
             f"{len(gateway.checkpoint_posts)} checkpoints")
        assert not errors, [f"{e.exc_type.__name__}: {e.exc_value}" for e in errors]
        check_spool(gateway, watch, root, final_waiting, violations, trainer.retrained)
    # What the example went through (--hypothesis-show-statistics).
    event(f"policy {policy}")
    event(f"processes: {min(trainer.runs, 5)}{'+' if trainer.runs > 5 else ''}")
    if trainer.kills:
        event("killed")
    step_kinds = {(status, kind) for _, _, status, kind in gateway.step_posts}
    checkpoint_kinds = {(status, kind) for _, status, kind in gateway.checkpoint_posts}
    for status, kind in sorted(step_kinds | checkpoint_kinds, key=str):
        what = "checkpoint" if (status, kind) in checkpoint_kinds else "step"
        event(f"a {what} answered {status} {kind or ''}".rstrip())
    if any(b["retrainedSteps"] and s in (200, 201) for b, s, _ in gateway.checkpoint_posts):
        event("a checkpoint recorded with retrained steps")
    if final_waiting:
        event("a checkpoint still waits at the end (wait policy)")
    waiting = set()
    for kind, key, status in gateway.log:
        if kind == "checkpoint":
            (waiting.discard if status in _FINAL_CHECKPOINT else waiting.add)(key)
        elif waiting:
            event("a report sent while a checkpoint waited")
            break
