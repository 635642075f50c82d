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
import asyncio
import http.server
import inspect
import json
import socket
import threading
import time
from types import SimpleNamespace

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from rods_client import RodsClient, bfcl, slime
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
    """The real client, counting its requests by the thread that made them."""

    def __init__(self, client):
        self.client = client
        self.threads = []

    def __getattr__(self, name):
        return getattr(self.client, name)

    def fetch_pool(self, *a, **k):
        self.threads.append(threading.get_ident())
        return self.client.fetch_pool(*a, **k)

    def on_this_thread(self):
        return self.threads.count(threading.get_ident())


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
    # One pool request on slime's thread, the first draw's; later draws (slime makes them inside
    # its rollout's event loop) take the pool a background thread keeps fresh.
    assert counting.on_this_thread() == 1
    assert len(source.get_samples(3)) == 3 and counting.on_this_thread() == 1
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
        # a miss_func task's withheld functions arrive with their turn (generate adds them)
        assert set(names) == {d["name"] for d in bfcl.tool_documents(task["involved_classes"])} - set(
            task.get("excluded_function") or []) - set(bfcl.withheld_functions(task, 0))
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


def test_rollouts_draw_from_the_last_pool_while_the_gateway_is_away(slime_client, tmp_path, tokenizer):
    # The gateway goes away for this client: its address is switched to a closed port (the
    # refresher's requests are refused as they would be with the gateway down).
    client = RodsClient(slime_client.base_url, slime_client.token, slime_client.campaign, retries=0, timeout=5)
    source = RodsDataSource(make_args(slime_client, tmp_path, rods_pool_poll_seconds=1), client=client,
                            tokenizer=tokenizer)
    first = source.get_samples(2)
    version = source.pool_version
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    client.base_url = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    deadline = time.monotonic() + 60
    while source.pool_refresh_errors == 0:
        assert time.monotonic() < deadline, "the refresher never noticed the outage"
        time.sleep(0.2)
    during = source.get_samples(3)  # no exception: the last pool serves
    assert [len(g) for g in during] == [4, 4, 4] and source.pool_version == version
    pool_ids = {t["taskId"] for t in slime_client.fetch_pool()["tasks"]}
    assert {g[0].metadata["rods_task_id"] for g in first + during} <= pool_ids
    source.live_pool.close()


class SglangMirror:
    """slime's router's ``POST /generate`` as slime's generate uses it (sglang_rollout.py:176-219:
    ``input_ids``, ``sampling_params.max_new_tokens``, ``return_logprob``; the answer's ``text`` and
    ``meta_info.output_token_logprobs`` / ``finish_reason.type``), named as a mirror: sglang needs a
    GPU. Its policy is scripted for the episode's ``task``: ``oracle`` answers each user turn with
    that turn's ground-truth calls as ``<tool_call>`` blocks, then "Done." once the results are
    back; ``idle`` never calls."""

    def __init__(self, tokenizer, policy="oracle"):
        self.tokenizer, self.policy, self.requests, self.task = tokenizer, policy, [], None
        self.answers = []
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                out = json.dumps(mirror.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def answer(self, body):
        self.requests.append(body)
        text = self.tokenizer.decode(body["input_ids"])
        task = self.task
        turn = text.count("<|im_start|>user\n") - 1
        last = text.rsplit("<|im_start|>", 2)[-2]
        if self.policy == "oracle" and not last.startswith("tool") and task["ground_truth"][turn]:
            reply = "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in bfcl.ground_truth_tool_calls(task, turn))
        else:
            reply = "Done."
        ids = self.tokenizer.encode(reply, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        limit = body["sampling_params"]["max_new_tokens"]
        finish = "length" if len(ids) > limit else "stop"
        ids = ids[:limit]
        self.answers.append(ids)
        return {"text": self.tokenizer.decode(ids, skip_special_tokens=True),
                "meta_info": {"output_token_logprobs": [[-0.25, i, None] for i in ids], "finish_reason": {"type": finish}}}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _episode_args(client, tmp_path, tokenizer, mirror, **over):
    folder = tmp_path / "tokenizer"
    if not folder.exists():
        tokenizer.save_pretrained(str(folder))
    return make_args(client, tmp_path, hf_checkpoint=str(folder), sglang_router_ip="127.0.0.1",
                     sglang_router_port=mirror.port, **over)


def _segments(sample):
    """The response as (loss_mask value, text) runs."""
    out, start = [], 0
    response = sample.tokens[len(sample.tokens) - sample.response_length:]
    for i in range(1, len(response) + 1):
        if i == len(response) or sample.loss_mask[i] != sample.loss_mask[start]:
            out.append((sample.loss_mask[start], response[start:i]))
            start = i
    return out


def test_a_multi_turn_episode_runs_its_calls_in_the_executor_and_is_rewarded_turn_by_turn(slime_client, tmp_path,
                                                                                        tokenizer):
    source = RodsDataSource(make_args(slime_client, tmp_path), tokenizer=tokenizer)
    entries = source.live_pool.latest()[1]
    oracle = SglangMirror(tokenizer)
    idle = SglangMirror(tokenizer, policy="idle")
    try:
        args = _episode_args(slime_client, tmp_path, tokenizer, oracle)
        by_category = {}
        for entry in entries:
            by_category.setdefault(entry.get("category"), entry)
        assert "miss_func" in by_category, sorted(by_category)
        for category, entry in sorted(by_category.items()):
            task = oracle.task = idle.task = entry["task"]
            (sample,) = source._group(entry)[:1]
            prompt_ids = tokenizer.encode(sample.prompt, add_special_tokens=False)
            oracle.answers.clear()
            done = asyncio.run(slime.generate(args, sample, {"max_new_tokens": 1 << 17, "temperature": 1.0}))
            assert done is sample and sample.status == SampleMirror.Status.COMPLETED, category
            # The policy's tokens are trained on, with their log-probabilities; what rods appended is not.
            assert len(sample.loss_mask) == len(sample.rollout_log_probs) == sample.response_length > 0
            assert sample.tokens[:len(prompt_ids)] == prompt_ids
            trained = [t for m, seg in _segments(sample) if m == 1 for t in seg]
            assert trained == [t for a in oracle.answers for t in a]
            assert all(lp == -0.25 for lp, m in zip(sample.rollout_log_probs, sample.loss_mask) if m == 1)
            assert all(lp == 0.0 for lp, m in zip(sample.rollout_log_probs, sample.loss_mask) if m == 0)
            # every request carried the whole episode so far
            assert all(sample.tokens[:len(r["input_ids"])] == r["input_ids"] for r in oracle.requests[-len(oracle.answers):])
            appended = "".join(tokenizer.decode(seg) for m, seg in _segments(sample) if m == 0)
            truth = task["ground_truth"]
            # each call ran in the executor (a tool message each) and each later user turn arrived
            assert appended.count("<|im_start|>tool\n") == sum(len(t) for t in truth), (
                category, task.get("id"), truth, sample.metadata["rods_calls"], appended[-3000:])
            for turn in task["question"][1:]:
                for message in turn:
                    assert message["content"] in appended, category
            assert sample.metadata["rods_calls"][:len(truth)] == [
                [bfcl.call_string(c["name"], c["arguments"]) for c in bfcl.ground_truth_tool_calls(task, t)]
                for t in range(len(truth))]
            for name, at in bfcl.withheld_functions(task, 0).items():
                assert f'"name": "{name}"' not in sample.prompt  # withheld from the prompt's tools ...
                before, _, after = appended.partition(task["question"][at][0]["content"] if task["question"][at] else
                                                      "New functions are available now")
                assert f'"name": "{name}"' in after and f'"name": "{name}"' not in before  # ... until its turn
            # BFCL's progress reward of the whole episode: every turn right
            assert asyncio.run(slime.reward(args, sample)) == 1.0, category

            lazy = source._group(entry)[0]
            asyncio.run(slime.generate(_episode_args(slime_client, tmp_path, tokenizer, idle), lazy,
                                       {"max_new_tokens": 1 << 17}))
            expected = sum(1.0 for t in truth if not t) / len(truth)  # only the turns that need no call
            assert asyncio.run(slime.reward(args, [lazy, sample])) == [expected, 1.0], category

        # slime's own single-turn generate: the response's calls score the first turn
        entry = by_category["base"]
        oracle.task = entry["task"]
        single = source._group(entry)[0]
        single.response = "".join(f"<tool_call>{json.dumps(c)}</tool_call>"
                                  for c in bfcl.ground_truth_tool_calls(entry["task"], 0))
        assert asyncio.run(slime.reward(args, single)) == 1.0 / len(entry["task"]["ground_truth"])

        # the response budget is the whole episode's: cut off, TRUNCATED
        short = source._group(entry)[0]
        asyncio.run(slime.generate(args, short, {"max_new_tokens": 3}))
        assert short.status == SampleMirror.Status.TRUNCATED and short.response_length == 3
    finally:
        oracle.close()
        idle.close()
        source.live_pool.close()


def test_groups_the_dynamic_filter_drops_are_reported_with_the_rollout(slime_client, tmp_path, tokenizer):
    args = make_args(slime_client, tmp_path, rods_spool_dir=str(tmp_path / "spool"))
    source = RodsDataSource(args, tokenizer=tokenizer)
    mastered, boundary = source.get_samples(2)
    for s in mastered:
        s.reward = 1.0
    for s, v in zip(boundary, [0.0, 1.0, 1.0, 0.0]):
        s.reward = v
    # slime's default filter (nonzero reward std) drops the group every sample solved
    assert slime.dynamic_filter(args, mastered) is False and slime.dynamic_filter(args, boundary) is True
    assert log_rollout_data(1, args, list(boundary), {}, 1.0) is False  # slime logs the kept ones only
    (reporter,) = [r for k, r in slime._reporters.items() if k[3] == str(tmp_path)]
    assert reporter.flush(timeout=60)
    expected = {}
    for s in list(boundary) + list(mastered):
        expected.setdefault(s.metadata["rods_task_id"], []).append(s.reward)
    assert slime_client.report_step(2, expected, policy_version="slime-rollout-1")["duplicate"] is True
    # taken once: the next rollout's report does not carry them again
    assert slime._dropped.get(slime._reporter_key(args)) is None
    source.live_pool.close()
