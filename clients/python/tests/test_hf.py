"""The transformers/TRL adapter against the real gateway, driven by transformers' own callback
handler (transformers imports without torch). TRL itself needs torch, so its reward-function call
is mirrored by ``trl_grpo_reward_call``, following GRPOTrainer's documented convention."""

import pytest
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

from rods_client import RodsError
from rods_client.hf import RodsCallback, RodsPoolDataset, RodsRewardRecorder


def trl_grpo_reward_call(reward_fn, rows, num_generations, completions):
    """What TRL's GRPOTrainer does per generation batch: each prompt repeated ``num_generations``
    times, the reward function called with ``prompts``, ``completions`` and every other dataset
    column as a keyword argument holding one value per completion."""
    inputs = [row for row in rows for _ in range(num_generations)]
    kwargs = {k: [x[k] for x in inputs] for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")}
    return reward_fn(prompts=[x["prompt"] for x in inputs], completions=completions, **kwargs)


def score(prompts, completions, rods_task_id, **_):
    # a deterministic stand-in for a verifier: reward = the completion's own number
    return [float(c) for c in completions]


def test_pool_dataset_rows(hf_client):
    dataset = RodsPoolDataset(hf_client)
    pool = hf_client.fetch_pool()
    assert dataset.version == pool["version"]
    assert len(dataset) == len(pool["tasks"]) > 0
    row = dataset[0]
    assert row["rods_task_id"] == pool["tasks"][0]["taskId"]
    assert row["prompt"] and row["prompt"][0]["role"] == "user" and row["prompt"][0]["content"]
    assert row["task"]["rods_task_id"] == row["rods_task_id"]
    assert dataset[len(dataset)]["rods_task_id"] == row["rods_task_id"]  # wraps, never IndexError
    assert dataset.refresh() is False  # same version: nothing swapped


def test_callback_reports_the_steps_rewards(hf_client, tmp_path):
    dataset = RodsPoolDataset(hf_client)
    recorder = RodsRewardRecorder(score)
    callback = RodsCallback(hf_client, recorder, dataset)
    assert isinstance(callback, TrainerCallback)
    handler = CallbackHandler([DefaultFlowCallback, callback], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[])
    state, control = TrainerState(logging_steps=1), TrainerControl()

    rows = [dataset[i] for i in range(3)]
    completions = ["0.25", "0.75", "1.0", "0.0", "0.5", "0.5"]
    rewards = trl_grpo_reward_call(recorder, rows, 2, completions)
    assert rewards == [0.25, 0.75, 1.0, 0.0, 0.5, 0.5]  # the wrapped function's answer, unchanged
    state.global_step = 1
    control = handler.on_step_end(args, state, control)

    assert control.should_log is True  # transformers' own flow callback ran alongside ours
    assert len(callback.reports) == 1
    report = callback.reports[0]
    assert report["step"] == 1 and report["groups"] == 3
    assert report["answer"]["groups"] == 3 and report["answer"]["duplicate"] is False
    expected = {rows[0]["rods_task_id"]: [0.25, 0.75], rows[1]["rods_task_id"]: [1.0, 0.0],
                rows[2]["rods_task_id"]: [0.5, 0.5]}
    # The gateway holds exactly this body: the same one again is a duplicate, another a conflict.
    assert hf_client.report_step(1, expected, policy_version="step-1")["duplicate"] is True
    with pytest.raises(RodsError) as conflict:
        hf_client.report_step(1, {rows[0]["rods_task_id"]: [0.0, 0.0]}, policy_version="step-1")
    assert conflict.value.status == 409

    # A step with no recorded reward reports nothing.
    state.global_step = 2
    handler.on_step_end(args, state, control)
    assert len(callback.reports) == 1


def test_recorder_refuses_rows_without_a_task_id(hf_client):
    recorder = RodsRewardRecorder(score)
    with pytest.raises(ValueError, match="remove_unused_columns=False"):
        recorder(prompts=["p"], completions=["1"])
