"""Scores one BFCL multi-turn task against an OpenAI-compatible endpoint (POST /evaluations/task),
with bfcl-eval's own multi-turn FC inference loop and its own multi-turn checker.

What runs is bfcl-eval 2026.3.23's code; line numbers below are of that version's files, under
bfcl_eval/:

- the task: `utils.load_dataset_entry("multi_turn_<category>")` (utils.py:402), which adds the
  function docs and moves the held-out docs of miss_func into `missed_function`
  (utils.py:772 populate_test_cases_with_predefined_functions), and
  `utils.load_ground_truth_entry` (utils.py:445);
- inference: `OpenAICompletionsHandler` (model_handler/api_inference/openai_completion.py:21),
  the FC handler for an OpenAI-compatible chat-completions endpoint, with is_fc_model=True, so
  that `BaseHandler.inference` (base_handler.py:68) runs `inference_multi_turn_FC`
  (base_handler.py:95): the turn loop, the held-out functions added at their turn with bfcl's
  user prompt (base_handler.py:176-194), the step loop that ends a turn on a reply without calls
  (base_handler.py:273) and bfcl's step limit MAXIMUM_STEP_LIMIT = 20
  (constants/default_prompts.py:1, base_handler.py:321-323);
- scoring: what eval_runner._evaluate_single_multi_turn_entry (eval_checker/eval_runner.py:166)
  does for one entry — its force-terminated check (eval_runner.py:200), the decoding of each step
  with the handler's decode_execute, empty steps dropped (eval_runner.py:220-235) — then
  `multi_turn_checker` (eval_checker/multi_turn_eval/multi_turn_checker.py:9) decides. The
  runner function itself is not imported: eval_runner.py imports constants/model_config.py, which
  imports every vendor SDK bfcl supports (anthropic, google-genai, cohere, ...).

What the subclass below changes, and why:

- the client: bfcl's handler builds its OpenAI client from OPENAI_BASE_URL / OPENAI_API_KEY in
  the process environment (openai_completion.py:34 _build_client_kwargs); concurrent requests for
  different endpoints cannot share an environment, so the base URL and key come from the request;
- bfcl's `generate_with_backoff` (openai_completion.py:69) retries a rate limit for ever
  (model_handler/utils.py:543, no stop condition); here a connection error, 408, 409, 429 or 5xx
  is retried RODS_EXECUTOR_EVAL_RETRIES times (default 2, short backoff) within the request's
  time limit, and every endpoint failure becomes EndpointError: the task is not scored (HTTP
  502, or 504 past timeoutS), never a wrong answer;
- `maxStepsPerTurn` below bfcl's 20: the (N+2)-th query of a turn ends the task as bfcl's own
  force quit would (eval_runner.py:200, "multi_turn:force_terminated").

bfcl's executor hands call strings to eval() (multi_turn_eval/multi_turn_utils.py:83), and in
inference these strings are built from the endpoint's tool calls (model_handler/utils.py:207
convert_to_function_call: the tool name and JSON arguments pasted into `name(k=repr(v), ...)`).
Generated text is data: `execute_multi_turn_func_call` as bfcl's handler and checker modules see
it (base_handler.py:17, multi_turn_checker.py:1) is replaced, once, by `_gated_execute`, which
hands bfcl's executor a call only after executor/parser.py accepted it (one call of a public
method of the task's classes, literal arguments) and records a rejected one as bfcl records a call
that raised ("Error during execution: ...", multi_turn_utils.py:98).

Isolation: bfcl keeps environment instances in multi_turn_utils' module globals under
`<model name>_<task id>_<class>_instance` (multi_turn_utils.py:33-47); the handler's
`model_name_underline_replaced` (base_handler.py:56) and the checker's model name are set to a
name of this request's own, and its instances are deleted when it ends, so concurrent requests
and a repeated request for the same task never share state. bfcl's loop prints to stdout
(base_handler.py:212-214, 274, 285); those prints of an evaluation thread are dropped
(`_ThreadStdout`), the server's own output is untouched. bfcl's result writer (base_handler.py:769) is not used;
BFCL_PROJECT_ROOT (constants/eval_config.py:19: result/, score/, .file_locks/ are made there on
import) points into a temporary directory, removed at exit, unless it is set.
"""

from __future__ import annotations

import atexit
import copy
import io
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

from executor import bfcl

# bfcl's own step limit (constants/default_prompts.py:1), the largest maxStepsPerTurn.
BFCL_MAX_STEPS = 20
RETRIES_SETTING = "RODS_EXECUTOR_EVAL_RETRIES"
MAX_ERROR_CHARS = 2000
_names = itertools.count()


class EndpointError(Exception):
    """The endpoint failed (unreachable, an HTTP error, an answer that is not a chat completion):
    the task is not scored."""

    def __init__(self, message: str, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class UnknownTask(Exception):
    pass


@dataclass
class Endpoint:
    base_url: str
    model: str
    api_key: str | None = None


def _cap(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def scrub(text: str, secret: str | None) -> str:
    """`text` with every occurrence of the API key replaced (an endpoint may echo it back)."""
    return text.replace(secret, "<apiKey>") if secret else text


class _ThreadStdout(io.TextIOBase):
    """sys.stdout that drops what evaluation threads print (bfcl's progress lines) and passes
    everything else to the stream it replaced."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.local = threading.local()

    def write(self, s: str) -> int:
        if getattr(self.local, "quiet", False):
            return len(s)
        return self.inner.write(s)

    def flush(self) -> None:
        self.inner.flush()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")


def _thread_stdout() -> _ThreadStdout:
    """sys.stdout as a _ThreadStdout (installed again if someone replaced it since)."""
    with _import_lock:
        if not isinstance(sys.stdout, _ThreadStdout):
            sys.stdout = _ThreadStdout(sys.stdout)
        return sys.stdout


def _retries() -> int:
    raw = os.environ.get(RETRIES_SETTING, "").strip()
    return max(0, int(raw)) if raw.isdigit() else 2


_import_lock = threading.Lock()


def _bfcl() -> dict[str, Any]:
    with _import_lock:
        return _load_bfcl()


@cache
def _load_bfcl() -> dict[str, Any]:
    """Imports bfcl's handler and checker (about 0.4 s, and the packages of requirements.txt's
    evaluation block) on the first evaluation only, and installs the call gate and stdout filter."""
    if not os.environ.get("BFCL_PROJECT_ROOT"):
        root = tempfile.mkdtemp(prefix="rods-bfcl-")
        os.environ["BFCL_PROJECT_ROOT"] = root
        atexit.register(shutil.rmtree, root, True)
    import openai
    from bfcl_eval import utils as bfcl_utils
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as checker_module
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.model_handler import base_handler
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    from executor.parser import CallRejected, allowed_methods, parse_call

    original = multi_turn_utils.execute_multi_turn_func_call

    def _gated_execute(func_call_list, initial_config, involved_classes, model_name, test_entry_id,
                       long_context=False, is_evaL_run=False):  # noqa: ANN001 (bfcl's signature)
        methods = allowed_methods(involved_classes)
        results: list[str] = []
        # The instances persist in bfcl's globals between calls, so running accepted calls one at
        # a time is what one call with the whole list does.
        _, instances = original([], initial_config, involved_classes, model_name, test_entry_id,
                                long_context=long_context, is_evaL_run=is_evaL_run)
        for call in func_call_list:
            try:
                parse_call(call, methods)
            except CallRejected as e:
                results.append(f"Error during execution: rods refused the call: {e.reason}")
                continue
            out, instances = original([call], initial_config, involved_classes, model_name, test_entry_id,
                                      long_context=long_context, is_evaL_run=is_evaL_run)
            results.extend(out)
        return results, instances

    if getattr(base_handler.execute_multi_turn_func_call, "__name__", "") != "_gated_execute":
        base_handler.execute_multi_turn_func_call = _gated_execute
        checker_module.execute_multi_turn_func_call = _gated_execute

    class Handler(OpenAICompletionsHandler):
        """bfcl's OpenAI-compatible FC handler with the request's endpoint, a deadline and a step
        limit; the inference loop is bfcl's (inference_multi_turn_FC is @final)."""

        rods_endpoint: Endpoint
        rods_deadline: float
        rods_max_steps: int

        def _build_client_kwargs(self) -> dict[str, Any]:  # openai_completion.py:34
            return {
                "base_url": self.rods_endpoint.base_url,
                # the SDK insists on a key; a local server without auth ignores it
                "api_key": self.rods_endpoint.api_key or "EMPTY",
                # retries are generate_with_backoff's, within the deadline
                "max_retries": 0,
            }

        def add_first_turn_message_FC(self, inference_data: dict, first_turn_message: list[dict]) -> dict:
            self.rods_steps = 0
            return super().add_first_turn_message_FC(inference_data, first_turn_message)

        def _add_next_turn_user_message_FC(self, inference_data: dict, user_message: list[dict]) -> dict:
            self.rods_steps = 0
            return super()._add_next_turn_user_message_FC(inference_data, user_message)

        def _query_FC(self, inference_data: dict):  # noqa: ANN202
            # bfcl queries at most MAXIMUM_STEP_LIMIT + 1 times a turn (base_handler.py:321-323)
            if self.rods_steps > self.rods_max_steps:
                raise StepLimit(self.rods_max_steps)
            self.rods_steps += 1
            self.rods_queries += 1
            return super()._query_FC(inference_data)

        def generate_with_backoff(self, **kwargs: Any):  # noqa: ANN201 (openai_completion.py:69)
            retries = _retries()
            for attempt in range(retries + 1):
                remaining = self.rods_deadline - time.monotonic()
                if remaining <= 0:
                    raise EndpointError("the task's time limit (timeoutS) passed", timeout=True)
                start = time.time()
                try:
                    response = self.client.chat.completions.create(**kwargs, timeout=remaining)
                    return response, time.time() - start
                except openai.APITimeoutError:
                    error = EndpointError("the request timed out (timeoutS)", timeout=True)
                    retry = False
                except openai.APIStatusError as e:
                    if e.status_code == 400 and any(m in str(e.message).lower() for m in _CONTEXT_MARKERS):
                        raise ContextExceeded(f"HTTP 400: {e.message}") from None
                    error = EndpointError(f"HTTP {e.status_code}: {e.message}")
                    retry = e.status_code in (408, 409, 429) or e.status_code >= 500
                except openai.APIConnectionError as e:
                    cause = e.__cause__ or e.__context__
                    error = EndpointError(f"cannot connect: {e.message}" + (f" ({cause})" if cause else ""))
                    retry = True
                except openai.OpenAIError as e:
                    error = EndpointError(f"{type(e).__name__}: {e}")
                    retry = False
                if not retry or attempt == retries:
                    break
                # a short backoff within the deadline (bfcl's own waits 6-120 s, for ever)
                time.sleep(min(0.5 * 2**attempt, max(0.0, self.rods_deadline - time.monotonic())))
            if attempt:
                error.args = (f"{error.args[0]} (after {attempt + 1} attempts)",)
            raise error

        def _parse_query_response_FC(self, api_response: Any) -> dict:  # openai_completion.py:109
            try:
                return super()._parse_query_response_FC(api_response)
            except Exception as e:
                raise EndpointError(f"the answer is not a chat completion bfcl can read: {type(e).__name__}: {e}") from None

    return {
        "Handler": Handler,
        "utils": bfcl_utils,
        "multi_turn_utils": multi_turn_utils,
        "multi_turn_checker": checker_module.multi_turn_checker,
        "is_empty_execute_response": multi_turn_utils.is_empty_execute_response,
    }


class ContextExceeded(Exception):
    """The endpoint refused a query because the conversation no longer fits the model's context: the
    policy's own answers made it so (a model that never stops writing fills its context), so the
    task is answered wrong, as bfcl's runner scores an entry whose inference raised."""


# vLLM: "This model's maximum context length is N tokens"; OpenAI: code context_length_exceeded.
_CONTEXT_MARKERS = ("maximum context length", "context_length_exceeded", "context length")


class StepLimit(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


_entries_lock = threading.Lock()


@cache
def _entries(category: str) -> tuple[dict[str, dict[str, Any]], dict[str, list[list[str]]]]:
    """bfcl's prompt entries (with function docs) and possible answers of a category, by id."""
    b = _bfcl()
    test_category = f"multi_turn_{bfcl.CATEGORIES[category]}"
    with _entries_lock:
        prompts = b["utils"].load_dataset_entry(test_category)
        answers = b["utils"].load_ground_truth_entry(test_category)
    return {e["id"]: e for e in prompts}, {a["id"]: a["ground_truth"] for a in answers}


def evaluate_task(task_id: str, category: str, endpoint: Endpoint, max_steps: int | None = None,
                  timeout_s: float | None = None) -> dict[str, Any]:
    """Runs bfcl's inference for one task against the endpoint and its checker on the result.
    Raises UnknownTask, EndpointError (not scored); anything else is a bug."""
    started = time.monotonic()
    b = _bfcl()
    prompts, answers = _entries(category)
    if task_id not in prompts or task_id not in answers:
        raise UnknownTask(f"no task {task_id!r} in category {category!r} of bfcl-eval {bfcl.version()}")
    test_entry = copy.deepcopy(prompts[task_id])  # the handler extends test_entry["function"]
    ground_truth = answers[task_id]
    test_category = task_id.rsplit("_", 1)[0]  # as base_handler.py:104 and multi_turn_checker.py:23 do

    name = f"rods_eval_{os.getpid()}_{next(_names)}"
    handler = b["Handler"](
        model_name=endpoint.model,
        temperature=0.001,  # bfcl's default for generation (__main__/_llm_response_generation)
        registry_name=f"{name}-FC",
        is_fc_model=True,
        rods_endpoint=endpoint,
        rods_deadline=started + (timeout_s if timeout_s else 1e9),
        rods_max_steps=BFCL_MAX_STEPS if max_steps is None else max_steps,
        rods_steps=0,
        rods_queries=0,
    )
    # bfcl's instance key for this request's inference (multi_turn_utils.py:33); the checker
    # uses `name` + "_eval" and `name` + "_ground_truth_eval" (multi_turn_checker.py:46, 63 with
    # is_evaL_run=True, multi_turn_utils.py:25-26).
    handler.model_name_underline_replaced = name
    stdout = _thread_stdout()
    stdout.local.quiet = True
    try:
        force_terminated = None
        context_exceeded = False
        try:
            model_result, metadata = handler.inference(test_entry, include_input_log=False, exclude_state_log=True)
        except StepLimit as e:
            model_result, metadata = None, {}
            force_terminated = (
                f"Model was force-terminated during inference phase after {e.limit} steps in a turn "
                f"(maxStepsPerTurn {e.limit}; bfcl's own limit is {BFCL_MAX_STEPS})."
            )
        except ContextExceeded as e:
            model_result, metadata = None, {}
            force_terminated = f"The conversation outgrew the model's context; the endpoint said: {e}"
            context_exceeded = True
        tokens_in = sum(sum(t) for t in metadata.get("input_token_count", []))
        tokens_out = sum(sum(t) for t in metadata.get("output_token_count", []))
        if force_terminated is not None:
            verdict = {
                "valid": False,
                "error_type": "rods:context_length_exceeded" if context_exceeded else "multi_turn:force_terminated",
                "error_message": force_terminated,
            }
            decoded: list[list[list[str]]] = []
            turns = 0
        elif len(model_result) != len(ground_truth):  # eval_runner.py:200
            verdict = {
                "valid": False,
                "error_type": "multi_turn:force_terminated",
                "error_message": "Model was force-terminated during inference phase. The length of the model "
                f"result turns ({len(model_result)}) does not match the length of the ground truth turns "
                f"({len(ground_truth)}).",
            }
            decoded = []
            turns = len(model_result)
        else:
            decoded = []
            for turn in model_result:  # eval_runner.py:220-236
                steps = []
                for step in turn:
                    try:
                        calls = handler.decode_execute(step, has_tool_call_tag=False)
                    except Exception:  # noqa: BLE001 (bfcl ignores a step that does not decode)
                        continue
                    if b["is_empty_execute_response"](calls):
                        continue
                    steps.append(calls)
                decoded.append(steps)
            verdict = b["multi_turn_checker"](decoded, ground_truth, test_entry, test_category, name)
            turns = len(model_result)
        valid = bool(verdict.get("valid"))
        message = verdict.get("error_message")
        if isinstance(message, list):
            message = " ".join(str(m) for m in message)
        return {
            "taskId": task_id,
            "category": category,
            "valid": valid,
            "errorType": None if valid else verdict.get("error_type"),
            "error": None if valid or message is None else _cap(scrub(str(message), endpoint.api_key)),
            "turns": turns,
            "toolCalls": sum(len(calls) for turn in decoded for calls in turn),
            "promptTokens": int(tokens_in),
            "completionTokens": int(tokens_out),
            "durationMs": round((time.monotonic() - started) * 1000),
            "bfclEvalVersion": bfcl.version(),
            "model": endpoint.model,
        }
    finally:
        stdout.local.quiet = False
        _forget(b["multi_turn_utils"], name)


def _forget(module: Any, name: str) -> None:
    """Deletes this request's environment instances from bfcl's globals (multi_turn_utils.py:47)."""
    space = vars(module)
    for key in [k for k in space if k.startswith(name + "_")]:
        space.pop(key, None)
