"""Fixtures for the adapter tests: a real gateway, given by clients/python/adapters.int.test.ts.

Environment: RODS_GATEWAY_URL, RODS_TOKEN and one campaign per adapter (RODS_CAMPAIGN_HF,
RODS_CAMPAIGN_VERL, RODS_CAMPAIGN_SLIME, RODS_CAMPAIGN_REPORTING, RODS_CAMPAIGN_EXAMPLE), each seeded with a pool of BFCL tasks.
"""

import os
import time

import pytest

from rods_client import RodsClient


def _client(campaign_var: str) -> RodsClient:
    missing = [v for v in ("RODS_GATEWAY_URL", "RODS_TOKEN", campaign_var) if not os.environ.get(v)]
    if missing:
        pytest.fail(f"set {', '.join(missing)} (clients/python/adapters.int.test.ts does)")
    client = RodsClient(os.environ["RODS_GATEWAY_URL"], os.environ["RODS_TOKEN"], os.environ[campaign_var])
    # The campaign's first pool version appears once its workflow seeded it.
    deadline = time.monotonic() + 90
    while not client.fetch_pool()["tasks"]:
        if time.monotonic() > deadline:
            pytest.fail(f"campaign {client.campaign} has no pool after 90 s")
        time.sleep(0.5)
    return client


@pytest.fixture(scope="module")
def hf_client() -> RodsClient:
    return _client("RODS_CAMPAIGN_HF")


@pytest.fixture(scope="module")
def verl_client() -> RodsClient:
    return _client("RODS_CAMPAIGN_VERL")


@pytest.fixture(scope="module")
def slime_client() -> RodsClient:
    return _client("RODS_CAMPAIGN_SLIME")


@pytest.fixture(scope="module")
def reporting_client() -> RodsClient:
    return _client("RODS_CAMPAIGN_REPORTING")


@pytest.fixture(scope="module")
def example_client() -> RodsClient:
    return _client("RODS_CAMPAIGN_EXAMPLE")
