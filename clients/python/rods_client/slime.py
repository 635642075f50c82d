"""rods for slime (THUDM/slime): the campaign's live pool as slime's data source, each rollout's
rewards reported once as the rollout's step.

    python train.py ... \\
        --data-source-path rods_client.slime.RodsDataSource \\
        --custom-generate-function-path rods_client.slime.generate \\
        --custom-rm-path rods_client.slime.reward \\
        --dynamic-sampling-filter-path rods_client.slime.dynamic_filter \\
        --custom-rollout-log-function-path rods_client.slime.log_rollout_data \\
        --apply-chat-template --n-samples-per-prompt 8 --rollout-batch-size 32

What slime's own code does, read at THUDM/slime 624b824 (2026-08-21), and how this follows it:

* slime builds the data source as ``cls(args)`` in its rollout manager (slime/ray/rollout.py:383-384) and
  calls ``get_samples(n)`` for ``n`` prompt groups of ``args.n_samples_per_prompt`` samples each
  (slime/rollout/data_source.py:17-46), synchronously inside the rollout's event loop
  (slime/rollout/sglang_rollout.py:410). ``RodsDataSource.get_samples`` draws ``n`` distinct tasks
  of the newest pool a background thread keeps (rods_client.pool.LivePool: a long poll of the
  gateway); only the first call waits for a request, and while the gateway is away rollouts draw
  from the last pool (``pool_refresh_errors`` counts the failed refreshes, each logged).
* ``generate``, ``reward`` and ``dynamic_filter`` are slime's custom generate function (a BFCL
  multi-turn episode with its calls run in the rods executor), reward function (BFCL's progress
  reward of the episode) and dynamic sampling filter (slime's own verdict, with the dropped
  groups' rewards reported with the rollout): see each one's documentation.
* slime's default rollout sends ``tokenizer.encode(sample.prompt, add_special_tokens=False)``
  (slime/rollout/sglang_rollout.py:61): the prompt must be the text after the chat template. As
  slime's Dataset does (slime/utils/data.py:233-276), with ``--apply-chat-template`` the prompt is
  ``tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True,
  **apply_chat_template_kwargs)`` with the task's functions as ``tools`` (unless ``--tool-key`` is
  empty), and the tools are kept in ``metadata[tool_key]``; without it the prompt is the first
  user turn's text. The tokenizer is ``args.hf_checkpoint``'s.
* ``Sample.rollout_id`` groups the samples of one trajectory (slime/utils/types.py:99-106); it is
  left unset, and slime numbers it. The step is the rollout's: slime's training loop runs
  ``for rollout_id in range(args.start_rollout_id, args.num_rollout)`` (train.py:49) and hands each
  rollout's samples, with their raw rewards, to ``--custom-rollout-log-function-path`` as
  ``log_rollout_data(rollout_id, args, samples, metrics, rollout_time)`` (slime/observability/
  rollout_metrics.py:256-260, slime/ray/rollout.py:506). ``log_rollout_data`` reports step
  ``rollout_id + 1`` through the durable spool (rods_client.reporting; ``<args.save>/rods-spool``),
  never blocking the rollout, and returns False so slime's own logging runs too.
* ``save(rollout_id)`` / ``load(rollout_id)`` keep the draw counter with slime's checkpoints
  (train.py:79-80 saves after the model; placement_group.py:221-222 loads ``start_rollout_id - 1``);
  a resumed run's rollouts that the spool had reported are not sent again.
* ``save(rollout_id)`` is also the checkpoint's report: slime calls it (through
  ``RolloutManager.save``, slime/ray/rollout.py:530-531, the process that runs
  ``log_rollout_data``) once ``actor_model.save_model(rollout_id)`` has returned (train.py:71-80;
  actor_group.py:151-153 waits for every actor's save). The checkpoint holds steps up to
  ``rollout_id + 1`` and is reported through the same spool (when ``log_rollout_data`` reports the
  rollouts), in order with them, as
  ``<run id>-step-<rollout_id + 1>`` (one run id per process, ``run-`` and 12 hex digits, or
  ``args.rods_run_id``); the saved state file records it, and ``load`` of a resumed run reads it
  back as the checkpoint every later one resumes from (or ``args.rods_resumed_from``), with the rollouts
  it trains again (``rods_client.reporting``: retrainedSteps). No digest: the Megatron checkpoint
  is written by the training actors, on other nodes and, with ``--async-save``, later.

Settings (``rods_pool_poll_seconds``, ``rods_max_tool_calls``, ``rods_dynamic_filter_path``,
``rods_executor_url``) are keys of the YAML file of slime's ``--custom-config-path``, which slime
sets on ``args`` (slime/utils/arguments.py:2013-2018).

``report_rewards`` (``--custom-reward-post-process-path``) keeps slime's GRPO normalization for code
written against it; it reports nothing (slime does not tell it the step).
"""

from __future__ import annotations

import asyncio
import copy
import enum
import importlib
import json
import logging
import math
import os
import random
import threading
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import RodsClient
from ._common import first_turn
from .bfcl import ExecutorClient, environment_class, openai_tools, response_calls, tool_calls_in, turn_scores
from .pool import LivePool
from .reporting import StepReporter, check_id, default_spool_dir, new_run_id

try:  # slime imports torch; without it the classes keep the same methods on plain bases
    from slime.rollout.data_source import DataSource as _DataSourceBase
    from slime.utils.types import Sample as _SlimeSample
except ImportError:  # pragma: no cover - exercised only where slime is absent
    _DataSourceBase = object  # type: ignore[misc,assignment]
    _SlimeSample = None

__all__ = ["RodsDataSource", "log_rollout_data", "flush", "report_rewards", "generate", "reward", "dynamic_filter",
           "SampleMirror"]

log = logging.getLogger("rods_client")


class StatusMirror(enum.Enum):
    """slime's ``Sample.Status`` (slime/utils/types.py:130-138), where slime is not installed."""

    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass
class SampleMirror:
    """The fields of slime's ``Sample`` (slime/utils/types.py:94-151) this adapter sets and reads,
    used only where slime is not installed (it is not on PyPI)."""

    Status = StatusMirror

    group_index: Optional[int] = None
    index: Optional[int] = None
    rollout_id: Optional[int] = None
    prompt: Any = ""
    tokens: List[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    label: Optional[str] = None
    reward: Any = None
    loss_mask: Optional[List[int]] = None
    rollout_log_probs: Optional[List[float]] = None
    status: StatusMirror = StatusMirror.PENDING
    metadata: Dict[str, Any] = field(default_factory=dict)


def _client(args: Any) -> RodsClient:
    return RodsClient.from_env(getattr(args, "rods_gateway_url", None), getattr(args, "rods_token", None),
                               getattr(args, "rods_campaign", None))


def _chat_kwargs(args: Any) -> Dict[str, Any]:
    kwargs = getattr(args, "apply_chat_template_kwargs", None) or {}
    if isinstance(kwargs, str):  # slime takes it as JSON on the command line
        kwargs = json.loads(kwargs)
    return dict(kwargs)


class RodsDataSource(_DataSourceBase):  # type: ignore[misc,valid-type]
    def __init__(self, args: Any, client: Optional[RodsClient] = None, sample_cls: Any = None, tokenizer: Any = None):
        self.args = args
        self.client = client or _client(args)
        self.sample_cls = sample_cls or _SlimeSample or SampleMirror
        self.n_samples_per_prompt = int(getattr(args, "n_samples_per_prompt", 1) or 1)
        self.seed = int(getattr(args, "rollout_seed", 0) or 0)
        self.buffer: List[List[Any]] = []
        self.draws = 0
        self.sample_group_index = 0
        self.sample_index = 0
        self.pool_version: Optional[int] = None
        self._live: Optional[LivePool] = None
        self._tokenizer = tokenizer
        self.run_id = check_id("rods_run_id", getattr(args, "rods_run_id", None) or new_run_id(), max_length=100)
        self.resumed_from: Optional[str] = getattr(args, "rods_resumed_from", None)
        self.checkpoints: List[Dict[str, Any]] = []

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.args.hf_checkpoint, trust_remote_code=True)
        return self._tokenizer

    def get_samples(self, num_samples: int) -> List[List[Any]]:
        groups = self.buffer[:num_samples]
        self.buffer = self.buffer[num_samples:]
        missing = num_samples - len(groups)
        if missing <= 0:
            return groups
        # slime calls this inside its rollout's event loop (sglang_rollout.py:410): no request here
        # but the very first; the pool comes from the refresher, the last one while the gateway is away.
        self.pool_version, tasks = self.live_pool.latest()
        rng = random.Random(f"{self.seed}:{self.draws}")
        self.draws += 1
        picked = rng.sample(tasks, min(missing, len(tasks)))
        picked += rng.choices(tasks, k=missing - len(picked))
        groups.extend(self._group(entry) for entry in picked)
        return groups

    @property
    def live_pool(self) -> LivePool:
        """The campaign's pool, refreshed by a background thread that long-polls the gateway (made
        at the first draw, which waits for the campaign's first pool)."""
        if self._live is None:
            self._live = LivePool(self.client, poll_seconds=int(getattr(self.args, "rods_pool_poll_seconds", 20) or 20))
        return self._live

    @property
    def pool_refresh_errors(self) -> int:
        """Failed pool refreshes (the gateway away): each rollout meanwhile drew from the last pool."""
        return self._live.refresh_errors if self._live is not None else 0

    def prompt(self, task: Dict[str, Any]) -> Tuple[Any, List[Dict[str, Any]]]:
        """The sample's prompt as slime's Dataset would make it, and the task's tools (without the
        functions a miss_func task withholds until a later turn: ``generate`` adds them then)."""
        messages = first_turn(task)
        tool_key = getattr(self.args, "tool_key", "tools")
        tools = openai_tools(task, turn=0) if tool_key else []
        if not getattr(self.args, "apply_chat_template", False):
            return "\n".join(str(m.get("content") or "") for m in messages), tools
        text = self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                                  add_generation_prompt=True, **_chat_kwargs(self.args))
        return text, tools

    def _group(self, entry: Dict[str, Any]) -> List[Any]:
        task = entry.get("task") or {}
        prototype = self.sample_cls()
        prototype.prompt, tools = self.prompt(task)
        prototype.label = json.dumps(task.get("ground_truth"))
        prototype.metadata = {"rods_task_id": entry["taskId"], "rods_category": entry.get("category"),
                              "rods_origin": entry.get("origin"), "rods_pool_version": self.pool_version, "task": task}
        tool_key = getattr(self.args, "tool_key", "tools")
        if tool_key:
            prototype.metadata[tool_key] = tools
        group = []
        for _ in range(self.n_samples_per_prompt):
            sample = copy.deepcopy(prototype)
            sample.group_index = self.sample_group_index
            sample.index = self.sample_index
            self.sample_index += 1
            group.append(sample)
        self.sample_group_index += 1
        return group

    def add_samples(self, samples: List[List[Any]]) -> None:
        self.buffer.extend(samples)

    def _state_path(self, root: Optional[str], rollout_id: Any) -> Optional[str]:
        if rollout_id is None or not root:
            return None
        return os.path.join(root, f"rollout/rods_data_source_{rollout_id}.json")

    def save(self, rollout_id: Any) -> None:
        path = self._state_path(getattr(self.args, "save", None), rollout_id)
        if path is None:
            return
        state: Dict[str, Any] = {"draws": self.draws, "sample_group_index": self.sample_group_index,
                                 "sample_index": self.sample_index}
        # The checkpoint is reported where this process reports the rollouts (log_rollout_data ran
        # before, in the same rollout): without that hook no step of it would ever be sent.
        reporter = _existing_reporter(self.args)
        if reporter is not None:
            step = int(rollout_id) + 1
            state["checkpoint"] = {"campaign": reporter.client.campaign, "checkpointId": f"{self.run_id}-step-{step}",
                                   "runId": self.run_id, "step": step, "resumedFrom": self.resumed_from,
                                   "digest": None}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(state, f)
        if reporter is not None:
            checkpoint = state["checkpoint"]
            reporter.checkpoint(checkpoint["step"], checkpoint["checkpointId"], self.run_id,
                                resumed_from=self.resumed_from)
            self.checkpoints.append(checkpoint)

    def load(self, rollout_id: Any = None) -> None:
        root = getattr(self.args, "load", None) or getattr(self.args, "save", None)
        path = self._state_path(root, rollout_id)
        if path is None or not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        self.draws = int(state["draws"])
        self.sample_group_index = int(state["sample_group_index"])
        self.sample_index = int(state["sample_index"])
        checkpoint = state.get("checkpoint") or {}
        if getattr(self.args, "rods_resumed_from", None) is None and checkpoint.get("checkpointId"):
            # A state saved before rods reported checkpoints has none: resumedFrom stays null.
            if checkpoint.get("campaign") in (None, self.client.campaign):
                self.resumed_from = str(checkpoint["checkpointId"])

    def __len__(self) -> int:
        return len(self.live_pool.latest()[1]) + len(self.buffer)


def _reward_value(sample: Any, args: Any) -> Optional[float]:
    if hasattr(sample, "get_reward_value"):
        value = sample.get_reward_value(args)
    else:
        value = sample.reward
        if isinstance(value, dict):
            value = value[getattr(args, "reward_key", None)]
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


_reporters: Dict[Tuple[Any, ...], StepReporter] = {}
_reporters_lock = threading.Lock()


def _reporter_key(args: Any) -> Tuple[Any, ...]:
    return (getattr(args, "rods_gateway_url", None), getattr(args, "rods_token", None),
            getattr(args, "rods_campaign", None), getattr(args, "save", None))


def _existing_reporter(args: Any) -> Optional[StepReporter]:
    with _reporters_lock:
        return _reporters.get(_reporter_key(args))


def _reporter(args: Any) -> StepReporter:
    key = _reporter_key(args)
    with _reporters_lock:
        if key not in _reporters:
            client = _client(args)
            folder = getattr(args, "rods_spool_dir", None) or default_spool_dir(client.campaign, getattr(args, "save", None))
            _reporters[key] = StepReporter(client, folder, strict=bool(getattr(args, "rods_strict", False)))
        return _reporters[key]


def _rewards_by_task(samples: List[Any], args: Any, into: Optional[Dict[str, List[float]]] = None
                     ) -> Dict[str, List[float]]:
    groups: Dict[str, List[float]] = into if into is not None else {}
    for s in samples:
        task_id = (getattr(s, "metadata", None) or {}).get("rods_task_id")
        value = _reward_value(s, args)
        if task_id is not None and value is not None:
            groups.setdefault(str(task_id), []).append(value)
    return groups


def log_rollout_data(rollout_id: int, args: Any, samples: List[Any], rollout_extra_metrics: Any = None,
                     rollout_time: Any = None) -> bool:
    """slime's rollout log hook: reports the rollout's raw rewards per task as step rollout_id + 1,
    with those of the groups ``dynamic_filter`` dropped during the rollout."""
    flat = [s for group in samples for s in group] if samples and isinstance(samples[0], list) else list(samples)
    groups = _rewards_by_task(flat, args)
    with _reporters_lock:
        dropped = _dropped.pop(_reporter_key(args), [])
    for group in dropped:
        _rewards_by_task(group, args, groups)
    _reporter(args).report(int(rollout_id) + 1, groups, policy_version=f"slime-rollout-{int(rollout_id)}")
    return False


# The groups dynamic_filter dropped since the last log_rollout_data, per reporter. slime runs both
# in its RolloutManager actor (the filter on the rollout's event-loop thread, sglang_rollout.py:428;
# the log hook after the rollout, ray/rollout.py:506), so the next log of the same process takes them.
_dropped: Dict[Tuple[Any, ...], List[List[Any]]] = {}


def _load_path(path: str) -> Callable[..., Any]:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _nonzero_std(args: Any, samples: List[Any], **kwargs: Any) -> bool:
    """slime's default filter (filter_hub/dynamic_sampling_filters.py:9, check_reward_nonzero_std),
    where slime is not installed: keep a group whose rewards are not all equal."""
    values = [_reward_value(s, args) or 0.0 for s in samples]
    return len(set(values)) > 1


def dynamic_filter(args: Any, samples: List[Any], **kwargs: Any) -> Any:
    """``--dynamic-sampling-filter-path rods_client.slime.dynamic_filter``: slime's dynamic sampling
    filter named by ``rods_dynamic_filter_path`` (default slime's ``check_reward_nonzero_std``),
    whose verdict is returned as it is; a group it drops is not trained on, but its rewards are
    reported to rods with the rollout's (the too-easy and too-hard groups are exactly the ones the
    boundary is made of). slime gives dropped groups to nothing else (sglang_rollout.py:426-432)."""
    path = getattr(args, "rods_dynamic_filter_path", None)
    if path:
        inner = _load_path(path)
    else:
        try:
            from slime.rollout.filter_hub.dynamic_sampling_filters import check_reward_nonzero_std as inner
        except ImportError:
            inner = _nonzero_std
    verdict = inner(args, samples, **kwargs)
    if not getattr(verdict, "keep", verdict):
        with _reporters_lock:
            _dropped.setdefault(_reporter_key(args), []).append(list(samples))
    return verdict


def flush(timeout: Optional[float] = None) -> bool:
    """Waits until every rollout reported in this process was sent (False when ``timeout`` passed)."""
    with _reporters_lock:
        reporters = list(_reporters.values())
    return all(r.flush(timeout) for r in reporters)


def report_rewards(args: Any, samples: List[Any]) -> Tuple[List[float], List[float]]:
    """slime's reward post-process hook with its default GRPO normalization (reports nothing)."""
    flat = [s for group in samples for s in group] if samples and isinstance(samples[0], list) else list(samples)
    raw = [_reward_value(s, args) or 0.0 for s in flat]
    return raw, _normalized(args, flat, raw)


def _normalized(args: Any, flat: List[Any], raw: List[float]) -> List[float]:
    """GRPO group normalization as slime applies it by default (mean, then std for grpo/gspo/cispo)."""
    estimator = getattr(args, "advantage_estimator", None)
    if estimator not in ("grpo", "gspo", "cispo", "reinforce_plus_plus_baseline") or not getattr(
            args, "rewards_normalization", False):
        return list(raw)
    by_group: Dict[Any, List[int]] = {}
    for i, s in enumerate(flat):
        by_group.setdefault(getattr(s, "group_index", None), []).append(i)
    out = list(raw)
    divide = estimator in ("grpo", "gspo", "cispo") and getattr(args, "grpo_std_normalization", False)
    for members in by_group.values():
        values = [raw[i] for i in members]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
        for i in members:
            out[i] = (raw[i] - mean) / (std + 1e-6) if divide else raw[i] - mean
    return out


# --- BFCL multi-turn rollouts: a generate function and a reward function for slime ---------------

_tokenizers: Dict[str, Any] = {}


def _tokenizer(args: Any) -> Any:
    """slime's own tokenizer of the rollout (GenerateState, sglang_rollout.py:83-91), else
    ``args.hf_checkpoint``'s, loaded once."""
    try:
        from slime.rollout.sglang_rollout import GenerateState
    except ImportError:
        path = str(args.hf_checkpoint)
        if path not in _tokenizers:
            from transformers import AutoTokenizer

            _tokenizers[path] = AutoTokenizer.from_pretrained(path, trust_remote_code=True)
        return _tokenizers[path]
    return GenerateState(args).tokenizer


def _post_json(url: str, payload: Dict[str, Any], timeout: float = 600.0) -> Dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(payload).encode("utf-8"), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


async def _post(url: str, payload: Dict[str, Any]) -> Dict[str, Any]:
    try:  # slime's own client of its router (retries, connection pool)
        from slime.utils.http_utils import post
    except ImportError:
        return await asyncio.to_thread(_post_json, url, payload)
    return await post(url, payload)


def _continuation(tokenizer: Any, messages: List[Dict[str, Any]], args: Any) -> str:
    """The chat template's text for ``messages`` appended to a conversation, then the assistant's
    generation prompt: the rendering of a one-message conversation followed by them, less the
    rendering of that message alone (so a template's tool and user framing is its own)."""
    base = [{"role": "user", "content": "."}]
    kwargs = _chat_kwargs(args)
    before = tokenizer.apply_chat_template(base, tokenize=False, add_generation_prompt=False, **kwargs)
    after = tokenizer.apply_chat_template(base + messages, tokenize=False, add_generation_prompt=True, **kwargs)
    if not after.startswith(before):
        raise RuntimeError("rods: this chat template does not render a conversation as the prefix of its "
                           "continuation; the multi-turn generate cannot append tool results and user turns")
    return after[len(before):]


def _executor(args: Any) -> ExecutorClient:
    return ExecutorClient(getattr(args, "rods_executor_url", None))


async def generate(args: Any, sample: Any, sampling_params: Dict[str, Any], evaluation: bool = False) -> Any:
    """``--custom-generate-function-path rods_client.slime.generate``: one BFCL multi-turn episode.

    slime calls it as ``await generate(args, sample, sampling_params)`` inside its semaphore
    (sglang_rollout.py:245-262). The policy answers through slime's router
    (``http://{sglang_router_ip}:{sglang_router_port}/generate`` with ``input_ids`` and
    ``return_logprob``, as slime's own generate, sglang_rollout.py:152-221). Each
    ``<tool_call>{"name", "arguments"}</tool_call>`` of an answer runs in the rods environment
    executor (one environment per episode: the state carries from call to call and turn to turn)
    and its result is appended as a tool message; an answer without a tool call ends the user's
    turn and the task's next user turn is appended, with the documents of the functions a
    miss_func task brings at that turn. Tool results and user turns are in the response with
    ``loss_mask`` 0, the policy's tokens with 1 and their log-probabilities (as slime's examples
    do, examples/retool/generate_with_retool.py:215-404). The episode ends after the last user
    turn, at ``max_new_tokens`` for the whole response (or ``--rollout-max-context-len``:
    TRUNCATED), after ``rods_max_tool_calls`` calls (default 32), or when the router aborts
    (ABORTED). The calls made per user turn are in ``metadata["rods_calls"]``, which ``reward``
    scores. A sample handed back with a partial response starts its episode again.
    """
    tokenizer = _tokenizer(args)
    task = sample.metadata["task"]
    status = type(sample).Status
    env = environment_class(tuple(sorted(set(task["involved_classes"]))))(_executor(args))
    env.reset(task=task)
    url = f"http://{args.sglang_router_ip}:{args.sglang_router_port}/generate"
    prompt_ids = tokenizer.encode(sample.prompt, add_special_tokens=False)
    budget = int(sampling_params.get("max_new_tokens") or 1024)
    context = getattr(args, "rollout_max_context_len", None)
    max_calls = int(getattr(args, "rods_max_tool_calls", None) or 32)
    tokens: List[int] = []
    mask: List[int] = []
    log_probs: List[float] = []
    text: List[str] = []
    outcome = status.COMPLETED
    calls_made = 0
    while True:
        left = budget - len(tokens)
        if context:
            left = min(left, int(context) - len(prompt_ids) - len(tokens))
        if left <= 0:
            outcome = status.TRUNCATED
            break
        out = await _post(url, {"input_ids": prompt_ids + tokens, "return_logprob": True,
                                "sampling_params": dict(sampling_params, max_new_tokens=left)})
        meta = out.get("meta_info") or {}
        finish = (meta.get("finish_reason") or {}).get("type")
        pairs = meta.get("output_token_logprobs") or []
        tokens += [int(p[1]) for p in pairs]
        log_probs += [float(p[0]) for p in pairs]
        mask += [1] * len(pairs)
        text.append(str(out.get("text") or ""))
        if finish == "abort":
            outcome = status.ABORTED
            break
        if finish == "length":
            outcome = status.TRUNCATED
            break
        calls = tool_calls_in(text[-1])
        if calls:
            if calls_made + len(calls) > max_calls:
                log.warning("rods: episode of task %s stopped at %d tool calls (rods_max_tool_calls)",
                            task.get("id"), calls_made)
                break
            calls_made += len(calls)
            messages = [{"role": "tool", "content": await asyncio.to_thread(env._call, name, arguments)}
                        for name, arguments in calls]
        else:
            request = env._next_user_message()
            if request is None:
                break
            messages = [{"role": "user", "content": request}]
        appended = _continuation(tokenizer, messages, args)
        ids = tokenizer.encode(appended, add_special_tokens=False)
        tokens += ids
        log_probs += [0.0] * len(ids)
        mask += [0] * len(ids)
        text.append(appended)
    sample.tokens = prompt_ids + tokens
    sample.response = "".join(text)
    sample.response_length = len(tokens)
    sample.loss_mask = mask
    sample.rollout_log_probs = log_probs
    sample.status = outcome
    sample.metadata["rods_calls"] = env.calls
    env._close_session()  # the episode is over: its live environment in the executor is not
    return sample


def _episode_score(args: Any, sample: Any) -> float:
    metadata = getattr(sample, "metadata", None) or {}
    task = metadata.get("task")
    if not task or not task.get("ground_truth"):
        return 0.0
    calls = metadata.get("rods_calls")
    if calls is None:  # slime's own single-turn generate: the response is the first turn's answer
        calls = [response_calls(getattr(sample, "response", ""))]
    scores = turn_scores(task, calls, _executor(args))
    return sum(scores) / len(scores) if scores else 0.0


async def reward(args: Any, sample: Any, **kwargs: Any) -> Any:
    """``--custom-rm-path rods_client.slime.reward``: BFCL's progress reward of the episode, the mean
    over the task's user turns of BFCL's check of each (``rods_client.bfcl.turn_scores``), on the
    calls ``generate`` recorded per turn (with slime's own single-turn generate: the response's
    ``<tool_call>`` blocks as the first turn's calls). slime calls it per sample, or with a list
    (``--group-rm``, or a generate returning several samples: rm_hub/__init__.py:99-110); a list
    gets a list, scored concurrently."""
    if isinstance(sample, list):
        return list(await asyncio.gather(*(asyncio.to_thread(_episode_score, args, s) for s in sample)))
    return await asyncio.to_thread(_episode_score, args, sample)
