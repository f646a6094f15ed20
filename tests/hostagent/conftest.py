"""`netns`: a network namespace of the test's own (its loopback up), removed after.

`host_path`: a collectives test module that uses it (pytestmark) runs once per host path of the
reliable transport, with AIFABRIC_HOST_PATH set for the module's duration: every TransportConfig
without a host_path of its own, in this process and in the rank programs it starts, follows it.
The native path is skipped where it cannot be built (and said why)."""
from __future__ import annotations

import os
import subprocess

import pytest

from hostagent.collectives.host_path import ENV

HOST_PATHS = ("python", "native")


def native_missing() -> str | None:
    """Why the native host path cannot run here (None: it can)."""
    from hostagent.collectives.native import binding
    try:
        binding.library()
    except binding.BuildError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module", params=HOST_PATHS)
def host_path(request: pytest.FixtureRequest):
    if request.param == "native" and (why := native_missing()):
        pytest.skip(f"native host path: {why}")
    before = os.environ.get(ENV)
    os.environ[ENV] = request.param
    yield request.param
    if before is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = before


@pytest.fixture
def netns():
    name = f"aifabric-t{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
