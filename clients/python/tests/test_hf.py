"""The TRL callback (rods_client.trl, also rods_client.hf) driven by transformers' own
CallbackHandler against the real gateway, where torch is absent. TRL's real GRPOTrainer runs the
same pieces in clients/python/trl.e2e.test.ts; here ``grpo_reward_call`` stands for its reward
call (each prompt repeated num_generations times, every dataset column a keyword argument, the
trainer state as ``trainer_state``)."""

import hashlib
import json
import logging
import os

import pytest
from test_reporting import FaultProxy  # the gateway's checkpoint side, faked (tests/test_reporting.py)
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

from rods_client import RodsClient
from rods_client.hf import RodsCallback, RodsPoolDataset, RodsRewardRecorder
from rods_client.reporting import checkpoint_digest
from rods_client.trl import RodsRewards, pool_rows


def grpo_reward_call(reward_fn, rows, num_generations, completions, state):
    inputs = [row for row in rows for _ in range(num_generations)]
    kwargs = {k: [x[k] for x in inputs] for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")}
    return reward_fn(prompts=[x["prompt"] for x in inputs], completions=completions, trainer_state=state, **kwargs)


def score(prompts, completions, rods_task_id, **_):
    return [float(c) for c in completions]


def test_pool_rows_carry_the_task_its_environment_and_version(hf_client):
    pool = hf_client.fetch_pool()
    rows = pool_rows(pool)
    assert len(rows) == len(pool["tasks"]) > 0
    row = rows[0]
    assert row["rods_task_id"] == pool["tasks"][0]["taskId"] and row["rods_pool_version"] == pool["version"]
    task = json.loads(row["task"])
    assert task["rods_task_id"] == row["rods_task_id"] and task["question"] and task["initial_config"] is not None
    assert row["environment"] == "+".join(sorted(task["involved_classes"])) or row["environment"] == "all"
    assert row["prompt"] and row["prompt"][0]["role"] == "user" and row["prompt"][0]["content"]


def test_callback_reports_each_step_once_through_the_spool(hf_client, tmp_path):
    recorder = RodsRewardRecorder(score)
    assert RodsRewardRecorder is RodsRewards
    callback = RodsCallback(hf_client, recorder, spool_dir=str(tmp_path / "spool"))
    assert isinstance(callback, TrainerCallback)
    handler = CallbackHandler([DefaultFlowCallback, callback], model=None, processing_class=None, optimizer=None,
                              lr_scheduler=None)
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[])
    state, control = TrainerState(logging_steps=1), TrainerControl()
    handler.on_train_begin(args, state, control)

    rows = pool_rows(hf_client.fetch_pool())[:3]
    completions = ["0.25", "0.75", "1.0", "0.0", "0.5", "0.5"]
    state.global_step = 0  # TRL scores the generation batch of step 1 before the step runs
    assert grpo_reward_call(recorder, rows, 2, completions, state) == [0.25, 0.75, 1.0, 0.0, 0.5, 0.5]
    state.global_step = 1
    control = handler.on_step_end(args, state, control)
    assert control.should_log is True  # transformers' own flow callback ran alongside ours
    assert callback.reported[-1] == {"step": 1, "groups": 3, "rewards": 6, "spooled": True,
                                     "poolVersions": [rows[0]["rods_pool_version"]]}
    # A step without rods rows is reported too (an empty closing batch), so it closes.
    state.global_step = 2
    handler.on_step_end(args, state, control)
    handler.on_train_end(args, state, control)
    assert callback.reporter.stats["sent"] == 2 and callback.reporter.acked == 2

    expected = {rows[0]["rods_task_id"]: [0.25, 0.75], rows[1]["rods_task_id"]: [1.0, 0.0],
                rows[2]["rods_task_id"]: [0.5, 0.5]}
    # The gateway holds exactly this body: the same one again is a duplicate; step 2 closed empty.
    assert hf_client.report_step(1, expected, policy_version="step-1")["duplicate"] is True
    assert hf_client.report_step(2, {}, policy_version="step-2")["duplicate"] is True
    timings = json.loads((tmp_path / "rods-timings.json").read_text())
    assert timings["stepEnd"]["n"] == 2 and timings["reports"]["sent"] == 2

    # A resumed run (same output dir, so the same spool) re-trains step 2: not sent again.
    resumed = RodsCallback(hf_client, RodsRewards(score), spool_dir=str(tmp_path / "spool"))
    handler = CallbackHandler([resumed], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
    handler.on_train_begin(args, state, control)
    handler.on_step_end(args, state, control)
    handler.on_train_end(args, state, control)
    assert resumed.reporter.stats["skipped"] == 1 and resumed.reporter.stats["sent"] == 0


def test_recorder_refuses_rows_without_a_task_id():
    with pytest.raises(ValueError, match="remove_unused_columns=False"):
        RodsRewards(score)(prompts=["p"], completions=["1"], trainer_state=TrainerState())


def test_the_map_style_dataset_warns_that_it_never_grows(hf_client):
    with pytest.warns(DeprecationWarning, match="never draws tasks injected"):
        dataset = RodsPoolDataset(hf_client)
    assert len(dataset) > 0 and dataset[len(dataset)]["rods_task_id"] == dataset[0]["rods_task_id"]


def save_checkpoint(output_dir, step):
    """What transformers' Trainer._save_checkpoint leaves in <output_dir>/checkpoint-<step> before on_save."""
    folder = os.path.join(output_dir, f"checkpoint-{step}")
    os.makedirs(os.path.join(folder, "sub"), exist_ok=True)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(bytes(range(256)) * 5000 + str(step).encode())  # over a 1 MiB read
    with open(os.path.join(folder, "trainer_state.json"), "w") as f:
        json.dump({"global_step": step}, f)
    with open(os.path.join(folder, "sub", "rng_state.pth"), "wb") as f:
        f.write(b"rng")
    return folder


def expected_digest(folder):
    """The digest as rods_client.reporting.checkpoint_digest documents it, computed here on its own."""
    h = hashlib.sha256()
    for rel in sorted(["model.safetensors", "trainer_state.json", "sub/rng_state.pth"]):
        data = open(os.path.join(folder, rel), "rb").read()
        h.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return "sha256:" + h.hexdigest()


def test_callback_reports_each_saved_checkpoint_and_a_resumed_run_names_it(hf_client, tmp_path, caplog):
    proxy = FaultProxy(hf_client.base_url)
    client = RodsClient(proxy.url, hf_client.token, hf_client.campaign, timeout=5, retries=0)
    out, spool = str(tmp_path / "out"), str(tmp_path / "spool")
    args = TrainingArguments(output_dir=out, report_to=[])
    proxy.closed_from = first = 3  # the earlier test closed steps 1 and 2 of this campaign

    def run(callback, state, steps, save_at):
        handler = CallbackHandler([callback], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
        control = TrainerControl()
        handler.on_train_begin(args, state, control)
        for step in steps:  # as transformers does: on_step_end, then the save and on_save
            state.global_step = step
            handler.on_step_end(args, state, control)
            if step in save_at:
                save_checkpoint(out, step)
                handler.on_save(args, state, control)
        handler.on_train_end(args, state, control)

    try:
        first_run = RodsCallback(client, RodsRewards(score), spool_dir=spool, checkpoint_digest=True)
        run(first_run, TrainerState(), [first, first + 1], save_at={first})
        run_id = first_run.run_id
        assert len(run_id) == 16 and run_id.startswith("run-") and int(run_id[4:], 16) >= 0
        folder = os.path.join(out, f"checkpoint-{first}")
        record = json.loads(open(os.path.join(folder, "rods-checkpoint.json")).read())
        assert record == {"campaign": hf_client.campaign, "checkpointId": f"{run_id}-step-{first}", "runId": run_id,
                          "step": first, "resumedFrom": None, "digest": expected_digest(folder)}
        assert checkpoint_digest(folder) == record["digest"]  # the record itself is not hashed
        assert first_run.checkpoints == [dict(record, folder=folder)]
        assert first_run.reporter.stats["checkpoints"] == 1 and first_run.reporter.stats["sent"] == 2
        assert proxy.checkpoints[record["checkpointId"]] == {
            "checkpointId": record["checkpointId"], "runId": run_id, "step": first, "resumedFrom": None,
            "digest": record["digest"], "retrainedSteps": []}
        assert json.loads((tmp_path / "out" / "rods-timings.json").read_text())["checkpointSave"]["n"] == 1

        # A resumed run: transformers loaded checkpoint-3's state (global_step 3) before on_train_begin.
        resumed = RodsCallback(client, RodsRewards(score), spool_dir=spool)
        run(resumed, TrainerState(global_step=first), [first + 1, first + 2], save_at={first + 2})
        assert resumed.run_id != run_id and resumed.resumed_from == record["checkpointId"]
        (mine,) = resumed.checkpoints
        assert mine["checkpointId"] == f"{resumed.run_id}-step-{first + 2}" and mine["digest"] is None
        body = proxy.checkpoints[mine["checkpointId"]]
        assert body["resumedFrom"] == record["checkpointId"]
        # Step 4 was trained again (the spool had reported it): it goes in the next checkpoint.
        assert body["retrainedSteps"] == [{"step": first + 1, "groups": []}]
        assert resumed.reporter.stats["skipped"] == 1 and resumed.reporter.stats["retrained"] == 1

        # No record in the folder it resumes from: resumedFrom null, with a warning; or as given.
        caplog.set_level(logging.WARNING, logger="rods_client")
        lost = RodsCallback(client, RodsRewards(score), spool_dir=str(tmp_path / "spool-2"), run_id="my-run")
        lost.on_train_begin(args, TrainerState(global_step=99), TrainerControl())
        assert lost.resumed_from is None and lost.run_id == "my-run"
        assert "checkpoint-99 a run resumes from has no rods-checkpoint.json" in caplog.text
        given = RodsCallback(client, RodsRewards(score), spool_dir=str(tmp_path / "spool-3"), resumed_from="ckpt-a")
        given.on_train_begin(args, TrainerState(global_step=first), TrainerControl())
        assert given.resumed_from == "ckpt-a"
        for cb in (lost, given):
            cb.reporter.close(5)
        with pytest.raises(ValueError, match="run_id"):
            RodsCallback(client, RodsRewards(score), run_id="no/slash")
    finally:
        proxy.close()
