"""`aifabric compose` run for real on Docker Swarm: a k=4 fat-tree with every switch and host a
container and every link an overlay network, deployed with ``docker stack deploy``; all pairs
reachable over IPv4 and IPv6, each at its first echo request, ECMP over every core switch, every
switch on the native data path (the image's prebuilt libraries, no compiler in it), then
removed with nothing left (services, containers, networks, configs; the swarm itself and its
docker_gwbridge when this test made them). On a single-node Swarm where this machine is in one
already or AIFABRIC_SWARM_ONE_NODE=1 asks for it, and on two nodes, the second a Docker engine in
a privileged container (docker/swarm-node.Dockerfile) joined as a worker, with ``--place-pods``
putting pods 0 and 2 and the cores on this machine and pods 1 and 3 on the worker
(`aifabric.containers.swarm`), so the uplinks of pods 1 and 3 cross between the nodes' VXLANs. The
two-node case makes its own swarm: it is skipped where this machine already is in one.

Needs a Docker engine (started, and the base image made, as for tests/fabric/test_docker_stack.py);
elsewhere skipped, saying why. Builds the fabric and controller images of docker-compose.yml
(cached layers: seconds when nothing changed). The Mininet-free fabric still takes the
machine's two cores: run it under the fabric lock like every fabric
(`flock /tmp/aifabric-fabric.lock pytest tests/fabric/test_compose_swarm.py`).
"""
from __future__ import annotations

import ipaddress
import json
import os
import time
from collections.abc import Iterator

import pytest

from aifabric.lab import traffic
from aifabric.containers.compose_project import LINK_POOL
from aifabric.containers.swarm import STACK, SwarmFabric, build_images, network_exists, swarm_state
from tests.docker_support import run, skip_reason
from topologies.fabric import Role, fat_tree

pytestmark = pytest.mark.slow

ECMP_PINGS = 5              # echo requests per inter-pod pair in the ECMP round
MIN_CORE_PACKETS = 20       # far above what the links' announcements add in that round


# An echo's wait: the first echo between two hosts of the Swarm fabric (an address resolved at
# every hop, across two Docker nodes) took over the default 2 s on a busy machine; a lost echo
# still needs a retry and is named.
ECHO_WAIT_S = 5


def ping_all(fab: SwarmFabric, family: str) -> traffic.Reachability:
    key = "ip4" if family == "ipv4" else "ip6"
    address = {h.name: str(getattr(h, key).ip) for h in fab.fabric.hosts}
    hosts = [fab.host(h.name) for h in fab.fabric.hosts]
    return traffic.all_pairs_ping(hosts, lambda h: address[h.name], family, wait_s=ECHO_WAIT_S)


def core_link_packets(fab: SwarmFabric) -> dict[str, int]:
    """Packets each core switch received on its link interfaces (its management one left out)."""
    pool = ipaddress.ip_network(LINK_POOL)
    counts = {}
    for sw in fab.fabric.switches:
        if sw.role is not Role.CORE:
            continue
        argv = fab.exec_argv(sw.name)
        addresses = json.loads(run(*argv, "ip", "-j", "-4", "addr", "show"))
        links = {i["ifname"] for i in addresses if any(ipaddress.ip_address(a["local"]) in pool for a in i.get("addr_info", []))}
        stats = json.loads(run(*argv, "ip", "-j", "-s", "link", "show"))
        counts[sw.name] = sum(i["stats64"]["rx"]["packets"] for i in stats if i["ifname"] in links)
    return counts


@pytest.fixture(scope="module", params=[1, 2], ids=["one-node", "two-nodes"])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwarmFabric]:
    nodes = request.param
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    in_swarm = swarm_state() == "active"
    if nodes > 1 and in_swarm:
        pytest.skip("this machine is in a swarm already; the two-node case adds a worker only to a swarm of its own")
    if nodes == 1 and not in_swarm and os.environ.get("AIFABRIC_SWARM_ONE_NODE") != "1":
        pytest.skip("single-node Swarm: the two-node case deploys the same stack (3 min saved); "
                    "runs where this machine is in a swarm, or with AIFABRIC_SWARM_ONE_NODE=1")
    t0 = time.monotonic()
    build_images()
    build_s = time.monotonic() - t0
    fab = SwarmFabric.deploy(fat_tree(4), tmp_path_factory.mktemp("compose"), stack=STACK + "test", nodes=nodes)
    try:
        if nodes > 1:       # the placement held: the last pod's hosts run on the worker
            assert fab.exec_argv(fab.fabric.hosts[-1].name)[:4] == ["docker", "exec", "-i", fab.workers[0]]
        yield fab
    finally:
        left = fab.remove()
        print(f"\nswarm deployment on {nodes} node(s): build {build_s:.1f} s, {fab.timings}; "
              f"left after removal: {left or 'nothing'}")


def test_all_pairs_reachable_over_ipv4_and_ipv6(deployment: SwarmFabric) -> None:
    for family in ("ipv4", "ipv6"):
        result = ping_all(deployment, family)
        assert result.pairs == 16 * 15
        assert result.failures() == [], f"{family}: unreached pairs {result.failures()}"
        assert not result.needed_retry, f"{family}: pairs whose first echo request was lost: {result.needed_retry}"


def test_ecmp_spreads_inter_pod_traffic_over_every_core(deployment: SwarmFabric) -> None:
    before = core_link_packets(deployment)
    pod = {h.name: deployment.fabric.switch(h.switch).pod for h in deployment.fabric.hosts}
    procs = []
    for src in deployment.fabric.hosts:
        targets = " ".join(str(h.ip4.ip) for h in deployment.fabric.hosts if pod[h.name] != pod[src.name])
        script = f"for d in {targets}; do ping -n -q -c {ECMP_PINGS} -i 0.2 -W 2 $d >/dev/null & done; wait"
        procs.append(deployment.host(src.name).popen(["bash", "-c", script]))
    for proc in procs:
        proc.communicate(timeout=120)
    after = core_link_packets(deployment)
    delta = {core: after[core] - before[core] for core in before}
    assert len(delta) == 4
    assert all(n >= MIN_CORE_PACKETS for n in delta.values()), f"packets per core switch: {delta}"


def test_every_switch_container_runs_the_native_data_path(deployment: SwarmFabric) -> None:
    """The image carries the native libraries built in its `native` stage, not the compiler: each
    switch runs the fabric program natively, as on a machine with gcc (softswitch-ctl's
    packet_path in the switch's container)."""
    paths = {sw.name: json.loads(run(*deployment.exec_argv(sw.name), "softswitch-ctl", "packet_path"))
             for sw in deployment.fabric.switches}
    print(f"\npacket_path of {next(iter(paths))}: {paths[next(iter(paths))]}")
    not_native = {name: p.get("native_refused") for name, p in paths.items() if p.get("native") is not True}
    assert not_native == {}, f"switches not on the native data path, and why: {not_native}"


def test_removal_leaves_nothing(deployment: SwarmFabric) -> None:
    made_swarm, gwbridge_before = deployment.made_swarm, deployment.gwbridge_before
    left = deployment.remove()
    assert left == {}, f"left after removal: {left}"
    if made_swarm:
        assert swarm_state() == "inactive"
        assert network_exists("docker_gwbridge") == gwbridge_before
