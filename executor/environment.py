"""Runs a task's call strings, turn by turn, against fresh instances of its environment classes.

Every call goes through the restricted parser (executor.parser) and is then dispatched with
``getattr(instance, name)(*args, **kwargs)`` on the instance that owns the method: no eval, no
exec. The result of a run says, per turn, what each call returned (or the error it produced) and
the state of every instance after the turn (public attributes, as bfcl's state checker compares
them), plus the first failure.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import inspect
import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from executor import bfcl
from executor.parser import CallRejected, allowed_methods, parse_call

# 2**14000 has about 4200 decimal digits, under Python's 4300-digit conversion limit.
MAX_INT_BITS = 14_000


class RequestError(ValueError):
    """The request itself is unusable (unknown class, wrong shapes): HTTP 400."""


class LimitExceeded(Exception):
    """The run's output passed one of the executor's limits: HTTP 422 naming the setting."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


DEPTH_SETTING = "RODS_EXECUTOR_MAX_DEPTH"


# ---- state serialization ----------------------------------------------------------------
#
# Iterative, not recursive: an environment's state can nest deeper than Python's recursion limit
# (a directory chain made by mkdir/cd calls), and a RecursionError there used to be a 500.


class DepthExceeded(ValueError):
    """A value nests deeper than the allowed number of levels."""

    def __init__(self, max_depth: int) -> None:
        super().__init__(f"nests deeper than {max_depth} levels")
        self.max_depth = max_depth


class TooLarge(ValueError):
    """An encoding passed its byte limit (raised as soon as it does, not at the end)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"is larger than {max_bytes} bytes as JSON")
        self.max_bytes = max_bytes


_CONTAINER = object()
_END = object()


def _leaf(value: Any) -> Any:
    """The JSON form of a value that is not a container, or _CONTAINER."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        # Python refuses to print integers of more than 4300 digits (and JSON readers lose
        # precision far earlier); such a result is reported by its size.
        return value if value.bit_length() <= MAX_INT_BITS else f"<integer of {value.bit_length()} bits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, complex)):
        return str(value)
    return _CONTAINER


def _items(value: Any) -> tuple[str, Any, Iterator[Any]] | None:
    """(kind, empty output, iterator) for a container: m(apping) of (key, value), l(ist), s(et)."""
    if isinstance(value, Mapping):
        return "m", {}, iter(value.items())
    if isinstance(value, (list, tuple)):
        return "l", [], iter(value)
    if isinstance(value, (set, frozenset)):
        return "s", [], iter(value)
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict):
        return "m", {}, iter([(k, v) for k, v in attrs.items() if not k.startswith("_")])
    return None


def to_json(value: Any, max_depth: int | None = None) -> Any:
    """A JSON-ready copy of an environment value: objects become their public attributes,
    sets become sorted lists, datetimes ISO strings, non-finite floats strings. An attribute
    that points back to an object being serialized (a directory's parent) is left out (the
    mapping entry that holds it). Raises DepthExceeded past `max_depth` nested containers."""
    leaf = _leaf(value)
    if leaf is not _CONTAINER:
        return leaf
    # Frames: [kind, output, iterator, key being filled (mappings), id of the source value].
    stack: list[list[Any]] = []
    ancestors: set[int] = set()
    result: Any = None

    def push(source: Any) -> bool:
        opened = _items(source)
        if opened is None:
            return False
        if max_depth is not None and len(stack) >= max_depth:
            raise DepthExceeded(max_depth)
        stack.append([opened[0], opened[1], opened[2], None, id(source)])
        ancestors.add(id(source))
        return True

    def put(frame: list[Any], converted: Any) -> None:
        if frame[0] == "m":
            frame[1][frame[3]] = converted
        else:
            frame[1].append(converted)

    if not push(value):
        return str(value)
    while stack:
        frame = stack[-1]
        item = next(frame[2], _END)
        if item is _END:
            stack.pop()
            ancestors.discard(frame[4])
            out = frame[1]
            if frame[0] == "s":
                out.sort(key=lambda x: encode(x, sort_keys=True, separators=(", ", ": ")))
            if stack:
                put(stack[-1], out)
            else:
                result = out
            continue
        if frame[0] == "m":
            k, child = item
            frame[3] = k if isinstance(k, str) else encode(to_json(k), separators=(", ", ": "))
        else:
            child = item
        leaf = _leaf(child)
        if leaf is not _CONTAINER:
            put(frame, leaf)
        elif id(child) in ancestors:
            # A back-reference: the innermost mapping leaves out the entry that holds it.
            at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] == "m"), None)
            if at is None:
                put(frame, "<back-reference>")
                continue
            for dropped in stack[at + 1 :]:
                ancestors.discard(dropped[4])
            del stack[at + 1 :]
        elif not push(child):
            put(frame, str(child))
    return result


def encode(
    value: Any,
    *,
    sort_keys: bool = False,
    separators: tuple[str, str] = (",", ":"),
    max_bytes: int | None = None,
) -> str:
    """json.dumps (ASCII, no NaN) of a JSON-ready value, without recursion; raises TooLarge as
    soon as the text passes `max_bytes`."""
    item_sep, key_sep = separators
    parts: list[str] = []
    size = 0
    stack: list[list[Any]] = []  # [iterator, is mapping, first item]
    while True:
        if isinstance(value, dict):
            text = "{"
            stack.append([iter(sorted(value.items()) if sort_keys else value.items()), True, True])
        elif isinstance(value, (list, tuple)):
            text = "["
            stack.append([iter(value), False, True])
        else:
            text = _scalar_text(value)
        parts.append(text)
        size += len(text)
        while stack:
            frame = stack[-1]
            item = next(frame[0], _END)
            if item is _END:
                stack.pop()
                text = "}" if frame[1] else "]"
            elif frame[1]:
                key, value = item
                if not isinstance(key, str):
                    raise TypeError(f"keys must be str, not {type(key).__name__}")
                text = ("" if frame[2] else item_sep) + _ENCODE_STR(key) + key_sep
            else:
                value = item
                text = "" if frame[2] else item_sep
            parts.append(text)
            size += len(text)
            if max_bytes is not None and size > max_bytes:
                raise TooLarge(max_bytes)
            if item is not _END:
                frame[2] = False
                break
        else:
            if max_bytes is not None and size > max_bytes:
                raise TooLarge(max_bytes)
            return "".join(parts)
        if max_bytes is not None and size > max_bytes:
            raise TooLarge(max_bytes)


_ENCODE_STR = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _scalar_text(value: Any) -> str:
    if isinstance(value, str):
        return _ENCODE_STR(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"out of range float value {value!r}")
        return float.__repr__(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def instance_state(instance: object, max_depth: int | None = None) -> dict[str, Any]:
    """The public attributes of an environment instance, JSON-ready (bfcl's state checker
    compares exactly these: vars() minus names starting with an underscore)."""
    return to_json({k: v for k, v in vars(instance).items() if not k.startswith("_")}, max_depth)


def bfcl_text(result: Any) -> str:
    """The string bfcl's executor records for a call result (its response checker compares
    these): strings as they are, dicts as JSON, anything else through str()."""
    if type(result) is str:
        return result
    try:
        if type(result) is dict:
            try:
                return json.dumps(result)
            except (TypeError, ValueError):
                return str(result)
        return str(result)
    except ValueError as e:  # an integer too long to print
        return f"<unprintable result: {e}>"
    except RecursionError:
        return "<unprintable result: nested too deeply>"


# ---- request validation -----------------------------------------------------------------


# Fields of a request; a whole BFCL task record may be sent as it is (its other fields are ignored).
REQUEST_FIELDS = frozenset({"involved_classes", "initial_config", "ground_truth", "long_context", "timeout_ms"})
RECORD_FIELDS = frozenset({"id", "category", "question", "missed_function", "excluded_function", "path"})


def validate(request: Any) -> tuple[list[str], dict[str, Any], list[list[str]], bool]:
    if not isinstance(request, dict):
        raise RequestError("the request body must be a JSON object")
    unknown = sorted(set(request) - REQUEST_FIELDS - RECORD_FIELDS)
    if unknown:
        raise RequestError(
            f"unknown field(s) {', '.join(unknown)}; a request has {', '.join(sorted(REQUEST_FIELDS))}"
        )
    classes = request.get("involved_classes")
    if not isinstance(classes, list) or not classes or not all(isinstance(c, str) for c in classes):
        raise RequestError("involved_classes must be a non-empty array of class names")
    unknown = [c for c in classes if c not in bfcl.CLASS_MODULES]
    if unknown:
        raise RequestError(
            f"unknown class(es) {', '.join(map(repr, unknown))}; known: {', '.join(bfcl.CLASS_MODULES)}"
        )
    if len(set(classes)) != len(classes):
        raise RequestError("involved_classes lists a class twice")
    config = request.get("initial_config", {})
    if not isinstance(config, dict):
        raise RequestError("initial_config must be an object keyed by class name")
    for name, value in config.items():
        if not isinstance(value, dict):
            raise RequestError(f"initial_config.{name} must be an object")
    turns = request.get("ground_truth")
    if not isinstance(turns, list) or not all(isinstance(t, list) for t in turns):
        raise RequestError("ground_truth must be an array of turns, each an array of call strings")
    for i, turn in enumerate(turns):
        for j, call in enumerate(turn):
            if not isinstance(call, str):
                raise RequestError(f"ground_truth[{i}][{j}] must be a string, got {type(call).__name__}")
    # bfcl loads the long-context extensions for the long_context category; so do we by default
    long_context = request.get("long_context", request.get("category") == "long_context")
    if not isinstance(long_context, bool):
        raise RequestError("long_context must be a boolean")
    return classes, config, turns, long_context


# ---- execution ----------------------------------------------------------------------------


def _is_error_result(result: Any) -> str | None:
    """The environment's own error report, if the call returned one ({"error": "..."})."""
    if isinstance(result, dict) and "error" in result:
        return str(result["error"])
    # TicketAPI.get_user_tickets reports "not logged in" as a one-element list
    if isinstance(result, list) and len(result) == 1 and isinstance(result[0], dict) and "error" in result[0]:
        return str(result[0]["error"])
    return None


def instantiate(classes: list[str], config: dict[str, Any], long_context: bool) -> dict[str, object]:
    """Fresh instances, each loaded with a deep copy of its initial configuration (as bfcl)."""
    instances: dict[str, object] = {}
    for name in classes:
        instance = bfcl.load_class(name)()
        if name not in bfcl.STATELESS_CLASSES:
            try:
                instance._load_scenario(copy.deepcopy(config.get(name, {})), long_context=long_context)  # type: ignore[attr-defined]
            except Exception as e:  # a malformed initial_config
                raise RequestError(
                    f"initial_config.{name} could not be loaded: {type(e).__name__}: {e}"
                ) from None
        instances[name] = instance
    return instances


def execute_call(
    source: str, methods: Mapping[str, str], instances: Mapping[str, object], max_depth: int | None = None
) -> dict[str, Any]:
    """One call: {call, ok, function?, result?, text, kind?, error?}. `text` is what bfcl's
    executor would record for it; `kind` and `error` say why a call failed."""
    try:
        parsed = parse_call(source, methods)
    except CallRejected as e:
        return {"call": source, "ok": False, "kind": e.kind, "error": e.reason, "text": f"Error during execution: {e.reason}"}
    owner = methods[parsed.name]
    entry: dict[str, Any] = {"call": source, "function": f"{owner}.{parsed.name}"}
    method = getattr(instances[owner], parsed.name)
    signature = inspect.signature(method)
    try:
        signature.bind(*parsed.args, **parsed.kwargs)
        misfit = None
    except TypeError as e:
        misfit = f"arguments do not fit {parsed.name}{signature}: {e}"
    try:
        # Arguments that do not fit raise TypeError here, before the method's body runs; the call
        # is made anyway so that the recorded text is Python's message, as in bfcl.
        result = method(*parsed.args, **parsed.kwargs)
    except Exception as e:  # the environment raised
        reason = misfit or f"{parsed.name} raised {type(e).__name__}: {e}"
        return {**entry, "ok": False, "kind": "execution", "error": reason, "text": f"Error during execution: {e}"}
    entry.update(result=to_json(result, max_depth), text=bfcl_text(result))
    env_error = _is_error_result(result)
    if env_error is not None:
        return {**entry, "ok": False, "kind": "execution", "error": f"{parsed.name} returned an error: {env_error}"}
    return {**entry, "ok": True}


Progress = Callable[[str, Any], None]


def _call_label(t: int, i: int, source: str) -> str:
    return f"turn {t} call {i} ({source[:80]}{'...' if len(source) > 80 else ''})"


def run(
    request: Any,
    progress: Progress | None = None,
    *,
    max_depth: int | None = None,
    keep_turns: bool = True,
) -> dict[str, Any]:
    """Executes the request's turns on fresh instances; state carries over from turn to turn.
    A failed call does not stop the run (bfcl executes every call too): `failure` is the first.
    `progress(event, data)` is told ("call", {turn, index, call}) before each call and ("turn",
    turn_result) after each turn, so that a supervisor that kills a run at its time limit can
    still say where it stopped. A result or state nested deeper than `max_depth` raises
    LimitExceeded; `keep_turns=False` leaves the turns to `progress` (the result has none)."""
    classes, config, turns, long_context = validate(request)
    instances = instantiate(classes, config, long_context)
    methods = allowed_methods(classes)

    failure: dict[str, Any] | None = None
    out_turns: list[dict[str, Any]] = []
    for t, calls in enumerate(turns):
        results: list[dict[str, Any]] = []
        for i, source in enumerate(calls):
            if progress:
                progress("call", {"turn": t, "index": i, "call": source})
            try:
                entry = execute_call(source, methods, instances, max_depth)
            except DepthExceeded as e:
                raise LimitExceeded(
                    DEPTH_SETTING, f"the result of {_call_label(t, i, source)} {e} ({DEPTH_SETTING})"
                ) from None
            if not entry["ok"] and failure is None:
                failure = {"turn": t, "index": i, "call": source, "reason": entry["error"], "kind": entry["kind"]}
            results.append(entry)
        state: dict[str, Any] = {}
        for name, inst in instances.items():
            try:
                state[name] = instance_state(inst, max_depth)
            except DepthExceeded as e:
                raise LimitExceeded(
                    DEPTH_SETTING, f"the state of {name} after turn {t} {e} ({DEPTH_SETTING})"
                ) from None
        turn_result = {"turn": t, "results": results, "state": state}
        if keep_turns:
            out_turns.append(turn_result)
        if progress:
            progress("turn", turn_result)
    return {"ok": failure is None, "failure": failure, "turns": out_turns}
