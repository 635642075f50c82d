"""A trainer's BFCL environment on executor sessions (rods_client.bfcl), against the real executor
of the stack (RODS_EXECUTOR_URL, default http://127.0.0.1:7300): each tool call runs once; a
session the executor lost mid-episode (closed, expired, or the executor restarted) is opened again
with the episode's calls replayed, and the episode ends as it would have."""

import json
import os
import urllib.request

from rods_client import bfcl

URL = os.environ.get("RODS_EXECUTOR_URL") or bfcl.DEFAULT_EXECUTOR_URL


class Counting(bfcl.ExecutorClient):
    """The real client, counting the calls it asks the executor to run (the executor's own
    calls_executed counts every client's: other tests share it)."""

    sent = 0

    def _request(self, method, path, body=None):
        if body and path == "/execute":
            Counting.sent += sum(len(t) for t in body["ground_truth"])
        elif body and path.endswith("/calls"):
            Counting.sent += len(body["calls"])
        return super()._request(method, path, body)


def executed() -> int:
    return Counting.sent


def play(env, task, lose_session_at=None):
    """The task's ground-truth calls as the policy's; the session deleted behind the client's back
    before call number ``lose_session_at``. Returns each call's answer and the reward."""
    env.reset(task=task)
    answers, n = [], 0
    for turn in range(len(task["ground_truth"])):
        if turn:
            env.reply_to_user("done")
        for c in bfcl.ground_truth_tool_calls(task, turn):
            if n == lose_session_at:
                req = urllib.request.Request(f"{URL}/sessions/{env._session}", method="DELETE")
                urllib.request.urlopen(req).read()
            answers.append(getattr(env, c["name"])(**c["arguments"]))
            n += 1
    return answers, env._progress()


def test_each_tool_call_runs_once_and_a_lost_session_is_rebuilt_from_the_episode():
    task = next(t for t in bfcl_seeds("base") if sum(len(c) for c in t["ground_truth"]) >= 6)
    cls = bfcl.environment_class(tuple(sorted(task["involved_classes"])))
    calls = sum(len(c) for c in task["ground_truth"])

    bfcl.turn_scores(task, task["ground_truth"], bfcl.ExecutorClient(URL))  # the truth's run, cached
    replaying = Counting(URL)
    replaying.sessions = False  # as RODS_EXECUTOR_SESSIONS=0
    before = executed()
    expected, reward = play(cls(replaying), task)
    replayed = executed() - before

    live = Counting(URL)
    env = cls(live)
    before = executed()
    answers, live_reward = play(env, task)
    assert (answers, live_reward) == (expected, reward)
    assert live.sessions is True and env._session is None  # scored: the session was closed
    # The k-th call replayed k calls; on a session, one. The reward replays the episode once.
    assert replayed == calls * (calls + 1) // 2 + calls
    assert executed() - before == calls + calls

    # The session disappears before the 4th call: the client opens another, replays the 3 calls
    # before it, and the episode ends with the same answers and reward.
    before = executed()
    answers, lost_reward = play(cls(live), task, lose_session_at=3)
    assert (answers, lost_reward) == (expected, reward)
    # (the 4th call is asked twice: the lost session refused it with a 404, having run nothing)
    assert executed() - before == calls + 1 + 3 + calls


def bfcl_seeds(category):
    with urllib.request.urlopen(f"{URL}/seeds?category={category}&limit=50") as r:
        return json.loads(r.read())["seeds"]
