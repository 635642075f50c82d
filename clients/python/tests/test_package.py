"""The installed package: its version is the API version the running gateway serves."""

import importlib.metadata
import os
import pathlib
import subprocess
import sys

import rods_client


def test_installed_from_the_package_not_the_source_tree():
    # adapters.int.test.ts runs pytest from outside clients/python, on a `pip install`ed copy.
    assert "site-packages" in rods_client.__file__, rods_client.__file__
    assert importlib.metadata.version("rods-client") == rods_client.__version__


def test_version_is_the_gateways_api_version():
    client = rods_client.RodsClient(os.environ["RODS_GATEWAY_URL"], os.environ["RODS_TOKEN"], "unused")
    assert client.api_version() == rods_client.__version__


def test_no_runtime_dependency():
    assert importlib.metadata.requires("rods-client") in (None, []) or all(
        "extra ==" in r for r in importlib.metadata.requires("rods-client")
    )


EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def test_examples_compile():
    names = sorted(p.name for p in EXAMPLES.glob("*.py"))
    assert names == ["slime_data_source.py", "trl_grpo.py", "verl_ppo.py"]
    for name in names:
        compile((EXAMPLES / name).read_text(encoding="utf-8"), name, "exec")


def test_slime_example_runs_against_the_gateway(example_client):
    # The slime example needs no framework: it runs as written, on its own campaign.
    env = {**os.environ, "RODS_CAMPAIGN": example_client.campaign}
    done = subprocess.run([sys.executable, str(EXAMPLES / "slime_data_source.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "reported 4 groups as step 1" in done.stdout
    assert example_client.fetch_batch(1)["tasks"]  # the campaign still answers
