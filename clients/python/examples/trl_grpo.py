"""GRPO with TRL on the rods pool: the trainer draws prompts from the campaign's boundary pool and
reports each step's rewards per task. Needs `pip install ./clients/python trl` (and torch).

    RODS_GATEWAY_URL=http://127.0.0.1:7500 RODS_TOKEN=... RODS_CAMPAIGN=exp-7 python trl_grpo.py
"""

from trl import GRPOConfig, GRPOTrainer

from rods_client import RodsClient
from rods_client.hf import RodsCallback, RodsPoolDataset, RodsRewardRecorder


def tool_use_reward(prompts, completions, task, **_):
    # Your verifier: run the completion's calls in the task's environment, score progress in [0, 1].
    return [0.0 for _ in completions]


rods = RodsClient.from_env()
dataset = RodsPoolDataset(rods)  # rows: prompt, rods_task_id, task, ...
reward = RodsRewardRecorder(tool_use_reward)  # records each reward under its rods_task_id
trainer = GRPOTrainer(
    model="Qwen/Qwen3-0.6B",
    reward_funcs=[reward],
    train_dataset=dataset,
    # keep rods_task_id and task: TRL passes dataset columns to reward functions
    args=GRPOConfig(output_dir="grpo-rods", num_generations=8, remove_unused_columns=False),
    callbacks=[RodsCallback(rods, reward, dataset)],  # reports at each step's end, refreshes the pool
)
trainer.train()
