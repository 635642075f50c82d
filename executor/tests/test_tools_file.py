"""The Python client's copy of bfcl's function documents is the installed bfcl-eval's."""

from pathlib import Path

from executor import gen_tools

CLIENT_FILE = Path(__file__).resolve().parents[2] / "clients/python/rods_client/data/bfcl_tools.json"


def test_client_tools_file_is_bfcls_function_documents() -> None:
    assert CLIENT_FILE.read_text(encoding="utf-8") == gen_tools.render(), (
        "clients/python/rods_client/data/bfcl_tools.json differs from the installed bfcl-eval: "
        "PYTHONPATH=. .stack/venv/bin/python executor/gen_tools.py > clients/python/rods_client/data/bfcl_tools.json"
    )
    doc = gen_tools.tools_document()
    assert set(doc["classes"]) == {"GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI",
                                   "TradingBot", "TravelAPI", "VehicleControlAPI"}
    assert all(doc["classes"][c] for c in doc["classes"])
