"""Exercises rods_client against a real gateway (run by clients/python/client.int.test.ts).

Environment: RODS_GATEWAY_URL, RODS_TOKEN, RODS_CAMPAIGN. Prints one JSON line with what it saw.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rods_client import RodsClient, RodsError  # noqa: E402

rods = RodsClient(os.environ["RODS_GATEWAY_URL"], os.environ["RODS_TOKEN"], os.environ["RODS_CAMPAIGN"])
out = {}

pool = rods.fetch_pool()
deadline = time.time() + 60
while not pool["tasks"] and time.time() < deadline:
    time.sleep(0.5)
    pool = rods.fetch_pool()
out["version"] = pool["version"]
out["tasks"] = len(pool["tasks"])
again = rods.fetch_pool()
out["cached_same_object"] = again is pool  # a 304 returns the cached pool

task_ids = [t["taskId"] for t in pool["tasks"]]
first = rods.report_step(1, {t: [0.5] * 16 for t in task_ids}, policy_version="py-1")
out["first_report"] = {"duplicate": first.get("duplicate"), "groups": first.get("groups")}
dup = rods.report_step(1, {t: [0.5] * 16 for t in task_ids}, policy_version="py-1")
out["second_report_duplicate"] = dup.get("duplicate")

try:
    rods.report_step(2, {task_ids[0]: [0.5, 1.5]}, policy_version="py-2")
    out["bad_reward"] = None
except RodsError as e:
    out["bad_reward"] = {"status": e.status, "fields": [x.get("field") for x in e.problem.get("errors", [])]}

b1 = rods.fetch_batch(5, seed=7)
b2 = rods.fetch_batch(5, seed=7)
out["batch_size"] = len(b1["tasks"])
out["batch_deterministic"] = [t["taskId"] for t in b1["tasks"]] == [t["taskId"] for t in b2["tasks"]]

try:
    RodsClient(os.environ["RODS_GATEWAY_URL"], "wrong-token", os.environ["RODS_CAMPAIGN"]).fetch_pool()
    out["wrong_token"] = None
except RodsError as e:
    out["wrong_token"] = e.status

print(json.dumps(out))
