"""executor/bfcl_harness_check.py: delivered tasks through bfcl-eval's own executor and checker."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from executor import bfcl
from executor.bfcl_harness_check import main, run

ROOT = Path(__file__).resolve().parents[2]


def seed(category: str, index: int = 0) -> dict[str, Any]:
    return copy.deepcopy(dict(bfcl.seeds(category)[index]))


def synthesized(base: dict[str, Any], rods_id: str, bfcl_id: str) -> dict[str, Any]:
    """A child as the pool delivers it: the seed's task under a BFCL id, its rods id beside it."""
    task = copy.deepcopy(base)
    task.update(id=bfcl_id, rods_task_id=rods_id)
    return task


def test_seeds_of_every_category_and_a_delivered_child_pass() -> None:
    tasks = [seed(c, i) for c in bfcl.CATEGORIES for i in range(3)]
    tasks.append(synthesized(seed("base", 2), "multi_turn_base_2~s6", "multi_turn_base_176349360942241"))
    tasks.append(
        synthesized(seed("long_context", 0), "multi_turn_long_context_0~s3", "multi_turn_long_context_1000007")
    )
    assert run(tasks) == {"tasks": len(tasks), "passed": len(tasks), "failed": []}
    assert any(t.get("missed_function") for t in tasks)  # miss_func holdout turns are checked too


def test_a_wrong_possible_answer_fails_in_bfcls_checker(tmp_path: Path) -> None:
    tasks = [seed("base", 0), seed("base", 1), seed("miss_func", 0)]
    answers = [{"id": t["id"], "ground_truth": copy.deepcopy(t["ground_truth"])} for t in tasks]
    # The second task's possible answer leaves out the last call of its first turn that has
    # more than one call: the model's (perfect for the task) answer now ends in another state.
    turn = next(i for i, calls in enumerate(answers[1]["ground_truth"]) if len(calls) > 1)
    answers[1]["ground_truth"][turn] = answers[1]["ground_truth"][turn][:-1]
    tasks_file, answers_file = tmp_path / "tasks.jsonl", tmp_path / "answers.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    answers_file.write_text("".join(json.dumps(a) + "\n" for a in answers))

    r = subprocess.run(
        [sys.executable, "-m", "executor.bfcl_harness_check", str(tasks_file), "--answers", str(answers_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    summary = json.loads(r.stdout)
    assert summary["tasks"] == 3 and summary["passed"] == 2
    assert [f["id"] for f in summary["failed"]] == [tasks[1]["id"]]
    assert summary["failed"][0]["error"].startswith("multi_turn:")
    # the same answers as in the records: everything passes, exit status 0
    answers_file.write_text("".join(json.dumps({"id": t["id"], "ground_truth": t["ground_truth"]}) + "\n" for t in tasks))
    assert main([str(tasks_file), "--answers", str(answers_file)]) == 0


def test_a_rods_child_id_is_refused_and_bfcls_executor_cannot_run_it() -> None:
    child = synthesized(seed("base", 3), "multi_turn_base_3~s4", "multi_turn_base_3~s4")
    [failure] = run([child])["failed"]
    assert "not an integer index" in failure["error"]

    # What the id check stands for: bfcl's executor names instances after the id, and a `~` in
    # the name makes every call a syntax error.
    from executor import bfcl_harness_check as check

    original = check._test_category
    check._test_category = lambda task: "multi_turn_base"
    try:
        [failure] = run([child])["failed"]
    finally:
        check._test_category = original
    assert "invalid syntax" in failure["error"]


def test_malformed_tasks_fail_with_a_reason() -> None:
    base = seed("base", 0)
    wrong_category = dict(copy.deepcopy(base), category="miss_param")
    failing_call = copy.deepcopy(base)
    failing_call["id"] = "multi_turn_base_1000001"
    failing_call["ground_truth"][0] = ["cd(folder='no_such_folder_anywhere')"]
    unsafe = copy.deepcopy(base)
    unsafe["id"] = "multi_turn_base_1000002"
    unsafe["ground_truth"][0] = ["__import__('os').system('true')"]
    holdout = seed("miss_func", 0)
    turn = next(iter(holdout["missed_function"]))
    holdout["question"][int(turn)] = [{"role": "user", "content": "hi"}]
    duplicate = copy.deepcopy(seed("base", 4))
    failed = {
        f["id"]: f["error"]
        for f in run([wrong_category, failing_call, unsafe, holdout, duplicate, copy.deepcopy(duplicate)])["failed"]
    }
    assert "the task's category is 'multi_turn_miss_param'" in failed[base["id"]]
    assert "No such file or directory" in failed["multi_turn_base_1000001"]
    assert "not allowed" in failed["multi_turn_base_1000002"] or "unknown" in failed["multi_turn_base_1000002"]
    assert "has a user message" in failed[holdout["id"]]
    assert "duplicate id" in failed[duplicate["id"]]


def test_possible_answers_reach_bfcls_eval_only_through_the_parser() -> None:
    task = seed("base", 0)
    answer = copy.deepcopy(task["ground_truth"])
    answer[0] = ["exec('import os')"]
    [failure] = run([task], {task["id"]: answer})["failed"]
    assert failure["error"].startswith("possible answer turn 0 call 0")
