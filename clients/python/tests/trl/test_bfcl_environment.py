"""rods_client.bfcl against the real environment executor, called the way TRL calls it.

TRL's GRPOTrainer parses a completion's tool calls with trl.chat_template_utils.parse_response
(the prompt's ids as prefix, the rollout's tools) and calls each as
``tool(**arguments)`` on the rollout's environment (grpo_trainer.py, _tool_call_loop); it renders
an environment's public methods as tools with transformers' get_json_schema. These tests do
exactly that with TRL's own parser and transformers' own schema code, against the executor of
the local stack (RODS_EXECUTOR_URL), on bfcl's real seed tasks.

Environment: RODS_MODEL (the tiny model's folder: its tokenizer has TRL's Qwen3 template).
"""

import json
import os
import urllib.request

import pytest
from transformers import AutoTokenizer
from transformers.utils import get_json_schema
from trl.chat_template_utils import add_response_schema, parse_response

from rods_client import bfcl

EXECUTOR = os.environ.get("RODS_EXECUTOR_URL", "http://127.0.0.1:7300")


def seeds(category, limit):
    with urllib.request.urlopen(f"{EXECUTOR}/seeds?category={category}&limit={limit}") as r:
        return json.loads(r.read())["seeds"]


@pytest.fixture(scope="module")
def tokenizer():
    return add_response_schema(AutoTokenizer.from_pretrained(os.environ["RODS_MODEL"]))


def play(env, task, tokenizer, skip_turn=None):
    """Plays the task's ground truth as a model would: each call a <tool_call> TRL parses, each
    turn ended with reply_to_user."""
    docs = {d["name"]: d for d in bfcl.tool_documents(task["involved_classes"])}
    tools = [getattr(env, d) for d in docs] + [env.reply_to_user]
    prompt = tokenizer.apply_chat_template(bfcl.first_turn(task), tools=tools, tokenize=False, add_generation_prompt=True)
    prefix = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    for t, calls in enumerate(task["ground_truth"]):
        if t != skip_turn:
            for call in bfcl.ground_truth_tool_calls(task, t):
                text = "<tool_call>\n" + json.dumps(call) + "\n</tool_call><|im_end|>"
                ids = tokenizer(text, add_special_tokens=False)["input_ids"]
                parsed = parse_response(tokenizer, ids, prefix=prefix, tools=tools)
                (tool_call,) = parsed["tool_calls"]
                function = tool_call["function"]
                answer = getattr(env, function["name"])(**function["arguments"])
                assert isinstance(answer, str)
        if t < len(task["ground_truth"]) - 1:
            following = env.reply_to_user("done")
            for message in task["question"][t + 1]:
                assert str(message["content"]) in following


@pytest.mark.parametrize("category", ["base", "miss_func", "miss_param", "long_context"])
def test_ground_truth_scores_full_progress_and_a_skipped_turn_loses_it(category, tokenizer):
    factories = bfcl.environment_factories(EXECUTOR)
    for task in seeds(category, 3):
        env = factories[bfcl.environment_name(task)]()
        assert env.reset(task=json.dumps(task)) is None
        play(env, task, tokenizer)
        assert bfcl.progress_reward([None], [env]) == [1.0], (task["id"], env.calls)

        turns = len(task["ground_truth"])
        busy = next(t for t, calls in enumerate(task["ground_truth"]) if calls)
        env = factories[bfcl.environment_name(task)]()
        env.reset(task=task)
        play(env, task, tokenizer, skip_turn=busy)
        (score,) = bfcl.progress_reward([None], [env])
        assert score <= (turns - 1) / turns, (task["id"], env.calls)


def test_a_withheld_function_answers_not_available_until_its_turn(tokenizer):
    task = next(t for t in seeds("miss_func", 20) if t.get("missed_function"))
    (at, names), = list(task["missed_function"].items())[:1]
    env = bfcl.environment_factories(EXECUTOR)[bfcl.environment_name(task)]()
    env.reset(task=task)
    answer = getattr(env, names[0])()
    assert json.loads(answer) == {"error": f"{names[0]} is not available yet"}
    for _ in range(int(at)):
        text = env.reply_to_user("ok")
    assert names[0] in text  # the turn that brings it names it


def test_every_tool_renders_as_bfcls_document(tokenizer):
    factories = bfcl.environment_factories(EXECUTOR)
    for cls in bfcl.CLASSES:
        env = factories[cls]()
        for doc in bfcl.tool_documents([cls]):
            schema = get_json_schema(getattr(env, doc["name"]))["function"]
            assert schema["name"] == doc["name"]
            assert set(schema["parameters"]["properties"]) == set(doc["parameters"]["properties"])
            assert set(schema["parameters"].get("required", [])) == set(doc["parameters"].get("required", []))
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}],
                                                 tools=[getattr(env, d["name"]) for d in bfcl.tool_documents([cls])]
                                                 + [env.reply_to_user], tokenize=False, add_generation_prompt=True)
        assert all(f'"name": "{d["name"]}"' in rendered for d in bfcl.tool_documents([cls]))


def test_every_seed_has_an_environment_and_a_foreign_task_is_refused():
    factories = bfcl.environment_factories(EXECUTOR)
    for category in ("base", "miss_func", "miss_param", "long_context"):
        for task in seeds(category, 200):
            assert bfcl.environment_name(task) in factories
    task = seeds("base", 1)[0]
    other = next(c for c in bfcl.CLASSES if c not in task["involved_classes"])
    with pytest.raises(ValueError, match="not among this environment's classes"):
        factories[other]().reset(task=task)
