"""The TRL callback (rods_client.trl, also rods_client.hf) driven by transformers' own
CallbackHandler against the real gateway, where torch is absent. TRL's real GRPOTrainer runs the
same pieces in clients/python/trl.e2e.test.ts; here ``grpo_reward_call`` stands for its reward
call (each prompt repeated num_generations times, every dataset column a keyword argument, the
trainer state as ``trainer_state``)."""

import json

import pytest
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

from rods_client.hf import RodsCallback, RodsPoolDataset, RodsRewardRecorder
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
        RodsRewards(score)(prompts=["p"], completions=["1"])


def test_the_map_style_dataset_warns_that_it_never_grows(hf_client):
    with pytest.warns(DeprecationWarning, match="never draws tasks injected"):
        dataset = RodsPoolDataset(hf_client)
    assert len(dataset) > 0 and dataset[len(dataset)]["rods_task_id"] == dataset[0]["rods_task_id"]
