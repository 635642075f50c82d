"""The slime data source and rollout log hook against the real gateway.

slime is not on PyPI and this machine reaches no other source of it, so its classes are mirrored
here, named as such: ``SlimeDataSourceMirror`` (the abstract methods of slime's DataSource,
slime/rollout/data_source.py:17-46) and rods_client.slime.SampleMirror (the Sample fields the
adapter uses). What slime does with a sample is reproduced with a real tokenizer: its default
rollout sends ``tokenizer.encode(sample.prompt, add_special_tokens=False)``
(slime/rollout/sglang_rollout.py:61), and its Dataset renders a prompt with
``apply_chat_template(messages, tools=..., tokenize=False, add_generation_prompt=True, **kwargs)``
(slime/utils/data.py:233-276). All at THUDM/slime 624b824.
"""

import abc
import inspect
import json
import socket
from types import SimpleNamespace

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from rods_client import bfcl
from rods_client.slime import RodsDataSource, SampleMirror, log_rollout_data, report_rewards

# A chat template that renders tools (Hermes style, as Qwen's), and reads one chat-template kwarg.
TEMPLATE = (
    "{% if tools %}<|im_start|>system\n# Tools\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools>"
    "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and not enable_thinking %}"
    "<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


class SlimeDataSourceMirror(abc.ABC):
    @abc.abstractmethod
    def get_samples(self, num_samples: int): ...

    @abc.abstractmethod
    def add_samples(self, samples): ...

    @abc.abstractmethod
    def save(self, rollout_id): ...

    @abc.abstractmethod
    def load(self, rollout_id=None): ...

    @abc.abstractmethod
    def __len__(self) -> int: ...


@pytest.fixture(scope="module")
def tokenizer():
    texts = [json.dumps(d) for d in bfcl.tool_documents(bfcl.CLASSES)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=800, special_tokens=["<unk>", "<|im_start|>", "<|im_end|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", unk_token="<unk>")
    fast.chat_template = TEMPLATE
    return fast


class CountingClient:
    """The real client, counting its requests (one pool request per rollout is the contract)."""

    def __init__(self, client):
        self.client = client
        self.requests = 0

    def __getattr__(self, name):
        return getattr(self.client, name)

    def fetch_pool(self, *a, **k):
        self.requests += 1
        return self.client.fetch_pool(*a, **k)


def make_args(client, tmp_path, **over):
    base = dict(n_samples_per_prompt=4, rollout_seed=3, save=str(tmp_path), load=None, apply_chat_template=True,
                apply_chat_template_kwargs=None, tool_key="tools", rods_gateway_url=client.base_url,
                rods_token=client.token, rods_campaign=client.campaign, advantage_estimator="grpo",
                rewards_normalization=True, grpo_std_normalization=True, reward_key=None)
    base.update(over)
    return SimpleNamespace(**base)


def test_meets_the_data_source_contract():
    class Probe(RodsDataSource, SlimeDataSourceMirror):
        pass

    assert not inspect.isabstract(Probe)
    assert list(inspect.signature(RodsDataSource.__init__).parameters)[:2] == ["self", "args"]


def test_prompts_are_the_chat_template_with_the_tasks_tools_as_slimes_rollout_encodes_them(slime_client, tmp_path,
                                                                                           tokenizer):
    args = make_args(slime_client, tmp_path, apply_chat_template_kwargs='{"enable_thinking": false}')
    counting = CountingClient(slime_client)
    source = RodsDataSource(args, client=counting, tokenizer=tokenizer)
    groups = source.get_samples(3)
    assert counting.requests == 1  # one pool request for the rollout, not one per group
    assert [len(g) for g in groups] == [4, 4, 4]
    assert [s.group_index for g in groups for s in g] == [0] * 4 + [1] * 4 + [2] * 4
    assert [s.index for g in groups for s in g] == list(range(12))
    assert all(s.rollout_id is None for g in groups for s in g)  # slime numbers trajectories itself
    for g in groups:
        sample = g[0]
        task = sample.metadata["task"]
        assert isinstance(sample.prompt, str)
        ids = tokenizer.encode(sample.prompt, add_special_tokens=False)  # slime's default rollout
        assert len(ids) > 0 and tokenizer.decode(ids) == sample.prompt
        names = [t["function"]["name"] for t in sample.metadata["tools"]]
        assert names and all(f'"name": "{n}"' in sample.prompt for n in names)
        assert set(names) == {d["name"] for d in bfcl.tool_documents(task["involved_classes"])} - set(
            task.get("excluded_function") or [])
        assert bfcl.first_turn(task)[0]["content"] in sample.prompt
        assert sample.prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # the kwargs reached it
    plain = RodsDataSource(make_args(slime_client, tmp_path, apply_chat_template=False, tool_key=""), tokenizer=tokenizer)
    (g,) = plain.get_samples(1)
    assert g[0].prompt == bfcl.first_turn(g[0].metadata["task"])[0]["content"] and "tools" not in g[0].metadata


def test_handed_back_groups_first_and_state_round_trip(slime_client, tmp_path, tokenizer):
    args = make_args(slime_client, tmp_path)
    source = RodsDataSource(args, tokenizer=tokenizer)
    pool_ids = {t["taskId"] for t in slime_client.fetch_pool()["tasks"]}
    groups = source.get_samples(3)
    assert len(source) == len(pool_ids)
    source.add_samples(groups[:1])  # an aborted group comes back first
    assert len(source) == len(pool_ids) + 1
    assert source.get_samples(2)[0] is groups[0]
    source.save(7)
    restored = RodsDataSource(SimpleNamespace(**{**vars(args), "load": str(tmp_path)}), tokenizer=tokenizer)
    restored.load(7)
    assert (restored.draws, restored.sample_index) == (source.draws, source.sample_index)
    ids = lambda gs: [g[0].metadata["rods_task_id"] for g in gs]  # noqa: E731
    assert ids(restored.get_samples(2)) == ids(source.get_samples(2))  # the same seeded draw


def test_the_rollout_log_hook_reports_the_rollout_as_its_step_once(slime_client, tmp_path, tokenizer):
    args = make_args(slime_client, tmp_path, rods_spool_dir=str(tmp_path / "spool"))
    source = RodsDataSource(args, sample_cls=SampleMirror, tokenizer=tokenizer)
    groups = source.get_samples(2)
    values = [[0.0, 1.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5]]
    for g, vs in zip(groups, values):
        for s, v in zip(g, vs):
            s.reward = v
    flat = [s for g in groups for s in g]  # slime hands the hook the rollout's flattened samples
    assert log_rollout_data(0, args, flat, {}, 1.0) is False  # slime's own logging still runs
    from rods_client import slime as adapter

    (reporter,) = [r for k, r in adapter._reporters.items() if k[2] == slime_client.campaign]
    assert reporter.flush(timeout=60) and reporter.acked == 1
    expected = {}
    for g, vs in zip(groups, values):
        expected.setdefault(g[0].metadata["rods_task_id"], []).extend(vs)
    # rollout 0 is rods step 1; the gateway holds exactly this body (the same again: a duplicate)
    assert slime_client.report_step(1, expected, policy_version="slime-rollout-0")["duplicate"] is True
    # A resumed run (slime restarts at start_rollout_id) logs rollout 0 again: not sent twice.
    log_rollout_data(0, args, flat, {}, 1.0)
    assert reporter.stats["skipped"] == 1 and reporter.stats["sent"] == 1

    raw, normalized = report_rewards(args, groups)  # slime's normalization, kept for old configs
    assert raw == [v for vs in values for v in vs]
    assert abs(sum(normalized[:4])) < 1e-9 and normalized[0] < 0 < normalized[1]
    assert normalized[4:] == [0.0] * 4


def test_saving_the_state_with_a_checkpoint_reports_the_checkpoint_and_a_resumed_run_names_it(slime_client, tmp_path,
                                                                                             tokenizer):
    # The gateway is down for the reporter here: what is checked is what save() spools (the
    # reporter's own tests send it).
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    down_url = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    args = make_args(slime_client, tmp_path, rods_gateway_url=down_url, rods_spool_dir=str(tmp_path / "spool"))
    source = RodsDataSource(args, client=slime_client, tokenizer=tokenizer)
    assert source.run_id.startswith("run-") and source.resumed_from is None
    from rods_client import slime as adapter

    source.save(3)  # no log_rollout_data in this process: nothing reports the rollouts, nor this
    assert not any(k[0] == down_url for k in adapter._reporters) and source.checkpoints == []
    reporter = adapter._reporter(args)  # what log_rollout_data of the rollout makes first
    key = next(k for k in adapter._reporters if k[0] == down_url)
    source.save(4)  # slime's RolloutManager.save(rollout_id) after the model's save: rods step 5
    first_id = f"{source.run_id}-step-5"
    assert reporter.pending_checkpoints == [first_id]
    spooled = json.loads((tmp_path / "spool" / "checkpoints" / f"{5:012d}.{first_id}.json").read_text())
    assert spooled["body"] == {"checkpointId": first_id, "runId": source.run_id, "step": 5, "resumedFrom": None,
                               "digest": None, "retrainedSteps": []}
    state = json.loads((tmp_path / "rollout" / "rods_data_source_4.json").read_text())
    assert state["checkpoint"]["checkpointId"] == first_id and state["checkpoint"]["campaign"] == slime_client.campaign

    # A restart loads start_rollout_id - 1 = 4: its checkpoints name the one it resumed from.
    resumed = RodsDataSource(SimpleNamespace(**{**vars(args), "load": str(tmp_path)}), client=slime_client,
                             tokenizer=tokenizer)
    resumed.load(4)
    assert resumed.run_id != source.run_id and resumed.resumed_from == first_id
    resumed.save(6)
    assert reporter.pending_checkpoints == [first_id, f"{resumed.run_id}-step-7"]
    assert resumed.checkpoints[-1]["resumedFrom"] == first_id
    given = RodsDataSource(SimpleNamespace(**{**vars(args), "rods_resumed_from": "ckpt-x"}), client=slime_client,
                           tokenizer=tokenizer)
    given.load(4)
    assert given.resumed_from == "ckpt-x"
    reporter.close(timeout=0.2)
    del adapter._reporters[key]
