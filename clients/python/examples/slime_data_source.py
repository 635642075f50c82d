"""slime with rods as its data source and reward reporter. Needs `pip install ./clients/python`
beside slime; slime loads both by path:

    RODS_GATEWAY_URL=http://127.0.0.1:7500 RODS_TOKEN=... RODS_CAMPAIGN=exp-7 \\
    python train.py ... \\
        --data-source-path rods_client.slime.RodsDataSource \\
        --custom-reward-post-process-path rods_client.slime.report_rewards \\
        --n-samples-per-prompt 8 --rollout-batch-size 32

Each rollout then draws 32 tasks from the campaign's pool (8 samples each: `metadata` holds
`rods_task_id` and the BFCL task for your reward model), and its rewards are reported to rods as
step rollout_id + 1 before slime's usual GRPO group normalization. This script shows the same
two calls outside slime, with a reward of 0.5 for every sample.
"""

from types import SimpleNamespace

from rods_client.slime import RodsDataSource, report_rewards

args = SimpleNamespace(n_samples_per_prompt=8, rollout_seed=0, save=None, load=None,
                       advantage_estimator="grpo", rewards_normalization=True, grpo_std_normalization=True)
source = RodsDataSource(args)
groups = source.get_samples(4)
for group in groups:
    for sample in group:
        sample.reward, sample.rollout_id = 0.5, 0
raw, normalized = report_rewards(args, groups)
print(f"reported {len(groups)} groups as step 1; normalized rewards {normalized[:8]}")
