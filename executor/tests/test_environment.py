"""Execution of call strings in the bfcl environment classes, and the sandboxed runner."""

from __future__ import annotations

import builtins
import json
from typing import Any

import pytest

from executor import bfcl, environment, sandbox
from executor.environment import RequestError, run


def seed(category: str, index: int = 0) -> dict[str, Any]:
    return bfcl.seeds(category)[index]


def request_of(task: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "involved_classes": task["involved_classes"],
        "initial_config": task["initial_config"],
        "ground_truth": task["ground_truth"],
        "long_context": task["category"] == "long_context",
        **extra,
    }


FS_CONFIG = {
    "GorillaFileSystem": {
        "root": {
            "alex": {
                "type": "directory",
                "contents": {
                    "docs": {"type": "directory", "contents": {"a.txt": {"type": "file", "content": "one\ntwo"}}},
                },
            }
        }
    }
}


def fs_request(*turns: list[str]) -> dict[str, Any]:
    return {"involved_classes": ["GorillaFileSystem"], "initial_config": FS_CONFIG, "ground_truth": list(turns)}


def test_seed_records_join_questions_with_ground_truth() -> None:
    for category in bfcl.CATEGORIES:
        records = bfcl.seeds(category)
        assert len(records) >= 100
        ids = [r["id"] for r in records]
        assert len(set(ids)) == len(ids)
        for r in records:
            assert r["id"].startswith(f"multi_turn_{category}_")
            assert r["category"] == category
            assert len(r["question"]) == len(r["ground_truth"])
            assert set(r["involved_classes"]) <= set(bfcl.CLASS_MODULES)
    assert all("missed_function" in r for r in bfcl.seeds("miss_func"))


def test_every_class_loads_and_has_public_methods() -> None:
    for name in bfcl.CLASS_MODULES:
        methods = bfcl.public_methods(name)
        assert methods, name
        assert not [m for m in methods if m.startswith("_")]


def test_ground_truth_of_a_seed_executes_with_state_per_turn() -> None:
    task = seed("base")
    result = run(request_of(task))
    assert result["ok"] is True and result["failure"] is None
    assert len(result["turns"]) == len(task["ground_truth"])
    for turn, calls in zip(result["turns"], task["ground_truth"]):
        assert [r["call"] for r in turn["results"]] == calls
        assert all(r["ok"] for r in turn["results"])
        assert set(turn["state"]) == set(task["involved_classes"])
    json.dumps(result, allow_nan=False)  # all of it is plain JSON


def test_state_is_the_public_attributes_and_follows_the_calls() -> None:
    result = run(fs_request(["cd(folder='docs')", "mkdir(dir_name='new')"], ["rm(file_name='a.txt')"]))
    assert result["ok"], result["failure"]
    first = result["turns"][0]["state"]["GorillaFileSystem"]
    # the directory tree as bfcl compares it; a directory's back-reference to its parent is left out
    docs = first["root"]["contents"]["docs"]
    assert docs["name"] == "docs" and "parent" not in docs
    assert docs["contents"]["a.txt"] == {"name": "a.txt", "content": "one\ntwo"}
    assert docs["contents"]["new"] == {"name": "new", "contents": {}}
    assert "_current_dir" not in first
    second = result["turns"][1]["state"]["GorillaFileSystem"]
    assert "a.txt" not in second["root"]["contents"]["docs"]["contents"]


def test_results_carry_the_value_and_bfcl_text() -> None:
    result = run(fs_request(["cd(folder='docs')", "cat(file_name='a.txt')", "mkdir(dir_name='n')"]))
    cd, cat, mkdir = result["turns"][0]["results"]
    assert cd["function"] == "GorillaFileSystem.cd"
    assert cat["result"] == {"file_content": "one\ntwo"}
    assert cat["text"] == json.dumps({"file_content": "one\ntwo"})
    assert mkdir["result"] is None and mkdir["text"] == "None"


def test_an_error_the_environment_returns_is_an_execution_failure() -> None:
    result = run(fs_request(["cd(folder='nowhere')", "ls()"]))
    assert result["ok"] is False
    assert result["failure"] == {
        "turn": 0,
        "index": 0,
        "call": "cd(folder='nowhere')",
        "reason": "cd returned an error: cd: 'nowhere': No such file or directory",
        "kind": "execution",
    }
    bad, ls = result["turns"][0]["results"]
    assert bad["ok"] is False and bad["result"] == {"error": "cd: 'nowhere': No such file or directory"}
    assert ls["ok"] is True  # later calls still run, as in bfcl


def test_arguments_that_do_not_fit_the_method_fail_execution() -> None:
    result = run(fs_request(["cd()"], ["cd(folder='docs', depth=2)"], ["cd('a', 'b')"]))
    reasons = [t["results"][0]["error"] for t in result["turns"]]
    assert "missing a required argument: 'folder'" in reasons[0]
    assert "unexpected keyword argument 'depth'" in reasons[1]
    assert "too many positional arguments" in reasons[2]
    assert result["turns"][0]["results"][0]["text"].startswith("Error during execution: GorillaFileSystem.cd()")
    assert result["failure"]["kind"] == "execution"


def test_parse_failures_and_unknown_functions_are_reported_per_call() -> None:
    result = run(fs_request(["ls(", "rm -rf /", "send_message(receiver_id='x', message='y')", "pwd()"]))
    broken, shell, foreign, pwd = result["turns"][0]["results"]
    assert broken["kind"] == "parse" and "not valid Python call syntax" in broken["error"]
    assert shell["kind"] == "parse"
    assert foreign["kind"] == "unknown-function"
    assert pwd["ok"] is True
    assert result["failure"]["call"] == "ls(" and result["failure"]["kind"] == "parse"


def test_requests_with_unknown_classes_or_wrong_shapes_are_refused() -> None:
    with pytest.raises(RequestError, match="unknown class"):
        run({"involved_classes": ["Shell"], "ground_truth": [["ls()"]]})
    with pytest.raises(RequestError, match="involved_classes"):
        run({"ground_truth": [["ls()"]]})
    with pytest.raises(RequestError, match="array of turns"):
        run({"involved_classes": ["MathAPI"], "ground_truth": ["add(a=1, b=2)"]})
    with pytest.raises(RequestError, match=r"ground_truth\[0\]\[0\] must be a string"):
        run({"involved_classes": ["MathAPI"], "ground_truth": [[{"name": "add"}]]})
    with pytest.raises(RequestError, match="initial_config.GorillaFileSystem could not be loaded"):
        run({"involved_classes": ["GorillaFileSystem"], "initial_config": {"GorillaFileSystem": {"root": 5}}, "ground_truth": []})


def test_huge_results_stay_serializable() -> None:
    result = run({"involved_classes": ["MathAPI"], "ground_truth": [["power(base=7, exponent=100000)"]]})
    entry = result["turns"][0]["results"][0]
    assert entry["ok"] is True
    assert entry["result"] == {"result": f"<integer of {(7**100000).bit_length()} bits>"}
    json.dumps(result)


def test_execution_never_reaches_eval_or_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("eval/exec must not be called")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    for category in bfcl.CATEGORIES:
        assert run(request_of(seed(category, 3)))["ok"]
    assert run(fs_request(["__import__('os').system('touch /tmp/rods-pwned')"]))["failure"]["kind"] == "parse"


def test_to_json_handles_sets_cycles_and_non_finite_floats() -> None:
    class Node:
        def __init__(self) -> None:
            self.name = "n"
            self.me = self
            self._hidden = 1

    out = environment.to_json({"s": {3, 1, 2}, "f": float("inf"), "n": Node(), "t": (1, 2)})
    assert out == {"s": [1, 2, 3], "f": "inf", "n": {"name": "n"}, "t": [1, 2]}


# ---- the sandboxed runner (one process per request) ----------------------------------------


def sandboxed(request: dict[str, Any], timeout_s: float, **limits: Any) -> sandbox.Outcome:
    return sandbox.execute(json.dumps(request).encode(), timeout_s, sandbox.Limits(**limits))


def test_sandbox_runs_a_seed_in_a_child_process() -> None:
    task = seed("miss_param", 5)
    outcome = sandboxed(request_of(task), timeout_s=30)
    assert outcome.status == 200
    assert outcome.body["ok"] is True
    assert outcome.body["turns"] == run(request_of(task))["turns"]


def test_sandbox_kills_a_run_at_its_time_limit_and_says_where() -> None:
    req = {
        "involved_classes": ["MathAPI"],
        "ground_truth": [["add(a=1, b=2)"], ["add(a=2, b=2)", "power(base=7, exponent=1000000000000)"]],
    }
    outcome = sandboxed(req, timeout_s=0.5)
    assert outcome.status == 200
    body = outcome.body
    assert body["ok"] is False
    assert body["failure"]["turn"] == 1 and body["failure"]["index"] == 1
    assert body["failure"]["kind"] == "execution"
    assert "time limit of 500 ms exceeded" in body["failure"]["reason"]
    assert [t["turn"] for t in body["turns"]] == [0]  # the finished turn is kept
    assert body["stopped"]["call"] == "power(base=7, exponent=1000000000000)"


def test_sandbox_reports_an_earlier_failure_first_when_stopped() -> None:
    req = {
        "involved_classes": ["MathAPI"],
        "ground_truth": [["divide(a=1, b=0)"], ["power(base=7, exponent=1000000000000)"]],
    }
    body = sandboxed(req, timeout_s=0.5).body
    assert body["failure"]["call"] == "divide(a=1, b=0)"
    assert "time limit" in body["stopped"]["reason"]


def test_sandbox_refuses_bad_requests_with_400() -> None:
    outcome = sandboxed({"involved_classes": ["Nope"], "ground_truth": []}, timeout_s=10)
    assert outcome.status == 400 and "unknown class" in outcome.body["error"]


def test_sandbox_children_share_no_state() -> None:
    first = sandboxed(fs_request(["cd(folder='docs')", "touch(file_name='b.txt')"]), 30)
    second = sandboxed(fs_request(["cd(folder='docs')", "ls()"]), 30)
    assert first.body["ok"] and second.body["ok"]
    assert second.body["turns"][0]["results"][1]["result"] == {"current_directory_content": ["a.txt"]}


def test_a_whole_task_record_is_a_request_and_long_context_follows_its_category() -> None:
    task = seed("long_context", 2)
    as_record = run(dict(task))
    assert as_record == run(request_of(task))  # request_of sets long_context explicitly
    assert as_record != run({**task, "long_context": False})  # the extensions change the state


def test_unknown_request_fields_are_refused() -> None:
    with pytest.raises(RequestError, match="unknown field"):
        run({"involved_classes": ["MathAPI"], "ground_truth": [], "longcontext": True})


# ---- serialization without recursion -----------------------------------------------------


def test_state_deeper_than_the_recursion_limit_serializes() -> None:
    # 2,000 directories made by calls nest about 4,000 JSON levels: far past Python's recursion
    # limit, which the recursive serializer hit at about 330 (a 500).
    calls = [c for i in range(2000) for c in (f"mkdir(dir_name='n{i}')", f"cd(folder='n{i}')")]
    state = run(fs_request(calls))["turns"][0]["state"]["GorillaFileSystem"]
    node, depth = state["root"], 0
    while f"n{depth}" in node["contents"]:
        node = node["contents"][f"n{depth}"]
        depth += 1
    assert depth == 2000 and node["contents"] == {}
    text = environment.encode(state)
    assert text.count("{") == text.count("}") and len(text) > 2000 * 20


def test_a_depth_limit_refuses_state_and_results_naming_the_setting() -> None:
    calls = [c for i in range(600) for c in (f"mkdir(dir_name='d{i}')", f"cd(folder='d{i}')")]
    message = "state of GorillaFileSystem after turn 0 nests deeper than 1000"
    with pytest.raises(environment.LimitExceeded, match=message) as e:
        run(fs_request(calls), max_depth=1000)
    assert e.value.setting == "RODS_EXECUTOR_MAX_DEPTH"
    deep: Any = []
    for _ in range(50):
        deep = [deep]
    with pytest.raises(environment.DepthExceeded):
        environment.to_json(deep, max_depth=20)
    assert environment.to_json(deep, max_depth=51) == deep


def test_encode_is_json_dumps_without_recursion() -> None:
    values: list[Any] = [
        {"a": [1, 2.5, -0.0, 1e300, None, True, False, "é\u2028\x00\"\\"], "b": {}, "c": [], "d": {"x": [[{}]]}},
        [],
        "s",
        7,
    ]
    for category in bfcl.CATEGORIES:
        values.append(run(request_of(seed(category, 1))))
    for v in values:
        for sort_keys in (False, True):
            for separators in ((",", ":"), (", ", ": ")):
                assert environment.encode(v, sort_keys=sort_keys, separators=separators) == json.dumps(
                    v, sort_keys=sort_keys, separators=separators, allow_nan=False
                )
    with pytest.raises(environment.TooLarge):
        environment.encode({"a": "x" * 100}, max_bytes=50)
    with pytest.raises(ValueError):
        environment.encode(float("nan"))
