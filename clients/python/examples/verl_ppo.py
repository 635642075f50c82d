"""verl 0.9's PPO/GRPO trainer (its v1 trainer) on a rods campaign's live pool, on BFCL multi-turn.

    pip install ./clients/python "verl[verl-core]==0.9.1"      # plus verl's vLLM or SGLang extra, on GPUs
    RODS_GATEWAY_URL=http://127.0.0.1:7500 RODS_TOKEN=... RODS_CAMPAIGN=exp-7 \\
      python clients/python/examples/verl_ppo.py actor_rollout_ref.model.path=Qwen/Qwen3-8B trainer.total_training_steps=500

The prompts are the campaign's pool, read live (rods_client.verl.RodsDataset); each row runs in
rods_client.verl.RodsBfclAgentLoop, verl's tool agent loop with the task's BFCL functions as tools
(run in the rods environment executor at RODS_EXECUTOR_URL, one live environment per episode) and
the task's later user turns delivered as BFCL delivers them; the reward is the episode's BFCL
progress reward (rods_client.verl.compute_score). Each step's rewards are reported once per task
as verl's global step (RodsReplayBuffer, spooled under the checkpoint folder, so a resume re-sends
nothing) and each checkpoint with what it was trained on (RodsCheckpointCallback). Any further verl
override goes on the command line (clients/python/gpu/verl_bfcl.sh is a GPU run of this file).
"""

import subprocess
import sys

ROWS = ["data.custom_cls.path=pkg://rods_client.verl", "data.custom_cls.name=RodsDataset",
        "data.dataloader_num_workers=0", "data.shuffle=false", "data.train_files=rods://train",
        "data.val_files=rods://val"]
# RodsDataset names its agent loop in each row (agent_name); verl's fully async trainer keeps it
# only with multi_turn.enable (detach_utils.py:66). A BFCL turn often takes several calls in one
# answer, and verl runs max_parallel_calls of them (default 1, tool_agent_loop.py:317).
EPISODES = ["actor_rollout_ref.rollout.multi_turn.enable=true",
            "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=8",
            "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=2048"]
STEPS = ["trainer.v1.sampler.custom_sampler.path=pkg://rods_client.verl",
         "trainer.v1.sampler.custom_sampler.name=RodsReplayBuffer",
         "+trainer.v1.sampler.sampler_kwargs.spool_dir=${trainer.default_local_dir}/rods-spool",
         "trainer.checkpoint_callback_class=rods_client.verl.RodsCheckpointCallback"]
REWARD = ["reward.custom_reward_function.path=pkg://rods_client.verl", "reward.custom_reward_function.name=compute_score"]
OVERRIDES = [*ROWS, *EPISODES, *STEPS, *REWARD]

if __name__ == "__main__":
    sys.exit(subprocess.call([sys.executable, "-m", "verl.trainer.main_ppo", *OVERRIDES, *sys.argv[1:]]))
