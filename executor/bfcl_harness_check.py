"""Runs delivered pool tasks through bfcl-eval's own multi-turn pipeline, as a trainer's BFCL
harness would, with a perfect model: the task's ground truth is the model's answer.

    .stack/venv/bin/python -m executor.bfcl_harness_check TASKS.jsonl [--answers ANSWERS.jsonl]

TASKS.jsonl is a pool sink file (one task record a line, as `current.jsonl`). The possible
answers are each record's `ground_truth`, or, with --answers, the `ground_truth` of the line with
the same `id` in a file shaped like bfcl's possible-answer files (`{"id", "ground_truth"}`).

For each task:
1. the checks bfcl's loader and handler make of a multi-turn entry before running it: the test
   category is the id up to its last `_` and must be `multi_turn_<category>`, the rest an integer
   (bfcl sorts entries by it); ids are unique (bfcl keeps environment instances by id);
   `missed_function` names functions of the task's classes, by turn index, and the turn that
   brings them has no user message;
2. inference: each turn's ground-truth calls run through bfcl's `execute_multi_turn_func_call`
   (is_evaL_run=False, as bfcl's handler does); a call that raises ("Error during execution")
   or returns an environment error fails the task;
3. evaluation: bfcl's `multi_turn_checker` with those calls as the decoded model result against
   the possible answer must say valid.

Prints {"tasks", "passed", "failed": [{"id", "error"}]} as JSON; exit status 1 when any failed.

bfcl's executor hands call strings to eval(); generated text is data here as everywhere, so a
call reaches it only after executor/parser.py accepted it (one call of a public method of the
task's classes, literal arguments).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

from bfcl_eval.constants.eval_config import MULTI_TURN_FUNC_DOC_PATH
from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

from executor.environment import _is_error_result
from executor.parser import CallRejected, allowed_methods, parse_call

MODEL_NAME = "rods_harness_check"
# bfcl keeps environment instances in its module's globals under `<model>_<id>_<class>_instance`
# for the life of the process; each run() gets a model name of its own so that a second run of
# the same ids (in one process) starts from fresh instances.
_runs = itertools.count()
ID_INDEX = re.compile(r"^\d+(-\d+-\d+)?$")


class TaskFailed(Exception):
    pass


def _function_names(involved_classes: list[str]) -> set[str]:
    names: set[str] = set()
    for cls in involved_classes:
        if cls not in MULTI_TURN_FUNC_DOC_FILE_MAPPING:
            raise TaskFailed(f"involved class {cls!r} has no bfcl function docs")
        path = Path(MULTI_TURN_FUNC_DOC_PATH) / MULTI_TURN_FUNC_DOC_FILE_MAPPING[cls]
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                names.add(json.loads(line)["name"])
    return names


def _test_category(task: dict[str, Any]) -> str:
    task_id = task.get("id")
    if not isinstance(task_id, str) or "_" not in task_id:
        raise TaskFailed(f"id {task_id!r} is not <test category>_<index>")
    test_category, index = task_id.rsplit("_", 1)
    if not ID_INDEX.match(index):
        raise TaskFailed(f"id {task_id!r}: {index!r} after the last '_' is not an integer index")
    category = task.get("category")
    expected = f"multi_turn_{category}" if isinstance(category, str) else None
    if not test_category.startswith("multi_turn_") or (expected and test_category != expected):
        raise TaskFailed(
            f"id {task_id!r} names test category {test_category!r}"
            + (f", the task's category is {expected!r}" if expected else "")
        )
    if not re.sub(r"[-./:]", "_", task_id).isidentifier():
        raise TaskFailed(f"id {task_id!r} does not make a Python name in bfcl's executor")
    return test_category


def _check_shape(task: dict[str, Any], ground_truth: Any) -> None:
    question = task.get("question")
    if not isinstance(question, list) or not isinstance(ground_truth, list):
        raise TaskFailed("question and ground_truth must be lists of turns")
    if len(question) != len(ground_truth):
        raise TaskFailed(f"{len(question)} question turns but {len(ground_truth)} ground-truth turns")
    classes = task.get("involved_classes")
    if not isinstance(classes, list) or not classes:
        raise TaskFailed("involved_classes must be a non-empty list")
    missed = task.get("missed_function") or {}
    if not isinstance(missed, dict):
        raise TaskFailed("missed_function must map turn indices to function names")
    known = _function_names(classes)
    for turn, names in missed.items():
        if not (isinstance(turn, str) and turn.isdigit() and int(turn) < len(question)):
            raise TaskFailed(f"missed_function key {turn!r} is not a turn index")
        if question[int(turn)]:
            raise TaskFailed(f"turn {turn} brings missed functions but has a user message")
        for name in names:
            if name not in known:
                raise TaskFailed(f"missed_function {name!r} is not a function of {classes}")


def _environment_error(result: str) -> str | None:
    """What makes a call fail: it raised (bfcl's text for that), or the environment returned its
    own error report, which bfcl records as text (json.dumps of a dict, str() of a list)."""
    if result.startswith("Error during execution"):
        return result
    try:
        value = json.loads(result)
    except ValueError:
        try:
            value = ast.literal_eval(result)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return _is_error_result(value)


def check_task(task: dict[str, Any], ground_truth: list[list[str]], model_name: str = MODEL_NAME) -> None:
    test_category = _test_category(task)
    _check_shape(task, task["ground_truth"])
    _check_shape(task, ground_truth)
    model_answer: list[list[str]] = task["ground_truth"]
    classes = task["involved_classes"]
    methods = allowed_methods(classes)
    for which, turns in (("", model_answer), ("possible answer ", ground_truth)):
        for t, calls in enumerate(turns):
            for i, call in enumerate(calls):
                try:
                    parse_call(call, methods)
                except CallRejected as e:
                    raise TaskFailed(f"{which}turn {t} call {i} {call!r}: {e}") from None
    long_context = "long_context" in test_category or "composite" in test_category
    for t, calls in enumerate(model_answer):
        results, _ = execute_multi_turn_func_call(
            calls,
            task.get("initial_config", {}),
            classes,
            model_name,
            task["id"],
            long_context=long_context,
            is_evaL_run=False,
        )
        for i, result in enumerate(results):
            error = _environment_error(result)
            if error is not None:
                raise TaskFailed(f"turn {t} call {i} {calls[i]!r}: {error}")
    # bfcl's runner drops steps that decode to no call, so a turn without calls is [].
    decoded = [[calls] if calls else [] for calls in model_answer]
    verdict = multi_turn_checker(decoded, ground_truth, task, test_category, model_name)
    if not verdict.get("valid"):
        raise TaskFailed(f"{verdict.get('error_type')}: {verdict.get('error_message')}")


def read_jsonl(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run(tasks: list[dict[str, Any]], answers: dict[str, Any] | None = None) -> dict[str, Any]:
    failed: list[dict[str, Any]] = []
    seen: set[str] = set()
    model_name = f"{MODEL_NAME}_{next(_runs)}"
    for n, task in enumerate(tasks):
        task_id = task.get("id", f"<line {n + 1}>")
        try:
            if task_id in seen:
                raise TaskFailed("duplicate id: bfcl would reuse the first task's environment")
            seen.add(task_id)
            if answers is None:
                ground_truth = task.get("ground_truth")
            elif task_id in answers:
                ground_truth = answers[task_id]
            else:
                raise TaskFailed("no possible answer with this id")
            check_task(task, ground_truth, model_name)
        except TaskFailed as e:
            failed.append({"id": task_id, "error": str(e)})
        except Exception as e:  # a task that breaks bfcl's code is a failed task, not a crash
            failed.append({"id": task_id, "error": f"{type(e).__name__}: {e}"})
    return {"tasks": len(tasks), "passed": len(tasks) - len(failed), "failed": failed}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", help="JSONL of delivered task records (a pool sink file)")
    ap.add_argument("--answers", help="JSONL of possible answers {id, ground_truth} (else each record's)")
    args = ap.parse_args(argv)
    answers = None
    if args.answers:
        answers = {a["id"]: a["ground_truth"] for a in read_jsonl(args.answers)}
    summary = run(read_jsonl(args.tasks), answers)
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")
    return 1 if summary["failed"] or summary["tasks"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
