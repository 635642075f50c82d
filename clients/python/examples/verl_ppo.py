"""verl 0.9's PPO/GRPO trainer (its v1 trainer) on a rods campaign's live pool.

    pip install ./clients/python "verl[verl-core]==0.9.1"      # plus verl's vLLM or SGLang extra, on GPUs
    RODS_GATEWAY_URL=http://127.0.0.1:7500 RODS_TOKEN=... RODS_CAMPAIGN=exp-7 \\
      python clients/python/examples/verl_ppo.py actor_rollout_ref.model.path=Qwen/Qwen3-8B trainer.total_training_steps=500

The prompts are the campaign's pool, read live (rods_client.verl.RodsDataset), each step's rewards
are reported once per task as verl's global step (RodsReplayBuffer, spooled under the checkpoint
folder, so a resume re-sends nothing), each checkpoint is reported with what it was trained on
(RodsCheckpointCallback), and rods rows are scored by rods_client.verl.compute_score
(BFCL's first-turn check, calls run in the rods environment executor at RODS_EXECUTOR_URL).
Any further verl override goes on the command line.
"""

import subprocess
import sys

ROWS = ["data.custom_cls.path=pkg://rods_client.verl", "data.custom_cls.name=RodsDataset",
        "data.dataloader_num_workers=0", "data.shuffle=false", "data.train_files=rods://train",
        "data.val_files=rods://val"]
STEPS = ["trainer.v1.sampler.custom_sampler.path=pkg://rods_client.verl",
         "trainer.v1.sampler.custom_sampler.name=RodsReplayBuffer",
         "+trainer.v1.sampler.sampler_kwargs.spool_dir=${trainer.default_local_dir}/rods-spool",
         "trainer.checkpoint_callback_class=rods_client.verl.RodsCheckpointCallback"]
REWARD = ["reward.custom_reward_function.path=pkg://rods_client.verl", "reward.custom_reward_function.name=compute_score"]

sys.exit(subprocess.call([sys.executable, "-m", "verl.trainer.main_ppo", *ROWS, *STEPS, *REWARD, *sys.argv[1:]]))
