"""The committed method catalog (domain/bfcl-catalog.generated.ts) is what gen_catalog.py makes
from the installed bfcl-eval: a bfcl-eval upgrade without a regenerated catalog fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_committed_catalog_matches_the_installed_bfcl_eval() -> None:
    made = subprocess.run(
        [sys.executable, "executor/gen_catalog.py"],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    committed = (ROOT / "domain" / "bfcl-catalog.generated.ts").read_text()
    assert made == committed, "regenerate: PYTHONPATH=. .stack/venv/bin/python executor/gen_catalog.py > domain/bfcl-catalog.generated.ts"
    # one method per line: every class's methods are there, not an empty table
    assert made.count('"readOnly": ') > 100
