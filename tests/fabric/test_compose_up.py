"""`aifabric compose`'s compose.yml run for real with docker-compose on one machine (bridge
networks, one per link): a small leaf-spine (2 leaves, 2 spines, 2 hosts each) comes up, every
pair of hosts is reachable over IPv4 and IPv6, each at its first echo request, and
``docker-compose down`` leaves no container, network or volume. The Swarm side is
tests/fabric/test_compose_swarm.py. Skipped, saying why, where there is no Docker engine; run it
under the fabric lock like every fabric.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aifabric.lab import traffic
from aifabric.containers.compose_project import ComposeProject
from aifabric.containers.swarm import ContainerHost, build_images
from tests.docker_support import compose_leftovers, run, skip_reason
from topologies.fabric import Fabric, leaf_spine

pytestmark = pytest.mark.slow

PROJECT = "aifabriccomposetest"
UP_TIMEOUT_S = 180


class ComposeFabric:
    def __init__(self, fabric: Fabric, out: Path) -> None:
        self.fabric, self.compose = fabric, ["docker-compose", "-f", str(out / "compose.yml"), "-p", PROJECT]

    def host(self, name: str) -> ContainerHost:
        return ContainerHost(name, [*self.compose, "exec", "-T", name])


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeFabric]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    build_images()
    out = tmp_path_factory.mktemp("compose-up")
    ComposeProject(leaf_spine(2, 2, 2)).write(out)
    fab = ComposeFabric(leaf_spine(2, 2, 2), out)
    run(*fab.compose, "down", "--remove-orphans", check=False)        # an earlier run's
    try:
        run(*fab.compose, "up", "-d", timeout=300)
        first, last = fab.fabric.hosts[0], fab.fabric.hosts[-1]
        deadline = time.monotonic() + UP_TIMEOUT_S
        while "ok" not in fab.host(first.name).cmd(f"ping -c 1 -W 1 {last.ip4.ip} >/dev/null && echo ok"):
            assert time.monotonic() < deadline, (f"{first.name} never reached {last.name}: "
                                                 + run(*fab.compose, "logs", "--tail", "10", check=False))
            time.sleep(2)
        yield fab
    finally:
        run(*fab.compose, "down", "--remove-orphans", timeout=180, check=False)


def test_all_pairs_reachable_over_ipv4_and_ipv6(up: ComposeFabric) -> None:
    for family, key in (("ipv4", "ip4"), ("ipv6", "ip6")):
        address = {h.name: str(getattr(h, key).ip) for h in up.fabric.hosts}
        result = traffic.all_pairs_ping([up.host(h.name) for h in up.fabric.hosts], lambda h, a=address: a[h.name],
                                        family)
        assert result.pairs == 4 * 3
        assert result.failures() == [], f"{family}: unreached pairs {result.failures()}"
        assert not result.needed_retry, f"{family}: pairs whose first echo request was lost: {result.needed_retry}"


def test_down_leaves_nothing(up: ComposeFabric) -> None:
    run(*up.compose, "down", "--remove-orphans", timeout=180)
    assert compose_leftovers(PROJECT) == {"containers": [], "networks": [], "volumes": []}
