"""slime with rods as its data source and reward reporter. Needs `pip install ./clients/python`
beside slime; slime loads both by path:

    RODS_GATEWAY_URL=http://127.0.0.1:7500 RODS_TOKEN=... RODS_CAMPAIGN=exp-7 \\
    python train.py ... --hf-checkpoint /models/Qwen3-8B --apply-chat-template \\
        --data-source-path rods_client.slime.RodsDataSource \\
        --custom-rollout-log-function-path rods_client.slime.log_rollout_data \\
        --n-samples-per-prompt 8 --rollout-batch-size 32

Each rollout then draws 32 tasks of the campaign's pool (8 samples each; the prompt is the chat
template with the task's functions as tools, `metadata` holds `rods_task_id`, the BFCL task and
its tools for your reward model), and its raw rewards are reported to rods as step rollout_id + 1,
through a durable spool under --save. This script makes the same two calls outside slime, with a
reward of 0.5 for every sample and the first user turn as the prompt (no tokenizer here).
"""

from types import SimpleNamespace

from rods_client import slime
from rods_client.slime import RodsDataSource, log_rollout_data

args = SimpleNamespace(n_samples_per_prompt=8, rollout_seed=0, save=None, load=None, apply_chat_template=False,
                       tool_key="tools")
source = RodsDataSource(args)
groups = source.get_samples(4)
for group in groups:
    for sample in group:
        sample.reward = 0.5
log_rollout_data(0, args, [s for g in groups for s in g], {}, 0.0)  # slime calls it after each rollout
assert slime.flush(timeout=60)  # sent in the background; here, wait before the script ends
print(f"reported {len(groups)} groups as step 1")
