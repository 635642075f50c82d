"""Regenerates clients/python/rods_client/data/bfcl_tools.json: bfcl-eval's own function documents
of the eight multi-turn environment classes (data/multi_turn_func_doc/<module>.json, the tool
descriptions bfcl's multi-turn inference hands the model), by class, for the trainer-side BFCL
environment of the Python client (rods_client/bfcl.py), which must run where bfcl-eval is not
installed. Run from the project root:

    PYTHONPATH=. .stack/venv/bin/python executor/gen_tools.py > clients/python/rods_client/data/bfcl_tools.json

executor/tests/test_tools_file.py fails when the file differs from what this prints.
"""

import json

from executor import bfcl


def tools_document() -> dict:
    folder = bfcl.data_dir() / "multi_turn_func_doc"
    classes = {}
    for name, module in bfcl.CLASS_MODULES.items():
        with (folder / f"{module}.json").open(encoding="utf-8") as f:
            classes[name] = [json.loads(line) for line in f if line.strip()]
    return {"bfclEvalVersion": bfcl.version(), "classes": classes}


def render() -> str:
    return json.dumps(tools_document(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render(), end="")
