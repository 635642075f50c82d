"""rods_client.verl on verl 0.9.1's real classes (installed from PyPI with its verl-core extra), on
CPU, against a live rods campaign (run by clients/python/verl.e2e.test.ts).

What is verl's own code here: the dataset is built by verl's create_rl_dataset from the
``data.custom_cls`` config and read through torchdata's StatefulDataLoader with verl's
create_rl_sampler and collate_fn, as PPOTrainer._init_dataloader does (trainer_base.py:743-750); the
replay buffer is built by verl's own PPOTrainer._build_replay_buffer from the
``trainer.v1.sampler.custom_sampler`` config and samples through verl's ReplayBuffer.sample over a
real TransferQueue (Ray on 2 CPUs); each response is scored by verl's NaiveRewardManager.run_single
calling rods_client.verl.compute_score, as the reward loop does; the checkpoint callback is built by
verl's build_checkpoint_callback from ``trainer.checkpoint_callback_class`` (its on_save is driven
without verl in tests/test_verl.py).

What is not: the rollout. verl generates with a vLLM or SGLang engine on GPUs; here each prompt's
n responses are written to TransferQueue the way AgentLoopWorkerTQ writes them
(agent_loop_tq.py:180-227): half of them the ground truth's first-turn calls as <tool_call>
blocks, half not, so tasks land in the boundary band and the campaign synthesises and injects.
Environment: RODS_GATEWAY_URL, RODS_TOKEN, RODS_CAMPAIGN, RODS_OUTPUT (a JSON summary), RODS_STEPS.
"""

import asyncio
import json
import os
import socket
import types
import uuid

import numpy as np
import pytest
import ray
import torch
from omegaconf import OmegaConf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from torchdata.stateful_dataloader import StatefulDataLoader
from transformers import PreTrainedTokenizerFast

import transfer_queue as tq
from rods_client import bfcl
from rods_client.verl import RodsCheckpointCallback, RodsDataset, RodsReplayBuffer, RodsReplayBufferAsync
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback, build_checkpoint_callback
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler
from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync
from verl.trainer.ppo.v1.trainer_base import PPOTrainer
from verl.utils.dataset.rl_dataset import collate_fn
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

BATCH = 4  # prompts a step
N = 4  # responses a prompt (rollout.n)
STEPS = int(os.environ.get("RODS_STEPS", "30"))


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1, "total_storage_size": 4000}}}))
    yield tmp_path_factory.mktemp("verl")
    tq.close()
    ray.shutdown()


@pytest.fixture(scope="module")
def tokenizer():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    texts = [json.dumps(d) for d in bfcl.tool_documents(bfcl.CLASSES)] + ["<tool_call> </tool_call>"]
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="<unk>")


def config(spool):
    return OmegaConf.create({
        "data": {"train_files": "rods://train", "val_files": "rods://val", "train_batch_size": BATCH, "shuffle": False,
                 "seed": 1, "dataloader_num_workers": 0, "custom_cls": {"path": "pkg://rods_client.verl", "name": "RodsDataset"},
                 "rods": {"poll_seconds": 2}},
        "trainer": {"checkpoint_callback_class": "rods_client.verl.RodsCheckpointCallback",
                    "default_local_dir": str(spool.parent / "checkpoints"), "resume_mode": "auto",
                    "v1": {"sync": {}, "sampler": {
            "max_off_policy_threshold": 8, "max_off_policy_strategy": "drop", "sync_refill_failed_groups": False,
            "custom_sampler": {"path": "pkg://rods_client.verl", "name": "RodsReplayBuffer"},
            "sampler_kwargs": {"spool_dir": str(spool)}}}},
        "reward": {"custom_reward_function": {"path": "pkg://rods_client.verl", "name": "compute_score"}},
    })


def build(cfg, tokenizer):
    dataset = create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer, None, is_train=True)
    loader = StatefulDataLoader(dataset=dataset, batch_size=BATCH, num_workers=0, drop_last=True, collate_fn=collate_fn,
                                sampler=create_rl_sampler(cfg.data, dataset))
    trainer = types.SimpleNamespace(config=cfg, trainer_mode="sync", _add_prompts_to_generate=lambda n: 0)
    buffer = PPOTrainer._build_replay_buffer(trainer)  # verl's own construction from the config
    return dataset, loader, buffer


def answer(task, good):
    """A response: the first turn's ground-truth calls as <tool_call> blocks, or a refusal."""
    if not good:
        return "I cannot do that."
    blocks = ["<tool_call>" + json.dumps(call) + "</tool_call>" for call in bfcl.ground_truth_tool_calls(task, 0)]
    return "\n".join(blocks)


def rollout(batch, step, tokenizer, manager, good=None, ledger=None, prompts=None):
    """Writes the prompts (the first ``prompts`` of the batch, default all) and their scored
    trajectories as AgentLoopWorkerTQ would; ``good(i, s)`` says which responses are the ground
    truth's (default: half of each group); ``ledger`` gets each trajectory's (task id, reward)."""
    good = good or (lambda i, s: (s + step + i) % 2 == 0)
    uids = [uuid.uuid4().hex for _ in range(len(batch["index"]) if prompts is None else prompts)]
    tq.kv_batch_put(keys=uids, partition_id="train",
                    tags=[{"is_prompt": True, "status": "pending", "global_steps": step}] * len(uids))
    keys, fields, tags, drawn = [], [], [], []
    for i, uid in enumerate(uids):
        extra = batch["extra_info"][i]
        task = json.loads(extra["task"])
        drawn.append({"taskId": extra["rods_task_id"], "version": extra["rods_pool_version"]})
        for s in range(N):
            text = answer(task, good=good(i, s))
            response = torch.tensor(tokenizer(text)["input_ids"] or [0], dtype=torch.int64)
            prompt = torch.tensor([1, 2, 3], dtype=torch.int64)
            item = DataProto.from_dict(
                tensors={"responses": response[None], "attention_mask": torch.ones(1, 3 + len(response), dtype=torch.int64)},
                non_tensors={"data_source": np.array([batch["data_source"][i]], dtype=object),
                             "reward_model": np.array([batch["reward_model"][i]], dtype=object),
                             "extra_info": np.array([dict(extra)], dtype=object)})
            result = manager.loop.run_until_complete(manager.run_single(item))
            rm = torch.zeros(len(response))
            rm[-1] = float(result["reward_score"])
            if ledger is not None:
                ledger.append((extra["rods_task_id"], float(result["reward_score"])))
            keys.append(f"{uid}_{s}_0")
            fields.append({"prompts": prompt, "responses": response, "response_mask": torch.ones(len(response), dtype=torch.int64),
                           "rm_scores": rm, "uid": uid, "data_source": batch["data_source"][i], "extra_info": dict(extra),
                           "global_steps": step, "extra_fields": {"reward_extra_info": result["reward_extra_info"]}})
            tags.append({"status": "success", "prompt_len": 3, "response_len": len(response), "seq_len": 3 + len(response),
                         "global_steps": step, "min_global_steps": step, "max_global_steps": step})
    tq.kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), tags=tags, partition_id="train")
    for uid in uids:
        tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})
    return drawn


def test_verl_trains_on_the_live_pool_and_reports_each_step_once_across_a_resume(runtime, tokenizer):
    spool = runtime / "spool"
    cfg = config(spool)
    dataset, loader, buffer = build(cfg, tokenizer)
    assert isinstance(dataset, RodsDataset) and isinstance(dataset, torch.utils.data.Dataset)
    assert type(buffer) is RodsReplayBuffer and len(dataset) == BATCH * 100_000
    callback = build_checkpoint_callback(cfg)  # what PPOTrainer.__init__ does (trainer_base.py:122)
    assert type(callback) is RodsCheckpointCallback and isinstance(callback, CheckpointCallback)
    assert callback.run_id.startswith("run-") and callback.resumed_from(buffer.client.campaign) is None
    val = create_rl_dataset(cfg.data.val_files, cfg.data, tokenizer, None, is_train=False)
    assert val.validation and 0 < len(val) < 1000  # the pool at start, not the virtual length
    score_fn = get_custom_reward_fn(cfg)  # verl's own loading of reward.custom_reward_function
    manager = NaiveRewardManager(cfg, tokenizer, score_fn)
    manager.loop = asyncio.new_event_loop()

    drawn_by_step = {}
    checkpoint = None
    it = iter(loader)
    for step in range(1, STEPS + 1):
        batch = next(it)
        assert batch["dummy_tensor"].shape == (BATCH, 1) and len(set(batch["data_source"])) == 1
        drawn_by_step[step] = rollout(batch, step, tokenizer, manager)
        meta, _ = buffer.sample(global_steps=step, partition_id="train", batch_size=BATCH)
        assert len(meta.keys) == BATCH * N
        tq.kv_clear(keys=meta.keys, partition_id="train")  # as the trainer does after the step
        if step == STEPS - 4:
            checkpoint = loader.state_dict()  # what verl writes to data.pt
    assert buffer.reporter.flush(timeout=120)
    assert buffer.reporter.stats["sent"] == STEPS and buffer.reporter.stats["rejected"] == 0
    dataset.close()

    # A resume from the checkpoint of step STEPS - 4: verl restores data.pt into a new loader and
    # calls sample() with global_steps = STEPS - 3, STEPS - 2, ...: steps the spool reported are skipped.
    dataset2, loader2, buffer2 = build(cfg, tokenizer)
    loader2.load_state_dict(checkpoint)
    it2 = iter(loader2)  # torchdata hands the dataset its saved state when the iterator starts
    assert dataset2.draws == BATCH * (STEPS - 4)
    for step in range(STEPS - 3, STEPS + 3):
        batch = next(it2)
        drawn_by_step.setdefault(step, rollout(batch, step, tokenizer, manager))
        meta, _ = buffer2.sample(global_steps=step, partition_id="train", batch_size=BATCH)
        tq.kv_clear(keys=meta.keys, partition_id="train")
    assert buffer2.reporter.flush(timeout=120)
    assert buffer2.reporter.stats["skipped"] == 4 and buffer2.reporter.stats["sent"] == 2
    dataset2.close()
    with open(os.environ["RODS_OUTPUT"], "w") as f:
        json.dump({"steps": STEPS + 2, "drawn": drawn_by_step, "batch": BATCH, "n": N}, f)


class TrainerParts:
    """What PPOTrainer._build_replay_buffer reads of the trainer, with verl's own methods for it:
    ``refill_fn`` is then a bound method of a trainer, as in verl (trainer_base.py:161)."""

    _build_replay_buffer = PPOTrainer._build_replay_buffer
    _resolve_filter_groups_metric = PPOTrainer._resolve_filter_groups_metric

    def __init__(self, cfg, mode, refill=None):
        self.config, self.trainer_mode, self.refill = cfg, mode, refill

    def _add_prompts_to_generate(self, n):
        return self.refill(n) if self.refill else 0


def test_a_shuffling_sampler_is_refused_by_name(runtime, tokenizer):
    cfg = config(runtime / "spool-shuffle")
    cfg.data.shuffle = True  # verl's default: torchdata's RandomSampler, randperm of the length per iter()
    with pytest.raises(ValueError, match="data.shuffle=false"):
        create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer, None, is_train=True)


def test_dapo_keeps_filtering_and_the_groups_it_drops_are_reported_with_the_step(runtime, tokenizer):
    # The reporter's gateway is a closed port: what is checked is the step's report as spooled.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    spool = runtime / "spool-dapo"
    cfg = config(spool)
    cfg.trainer.v1.sampler.sampler_kwargs.gateway_url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    cfg.algorithm = {"filter_groups": {"enable": True, "metric": "reward", "max_inflight_gen_batches": 1}}
    cfg.reward.reward_model = {"enable": False, "enable_resource_pool": False}
    dataset = create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer, None, is_train=True)
    loader = iter(StatefulDataLoader(dataset=dataset, batch_size=BATCH, num_workers=0, drop_last=True,
                                     collate_fn=collate_fn, sampler=create_rl_sampler(cfg.data, dataset)))
    manager = NaiveRewardManager(cfg, tokenizer, get_custom_reward_fn(cfg))
    manager.loop = asyncio.new_event_loop()
    ledger, refills = [], []

    def refill(n):
        # The trainer generating replacements, half-solved groups: as many as DAPO dropped so far
        # (verl asks for 2 per drop, then keeps the surplus out of the step: exactly replaced,
        # every group written is either trained on or dropped).
        k = buffer.dropped_groups - sum(refills)
        refills.append(k)
        if k:
            rollout(next(loader), 1, tokenizer, manager, ledger=ledger, prompts=k,
                    good=lambda i, s: s % 2 == 0)

    buffer = TrainerParts(cfg, "sync", refill)._build_replay_buffer()
    assert type(buffer) is RodsReplayBuffer
    assert buffer.filter_groups_metric == "reward" and buffer.gen_batch_size == 1  # verl's own, kept
    # Group 0 solved by every response (no signal: DAPO drops it), the others half solved.
    rollout(next(loader), 1, tokenizer, manager, good=lambda i, s: i == 0 or s % 2 == 0, ledger=ledger)
    meta, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=BATCH)
    assert len(meta.keys) == BATCH * N
    assert metrics["training/filter_groups/evicted_samples"] == buffer.dropped_groups >= 1 and refills
    tq.kv_clear(keys=meta.keys, partition_id="train")
    spooled = json.loads((spool / "pending" / f"{1:012d}.json").read_text())["body"]["groups"]
    reported = sorted((g["taskId"], r) for g in spooled for r in g["rewards"])
    # Every trajectory written this step is in the report: the sampled groups and the dropped one.
    assert reported == sorted(ledger) and len(reported) == (BATCH + buffer.dropped_groups) * N
    buffer.reporter.close(timeout=0.2)
    dataset.close()


def test_an_async_trainer_gets_verls_async_buffer_with_staleness_eviction(runtime, tokenizer):
    cfg = config(runtime / "spool-async")
    cfg.trainer.v1.separate_async = {}
    cfg.algorithm = {"filter_groups": {"enable": False}}
    buffer = TrainerParts(cfg, "separate_async")._build_replay_buffer()
    assert type(buffer) is RodsReplayBufferAsync and isinstance(buffer, ReplayBufferAsync)
    assert isinstance(buffer, RodsReplayBuffer)
    # what trainer_separate_async.py:104-111 requires with hybrid_rollout.enable_switch
    assert all(hasattr(buffer, m) for m in ("wait_for_sampleable", "get_sampleable_count"))
    uid = uuid.uuid4().hex
    buffer.finished_keys["train"].add(uid)
    buffer.prompt_global_steps["train"][uid] = 1
    stale, dapo, failed, _ = buffer._terminal_eviction_reasons(global_steps=9, partition_id="train")
    assert stale == {uid} and not dapo and not failed  # 9 - 1 + 1 > max_off_policy_threshold 8
    assert buffer._terminal_eviction_reasons(global_steps=8, partition_id="train")[0] == set()
    buffer.reporter.close(timeout=0.2)
