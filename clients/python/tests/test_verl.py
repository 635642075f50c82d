"""rods_client.verl's parts that need neither torch nor verl, against the real gateway and the real
environment executor. verl's own classes drive the rest in clients/python/verl.e2e.test.ts
(tests/verl/test_verl_v1.py, in the verl venv)."""

import json
import os
import socket
import types
import urllib.request

import pytest

from rods_client import RodsClient, bfcl
from rods_client.reporting import StepReporter, checkpoint_digest
from rods_client.verl import DATA_SOURCE, RodsCheckpointCallback, RodsDataset, compute_score, response_calls

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
    config = {"train_batch_size": 3, "seed": 2, "train_files": "t", "val_files": "v", "rods": {"poll_seconds": 1},
              "shuffle": False}
    with pytest.raises(ValueError, match="data.shuffle=false"):  # verl's default, refused before any request
        RodsDataset(data_files="t", config={**config, "shuffle": True}, client=verl_client)
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


def test_the_checkpoint_callback_reports_each_save_and_finds_the_checkpoint_verl_resumes_from(verl_client, tmp_path):
    # The gateway is down here: what is checked is what the callback spools (the reporter's own
    # tests send it); the spool's sender never reaches a closed port.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    down = RodsClient(f"http://127.0.0.1:{s.getsockname()[1]}", verl_client.token, verl_client.campaign, retries=0)
    s.close()
    root = tmp_path / "ckpts"
    config = {"trainer": {"default_local_dir": str(root), "resume_mode": "auto",
                          "v1": {"sampler": {"sampler_kwargs": {"checkpoint_digest": True}}}}}
    callback = RodsCheckpointCallback(config=config)  # as verl builds it: cls(config=config)
    assert callback.run_id.startswith("run-") and callback.resumed_from(verl_client.campaign) is None
    reporter = StepReporter(down, str(tmp_path / "spool"), backoff=0.05, max_backoff=0.1)
    trainer = types.SimpleNamespace(replay_buffer=types.SimpleNamespace(reporter=reporter))
    folder = root / "global_step_5"
    (folder / "actor").mkdir(parents=True)
    (folder / "actor" / "model.pt").write_bytes(b"weights")
    (folder / "data.pt").write_bytes(b"loader")
    callback.on_save(trainer=trainer, global_step=5, checkpoint_dir=str(folder), async_save=False)
    (root / "latest_checkpointed_iteration.txt").write_text("5")  # verl writes it before on_save
    record = json.loads((folder / "rods-checkpoint.json").read_text())
    assert record == {"campaign": verl_client.campaign, "checkpointId": f"{callback.run_id}-step-5",
                      "runId": callback.run_id, "step": 5, "resumedFrom": None,
                      "digest": checkpoint_digest(str(folder))}
    assert reporter.pending_checkpoints == [record["checkpointId"]]
    spooled = json.loads((tmp_path / "spool" / "checkpoints" / f"{5:012d}.{record['checkpointId']}.json").read_text())
    assert spooled["body"] == {"checkpointId": record["checkpointId"], "runId": callback.run_id, "step": 5,
                               "resumedFrom": None, "digest": record["digest"], "retrainedSteps": []}
    reporter.close(timeout=0.2)

    # A restart with resume_mode auto resumes from global_step_5: its checkpoints name it.
    resumed = RodsCheckpointCallback(config=config)
    reporter = StepReporter(down, str(tmp_path / "spool"), backoff=0.05, max_backoff=0.1)
    trainer = types.SimpleNamespace(replay_buffer=types.SimpleNamespace(reporter=reporter))
    (root / "global_step_6").mkdir()
    resumed.on_save(trainer=trainer, global_step=6, checkpoint_dir=str(root / "global_step_6"), async_save=True)
    assert resumed.run_id != callback.run_id
    assert resumed.checkpoints[0]["resumedFrom"] == record["checkpointId"]
    assert resumed.checkpoints[0]["digest"] is None  # async_save: the files may still be in flight
    assert reporter.pending_checkpoints == [record["checkpointId"], f"{resumed.run_id}-step-6"]
    reporter.close(timeout=0.2)
    path_mode = {"trainer": {"resume_mode": "resume_path", "resume_from_path": str(folder)}}
    assert RodsCheckpointCallback(config=path_mode).resumed_from(verl_client.campaign) == record["checkpointId"]
    assert RodsCheckpointCallback(config={"trainer": {"resume_mode": "disable", "default_local_dir": str(root)}}
                                  ).resumed_from(verl_client.campaign) is None
    assert os.path.exists(folder / "rods-checkpoint.json")


def test_compute_score_of_an_agent_loop_episode_is_the_progress_reward_of_its_turns(verl_client):
    # What verl's reward loop hands over for a RodsBfclAgentLoop episode: its calls per user turn.
    with urllib.request.urlopen(f"{EXECUTOR}/seeds?category=base&limit=1") as r:
        task = json.loads(r.read())["seeds"][0]
    turns = [[bfcl.call_string(c["name"], c["arguments"]) for c in bfcl.ground_truth_tool_calls(task, t)]
             for t in range(len(task["ground_truth"]))]
    n = len(turns)
    extra = {"task": json.dumps(task), "rods_calls": turns}
    assert compute_score(DATA_SOURCE, "", None, extra) == {"score": 1.0, "tool_calls": sum(map(len, turns))}
    skipped = turns[:-1] + [[]]  # the last turn unanswered: the earlier turns keep their state
    assert compute_score(DATA_SOURCE, "", None, dict(extra, rods_calls=skipped))["score"] == (n - 1) / n
