"""verl 0.9.1's GRPO (its v1 trainer, ``python -m verl.trainer.main_ppo``) on a rods campaign's live
pool, BFCL multi-turn episodes in rods_client.verl.RodsBfclAgentLoop, on one GPU node.

This is the part of clients/python/verl.e2e.test.ts that needs GPUs: verl's vLLM rollout server
generating and its FSDP actor and reference updating the model. It runs
clients/python/examples/verl_ppo.py (the example whose overrides the e2e test composes verl's config
from) with sizes for a small model, then checks from the run's own files that every step was
reported to rods (nothing left in the spool) and that each saved checkpoint has its rods record.

    pip install ./clients/python "verl[verl-core,vllm]==0.9.1"
    export RODS_GATEWAY_URL=https://rods.example:7500 RODS_TOKEN=... RODS_CAMPAIGN=exp-7 \\
           RODS_EXECUTOR_URL=https://rods.example:7300 RODS_EXECUTOR_TOKEN_FILE=... RODS_CA_BUNDLE=...
    python clients/python/gpu/verl_bfcl.py [more verl overrides]

Settings (environment): RODS_MODEL (default Qwen/Qwen2.5-1.5B-Instruct: its chat template writes
Hermes <tool_call> blocks, verl's default tool parser), GPUS (default: every GPU nvidia-smi
lists), STEPS (default 20), OUT (default ./rods-verl-bfcl: checkpoints, the rods spool, the log).
Exit status: main_ppo's, else 1 if a step is still pending in the spool or a checkpoint has no
rods record.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "verl_ppo.py"


def overrides(gpus: int, model: str, steps: int, out: str) -> List[str]:
    """The overrides this script adds to the example's: GRPO, vLLM, batch sizes for ``gpus``."""
    batch = 2 * gpus
    return [
        "algorithm.adv_estimator=grpo",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
        "actor_rollout_ref.rollout.prompt_length=6144",
        "actor_rollout_ref.rollout.response_length=4096",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=32",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={batch}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.actor.use_kl_loss=true",
        f"data.train_batch_size={batch}",
        "data.max_prompt_length=6144",
        "data.max_response_length=4096",
        f"trainer.n_gpus_per_node={gpus}",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={steps}",
        "trainer.save_freq=10",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.logger=[console]",
        f"trainer.default_local_dir={out}/checkpoints",
    ]


def main() -> int:
    missing = [v for v in ("RODS_GATEWAY_URL", "RODS_TOKEN", "RODS_CAMPAIGN", "RODS_EXECUTOR_URL") if not os.environ.get(v)]
    if missing:
        print(f"verl_bfcl.py: set {', '.join(missing)} (see {__file__}'s docstring)", file=sys.stderr)
        return 2
    if not shutil.which("nvidia-smi"):
        print("verl_bfcl.py: no nvidia-smi: this script needs GPUs", file=sys.stderr)
        return 2
    gpus = int(os.environ.get("GPUS") or len(subprocess.check_output(["nvidia-smi", "-L"], text=True).splitlines()))
    out = Path(os.environ.get("OUT") or "rods-verl-bfcl").resolve()
    out.mkdir(parents=True, exist_ok=True)
    steps = int(os.environ.get("STEPS") or 20)
    args = overrides(gpus, os.environ.get("RODS_MODEL") or "Qwen/Qwen2.5-1.5B-Instruct", steps, str(out))
    with open(out / "train.log", "w") as log:
        proc = subprocess.Popen([sys.executable, str(EXAMPLE), *args, *sys.argv[1:]], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:  # type: ignore[union-attr]
            sys.stdout.write(line)
            log.write(line)
        if proc.wait() != 0:
            return proc.returncode
    checkpoints = out / "checkpoints"
    pending = list((checkpoints / "rods-spool").glob("**/pending/*.json"))
    saved = sorted(checkpoints.glob("global_step_*"))
    unrecorded = [p.name for p in saved if not (p / "rods-checkpoint.json").exists()]
    print(f"verl_bfcl.py: {steps} steps; steps pending in the spool: {len(pending)}; checkpoints saved: "
          f"{len(saved)}, without a rods record: {unrecorded or 'none'}")
    return 0 if not pending and not unrecorded else 1


if __name__ == "__main__":
    sys.exit(main())
