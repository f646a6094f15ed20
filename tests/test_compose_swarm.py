"""`aifabric compose` run for real on Docker Swarm: a k=4 fat-tree with every switch and host a
container and every link an overlay network, deployed with ``docker stack deploy``; all pairs
reachable over IPv4 and IPv6, ECMP over every core switch, then removed with nothing left
(services, containers, networks, configs; the swarm itself and its docker_gwbridge when this
test made them). Twice: on a single-node Swarm, and on two nodes, the second a Docker engine in
a privileged container (docker/swarm-node.Dockerfile) joined as a worker, with ``--place-pods``
putting pods 0-1 and the cores on this machine and pods 2-3 on the worker, so the links between
pods 2-3 and the cores cross between the nodes' VXLANs. The two-node case makes its own swarm:
it is skipped where this machine already is in one.

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
from dataclasses import dataclass, field

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
WORKER = "aifabric-swarm-worker"
WORKER_IMAGE = "aifabric/swarm-node:dev"
FABRIC_IMAGE = "aifabric/fabric-softswitch:dev"
MANAGER_LABELS = ("aifabric.pod0", "aifabric.pod1", "aifabric.top")
WORKER_LABELS = ("aifabric.pod2", "aifabric.pod3")
UNPRIVILEGED = ("--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--security-opt", "seccomp=unconfined",
                "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined",
                "--volume", "/sys/fs/cgroup:/sys/fs/cgroup")      # the worker's engine makes cgroups


@dataclass
class Deployment:
    fabric: Fabric
    made_swarm: bool
    gwbridge_before: bool
    timings: dict[str, float]
    workers: list[str] = field(default_factory=list)     # containers running a worker's engine

    def engines(self) -> list[list[str]]:
        """The docker command of every node: this machine's, then each worker's."""
        return [["docker"], *(["docker", "exec", "-i", w, "docker"] for w in self.workers)]

    def exec_argv(self, service: str) -> list[str]:
        """``docker exec`` into the container of ``service``, on whichever node it runs."""
        label = f"label=com.docker.swarm.service.name={STACK}_{service}"
        for engine in self.engines():
            cid = run(*engine, "ps", "-q", "--filter", label).split()
            if cid:
                assert len(cid) == 1, f"service {service}: containers {cid}"
                return [*engine, "exec", cid[0]]
        raise AssertionError(f"service {service}: no running container on any node")


class ContainerHost:
    """A fabric host in its container: what `aifabric.traffic` needs (``name``, ``popen``, ``cmd``)."""

    def __init__(self, deployment: Deployment, name: str) -> None:
        self.name, self._argv = name, deployment.exec_argv(name)

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen([*self._argv, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs)

    def cmd(self, command: str) -> str:
        out, _ = self.popen(["bash", "-c", command]).communicate(timeout=120)
        return out.decode()


def swarm_state() -> str:
    return run("docker", "info", "--format", "{{.Swarm.LocalNodeState}}").strip()


def network_exists(name: str) -> bool:
    return subprocess.run(["docker", "network", "inspect", name], capture_output=True, check=False).returncode == 0


def leftovers(deployment: Deployment) -> dict[str, list[str]]:
    """What of the stack Docker still has: services and configs (the swarm's), containers and
    networks on every node."""
    label = f"label=com.docker.stack.namespace={STACK}"
    swarm = swarm_state() == "active"       # services and configs exist only on a swarm
    left = {"services": run("docker", "service", "ls", "-q", "--filter", label).split() if swarm else [],
            "configs": run("docker", "config", "ls", "-q", "--filter", label).split() if swarm else [],
            "containers": [], "networks": []}
    for engine in deployment.engines():     # (a worker whose engine is gone holds nothing)
        left["containers"] += run(*engine, "ps", "-aq", "--filter", label, check=False).split()
        left["networks"] += run(*engine, "network", "ls", "-q", "--filter", label, check=False).split()
    return left


def remove(deployment: Deployment) -> dict[str, list[str]]:
    """Remove the stack, wait until Docker has removed all of it, then the workers (each leaves
    the swarm, its container goes with its volume), and leave the swarm (and remove its gateway
    bridge) when the test made it; what is left.

    The services go first and the networks only once their containers are gone: Docker 20.10's
    ``docker stack rm`` removes both at once, and a network removed while a task still holds it
    can stay behind on the node, out of reach of any command until dockerd restarts."""
    deadline = time.monotonic() + REMOVE_TIMEOUT_S
    left = leftovers(deployment)
    if left["services"]:
        run("docker", "service", "rm", *left["services"], check=False)
    while left["containers"] and time.monotonic() < deadline:
        time.sleep(1)
        left = leftovers(deployment)
    run("docker", "stack", "rm", STACK, check=False)      # the networks and the config
    while any(left.values()) and time.monotonic() < deadline:
        time.sleep(1)
        left = leftovers(deployment)
    for worker in deployment.workers:
        node = run("docker", "exec", worker, "docker", "info", "--format", "{{.Swarm.NodeID}}", check=False).strip()
        run("docker", "exec", worker, "docker", "swarm", "leave", "--force", check=False)
        run("docker", "rm", "-f", "-v", worker, check=False)
        if node:
            run("docker", "node", "rm", "--force", node, check=False)
    deployment.workers.clear()
    if deployment.made_swarm and swarm_state() == "active":
        run("docker", "swarm", "leave", "--force")
        if not deployment.gwbridge_before and network_exists("docker_gwbridge"):
            run("docker", "network", "rm", "docker_gwbridge")
    left = leftovers(deployment)
    if subprocess.run(["docker", "container", "inspect", WORKER], capture_output=True, check=False).returncode == 0:
        left["workers"] = [WORKER]
    return {kind: ids for kind, ids in left.items() if ids}


def start_worker(manager: str) -> str:
    """A Docker engine in a privileged container joined to this machine's swarm as a worker,
    with the fabric image loaded; its swarm node id."""
    run("docker", "build", "-q", "-t", WORKER_IMAGE, "-f", "docker/swarm-node.Dockerfile", "docker",
        timeout=BUILD_TIMEOUT_S)
    run("docker", "rm", "-f", "-v", WORKER, check=False)            # an earlier run's
    if subprocess.run(["docker", "run", "-d", "--privileged", "--name", WORKER, "--hostname", WORKER, WORKER_IMAGE],
                      capture_output=True, check=False).returncode != 0:
        # an engine that cannot grant every capability (a sandbox, some VMs): all it has, as
        # docker/compose.unprivileged.yml gives the fabric
        run("docker", "rm", "-f", "-v", WORKER, check=False)
        run("docker", "run", "-d", *UNPRIVILEGED, "--name", WORKER, "--hostname", WORKER, WORKER_IMAGE)
    deadline = time.monotonic() + 60
    while subprocess.run(["docker", "exec", WORKER, "docker", "info"], capture_output=True,
                         check=False).returncode != 0:
        assert time.monotonic() < deadline, "the worker's dockerd did not answer within 60 s: " + run(
            "docker", "logs", "--tail", "20", WORKER, check=False)
        time.sleep(1)
    save = subprocess.Popen(["docker", "save", FABRIC_IMAGE], stdout=subprocess.PIPE)
    load = subprocess.run(["docker", "exec", "-i", WORKER, "docker", "load", "-q"], stdin=save.stdout,
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    assert save.wait() == 0 and load.returncode == 0, f"loading {FABRIC_IMAGE} into the worker: {load.stderr}"
    token = run("docker", "swarm", "join-token", "-q", "worker").strip()
    run("docker", "exec", WORKER, "docker", "swarm", "join", "--token", token, f"{manager}:2377", timeout=60)
    return run("docker", "exec", WORKER, "docker", "info", "--format", "{{.Swarm.NodeID}}").strip()


def label(node: str, labels: tuple[str, ...]) -> None:
    run("docker", "node", "update", *(a for name in labels for a in ("--label-add", f"{name}=true")), node)


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
        argv = deployment.exec_argv(sw.name)
        addresses = json.loads(run(*argv, "ip", "-j", "-4", "addr", "show"))
        links = {i["ifname"] for i in addresses if any(a["local"].startswith(pool) for a in i.get("addr_info", []))}
        stats = json.loads(run(*argv, "ip", "-j", "-s", "link", "show"))
        counts[sw.name] = sum(i["stats64"]["rx"]["packets"] for i in stats if i["ifname"] in links)
    return counts


@pytest.fixture(scope="module", params=[1, 2], ids=["one-node", "two-nodes"])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    nodes = request.param
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    made_swarm = swarm_state() != "active"
    if nodes > 1 and not made_swarm:
        pytest.skip("this machine is in a swarm already; the two-node case adds a worker only to a swarm of its own")
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    run("docker-compose", "build", "fabric", "controller", env=build_env(AIFABRIC_TARGET="softswitch"),
        timeout=BUILD_TIMEOUT_S)
    timings["build_s"] = time.monotonic() - t0
    dep = Deployment(fat_tree(4), made_swarm, network_exists("docker_gwbridge"), timings)
    # The manager on the address of docker0: reachable from a worker in a container
    manager = run("docker", "network", "inspect", "bridge", "--format", "{{(index .IPAM.Config 0).Gateway}}").strip()
    if made_swarm:
        run("docker", "swarm", "init", "--advertise-addr", manager)
    else:
        remove(dep)         # an earlier run's leftovers
    out = tmp_path_factory.mktemp("compose")
    try:
        if nodes > 1:
            t1 = time.monotonic()
            dep.workers.append(WORKER)
            label(start_worker(manager), WORKER_LABELS)
            label(run("docker", "info", "--format", "{{.Swarm.NodeID}}").strip(), MANAGER_LABELS)
            timings["worker_s"] = time.monotonic() - t1
        ComposeProject(dep.fabric, place_pods=nodes > 1).write(out)
        t2 = time.monotonic()
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
        timings["deploy_to_first_ping_s"] = time.monotonic() - t2
        if nodes > 1:       # the placement held: pod 3's hosts run on the worker
            assert dep.exec_argv(last.name)[:4] == ["docker", "exec", "-i", WORKER]
        yield dep
    finally:
        left = remove(dep)
        print(f"\nswarm deployment on {nodes} node(s), timings: {timings}; left after removal: {left or 'nothing'}")


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


def test_removal_leaves_nothing(deployment: Deployment) -> None:
    left = remove(deployment)
    assert left == {}, f"left after docker stack rm: {left}"
    if deployment.made_swarm:
        assert swarm_state() == "inactive"
        assert network_exists("docker_gwbridge") == deployment.gwbridge_before
