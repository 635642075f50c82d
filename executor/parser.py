"""The restricted parser for generated call strings (docs/architecture.md §4, invariant 6).

A call string such as ``mv(source='a.txt', destination='b')`` is data. It is parsed with
``ast.parse(..., mode="eval")`` and accepted only when it is one call of a bare function name
with literal arguments; the name must be a public method of one of the task's classes. Nothing
here (or anywhere in the executor) hands generated text to eval or exec: argument values come
from ``ast.literal_eval`` on nodes this module has already checked to be plain literals.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# Longer call strings are rejected before parsing (BFCL's longest ground-truth call is a few
# hundred characters; the synthesis gates cap strings at 200 characters).
MAX_CALL_CHARS = 20_000
# Literals nested deeper than this are rejected (keeps the checker's recursion bounded).
MAX_DEPTH = 20

FailureKind = Literal["parse", "unknown-function"]


class CallRejected(ValueError):
    """A call string that the restricted parser does not accept, with the reason."""

    def __init__(self, reason: str, kind: FailureKind = "parse") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


@dataclass(frozen=True)
class ParsedCall:
    name: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


_NODE_WORDS: dict[type, str] = {
    ast.Attribute: "an attribute access",
    ast.Subscript: "a subscript",
    ast.Call: "a call",
    ast.Name: "a name (only literal values are allowed)",
    ast.Lambda: "a lambda",
    ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.JoinedStr: "an f-string",
    ast.BinOp: "an arithmetic expression",
    ast.BoolOp: "a boolean expression",
    ast.Compare: "a comparison",
    ast.IfExp: "a conditional expression",
    ast.NamedExpr: "an assignment expression",
    ast.Starred: "a starred expression",
    ast.Set: "a set (not representable in JSON)",
    ast.Await: "an await expression",
    ast.Yield: "a yield expression",
    ast.YieldFrom: "a yield expression",
    ast.Slice: "a slice",
}


def _describe(node: ast.AST) -> str:
    return _NODE_WORDS.get(type(node), f"a {type(node).__name__} expression")


def _check_literal(node: ast.AST, where: str, depth: int = 0) -> None:
    """Accepts str, int, float, bool, None, and lists, tuples and dicts of those, and a sign on
    a number; raises CallRejected naming the first thing that is not such a literal."""
    if depth > MAX_DEPTH:
        raise CallRejected(f"{where}: literal nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, (str, bool, int, float)):
            return
        raise CallRejected(f"{where}: {type(value).__name__} literals are not allowed")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = node.operand
        if (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, (int, float))
            and not isinstance(operand.value, bool)
        ):
            return
        raise CallRejected(f"{where}: a sign is allowed only in front of a number")
    if isinstance(node, (ast.List, ast.Tuple)):
        for i, item in enumerate(node.elts):
            _check_literal(item, f"{where}[{i}]", depth + 1)
        return
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values):
            if key is None:
                raise CallRejected(f"{where}: ** unpacking inside a dict is not allowed")
            if not (isinstance(key, ast.Constant) and isinstance(key.value, (str, int, float, bool))):
                raise CallRejected(f"{where}: dict keys must be string or number literals")
            _check_literal(value, f"{where}[{key.value!r}]", depth + 1)
        return
    raise CallRejected(f"{where}: {_describe(node)} is not allowed; arguments must be literals")


def allowed_methods(involved_classes: Iterable[str]) -> dict[str, str]:
    """Method name -> class name for the public methods of the given classes. Where two classes
    share a name, the later class wins, as in bfcl's own name mapping."""
    from executor import bfcl

    owners: dict[str, str] = {}
    for class_name in involved_classes:
        for method in bfcl.public_methods(class_name):
            owners[method] = class_name
    return owners


def parse_call(source: str, methods: Mapping[str, str] | Iterable[str]) -> ParsedCall:
    """Parses one call string against the allowed method names; raises CallRejected."""
    if not isinstance(source, str):
        raise CallRejected(f"a call must be a string, got {type(source).__name__}")
    text = source.strip()
    if not text:
        raise CallRejected("empty call string")
    if len(text) > MAX_CALL_CHARS:
        raise CallRejected(f"call string of {len(text)} characters exceeds the limit of {MAX_CALL_CHARS}")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise CallRejected(f"not valid Python call syntax: {e.msg} (column {e.offset})") from None
    except (ValueError, RecursionError, MemoryError) as e:
        # null bytes, over-long integer literals, absurd nesting
        raise CallRejected(f"cannot parse: {type(e).__name__}: {e}") from None

    call = tree.body
    if not isinstance(call, ast.Call):
        raise CallRejected(f"expected a single function call, found {_describe(call)}")
    func = call.func
    if isinstance(func, ast.Attribute):
        raise CallRejected("method calls on objects (a.b(...)) are not allowed; call the function by its bare name")
    if not isinstance(func, ast.Name):
        raise CallRejected(f"the called thing must be a bare function name, found {_describe(func)}")
    name = func.id
    if name.startswith("_"):
        raise CallRejected(f"function name {name!r} starts with an underscore: private and dunder names are not callable")
    allowed = methods.keys() if isinstance(methods, Mapping) else set(methods)
    if name not in allowed:
        raise CallRejected(
            f"unknown function {name!r}: not a public method of the task's classes",
            kind="unknown-function",
        )

    args: list[Any] = []
    for i, node in enumerate(call.args):
        if isinstance(node, ast.Starred):
            raise CallRejected(f"{name}: *args unpacking is not allowed")
        _check_literal(node, f"{name}: positional argument {i}")
        args.append(ast.literal_eval(node))
    kwargs: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise CallRejected(f"{name}: **kwargs unpacking is not allowed")
        if kw.arg.startswith("_"):
            raise CallRejected(f"{name}: argument name {kw.arg!r} starts with an underscore")
        if kw.arg in kwargs:
            raise CallRejected(f"{name}: argument {kw.arg!r} given twice")
        _check_literal(kw.value, f"{name}: argument {kw.arg!r}")
        kwargs[kw.arg] = ast.literal_eval(kw.value)
    return ParsedCall(name=name, args=tuple(args), kwargs=kwargs)
