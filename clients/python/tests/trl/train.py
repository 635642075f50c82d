"""TRL's real GRPOTrainer on a rods campaign's live pool (run by clients/python/trl.e2e.test.ts).

The rods pieces are the example's (examples/trl_grpo.py); the reward differs: a tiny randomly
initialised model scores 0 on every BFCL task, so every task would be "hard" and nothing would be
synthesised. The test's reward is the BFCL progress reward plus a term read from the completion's
text (a hash, uniform in [0, 0.9]), which spreads the tasks over the bands the way a learning
policy's rewards would, so the campaign selects seeds and injects tasks while TRL trains.

Environment: RODS_GATEWAY_URL, RODS_TOKEN, RODS_CAMPAIGN, RODS_MODEL, RODS_OUTPUT_DIR,
RODS_MAX_STEPS, RODS_SAVE_STEPS (0: no checkpoints), RODS_RESUME (1: from the last checkpoint),
RODS_RESUME_FROM (a step N: from <output dir>/checkpoint-N instead), RODS_TOOLS (1: the BFCL
environments as TRL tools), RODS_STEP_SLEEP (seconds per reward call), RODS_BATCH (per-device
batch, default 8), RODS_STOP_AFTER_NEW_POOL (k: stop k steps after the first batch drawn from a
newer pool version than the first batch's, RODS_MAX_STEPS bounding the wait), RODS_ASYNC_REWARD (1:
the reward function is async), RODS_EVAL_STEPS (k: evaluate every k steps on a fixed set of four
rows, two of the pool's tasks and two rows without a rods task id), RODS_POLICY (oracle: OraclePolicy generates, with RODS_TOOLS=1; each
reward call prints a "rods-episodes" line: per rollout its calls, the ground truth's and the reward).
Prints one JSON line per optimizer step ("rods-step"), one per checkpoint the callback reported
("rods-checkpoint": its rods-checkpoint.json and folder; digests on) and a summary at the end
("rods-summary", with the run id and every checkpoint).
"""

import asyncio
import hashlib
import json
import os
import re
import sys
import time

import torch
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from rods_client import RodsClient
from rods_client import bfcl
from rods_client.bfcl import environment_factories, progress_reward
from rods_client.tiny import model_and_tokenizer
from rods_client.trl import RodsCallback, RodsPool, RodsRewards, pool_rows

tools = os.environ.get("RODS_TOOLS", "0") == "1"
oracle = None  # RODS_POLICY=oracle: OraclePolicy
pause = float(os.environ.get("RODS_STEP_SLEEP", "0"))


def _shaped(completions, environments):
    base = progress_reward(completions, environments) if tools else [0.0] * len(completions)
    if oracle is not None:  # the scripted policy plays BFCL: its own score, unshaped
        return base
    return [min(1.0, b + (int(hashlib.sha256(json.dumps(c).encode()).hexdigest()[:8], 16) % 901) / 1000)
            for b, c in zip(base, completions)]


def shaped_reward(prompts, completions, environments=None, **kwargs):
    time.sleep(pause)
    rewards = _shaped(completions, environments)
    if oracle is not None:
        print("rods-episodes " + json.dumps([
            {"taskId": t, "bfclId": env.task.get("id"), "calls": sum(map(len, env.calls)),
             "truthCalls": sum(map(len, env.task["ground_truth"])), "reward": r}
            for t, env, r in zip(kwargs["rods_task_id"], environments, rewards)]), flush=True)
    return rewards


class OraclePolicy:
    """RODS_POLICY=oracle: the model's ``generate`` (what GRPOTrainer calls without vLLM,
    grpo_trainer.py:1860-1875) replaced by a scripted policy that plays each BFCL task's ground
    truth as tool calls TRL parses: one call a message, each user turn ended with reply_to_user,
    "Done." once the user has no further request. The model's forward (the loss) is the tiny
    model's own. The task is found by the conversation's user turns among the pool's tasks."""

    def __init__(self, client, tokenizer):
        self.client, self.tokenizer, self.tasks = client, tokenizer, []
        self.learn()

    def learn(self):
        self.tasks = [t["task"] for t in self.client.fetch_pool()["tasks"]]

    def answer(self, context):
        segments = context.split("<|im_start|>")
        first = next(s for s in segments if s.startswith("user\n"))[len("user\n"):].split("<|im_end|>")[0].strip()
        said = "".join(s for s in segments if s.startswith("assistant"))
        calls = [json.loads(b)["name"] for b in re.findall(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", said, re.S)]
        turn = calls.count("reply_to_user")
        made = calls[::-1].index("reply_to_user") if turn else len(calls)  # calls since the turn began
        for attempt in range(2):
            found = [t for t in self.tasks if bfcl._turn_text(t["question"][0]).strip() == first]
            if found:
                break
            self.learn()  # a task injected since
        # A generated task may share its seed's first turn: the seed is played (the test checks seeds).
        task = min(found, key=lambda t: not str(t.get("id", "")).startswith("multi_turn_"))
        if turn >= len(task["ground_truth"]):
            return "Done.<|im_end|>"
        truth = bfcl.ground_truth_tool_calls(task, turn)
        call = truth[made] if made < len(truth) else {"name": "reply_to_user", "arguments": {"message": "done"}}
        return "<tool_call>\n" + json.dumps(call) + "\n</tool_call><|im_end|>"

    def generate(self, input_ids=None, attention_mask=None, **kwargs):
        rows = []
        for ids, mask in zip(input_ids, attention_mask):
            context = self.tokenizer.decode(ids[mask.bool()], skip_special_tokens=False)
            rows.append(self.tokenizer(self.answer(context), add_special_tokens=False)["input_ids"])
        width = max(map(len, rows))
        pad = self.tokenizer.pad_token_id
        completion = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=input_ids.device)
        return torch.cat([input_ids, completion], dim=1)


async def shaped_reward_async(prompts, completions, environments=None, **kwargs):
    await asyncio.sleep(pause)
    return _shaped(completions, environments)


class StepLog(TrainerCallback):
    """Prints what the rods callback reported; after it in the callback list, so it runs after it."""

    def __init__(self, rods_callback):
        self.rods = rods_callback
        self.printed = 0

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.rods.reported:
            print("rods-step " + json.dumps({**self.rods.reported[-1], "t": time.time()}), flush=True)
        return control

    def on_save(self, args, state, control, **kwargs):
        for checkpoint in self.rods.checkpoints[self.printed:]:
            print("rods-checkpoint " + json.dumps({**checkpoint, "t": time.time()}), flush=True)
        self.printed = len(self.rods.checkpoints)
        return control


class StopAfterNewPool(TrainerCallback):
    """Stops k steps after a batch came from a newer pool than the first: how soon an injection
    reaches the pool depends on the machine's load, not on a step count. Rank 0 decides and every
    rank follows, so all stop at the same step."""

    def __init__(self, pool, k):
        self.pool, self.k, self.seen_at = pool, k, None

    def on_step_end(self, args, state, control, **kwargs):
        versions = self.pool.batch_versions
        if self.seen_at is None and versions and versions[-1] != versions[0]:
            self.seen_at = state.global_step
        stop = torch.tensor([int(self.seen_at is not None and state.global_step >= self.seen_at + self.k)])
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.broadcast(stop, src=0)
        if stop.item():
            control.should_training_stop = True
        return control


rods = RodsClient.from_env()
model, tokenizer = model_and_tokenizer(rods)
if os.environ.get("RODS_POLICY") == "oracle":
    oracle = OraclePolicy(rods, tokenizer)
    model.generate = oracle.generate
output_dir = os.environ["RODS_OUTPUT_DIR"]
save_steps = int(os.environ.get("RODS_SAVE_STEPS", "0"))
args = GRPOConfig(
    output_dir=output_dir, max_steps=int(os.environ.get("RODS_MAX_STEPS", "20")), num_generations=4,
    per_device_train_batch_size=int(os.environ.get("RODS_BATCH", "8")),
    max_completion_length=16 if oracle is None else 16384, shuffle_dataset=False, bf16=False,
    gradient_checkpointing=False, report_to="none", logging_steps=1000, use_cpu=True, seed=1,
    save_strategy="steps" if save_steps else "no", save_steps=save_steps or 500, dataloader_num_workers=0,
    max_tool_calling_iterations=2 if oracle is None else 64,
    **({"eval_strategy": "steps", "eval_steps": int(os.environ["RODS_EVAL_STEPS"]), "per_device_eval_batch_size": 8}
       if os.environ.get("RODS_EVAL_STEPS") else {}),
)
pool = RodsPool(rods, args)
reward = RodsRewards(shaped_reward_async if os.environ.get("RODS_ASYNC_REWARD") == "1" else shaped_reward)
eval_dataset = None
if os.environ.get("RODS_EVAL_STEPS"):
    from datasets import Dataset

    rows = pool_rows(rods.fetch_pool())[:2]
    outside = [dict(rows[0], rods_task_id=None, rods_pool_version=None) for _ in range(2)]
    eval_dataset = Dataset.from_list(rows + outside)
callback = RodsCallback(rods, reward, pool, checkpoint_digest=True)
callbacks = [callback, StepLog(callback)]
if os.environ.get("RODS_STOP_AFTER_NEW_POOL"):
    callbacks.append(StopAfterNewPool(pool, int(os.environ["RODS_STOP_AFTER_NEW_POOL"])))
trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=pool.dataset,
                      eval_dataset=eval_dataset, reward_funcs=[reward], callbacks=callbacks,
                      environment_factory=environment_factories() if tools else None)
resume_from = os.environ.get("RODS_RESUME_FROM")
if resume_from:
    resume = os.path.join(output_dir, f"checkpoint-{int(resume_from)}")
else:
    resume = os.environ.get("RODS_RESUME") == "1" or None
started = time.time()
trainer.train(resume_from_checkpoint=resume)
rank = int(os.environ.get("RANK", "0"))
with open(os.path.join(output_dir, f"rods-pool-rank{rank}.json"), "w") as f:
    json.dump({"batchVersions": pool.batch_versions, "rank": rank}, f)
if trainer.is_world_process_zero():
    print("rods-summary " + json.dumps({"seconds": time.time() - started, "steps": trainer.state.global_step,
                                        "timings": callback.timings(), "runId": callback.run_id,
                                        "checkpoints": callback.checkpoints,
                                        "evaluation": callback.evaluation_summary()}), flush=True)
sys.exit(0)
