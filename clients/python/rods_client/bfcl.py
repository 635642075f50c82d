"""A BFCL multi-turn task as a trainer's environment: its functions as tools, its initial state,
its user turns in order, and BFCL's progress reward.

Standard library only. The functions' documents are bfcl-eval's own (``data/bfcl_tools.json``,
generated from the pinned bfcl-eval by ``executor/gen_tools.py``); calls run in the rods
environment executor (``RODS_EXECUTOR_URL``, default ``http://127.0.0.1:7300``), which parses
every call with its restricted parser and never evaluates text.

* ``BfclEnvironment`` is one rollout's environment. ``reset(task=...)`` takes the task record
  (the pool row's ``task`` column, JSON) and starts at its first user turn with its
  ``initial_config``. Each of the task's functions is a method (a TRL tool); a call appends
  ``name(arg=value, ...)`` to the current turn and answers what bfcl's executor records for it
  (the state carries from call to call and turn to turn). The episode lives in an executor
  session, so a call runs once; a session the executor lost is opened again with the episode's
  calls replayed into it, and ``RODS_EXECUTOR_SESSIONS=0`` (or an executor without sessions)
  replays the history through ``/execute`` at every call instead. ``reply_to_user(message)`` ends the
  current turn and answers the user's next request, so the conversation's user turns come in
  order within one rollout (TRL ends a rollout at the first message without a tool call).
* ``progress_reward`` scores each rollout with BFCL's progress reward: the mean over the task's user turns of "the state of
  every instance matches the ground truth's after that turn AND the ground truth's execution
  results of that turn are among the model's so far", as bfcl's own ``multi_turn_checker``
  decides a turn (``state_checker``, then ``response_checker``); a turn whose ground truth is
  empty (a miss_func/miss_param holding turn) passes when the model made no call in it (bfcl's
  irrelevance check). Unlike the checker's pass/fail, which stops at the first failing turn,
  every turn is scored.
* ``environment_factories()`` gives one environment class per set of involved classes (every
  single class and pair, and ``all`` for the rest), as TRL's ``environment_factory`` dict; a pool
  row names its environment in its ``environment`` column (``environment_name(task)``).
  It is the reward function: ``reward_funcs=[progress_reward]`` (wrapped by
  ``rods_client.trl.RodsRewards`` to report it to rods).

A miss_func task's withheld function is among the tools from the first turn (a TRL rollout's tool
list is rendered once, with its prompt); called before the turn that brings it, it answers an
error saying it is not available yet, and the next user request names it when it arrives.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from importlib import resources
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _tls_context, ca_bundle_from_env, is_loopback_host
from ._common import first_turn

__all__ = ["BfclEnvironment", "ExecutorClient", "SessionGone", "environment_factories", "environment_name", "progress_reward",
           "tool_documents", "openai_tools", "tool_calls_in", "response_calls", "withheld_functions", "turn_scores", "ground_truth_tool_calls", "first_turn", "CLASSES"]

DEFAULT_EXECUTOR_URL = "http://127.0.0.1:7300"


@functools.lru_cache(maxsize=1)
def _documents() -> Dict[str, Any]:
    with resources.files(__package__).joinpath("data/bfcl_tools.json").open(encoding="utf-8") as f:
        return json.load(f)


CLASSES: Tuple[str, ...] = tuple(sorted(_documents()["classes"]))


def tool_documents(classes: Sequence[str]) -> List[Dict[str, Any]]:
    """bfcl's function documents of the given classes (unknown class: ValueError)."""
    docs = _documents()["classes"]
    unknown = [c for c in classes if c not in docs]
    if unknown:
        raise ValueError(f"rods: unknown BFCL class(es) {unknown}; known: {list(CLASSES)}")
    return [d for c in classes for d in docs[c]]


_JSON_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def _json_schema(spec: Mapping[str, Any]) -> Dict[str, Any]:
    """bfcl's parameter spec as JSON Schema (bfcl writes dict, float, tuple and any)."""
    out: Dict[str, Any] = {}
    kind = spec.get("type")
    kind = _JSON_TYPES.get(kind, kind) if isinstance(kind, str) else kind
    if kind:
        out["type"] = kind
    for key in ("description", "enum", "default"):
        if key in spec:
            out[key] = spec[key]
    if isinstance(spec.get("items"), Mapping):
        out["items"] = _json_schema(spec["items"])
    if isinstance(spec.get("properties"), Mapping):
        out["properties"] = {k: _json_schema(v) for k, v in spec["properties"].items()}
    if spec.get("required"):
        out["required"] = list(spec["required"])
    return out


@functools.lru_cache(maxsize=None)
def _function_names(classes: Tuple[str, ...]) -> frozenset:
    return frozenset(d["name"] for d in tool_documents(classes))


def withheld_functions(task: Mapping[str, Any], turn: int) -> Dict[str, int]:
    """Function -> the user turn that brings it, for the functions a miss_func task still withholds
    at ``turn`` (``missed_function``: turn index -> names)."""
    out: Dict[str, int] = {}
    for at, names in (task.get("missed_function") or {}).items():
        if int(at) > turn:
            for name in names:
                out[name] = int(at)
    return out


def openai_tools(task: Mapping[str, Any], turn: Optional[int] = None) -> List[Dict[str, Any]]:
    """The task's functions as OpenAI-style tool schemas (what chat templates take as ``tools``),
    without the functions the task never offers (``excluded_function``) and, given ``turn``,
    without those a miss_func task still withholds at that user turn."""
    excluded = set(task.get("excluded_function") or [])
    if turn is not None:
        excluded |= set(withheld_functions(task, turn))
    return [{"type": "function", "function": {"name": d["name"], "description": d.get("description", ""),
                                              "parameters": _json_schema(d.get("parameters") or {"type": "dict"})}}
            for d in tool_documents(sorted(set(task.get("involved_classes") or []))) if d["name"] not in excluded]


def environment_name(task: Mapping[str, Any]) -> str:
    """The environment of a task: its involved classes, sorted and joined by '+'; 'all' beyond two."""
    classes = sorted(set(task.get("involved_classes") or []))
    return "+".join(classes) if 1 <= len(classes) <= 2 else "all"


class SessionGone(RuntimeError):
    """The executor no longer has this session (closed, idle too long, or the executor restarted)."""


class ExecutorClient:
    """The rods environment executor (executor/README.md): ``POST /execute`` replays a history of
    calls on fresh instances; a session (``/sessions``) keeps one episode's instances alive, so a
    tool call runs one call.

    Over HTTPS the executor's certificate is checked against ``RODS_CA_BUNDLE``, else
    ``SSL_CERT_FILE`` or ``REQUESTS_CA_BUNDLE`` (``ca_bundle=``). With ``RODS_EXECUTOR_TOKEN_FILE``
    (``token_file=``; the file the executor reads) every request carries its bearer token, read
    again at each request so a rotation needs no restart; the token is never sent over plain
    ``http://`` to a host beyond loopback.
    """

    def __init__(self, url: Optional[str] = None, timeout: float = 30.0, token_file: Optional[str] = None,
                 ca_bundle: Optional[str] = None):
        self.url = (url or os.environ.get("RODS_EXECUTOR_URL") or DEFAULT_EXECUTOR_URL).rstrip("/")
        self.timeout = timeout
        self.token_file = token_file or os.environ.get("RODS_EXECUTOR_TOKEN_FILE") or None
        parts = urllib.parse.urlsplit(self.url)
        if self.token_file and parts.scheme == "http" and not is_loopback_host(parts.hostname):
            raise ValueError(f"rods: refusing to send the executor's token over plain http to {parts.hostname}: "
                             "use an https:// RODS_EXECUTOR_URL (RODS_CA_BUNDLE names its CA)")
        self._context = _tls_context(ca_bundle or ca_bundle_from_env(), None, None) if parts.scheme == "https" else None
        # None until known; False: no sessions (an older executor, or RODS_EXECUTOR_SESSIONS=0): each
        # call replays the episode's history through /execute.
        self.sessions: Optional[bool] = False if os.environ.get("RODS_EXECUTOR_SESSIONS") == "0" else None

    def _headers(self) -> Dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.token_file:
            with open(self.token_file, encoding="utf-8") as f:
                headers["Authorization"] = "Bearer " + f.read().strip()
        return headers

    def _request(self, method: str, path: str, body: Any = None) -> Tuple[int, Any]:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=self._headers())
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._context) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")[:500]
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, {"error": text}
        except (urllib.error.URLError, OSError) as e:
            raise RuntimeError(f"rods: the environment executor {self.url} is unreachable: {e}") from None

    def _refused(self, status: int, answer: Any) -> RuntimeError:
        return RuntimeError(f"rods: the environment executor {self.url} refused a request: {status} "
                            f"{(answer or {}).get('error') if isinstance(answer, dict) else answer}")

    def execute(self, task: Mapping[str, Any], turns: Sequence[Sequence[str]]) -> Dict[str, Any]:
        status, answer = self._request("POST", "/execute", {
            "involved_classes": task["involved_classes"],
            "initial_config": task.get("initial_config") or {},
            "ground_truth": [list(t) for t in turns],
            "long_context": task.get("category") == "long_context",
        })
        if status != 200:
            raise self._refused(status, answer)
        return answer

    def open_session(self, task: Mapping[str, Any]) -> Optional[str]:
        """A live environment of the task (its session id), or None where the executor has none."""
        if self.sessions is False:
            return None
        status, answer = self._request("POST", "/sessions", {
            "involved_classes": task["involved_classes"],
            "initial_config": task.get("initial_config") or {},
            "long_context": task.get("category") == "long_context",
        })
        if status in (404, 405) and "no such endpoint" in str((answer or {}).get("error", "")):
            self.sessions = False
            return None
        if status != 201:
            raise self._refused(status, answer)
        self.sessions = True
        return str(answer["session"])

    def session_calls(self, session: str, calls: Sequence[str]) -> Dict[str, Any]:
        """{results: [one entry per call, as /execute records it], closed?} (SessionGone: a 404)."""
        status, answer = self._request("POST", f"/sessions/{session}/calls", {"calls": list(calls)})
        if status == 404:
            raise SessionGone(str((answer or {}).get("error")))
        if status != 200:
            raise self._refused(status, answer)
        return answer

    def close_session(self, session: str) -> None:
        """Closes a session (one already gone is fine; an unreachable executor reaps it when idle)."""
        try:
            self._request("DELETE", f"/sessions/{session}")
        except RuntimeError:
            pass


def ground_truth_tool_calls(task: Mapping[str, Any], turn: int) -> List[Dict[str, Any]]:
    """A turn's ground-truth calls as structured tool calls ``{"name", "arguments"}`` (positional
    arguments named by bfcl's documents): what a model that got the turn right would emit. The
    call strings are parsed with ``ast`` as literals, never evaluated."""
    import ast

    docs = {d["name"]: d for d in tool_documents(sorted(set(task.get("involved_classes") or [])))}
    out = []
    for call in (task.get("ground_truth") or [])[turn]:
        node = ast.parse(call, mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError(f"rods: not a call of a function name: {call!r}")
        names = list(((docs.get(node.func.id) or {}).get("parameters") or {}).get("properties") or {})
        arguments = {names[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
        arguments.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
        out.append({"name": node.func.id, "arguments": arguments})
    return out


def call_string(name: str, arguments: Mapping[str, Any]) -> str:
    """A tool call as the call string bfcl's ground truth uses: ``name(key=literal, ...)``."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def tool_calls_in(text: Optional[str]) -> List[Tuple[str, Dict[str, Any]]]:
    """The ``<tool_call>{"name", "arguments"}</tool_call>`` blocks of a model's text (the Hermes
    format of Qwen's chat templates) as (name, arguments): JSON parsed, never evaluated; a block
    that does not parse is left out."""
    calls = []
    for block in _TOOL_CALL.findall(text or ""):
        try:
            call = json.loads(block)
            name, arguments = call["name"], call.get("arguments") or {}
            if isinstance(arguments, str):
                arguments = json.loads(arguments)
            if isinstance(name, str) and isinstance(arguments, Mapping):
                calls.append((name, dict(arguments)))
        except (ValueError, KeyError, TypeError):
            continue
    return calls


def response_calls(text: Optional[str]) -> List[str]:
    """A response's ``<tool_call>`` blocks as call strings (``name(key=literal, ...)``)."""
    return [call_string(name, arguments) for name, arguments in tool_calls_in(text)]


def _turn_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def _task_of(task: Any) -> Dict[str, Any]:
    if isinstance(task, str):
        task = json.loads(task)
    if not isinstance(task, Mapping) or not task.get("involved_classes"):
        raise ValueError("rods: reset() needs the BFCL task record (the pool row's `task` column)")
    return dict(task)


@functools.lru_cache(maxsize=4096)
def _ground_truth_turns(url: str, task_json: str) -> Tuple[Tuple[Tuple[str, ...], Any], ...]:
    """Per turn: the ground truth's result texts and the state after it (cached per task)."""
    task = json.loads(task_json)
    answer = ExecutorClient(url).execute(task, task.get("ground_truth") or [])
    return tuple((tuple(r.get("text", "") for r in t["results"]), json.dumps(t["state"], sort_keys=True))
                 for t in answer["turns"])


def turn_scores(task: Mapping[str, Any], model_turns: Sequence[Sequence[str]],
                executor: Optional[ExecutorClient] = None) -> List[float]:
    """1.0 or 0.0 per user turn, as bfcl's multi_turn_checker decides a turn (see the module doc)."""
    executor = executor or ExecutorClient()
    truth_calls = task.get("ground_truth") or []
    n = len(truth_calls)
    turns = [list(model_turns[t]) if t < len(model_turns) else [] for t in range(n)]
    truth = _ground_truth_turns(executor.url, json.dumps(task, sort_keys=True))
    model = executor.execute(task, turns)["turns"]
    scores: List[float] = []
    so_far: List[str] = []
    for t in range(n):
        so_far.extend(r.get("text", "") for r in model[t]["results"])
        if not truth_calls[t]:
            scores.append(1.0 if not turns[t] else 0.0)
            continue
        if not turns[t]:
            scores.append(0.0)
            continue
        state_ok = json.dumps(model[t]["state"], sort_keys=True) == truth[t][1]
        remaining = list(so_far)
        results_ok = True
        for text in truth[t][0]:
            if text in remaining:
                remaining.remove(text)
            else:
                results_ok = False
                break
        scores.append(1.0 if state_ok and results_ok else 0.0)
    return scores


class BfclEnvironment:
    """One rollout of a BFCL multi-turn task (subclassed per set of classes by environment_factories)."""

    classes: Tuple[str, ...] = ()

    def __init__(self, executor: Optional[ExecutorClient] = None):
        self._executor = executor or ExecutorClient()
        self._task: Optional[Dict[str, Any]] = None
        self._turn = 0
        self._calls: List[List[str]] = [[]]
        self._score: Optional[float] = None
        self._lock = threading.Lock()
        self._session: Optional[str] = None  # the episode's live environment in the executor

    def reset(self, task: Any = None, **_: Any) -> Optional[str]:
        """Starts the task (a BFCL task record, or its JSON) at its first user turn."""
        self._close_session()
        self._task = _task_of(task)
        self._turn = 0
        self._calls = [[]]
        self._score = None
        missing = [c for c in self._task["involved_classes"] if c not in self.classes]
        if missing:
            raise ValueError(f"rods: task {self._task.get('id')} involves {missing}, not among this "
                             f"environment's classes {list(self.classes)}: name its environment with environment_name()")
        return None

    def reply_to_user(self, message: str) -> str:
        """Reply to the user once their current request is done; answers the user's next request.

        Args:
            message: What you tell the user about their current request.
        """
        text = self._next_request()
        return "The user has no further requests." if text is None else text

    def _next_request(self) -> Optional[str]:
        """Ends the current user turn; the user's next request (naming the functions that arrive
        with it), or None when the task has no further turn."""
        task = self._require()
        turns = task.get("question") or []
        self._turn += 1
        self._calls.append([])
        if self._turn >= len(turns):
            return None
        text = _turn_text(turns[self._turn])
        arriving = self._arriving(self._turn)
        if arriving:
            text += "\n(New functions are available now: " + ", ".join(arriving) + ".)"
        return text

    # Private (like every helper here): TRL offers each public method of an environment as a tool.
    def _next_user_message(self) -> Optional[str]:
        """The next user turn as a message text for a conversation whose tools are fixed at its
        start (a token-continuous rollout cannot re-render them): the request, then the documents
        of the functions a miss_func task brings at this turn, one JSON object a line. None: the
        task has no further turn."""
        request = self._next_request()
        if request is None:
            return None
        arriving = set(self._arriving(self._turn))
        if arriving:
            docs = [t for t in openai_tools(self._require(), turn=self._turn) if t["function"]["name"] in arriving]
            request += "\n" + "\n".join(json.dumps(d) for d in docs)
        return request

    def _progress(self) -> float:
        """BFCL's progress reward of this rollout so far, in [0, 1] (see the module doc)."""
        with self._lock:
            if self._score is None:
                task = self._require()
                scores = turn_scores(task, self._calls, self._executor)
                self._score = sum(scores) / len(scores) if scores else 0.0
                self._close_session()  # scored: the episode is over
            return self._score

    def _close_session(self) -> None:
        if self._session is not None:
            self._executor.close_session(self._session)
            self._session = None

    def _run(self, call: str) -> Dict[str, Any]:
        """The result entry of ``call`` (just appended to the history) on the episode's live
        environment: one call. A session the executor lost (closed, expired, restarted) is opened
        again and the episode's earlier calls replayed into it; an executor without sessions gets
        the whole history through /execute."""
        task = self._require()
        for _ in range(2):
            try:
                if self._session is None:
                    session = self._executor.open_session(task)
                    if session is None:
                        break
                    self._session = session
                    earlier = [c for t in self._calls for c in t][:-1]
                    if earlier:
                        self._executor.session_calls(session, earlier)
                answer = self._executor.session_calls(self._session, [call])
            except SessionGone:
                self._session = None
                continue
            if answer.get("closed"):
                self._session = None
            return answer["results"][-1]
        answer = self._executor.execute(task, self._calls)
        turn = answer["turns"][self._turn] if self._turn < len(answer["turns"]) else {"results": []}
        result = turn["results"][-1] if turn["results"] else {}
        if not result and answer.get("failure"):
            result = {"error": answer["failure"].get("reason")}
        return result

    @property
    def calls(self) -> List[List[str]]:
        """The model's calls so far, per user turn (call strings)."""
        return [list(t) for t in self._calls]

    @property
    def task(self) -> Optional[Dict[str, Any]]:
        return self._task

    def _require(self) -> Dict[str, Any]:
        if self._task is None:
            raise RuntimeError("rods: reset() the environment with a task first")
        return self._task

    def _arriving(self, turn: int) -> List[str]:
        return [n for at, names in (self._require().get("missed_function") or {}).items() if int(at) == turn
                for n in names]

    def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        task = self._require()
        withheld = withheld_functions(task, self._turn)
        if name in withheld:
            return json.dumps({"error": f"{name} is not available yet"})
        if name in (task.get("excluded_function") or []) or name not in _function_names(
                tuple(sorted(set(task["involved_classes"])))):
            return json.dumps({"error": f"{name} is not available"})
        call = call_string(name, arguments)
        self._calls[self._turn].append(call)
        self._score = None
        result = self._run(call)
        if "text" in result:
            return str(result["text"])
        return json.dumps({"error": result.get("error") or "failed"})


_PY_TYPES: Dict[str, Any] = {"string": str, "integer": int, "float": float, "number": float, "boolean": bool,
                             "array": list, "dict": dict, "object": dict, "tuple": list, "any": Any}


def _tool_method(doc: Mapping[str, Any]) -> Callable[..., str]:
    """A method whose signature, annotations and Google-style docstring are bfcl's document of the
    function (what transformers' get_json_schema and so TRL's tool rendering read)."""
    name = doc["name"]
    params = doc.get("parameters") or {}
    props: Mapping[str, Mapping[str, Any]] = params.get("properties") or {}
    required = set(params.get("required") or [])

    def tool(self: BfclEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: Dict[str, Any] = {}
    args_doc = []
    for key in list(props):
        spec = props[key]
        hint = _PY_TYPES.get(str(spec.get("type")), Any)
        annotations[key] = hint
        default = inspect.Parameter.empty if key in required else spec.get("default")
        parameters.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        description = " ".join(str(spec.get("description") or key).split())
        args_doc.append(f"    {key}: {description}")
    annotations["return"] = str
    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = annotations
    description = " ".join(str(doc.get("description") or name).split())
    tool.__doc__ = description + ("\n\nArgs:\n" + "\n".join(args_doc) if args_doc else "") + \
        "\n\nReturns:\n    What the function returned."
    return tool


@functools.lru_cache(maxsize=None)
def environment_class(classes: Tuple[str, ...]) -> type:
    """The environment class of a set of BFCL classes: BfclEnvironment with their functions as methods."""
    methods: Dict[str, Any] = {"classes": tuple(classes)}
    for doc in tool_documents(classes):
        methods[doc["name"]] = _tool_method(doc)
    return type("Bfcl_" + "_".join(classes) if classes != CLASSES else "Bfcl_all", (BfclEnvironment,), methods)


def environment_factories(executor_url: Optional[str] = None) -> Dict[str, Callable[[], BfclEnvironment]]:
    """TRL's ``environment_factory`` dict: one environment per single class and pair of classes, and
    ``all`` (every class) for a task of three or more (the names ``environment_name`` gives)."""
    executor = ExecutorClient(executor_url)
    names: List[Tuple[str, ...]] = [(c,) for c in CLASSES] + list(itertools.combinations(CLASSES, 2))
    out: Dict[str, Callable[[], BfclEnvironment]] = {}
    for classes in names:
        out["+".join(classes)] = functools.partial(environment_class(classes), executor)
    out["all"] = functools.partial(environment_class(CLASSES), executor)
    return out


def progress_reward(completions: Sequence[Any] = (), environments: Optional[Sequence[BfclEnvironment]] = None,
                    **_: Any) -> List[float]:
    """TRL reward function: each rollout's BFCL progress reward (needs ``environment_factory``)."""
    if environments is None:
        raise ValueError("rods: progress_reward needs TRL's environments: pass "
                         "environment_factory=rods_client.bfcl.environment_factories() to GRPOTrainer")
    return [env._progress() for env in environments]
