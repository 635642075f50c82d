"""GRPO with TRL on a rods campaign's live pool, each task a BFCL multi-turn environment.

    pip install ./clients/python trl      # with torch
    RODS_GATEWAY_URL=http://127.0.0.1:7500 RODS_TOKEN=... RODS_CAMPAIGN=exp-7 RODS_MAX_STEPS=100 \\
      python clients/python/examples/trl_grpo.py            # or: torchrun --nproc_per_node 2 ...

The model and tokenizer are RODS_MODEL and RODS_TOKENIZER (a path or hub name); unset, a tiny
random model is built from the pool's text (rods_client/tiny.py), enough to see the loop run on a
CPU. The BFCL environments run their calls in the rods environment executor (RODS_EXECUTOR_URL).
A run resumes from its last checkpoint in RODS_OUTPUT_DIR; steps it reported are not sent again.
"""

import os

from trl import GRPOConfig, GRPOTrainer
from transformers.trainer_utils import get_last_checkpoint

from rods_client import RodsClient
from rods_client.bfcl import environment_factories, progress_reward
from rods_client.tiny import model_and_tokenizer
from rods_client.trl import RodsCallback, RodsPool, RodsRewards

rods = RodsClient.from_env()
model, tokenizer = model_and_tokenizer(rods)
args = GRPOConfig(output_dir=os.environ.get("RODS_OUTPUT_DIR", "grpo-rods"), max_steps=int(os.environ.get("RODS_MAX_STEPS", "100")),
                  num_generations=4, per_device_train_batch_size=4, max_completion_length=64, shuffle_dataset=False,
                  bf16=False, gradient_checkpointing=False, save_steps=50, report_to="none")
pool = RodsPool(rods, args)  # the live pool as an IterableDataset, the same on every rank
reward = RodsRewards(progress_reward)  # BFCL's progress reward, recorded per task for rods
trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=pool.dataset,
                      reward_funcs=[reward], environment_factory=environment_factories(),
                      callbacks=[RodsCallback(rods, reward, pool)])  # reports every step once, spooled
trainer.train(resume_from_checkpoint=get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None)
