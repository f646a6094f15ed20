"""`aifabric compose` run for real on a single-node Docker Swarm: a k=4 fat-tree with every switch
and host a container and every link an overlay network, deployed with ``docker stack deploy``;
all pairs reachable over IPv4 and IPv6, ECMP over every core switch, then ``docker stack rm``
and nothing left (services, containers, networks, configs; the swarm itself and its
docker_gwbridge when this test made them).

Needs a Docker engine (started, and the base image made, as for tests/test_docker_stack.py);
elsewhere skipped, saying why. Builds the fabric and controller images of docker-compose.yml
(cached layers: seconds when nothing changed). The Mininet-free fabric still takes the
machine's two cores: run it under the fabric lock like every fabric
(`flock /tmp/aifabric-fabric.lock pytest tests/test_compose_swarm.py`).
"""
from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from aifabric import traffic
from aifabric.compose_project import LINK_POOL, ComposeProject
from tests.docker_support import build_env, run, skip_reason
from topologies.fabric import Fabric, Role, fat_tree

pytestmark = pytest.mark.slow

STACK = "aifabricswarmtest"
BUILD_TIMEOUT_S = 600
CONVERGE_TIMEOUT_S = 240
REMOVE_TIMEOUT_S = 120
ECMP_PINGS = 5              # echo requests per inter-pod pair in the ECMP round
MIN_CORE_PACKETS = 20       # far above what the links' announcements add in that round


@dataclass
class Deployment:
    fabric: Fabric
    made_swarm: bool
    gwbridge_before: bool
    timings: dict[str, float]

    def container(self, service: str) -> str:
        cid = run("docker", "ps", "-q", "--filter", f"label=com.docker.swarm.service.name={STACK}_{service}").split()
        assert len(cid) == 1, f"service {service}: containers {cid}"
        return cid[0]


class ContainerHost:
    """A fabric host in its container: what `aifabric.traffic` needs (``name``, ``popen``, ``cmd``)."""

    def __init__(self, deployment: Deployment, name: str) -> None:
        self.name, self._argv = name, ["docker", "exec", deployment.container(name)]

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen([*self._argv, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs)

    def cmd(self, command: str) -> str:
        out, _ = self.popen(["bash", "-c", command]).communicate(timeout=120)
        return out.decode()


def swarm_state() -> str:
    return run("docker", "info", "--format", "{{.Swarm.LocalNodeState}}").strip()


def network_exists(name: str) -> bool:
    return subprocess.run(["docker", "network", "inspect", name], capture_output=True, check=False).returncode == 0


def leftovers() -> dict[str, list[str]]:
    label = f"label=com.docker.stack.namespace={STACK}"
    swarm = swarm_state() == "active"       # services and configs exist only on a swarm
    return {"services": run("docker", "service", "ls", "-q", "--filter", label).split() if swarm else [],
            "containers": run("docker", "ps", "-aq", "--filter", label).split(),
            "networks": run("docker", "network", "ls", "-q", "--filter", label).split(),
            "configs": run("docker", "config", "ls", "-q", "--filter", label).split() if swarm else []}


def remove(deployment: Deployment) -> dict[str, list[str]]:
    """Remove the stack, wait until Docker has removed all of it, leave the swarm (and remove
    its gateway bridge) when the test made it; what is left.

    The services go first and the networks only once their containers are gone: Docker 20.10's
    ``docker stack rm`` removes both at once, and a network removed while a task still holds it
    can stay behind on the node, out of reach of any command until dockerd restarts."""
    deadline = time.monotonic() + REMOVE_TIMEOUT_S
    left = leftovers()
    if left["services"]:
        run("docker", "service", "rm", *left["services"], check=False)
    while left["containers"] and time.monotonic() < deadline:
        time.sleep(1)
        left = leftovers()
    run("docker", "stack", "rm", STACK, check=False)      # the networks and the config
    while any(left.values()) and time.monotonic() < deadline:
        time.sleep(1)
        left = leftovers()
    if deployment.made_swarm and swarm_state() == "active":
        run("docker", "swarm", "leave", "--force")
        if not deployment.gwbridge_before and network_exists("docker_gwbridge"):
            run("docker", "network", "rm", "docker_gwbridge")
        left = leftovers()
    return {kind: ids for kind, ids in left.items() if ids}


def ping_all(deployment: Deployment, family: str) -> traffic.Reachability:
    key = "ip4" if family == "ipv4" else "ip6"
    address = {h.name: str(getattr(h, key).ip) for h in deployment.fabric.hosts}
    hosts = [ContainerHost(deployment, h.name) for h in deployment.fabric.hosts]
    return traffic.all_pairs_ping(hosts, lambda h: address[h.name], family)


def core_link_packets(deployment: Deployment) -> dict[str, int]:
    """Packets each core switch received on its link interfaces (its management one left out)."""
    pool = LINK_POOL.rsplit(".", 2)[0] + "."        # 10.250.
    counts = {}
    for sw in deployment.fabric.switches:
        if sw.role is not Role.CORE:
            continue
        cid = deployment.container(sw.name)
        addresses = json.loads(run("docker", "exec", cid, "ip", "-j", "-4", "addr", "show"))
        links = {i["ifname"] for i in addresses if any(a["local"].startswith(pool) for a in i.get("addr_info", []))}
        stats = json.loads(run("docker", "exec", cid, "ip", "-j", "-s", "link", "show"))
        counts[sw.name] = sum(i["stats64"]["rx"]["packets"] for i in stats if i["ifname"] in links)
    return counts


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    run("docker-compose", "build", "fabric", "controller", env=build_env(AIFABRIC_TARGET="softswitch"),
        timeout=BUILD_TIMEOUT_S)
    timings["build_s"] = time.monotonic() - t0
    made_swarm = swarm_state() != "active"
    dep = Deployment(fat_tree(4), made_swarm, network_exists("docker_gwbridge"), timings)
    if made_swarm:
        run("docker", "swarm", "init", "--advertise-addr", "127.0.0.1")
    else:
        run("docker", "stack", "rm", STACK, check=False)       # an earlier run's leftovers
    out = tmp_path_factory.mktemp("compose")
    try:
        ComposeProject(dep.fabric).write(out)
        t1 = time.monotonic()
        run("docker", "stack", "deploy", "-c", str(out / "stack.yml"), STACK, cwd=out, timeout=300)
        first, last = dep.fabric.hosts[0], dep.fabric.hosts[-1]
        deadline = time.monotonic() + CONVERGE_TIMEOUT_S
        while True:     # the controller has programmed every switch on the longest path
            try:
                reached = ContainerHost(dep, first.name).cmd(f"ping -c 1 -W 1 {last.ip4.ip} >/dev/null && echo ok")
            except AssertionError:          # the service's container is not up yet
                reached = ""
            if "ok" in reached:
                break
            assert time.monotonic() < deadline, (
                f"{first.name} never reached {last.name} within {CONVERGE_TIMEOUT_S} s; controller said: "
                + run("docker", "service", "logs", "--tail", "20", f"{STACK}_controller", check=False))
            time.sleep(2)
        timings["deploy_to_first_ping_s"] = time.monotonic() - t1
        yield dep
    finally:
        left = remove(dep)
        print(f"\nswarm deployment timings: {timings}; left after removal: {left or 'nothing'}")


def test_all_pairs_reachable_over_ipv4_and_ipv6(deployment: Deployment) -> None:
    for family in ("ipv4", "ipv6"):
        result = ping_all(deployment, family)
        assert result.pairs == 16 * 15
        assert result.failures() == [], f"{family}: unreached pairs {result.failures()}"


def test_ecmp_spreads_inter_pod_traffic_over_every_core(deployment: Deployment) -> None:
    before = core_link_packets(deployment)
    pod = {h.name: deployment.fabric.switch(h.switch).pod for h in deployment.fabric.hosts}
    procs = []
    for src in deployment.fabric.hosts:
        targets = " ".join(str(h.ip4.ip) for h in deployment.fabric.hosts if pod[h.name] != pod[src.name])
        script = f"for d in {targets}; do ping -n -q -c {ECMP_PINGS} -i 0.2 -W 2 $d >/dev/null & done; wait"
        procs.append(ContainerHost(deployment, src.name).popen(["bash", "-c", script]))
    for proc in procs:
        proc.communicate(timeout=120)
    after = core_link_packets(deployment)
    delta = {core: after[core] - before[core] for core in before}
    assert len(delta) == 4
    assert all(n >= MIN_CORE_PACKETS for n in delta.values()), f"packets per core switch: {delta}"


def test_stack_rm_leaves_nothing(deployment: Deployment) -> None:
    left = remove(deployment)
    assert left == {}, f"left after docker stack rm: {left}"
    if deployment.made_swarm:
        assert swarm_state() == "inactive"
        assert network_exists("docker_gwbridge") == deployment.gwbridge_before
