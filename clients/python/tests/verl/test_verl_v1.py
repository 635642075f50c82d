"""rods_client.verl on verl 0.9.1's real classes (installed from PyPI with its verl-core extra), on
CPU, against a live rods campaign (run by clients/python/verl.e2e.test.ts).

What is verl's own code here: the config is composed by Hydra from verl's ppo_trainer.yaml with the
example's overrides as written (clients/python/examples/verl_ppo.py OVERRIDES, what main_ppo
composes); the dataset is built by verl's create_rl_dataset from ``data.custom_cls`` and read
through torchdata's StatefulDataLoader with verl's create_rl_sampler and collate_fn, as
PPOTrainer._init_dataloader does (trainer_base.py:743-750); each batch is taken and dispatched by
PPOTrainer's own _next_train_batch and _submit_batch_to_rollout (trainer_base.py:1466-1510) to
verl's AgentLoopWorkerTQ (a Ray actor, agent_loop_tq.py:51-227), which runs every row in the agent
loop its ``agent_name`` names (rods_client.verl.RodsBfclAgentLoop on verl's ToolAgentLoop), has
each episode scored by verl's RewardLoopWorker actors (RewardLoopManager, reward_loop.py:279-341,
naive reward manager calling rods_client.verl.compute_score) and writes the trajectories to a real
TransferQueue (Ray on 2 CPUs); the replay buffer is built by PPOTrainer._build_replay_buffer from
``trainer.v1.sampler.custom_sampler`` and samples through verl's ReplayBuffer.sample; the
checkpoint callback is built by verl's build_checkpoint_callback (its on_save is driven without
verl in tests/test_verl.py). Tool calls run in the real rods environment executor.

What is not: the policy. verl generates with a vLLM or SGLang server on GPUs (its
``server_manager.generate``, returning a TokenOutput, replica.py:39-51); here ``ScriptedPolicy``, a
Ray actor, answers each generate request with tokens of the test's tokenizer: for each user turn
it either answers it as BFCL's ground truth does (one <tool_call> per answer, then a closing
answer) or answers at once without a call, so episodes score between 0 and 1 and tasks land in
the boundary band. The model folder holds only a config and the tokenizer (no weights: nothing
runs the model). clients/python/gpu/verl_bfcl.sh runs the same example through main_ppo on GPUs.
Environment: RODS_GATEWAY_URL, RODS_TOKEN, RODS_CAMPAIGN, RODS_OUTPUT (a JSON summary), RODS_STEPS,
RODS_EXECUTOR_URL.
"""

import asyncio
import hashlib
import importlib.util
import json
import os
import socket
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
import ray
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from torchdata.stateful_dataloader import StatefulDataLoader
from transformers import PreTrainedTokenizerFast, Qwen2Config

import transfer_queue as tq
import verl
from rods_client import RodsClient, bfcl
from rods_client.verl import (AGENT_NAME, RodsBfclAgentLoop, RodsCheckpointCallback, RodsDataset, RodsReplayBuffer,
                              RodsReplayBufferAsync)
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.experimental.reward_loop.reward_loop import RewardLoopManager
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback, build_checkpoint_callback
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ, AgentLoopWorkerTQ
from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync
from verl.trainer.ppo.v1.trainer_base import PPOTrainer
from verl.utils.dataset.rl_dataset import collate_fn
from verl.utils.tensordict_utils import list_of_dict_to_tensordict
from verl.workers.rollout.replica import TokenOutput

BATCH = 4  # prompts a step
N = 4  # responses a prompt (rollout.n)
STEPS = int(os.environ.get("RODS_STEPS", "30"))
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "verl_ppo.py"
SPECIAL = ["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added but not special, as Qwen2.5's tokenizer has them: verl's reward managers decode responses
# with skip_special_tokens=True (naive.py:119), which must keep the calls.
MARKERS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
# A Hermes-style chat template (the format of verl's default tool parser, multi_turn.format=hermes):
# tools in the system message, calls as <tool_call> blocks, tool results in <tool_response>.
TEMPLATE = """{%- if tools %}<|im_start|>system
Call a function as <tool_call>{"name": NAME, "arguments": {...}}</tool_call>. Functions:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools><|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == "assistant" %}<|im_start|>assistant
{{ message.content }}
{%- for call in message.tool_calls or [] %}
<tool_call>{"name": {{ call.function.name | tojson }}, "arguments": {{ call.function.arguments | tojson }}}</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == "tool" %}<|im_start|>user
<tool_response>{{ message.content }}</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the policy actor's class, for Ray's workers


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1, "total_storage_size": 4000}}}))
    yield tmp_path_factory.mktemp("verl")
    tq.close()
    ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(runtime):
    """A Qwen2 config and a byte-level BPE tokenizer trained on the pool and BFCL's function documents."""
    client = RodsClient.from_env()
    texts = [json.dumps(t.get("task")) for t in client.fetch_pool()["tasks"]]
    texts += [json.dumps(d) for d in bfcl.tool_documents(bfcl.CLASSES)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=1000, special_tokens=SPECIAL, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token="<unk>")
    fast.add_tokens(MARKERS, special_tokens=False)
    fast.chat_template = TEMPLATE
    folder = runtime / "model"
    fast.save_pretrained(folder)
    Qwen2Config(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
                architectures=["Qwen2ForCausalLM"]).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    return PreTrainedTokenizerFast.from_pretrained(model_dir)


def example_overrides():
    spec = importlib.util.spec_from_file_location("rods_verl_ppo_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines OVERRIDES; runs main_ppo only as __main__
    return list(module.OVERRIDES)


def config(root, model_dir):
    """verl's ppo_trainer config as main_ppo composes it, with the example's overrides as written
    and this test's: the model folder, sizes for a CPU, the checkpoint folder under ``root``."""
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        cfg = compose("ppo_trainer", overrides=example_overrides() + [
            f"actor_rollout_ref.model.path={model_dir}", "actor_rollout_ref.rollout.name=vllm",
            f"actor_rollout_ref.rollout.n={N}", "actor_rollout_ref.rollout.prompt_length=16384",
            "actor_rollout_ref.rollout.response_length=16384", f"data.train_batch_size={BATCH}", "data.seed=1",
            "+data.rods.poll_seconds=2", f"trainer.default_local_dir={root}/checkpoints", "trainer.resume_mode=auto",
            "trainer.v1.sampler.max_off_policy_threshold=8", "reward.num_workers=2"])
    OmegaConf.set_struct(cfg, False)
    OmegaConf.resolve(cfg)
    return cfg


def spool_of(cfg):
    return Path(cfg.trainer.v1.sampler.sampler_kwargs.spool_dir)


class ScriptedPolicy:
    """The replaced piece: verl's rollout server (see the module doc). ``learn`` gives it the tasks
    of a batch; for each generate request it finds the task (by its first user message and the
    tools in the prompt), the user turn the conversation is at, and the calls already made in it."""

    def __init__(self, model_dir):
        self.tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
        self.tasks = {}

    def learn(self, tasks):
        for task in tasks:
            tools = sorted(t["function"]["name"] for t in bfcl.openai_tools(task, turn=0))
            self.tasks[json.dumps(task, sort_keys=True)] = (tuple(tools), task)

    def generate(self, request_id, prompt_ids):
        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        system, *messages = text.split("<|im_start|>")[1:]
        tools, rest, decoder = [], system.split("<tools>")[1].split("</tools>")[0].strip(), json.JSONDecoder()
        while rest:
            tool, end = decoder.raw_decode(rest)
            tools.append(tool["function"]["name"])
            rest = rest[end:].strip()
        tools.sort()
        users = [i for i, m in enumerate(messages) if m.startswith("user\n") and "<tool_response>" not in m]
        said = [messages[i][len("user\n"):].split("<|im_end|>")[0] for i in users]
        turn = len(users) - 1
        # The task: its tools, and the user turns so far (a generated task may share its seed's first).
        task = next(task for tools_of, task in self.tasks.values() if tools_of == tuple(tools)
                    and len(task["ground_truth"]) > turn and all(
                        said[t].startswith(bfcl._turn_text(task["question"][t])) for t in range(turn + 1)))
        made = sum(1 for m in messages[users[-1]:] if "<tool_response>" in m)
        truth = bfcl.ground_truth_tool_calls(task, turn)
        solves = hashlib.sha256(f"{request_id}:{turn}".encode()).digest()[0] % 2 == 0
        out = "<tool_call>" + json.dumps(truth[made]) + "</tool_call>" if solves and made < len(truth) else "Done."
        ids = self.tokenizer.encode(out + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


class PolicyClient:
    """What verl's agent loop calls as ``server_manager.generate`` (tool_agent_loop.py:244-253)."""

    def __init__(self, policy):
        self.policy = policy

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        return await self.policy.generate.remote(request_id, prompt_ids)


class Rollout:
    """verl's dispatch of a step's prompts, run by PPOTrainer's own methods on these attributes:
    the data loader, the global step, and AgentLoopManagerTQ.generate_sequences over one
    AgentLoopWorkerTQ actor, whose episodes are scored by verl's reward loop workers."""

    _fetch_one_gen_batch = PPOTrainer._fetch_one_gen_batch
    _next_train_batch = PPOTrainer._next_train_batch
    _submit_batch_to_rollout = PPOTrainer._submit_batch_to_rollout
    generate_sequences = AgentLoopManagerTQ.generate_sequences

    def __init__(self, cfg, loader, policy):
        self.config, self.trainer_mode, self.global_steps = cfg, "sync", 0
        self.train_dataloader, self.train_dataloader_it = loader, None
        self.policy = policy
        self.reward = RewardLoopManager(cfg)
        self.agent_loop_workers = [AgentLoopWorkerTQ.remote(cfg, PolicyClient(policy), None,
                                                            self.reward.reward_loop_worker_handles)]
        self.agent_loop_manager = self

    def step(self, step):
        """Dispatches the next batch for ``step``; the rows drawn."""
        self.global_steps = step
        batch = self._next_train_batch()
        extra = [dict(e) for e in batch["extra_info"]]
        ray.get(self.policy.learn.remote([json.loads(e["task"]) for e in extra]))
        self._submit_batch_to_rollout(batch)
        return [{"taskId": e["rods_task_id"], "version": e["rods_pool_version"]} for e in extra]

    def close(self):
        for actor in self.agent_loop_workers + self.reward.reward_loop_workers:
            ray.kill(actor)


def episodes(meta):
    """What verl wrote to TransferQueue for the sampled trajectories: per episode its task, reward,
    calls per user turn and the user turns delivered."""
    data = tq.kv_batch_get(keys=meta.keys, partition_id="train", select_fields=["rm_scores", "extra_info", "extra_fields"])
    out = []
    for i in range(len(meta.keys)):
        fields = data["extra_fields"][i]
        out.append({"taskId": data["extra_info"][i]["rods_task_id"], "reward": float(data["rm_scores"][i].sum()),
                    "calls": fields["rods_calls"], "userTurns": int(fields["rods_user_turns"]),
                    "turns": len(json.loads(data["extra_info"][i]["task"])["question"])})
    return out


def answer(task, good):
    """A response: the first turn's ground-truth calls as <tool_call> blocks, or a refusal."""
    if not good:
        return "I cannot do that."
    blocks = ["<tool_call>" + json.dumps(call) + "</tool_call>" for call in bfcl.ground_truth_tool_calls(task, 0)]
    return "\n".join(blocks)


def written_rollout(batch, step, tokenizer, manager, good, ledger=None, prompts=None):
    """For the buffer's own tests (DAPO, staleness): writes the prompts (the first ``prompts`` of the
    batch, default all) and single-turn trajectories scored by verl's NaiveRewardManager, as
    AgentLoopWorkerTQ writes them (agent_loop_tq.py:180-227); ``good(i, s)`` says which responses
    are the ground truth's; ``ledger`` gets each trajectory's (task id, reward)."""
    uids = [uuid.uuid4().hex for _ in range(len(batch["index"]) if prompts is None else prompts)]
    tq.kv_batch_put(keys=uids, partition_id="train",
                    tags=[{"is_prompt": True, "status": "pending", "global_steps": step}] * len(uids))
    keys, fields, tags = [], [], []
    for i, uid in enumerate(uids):
        extra = batch["extra_info"][i]
        task = json.loads(extra["task"])
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


def loader_of(cfg, tokenizer):
    dataset = create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer, None, is_train=True)
    return dataset, StatefulDataLoader(dataset=dataset, batch_size=BATCH, num_workers=0, drop_last=True,
                                       collate_fn=collate_fn, sampler=create_rl_sampler(cfg.data, dataset))


def test_verl_runs_bfcl_episodes_of_the_live_pool_in_its_agent_loop_and_reports_each_step_once_across_a_resume(
        runtime, tokenizer, model_dir):
    cfg = config(runtime / "main", model_dir)
    assert cfg.actor_rollout_ref.rollout.multi_turn.enable and AGENT_NAME in _agent_loop_registry
    dataset, loader = loader_of(cfg, tokenizer)
    assert isinstance(dataset, RodsDataset) and isinstance(dataset, torch.utils.data.Dataset)
    assert len(dataset) == BATCH * 100_000 and dataset[0]["agent_name"] == AGENT_NAME
    buffer = TrainerParts(cfg, "sync")._build_replay_buffer()  # verl's own construction from the config
    assert type(buffer) is RodsReplayBuffer
    callback = build_checkpoint_callback(cfg)  # what PPOTrainer.__init__ does (trainer_base.py:122)
    assert type(callback) is RodsCheckpointCallback and isinstance(callback, CheckpointCallback)
    assert callback.run_id.startswith("run-") and callback.resumed_from(buffer.client.campaign) is None
    val = create_rl_dataset(cfg.data.val_files, cfg.data, tokenizer, None, is_train=False)
    assert val.validation and 0 < len(val) < 1000  # the pool at start, not the virtual length
    policy = ray.remote(ScriptedPolicy).remote(str(model_dir))
    rollout = Rollout(cfg, loader, policy)

    drawn_by_step, episodes_by_step = {}, {}
    checkpoint = None
    for step in range(1, STEPS + 1):
        drawn_by_step[step] = rollout.step(step)
        meta, _ = buffer.sample(global_steps=step, partition_id="train", batch_size=BATCH)
        assert len(meta.keys) == BATCH * N
        episodes_by_step[step] = episodes(meta)
        tq.kv_clear(keys=meta.keys, partition_id="train")  # as the trainer does after the step
        if step == STEPS - 4:
            checkpoint = loader.state_dict()  # what verl writes to data.pt
    assert buffer.reporter.flush(timeout=120)
    assert buffer.reporter.stats["sent"] == STEPS and buffer.reporter.stats["rejected"] == 0
    rollout.close()
    dataset.close()
    every = [e for eps in episodes_by_step.values() for e in eps]
    # Episodes went past their first user turn, ran calls, and scored across the whole range.
    assert any(e["userTurns"] >= 2 and sum(map(len, e["calls"])) > 0 and 0 < e["reward"] < 1 for e in every)
    assert {e["reward"] for e in every} >= {0.0, 1.0} or len({e["reward"] for e in every}) > 3

    # A resume from the checkpoint of step STEPS - 4: verl restores data.pt into a new loader and
    # calls sample() with global_steps = STEPS - 3, STEPS - 2, ...: steps the spool reported are skipped.
    dataset2, loader2 = loader_of(cfg, tokenizer)
    buffer2 = TrainerParts(cfg, "sync")._build_replay_buffer()
    loader2.load_state_dict(checkpoint)
    rollout2 = Rollout(cfg, loader2, policy)
    rollout2.train_dataloader_it = iter(loader2)  # torchdata hands the dataset its saved state when the iterator starts
    # The saved draw count, plus at most the one row the loader's iterator may fetch ahead.
    assert BATCH * (STEPS - 4) <= dataset2.draws <= BATCH * (STEPS - 4) + 1
    for step in range(STEPS - 3, STEPS + 3):
        drawn = rollout2.step(step)
        drawn_by_step.setdefault(step, drawn)
        meta, _ = buffer2.sample(global_steps=step, partition_id="train", batch_size=BATCH)
        episodes_by_step.setdefault(step, episodes(meta))
        tq.kv_clear(keys=meta.keys, partition_id="train")
    assert buffer2.reporter.flush(timeout=120)
    assert buffer2.reporter.stats["skipped"] == 4 and buffer2.reporter.stats["sent"] == 2
    rollout2.close()
    dataset2.close()
    with open(os.environ["RODS_OUTPUT"], "w") as f:
        json.dump({"steps": STEPS + 2, "drawn": drawn_by_step, "episodes": episodes_by_step, "batch": BATCH, "n": N}, f)


class TrainerParts:
    """What PPOTrainer._build_replay_buffer reads of the trainer, with verl's own methods for it:
    ``refill_fn`` is then a bound method of a trainer, as in verl (trainer_base.py:161)."""

    _build_replay_buffer = PPOTrainer._build_replay_buffer
    _resolve_filter_groups_metric = PPOTrainer._resolve_filter_groups_metric

    def __init__(self, cfg, mode, refill=None):
        self.config, self.trainer_mode, self.refill = cfg, mode, refill

    def _add_prompts_to_generate(self, n):
        return self.refill(n) if self.refill else 0


def test_a_shuffling_sampler_is_refused_by_name(runtime, tokenizer, model_dir):
    cfg = config(runtime / "shuffle", model_dir)
    cfg.data.shuffle = True  # verl's default: torchdata's RandomSampler, randperm of the length per iter()
    with pytest.raises(ValueError, match="data.shuffle=false"):
        create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer, None, is_train=True)


def test_dapo_keeps_filtering_and_the_groups_it_drops_are_reported_with_the_step(runtime, tokenizer, model_dir):
    # The reporter's gateway is a closed port: what is checked is the step's report as spooled.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    cfg = config(runtime / "dapo", model_dir)
    spool = spool_of(cfg)
    cfg.trainer.v1.sampler.sampler_kwargs.gateway_url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    cfg.algorithm.filter_groups.update(enable=True, metric="reward", max_inflight_gen_batches=1)
    dataset, loader = loader_of(cfg, tokenizer)
    loader = iter(loader)
    manager = NaiveRewardManager(cfg, tokenizer, get_custom_reward_fn(cfg))
    manager.loop = asyncio.new_event_loop()
    ledger, refills = [], []

    def refill(n):
        # The trainer generating replacements, half-solved groups: as many as DAPO dropped so far
        # (verl asks for 2 per drop, then keeps the surplus out of the step: exactly replaced,
        # every group written is either trained on or dropped).
        k = buffer.dropped_groups - sum(refills)
        refills.append(k)
        # Half-solved groups are never dropped: more refills mean the written answers lost their variance.
        assert len(refills) <= 8, f"DAPO dropped every refill: {buffer.dropped_groups} groups"
        if k:
            written_rollout(next(loader), 1, tokenizer, manager, ledger=ledger, prompts=k,
                            good=lambda i, s: s % 2 == 0)

    buffer = TrainerParts(cfg, "sync", refill)._build_replay_buffer()
    assert type(buffer) is RodsReplayBuffer
    assert buffer.filter_groups_metric == "reward" and buffer.gen_batch_size == 1  # verl's own, kept
    # Group 0 solved by every response (no signal: DAPO drops it), the others half solved.
    written_rollout(next(loader), 1, tokenizer, manager, good=lambda i, s: i == 0 or s % 2 == 0, ledger=ledger)
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


def test_an_async_trainer_gets_verls_async_buffer_with_staleness_eviction(runtime, tokenizer, model_dir):
    cfg = config(runtime / "async", model_dir)
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


def test_the_gpu_script_composes_with_the_example_and_passes_verls_own_config_validation(runtime, model_dir):
    """clients/python/gpu/verl_bfcl.py's overrides on the example's, for 8 GPUs, through Hydra and the
    validate_config main_ppo runs before it starts Ray (main_ppo.py:177-181)."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    spec = importlib.util.spec_from_file_location("rods_verl_bfcl_gpu", EXAMPLE.parents[1] / "gpu" / "verl_bfcl.py")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    args = example_overrides() + gpu.overrides(8, str(model_dir), 20, str(runtime / "gpu"))
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose("ppo_trainer", overrides=args)
        wrong = compose("ppo_trainer", overrides=args + ["data.train_batch_size=12"])
    assert cfg.trainer.use_v1 and cfg.actor_rollout_ref.rollout.multi_turn.enable
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    with pytest.raises(ValueError, match="ppo_mini_batch_size"):  # the validation does refuse what is wrong
        validate_config(config=wrong, use_reference_policy=need_reference_policy(wrong), use_critic=need_critic(wrong))
