"""What the executor takes from the installed bfcl-eval package: the eight multi-turn
environment classes and the multi-turn data files (questions joined with ground truth).

Only the environment modules are imported (their imports are the standard library plus
mpmath); the service never uses bfcl's own executor (multi_turn_utils.execute_multi_turn_func_call),
because it runs call strings through eval().
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

DISTRIBUTION = "bfcl-eval"

# The classes of the BFCL multi-turn categories, by the name the task records use, and the module
# (under bfcl_eval.eval_checker.multi_turn_eval.func_source_code) that defines each. bfcl's
# constants.executable_backend_config.CLASS_FILE_PATH_MAPPING says the same and adds the web-search
# and memory classes of the agentic categories, which need network access or torch: not ours.
MODULE_PREFIX = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
CLASS_MODULES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
# Classes without scenario state: bfcl does not call _load_scenario on them.
STATELESS_CLASSES = frozenset({"MathAPI"})

# Our category names and the suffix of bfcl's file names (BFCL_v4_multi_turn_<suffix>.json).
CATEGORIES: dict[str, str] = {
    "base": "base",
    "miss_func": "miss_func",
    "miss_param": "miss_param",
    "long_context": "long_context",
}


def version() -> str:
    return metadata.version(DISTRIBUTION)


@cache
def load_class(name: str) -> type:
    """The environment class called `name` (KeyError for a name that is not one of ours)."""
    module = importlib.import_module(f"{MODULE_PREFIX}.{CLASS_MODULES[name]}")
    return getattr(module, name)


@cache
def public_methods(name: str) -> frozenset[str]:
    """The methods a call string may name for class `name`: functions defined on the class
    whose names do not start with an underscore (as bfcl maps them, minus its eval)."""
    cls = load_class(name)
    return frozenset(
        m for m, attr in inspect.getmembers(cls) if not m.startswith("_") and inspect.isfunction(attr)
    )


def data_dir() -> Path:
    return Path(str(resources.files("bfcl_eval") / "data"))


def _versioned(folder: Path, suffix: str) -> Path:
    """The newest BFCL_v<N>_multi_turn_<suffix>.json in `folder` (v3 and v4 name the same data)."""
    pattern = re.compile(rf"^BFCL_v(\d+)_multi_turn_{re.escape(suffix)}\.json$")
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := pattern.match(p.name))]
    if not found:
        raise FileNotFoundError(f"no BFCL_v*_multi_turn_{suffix}.json in {folder}")
    return max(found)[1]


def data_files(category: str) -> tuple[Path, Path]:
    """(question file, ground-truth file) of a category."""
    suffix = CATEGORIES[category]
    base = data_dir()
    return _versioned(base, suffix), _versioned(base / "possible_answer", suffix)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@cache
def seeds(category: str) -> tuple[dict[str, Any], ...]:
    """Every task record of a category, in file order, question file joined with its
    ground-truth file by id."""
    questions, answers = data_files(category)
    truth = {row["id"]: row["ground_truth"] for row in _json_lines(answers)}
    records = []
    for row in _json_lines(questions):
        if row["id"] not in truth:
            raise ValueError(f"{row['id']} has no ground truth in {answers}")
        record: dict[str, Any] = {
            "id": row["id"],
            "category": category,
            "involved_classes": row["involved_classes"],
            "initial_config": row["initial_config"],
            "question": row["question"],
            "ground_truth": truth[row["id"]],
        }
        # Optional fields, under bfcl's names: the functions withheld per turn (miss_func), the
        # functions not offered at all, and the function path the task was generated from.
        for key in ("missed_function", "excluded_function", "path"):
            if key in row:
                record[key] = row[key]
        records.append(record)
    return tuple(records)
