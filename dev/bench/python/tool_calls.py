"""BFCL episodes played as a trainer's environment plays them (rods_client.bfcl.BfclEnvironment:
one tool call at a time, the user's turns in order, then the progress reward), with each turn's
ground-truth calls as the policy's. Run twice by dev/bench/tool-calls.ts: on executor sessions
(each call runs once) and with the histories replayed through /execute (what the client did
before sessions). Prints one JSON object.

Arguments: executor URL, episodes per category, mode (sessions | replay).
"""

import json
import sys
import time
import urllib.request

from rods_client import bfcl

url, per_category, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def health():
    with urllib.request.urlopen(url + "/health") as r:
        return json.loads(r.read())


tasks = []
for category in ("base", "miss_func", "miss_param", "long_context"):
    with urllib.request.urlopen(f"{url}/seeds?category={category}&limit={per_category}") as r:
        tasks += json.loads(r.read())["seeds"]

executor = bfcl.ExecutorClient(url)
if mode == "replay":
    executor.sessions = False  # as RODS_EXECUTOR_SESSIONS=0: the client replays each history
call_ms, score_ms, tool_calls, rewards = [], [], 0, []
executed_calls = executed_scoring = 0
for task in tasks:
    env = bfcl.environment_class(tuple(sorted(task["involved_classes"])))(executor)
    env.reset(task=task)
    before = health()["calls_executed"]
    for turn, calls in enumerate(task["ground_truth"]):
        if turn:
            env.reply_to_user("done")
        for c in bfcl.ground_truth_tool_calls(task, turn):
            started = time.perf_counter()
            getattr(env, c["name"])(**c["arguments"])
            call_ms.append((time.perf_counter() - started) * 1000)
            tool_calls += 1
    middle = health()["calls_executed"]
    started = time.perf_counter()
    rewards.append(env._progress())
    score_ms.append((time.perf_counter() - started) * 1000)
    executed_calls += middle - before
    executed_scoring += health()["calls_executed"] - middle


def pct(values, q):
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


print(json.dumps({
    "mode": mode, "episodes": len(tasks), "tool_calls": tool_calls,
    "executor_calls_per_tool_call": round(executed_calls / tool_calls, 3),
    "executor_calls_per_episode_scoring": round(executed_scoring / len(tasks), 2),
    "p50_call_ms": pct(call_ms, 0.5), "p99_call_ms": pct(call_ms, 0.99),
    "tool_calls_ms_per_episode": round(sum(call_ms) / len(tasks), 1),
    "p50_score_ms": pct(score_ms, 0.5),
    "mean_reward": round(sum(rewards) / len(rewards), 4),
}))
