"""The restricted parser: what it accepts, and that everything else is rejected with a reason."""

from __future__ import annotations

import builtins

import pytest

from executor.parser import MAX_CALL_CHARS, CallRejected, ParsedCall, allowed_methods, parse_call

FS = allowed_methods(["GorillaFileSystem", "TwitterAPI", "MathAPI"])


def test_whitelist_is_the_public_methods_of_the_involved_classes() -> None:
    assert FS["cd"] == "GorillaFileSystem"
    assert FS["post_tweet"] == "TwitterAPI"
    assert FS["add"] == "MathAPI"
    assert "_load_scenario" not in FS
    assert not [m for m in FS if m.startswith("_")]
    # classes not involved contribute nothing
    assert "send_message" not in FS  # MessageAPI
    assert "send_message" in allowed_methods(["MessageAPI"])


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("cd(folder='document')", ParsedCall("cd", (), {"folder": "document"})),
        (
            "mv(source='a.txt', destination='b')",
            ParsedCall("mv", (), {"source": "a.txt", "destination": "b"}),
        ),
        (
            'post_tweet(content="x", tags=["#a", "#b"], mentions=[])',
            ParsedCall("post_tweet", (), {"content": "x", "tags": ["#a", "#b"], "mentions": []}),
        ),
        ("sort('final_report.pdf')", ParsedCall("sort", ("final_report.pdf",), {})),
        ("ls(a=True)", ParsedCall("ls", (), {"a": True})),
        ("ls()", ParsedCall("ls", (), {})),
        ("add(a=-3, b=+2.5)", ParsedCall("add", (), {"a": -3, "b": 2.5})),
        ("mean(numbers=[1, -2.0, 3e2])", ParsedCall("mean", (), {"numbers": [1, -2.0, 300.0]})),
        ("echo(content=None, file_name='f')", ParsedCall("echo", (), {"content": None, "file_name": "f"})),
        (
            "echo(content={'k': [1, (2, 3)], 4: {'n': None}})",
            ParsedCall("echo", (), {"content": {"k": [1, (2, 3)], 4: {"n": None}}}),
        ),
        # strings that look like code stay strings
        (
            "echo(content='__import__(\"os\").system(\"x\")', file_name='a).b(')",
            ParsedCall("echo", (), {"content": '__import__("os").system("x")', "file_name": "a).b("}),
        ),
        ("  cd( folder = 'x' )  ", ParsedCall("cd", (), {"folder": "x"})),
        ("cd(folder='line\\nbreak')", ParsedCall("cd", (), {"folder": "line\nbreak"})),
    ],
)
def test_accepts_calls_with_literal_arguments(source: str, expected: ParsedCall) -> None:
    parsed = parse_call(source, FS)
    assert parsed.name == expected.name
    assert parsed.args == expected.args
    assert dict(parsed.kwargs) == dict(expected.kwargs)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        # the classics
        ("__import__('os').system('x')", "method calls on objects"),
        ("__import__('os')", "underscore"),
        ("open('/etc/passwd')", "unknown function 'open'"),
        ("eval('1+1')", "unknown function 'eval'"),
        ("exec('x=1')", "unknown function 'exec'"),
        ("cd(folder=__file__)", "a name (only literal values are allowed)"),
        ("cd(folder=os.environ)", "attribute access"),
        # shapes of calls
        ("a.b.c()", "method calls on objects"),
        ("os.system('x')", "method calls on objects"),
        ("GorillaFileSystem.cd(folder='x')", "method calls on objects"),
        ("cd.__globals__", "expected a single function call"),
        ("(lambda: 1)()", "bare function name, found a lambda"),
        ("cd(*args)", "*args unpacking"),
        ("cd(*['x'])", "*args unpacking"),
        ("cd(**{'folder': 'x'})", "**kwargs unpacking"),
        ("ls()()", "bare function name, found a call"),
        ("[cd(folder='x')][0]", "expected a single function call, found a subscript"),
        ("cd(folder='x'); ls()", "not valid Python call syntax"),
        ("cd(folder='x')\nls()", "not valid Python call syntax"),
        ("import os", "not valid Python call syntax"),
        ("x = cd(folder='x')", "not valid Python call syntax"),
        ("cd", "expected a single function call, found a name"),
        ("", "empty call string"),
        ("cd(folder='x'", "not valid Python call syntax"),
        # argument values that are not literals
        ("cd(folder=lambda: 1)", "a lambda"),
        ("cd(folder=ls())", "a call"),
        ("cd(folder=open('/etc/passwd').read())", "a call"),
        ("cd(folder=[x for x in 'ab'])", "list comprehension"),
        ("cd(folder={x: 1 for x in 'ab'})", "dict comprehension"),
        ("cd(folder=(x for x in 'ab'))", "generator expression"),
        ("cd(folder=f'{__file__}')", "f-string"),
        ("cd(folder='a' + 'b')", "arithmetic expression"),
        ("power(base=10, exponent=10**9)", "arithmetic expression"),
        ("cd(folder=x[0])", "subscript"),
        ("cd(folder='a' if 1 else 'b')", "conditional expression"),
        ("cd(folder=(y := 'x'))", "assignment expression"),
        ("cd(folder={1, 2})", "a set"),
        ("cd(folder=b'bytes')", "bytes literals are not allowed"),
        ("cd(folder=1j)", "complex literals are not allowed"),
        ("cd(folder=...)", "ellipsis literals are not allowed"),
        ("cd(folder=-'x')", "a sign is allowed only in front of a number"),
        ("cd(folder=not True)", "UnaryOp"),
        ("cd(folder={**{}})", "** unpacking inside a dict"),
        ("cd(folder={ls(): 1})", "dict keys must be string or number literals"),
        ("cd(folder=[1, [2, [ls()]]])", "cd: argument 'folder'[1][1][0]: a call"),
        # names
        ("__class__()", "underscore"),
        ("_load_scenario(scenario={})", "underscore"),
        ("cd(_folder='x')", "argument name '_folder' starts with an underscore"),
        ("cd(folder='a', folder='b')", "given twice"),
        ("send_message(receiver_id='1', message='x')", "unknown function 'send_message'"),
        ("print('x')", "unknown function 'print'"),
    ],
)
def test_rejects_everything_else_with_a_reason(source: str, reason: str) -> None:
    with pytest.raises(CallRejected) as info:
        parse_call(source, FS)
    assert reason in info.value.reason
    expected_kind = "unknown-function" if reason.startswith("unknown function") else "parse"
    assert info.value.kind == expected_kind


def test_rejects_oversized_and_deeply_nested_input() -> None:
    with pytest.raises(CallRejected, match="exceeds the limit"):
        parse_call("cd(folder='" + "x" * MAX_CALL_CHARS + "')", FS)
    with pytest.raises(CallRejected, match="nested deeper"):
        parse_call("cd(folder=" + "[" * 30 + "]" * 30 + ")", FS)
    # deeper than the Python parser itself allows: still a clean rejection
    with pytest.raises(CallRejected):
        parse_call("cd(folder=" + "[" * 5000 + "]" * 5000 + ")", FS)
    # a null byte (ValueError or SyntaxError, by Python version)
    with pytest.raises(CallRejected, match="cannot parse|not valid Python call syntax"):
        parse_call("cd(folder='x')\x00", FS)
    # an integer literal Python will not convert
    with pytest.raises(CallRejected, match="4300 digits"):
        parse_call("add(a=" + "9" * 5000 + ", b=1)", FS)


def test_non_string_input_is_rejected() -> None:
    with pytest.raises(CallRejected, match="must be a string"):
        parse_call(123, FS)  # type: ignore[arg-type]


def test_parsing_never_reaches_eval_or_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("eval/exec must not be called on a call string")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    assert parse_call("post_tweet(content='x', tags=['#a'])", FS).kwargs["tags"] == ["#a"]
    with pytest.raises(CallRejected):
        parse_call("__import__('os').system('x')", FS)
