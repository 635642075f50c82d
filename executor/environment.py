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
from collections.abc import Callable, Mapping
from typing import Any

from executor import bfcl
from executor.parser import CallRejected, allowed_methods, parse_call

# 2**14000 has about 4200 decimal digits, under Python's 4300-digit conversion limit.
MAX_INT_BITS = 14_000


class RequestError(ValueError):
    """The request itself is unusable (unknown class, wrong shapes): HTTP 400."""


# ---- state serialization ----------------------------------------------------------------


class _Cycle(Exception):
    """Raised for a value that is already being serialized further up (a back-reference)."""


def to_json(value: Any, _ancestors: tuple[int, ...] = ()) -> Any:
    """A JSON-ready copy of an environment value: objects become their public attributes,
    sets become sorted lists, datetimes ISO strings, non-finite floats strings. An attribute
    that points back to an object being serialized (a directory's parent) is left out."""
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
    if id(value) in _ancestors:
        raise _Cycle
    inner = (*_ancestors, id(value))
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            try:
                out[k if isinstance(k, str) else json.dumps(to_json(k))] = to_json(v, inner)
            except _Cycle:
                continue
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(v, inner) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [to_json(v, inner) for v in value]
        return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict):
        public = {k: v for k, v in attrs.items() if not k.startswith("_")}
        return to_json(public, inner)
    return str(value)


def instance_state(instance: object) -> dict[str, Any]:
    """The public attributes of an environment instance, JSON-ready (bfcl's state checker
    compares exactly these: vars() minus names starting with an underscore)."""
    return to_json({k: v for k, v in vars(instance).items() if not k.startswith("_")})


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


def execute_call(source: str, methods: Mapping[str, str], instances: Mapping[str, object]) -> dict[str, Any]:
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
    entry.update(result=to_json(result), text=bfcl_text(result))
    env_error = _is_error_result(result)
    if env_error is not None:
        return {**entry, "ok": False, "kind": "execution", "error": f"{parsed.name} returned an error: {env_error}"}
    return {**entry, "ok": True}


Progress = Callable[[str, Any], None]


def run(request: Any, progress: Progress | None = None) -> dict[str, Any]:
    """Executes the request's turns on fresh instances; state carries over from turn to turn.
    A failed call does not stop the run (bfcl executes every call too): `failure` is the first.
    `progress(event, data)` is told ("call", {turn, index, call}) before each call and ("turn",
    turn_result) after each turn, so that a supervisor that kills a run at its time limit can
    still say where it stopped."""
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
            entry = execute_call(source, methods, instances)
            if not entry["ok"] and failure is None:
                failure = {"turn": t, "index": i, "call": source, "reason": entry["error"], "kind": entry["kind"]}
            results.append(entry)
        turn_result = {
            "turn": t,
            "results": results,
            "state": {name: instance_state(inst) for name, inst in instances.items()},
        }
        out_turns.append(turn_result)
        if progress:
            progress("turn", turn_result)
    return {"ok": failure is None, "failure": failure, "turns": out_turns}
