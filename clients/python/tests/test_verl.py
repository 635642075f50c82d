"""rods_client.verl's parts that need neither torch nor verl, against the real gateway and the real
environment executor. verl's own classes drive the rest in clients/python/verl.e2e.test.ts
(tests/verl/test_verl_v1.py, in the verl venv)."""

import json
import urllib.request

from rods_client import bfcl
from rods_client.verl import DATA_SOURCE, RodsDataset, compute_score, response_calls

EXECUTOR = "http://127.0.0.1:7300"


def test_response_calls_are_parsed_json_never_evaluated():
    text = ('<tool_call>{"name": "cd", "arguments": {"folder": "docs"}}</tool_call> then '
            '<tool_call>{"name": "ls", "arguments": "{}"}</tool_call> <tool_call>__import__("os")</tool_call>'
            '<tool_call>{"name": ["x"], "arguments": {}}</tool_call>')
    assert response_calls(text) == ["cd(folder='docs')", "ls()"]
    assert response_calls("") == [] and response_calls(None) == []


def test_compute_score_is_bfcls_first_turn_check(verl_client):
    with urllib.request.urlopen(f"{EXECUTOR}/seeds?category=base&limit=1") as r:
        task = json.loads(r.read())["seeds"][0]
    blocks = ["<tool_call>" + json.dumps(call) + "</tool_call>" for call in bfcl.ground_truth_tool_calls(task, 0)]
    extra = {"task": json.dumps(task)}
    assert compute_score(DATA_SOURCE, "\n".join(blocks), None, extra) == {"score": 1.0, "tool_calls": len(blocks)}
    assert compute_score(DATA_SOURCE, "\n".join(blocks[:-1]), None, extra)["score"] == 0.0
    assert compute_score(DATA_SOURCE, "no calls", None, extra) == {"score": 0.0, "tool_calls": 0}


def test_dataset_serves_distinct_tasks_of_the_live_pool_per_batch_and_keeps_its_draws(verl_client):
    config = {"train_batch_size": 3, "seed": 2, "train_files": "t", "val_files": "v", "rods": {"poll_seconds": 1}}
    dataset = RodsDataset(data_files="t", config=config, client=verl_client)
    pool = verl_client.fetch_pool()
    ids = {t["taskId"] for t in pool["tasks"]}
    rows = [dataset[i] for i in range(6)]
    for batch in (rows[:3], rows[3:]):
        assert len({r["extra_info"]["rods_task_id"] for r in batch}) == 3  # distinct within a batch
    assert all(r["extra_info"]["rods_task_id"] in ids and r["data_source"] == DATA_SOURCE for r in rows)
    assert rows[0]["raw_prompt"][0]["role"] == "user" and rows[0]["reward_model"]["ground_truth"]
    assert [r["index"] for r in rows] == list(range(6))
    state = dataset.state_dict()
    again = RodsDataset(data_files="t", config=config, client=verl_client)
    again.load_state_dict(state)
    assert again.draws == 6
    assert [again[i]["extra_info"]["rods_task_id"] for i in range(3)] == [dataset[i]["extra_info"]["rods_task_id"]
                                                                          for i in range(3)]
    val = RodsDataset(data_files="v", config=config, client=verl_client)
    assert val.validation and len(val) == len(pool["tasks"])
    for d in (dataset, again, val):
        d.close()
