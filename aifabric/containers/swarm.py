"""A per-container fabric (`aifabric.containers.compose_project`) deployed on Docker Swarm and driven from
Python, for tests/fabric/test_compose_swarm.py and benchmarks/scale.py.

    fab = SwarmFabric.deploy(fat_tree(4), Path("out/k4"), nodes=2)   # until a first ping crosses it
    fab.host("p0e0h0").cmd("ping -c 1 10.3.1.3")
    fab.remove()                                                     # {} when nothing is left

``deploy`` makes the swarm when this machine is in none (its manager on the address of docker0,
which a worker in a container reaches) and, for ``nodes`` > 1, adds workers: Docker engines in
containers (docker/swarm-node.Dockerfile) joined to it, the fabric image loaded into each, and
``--place-pods`` placement with the pods shared out between the nodes. ``remove`` takes
everything away again, the swarm and its docker_gwbridge included when ``deploy`` made them.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aifabric.containers.compose_project import IMAGES, ComposeProject
from topologies.fabric import Fabric

REPO = Path(__file__).resolve().parents[2]
STACK = "aifabric"
WORKER_IMAGE = "aifabric/swarm-node:dev"
CONVERGE_TIMEOUT_S = 240
REMOVE_TIMEOUT_S = 120
BUILD_TIMEOUT_S = 600
# For an engine that cannot start privileged containers: every capability it has, as
# docker/compose.unprivileged.yml gives the fabric, and the cgroups writable for the worker's engine
UNPRIVILEGED = ("--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--security-opt", "seccomp=unconfined",
                "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined",
                "--volume", "/sys/fs/cgroup:/sys/fs/cgroup")


class DockerError(RuntimeError):
    """A docker command failed; the message has its command line and standard error."""


def command(*argv: str, timeout: float = 120, check: bool = True, env: dict[str, str] | None = None,
            cwd: Path = REPO, stdin: object = None) -> str:
    """``argv``'s standard output; DockerError with its standard error when it fails."""
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd, check=False,
                            stdin=stdin)
    if check and result.returncode != 0:
        raise DockerError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr[-3000:]}")
    return result.stdout


def build_env(**extra: str) -> dict[str, str]:
    """The environment for docker-compose: this machine's extra CA certificates (a TLS-inspecting
    proxy's) handed to the image build for pip, when there are any."""
    env = dict(os.environ, **extra)
    local_cas = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    if local_cas and "AIFABRIC_PIP_CERT_PEM" not in env:
        env["AIFABRIC_PIP_CERT_PEM"] = "\n".join(p.read_text().strip() for p in local_cas)
    return env


def build_images() -> None:
    """The fabric (softswitch) and controller images of docker-compose.yml, which the containers
    run (Docker's layer cache: seconds when nothing changed)."""
    command("docker-compose", "build", "fabric", "controller", env=build_env(AIFABRIC_TARGET="softswitch"),
            timeout=BUILD_TIMEOUT_S)


def swarm_state() -> str:
    return command("docker", "info", "--format", "{{.Swarm.LocalNodeState}}").strip()


def network_exists(name: str) -> bool:
    return subprocess.run(["docker", "network", "inspect", name], capture_output=True, check=False).returncode == 0


def _bridge_setting(template: str) -> str:
    """One setting of the default bridge network ("" where it has none)."""
    value = command("docker", "network", "inspect", "bridge", "--format", template).strip()
    return "" if value == "<no value>" else value


def manager_address() -> str:
    """The address of docker0 on this machine: the swarm's manager, reachable from a worker in a container."""
    gateway = _bridge_setting("{{(index .IPAM.Config 0).Gateway}}")
    if gateway:
        return gateway
    # an engine may leave the default bridge's IPAM without a gateway (Debian's 20.10 on a fresh
    # machine does): the bridge interface's own address is the same thing
    bridge = _bridge_setting('{{index .Options "com.docker.network.bridge.name"}}') or "docker0"
    shown = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", bridge], capture_output=True, text=True)
    for word, value in zip(shown.stdout.split(), shown.stdout.split()[1:]):
        if word == "inet":
            return value.partition("/")[0]
    raise DockerError(f"no address for the swarm's manager: Docker's bridge network names no gateway "
                      f"and {bridge} has no IPv4 address ({shown.stderr.strip() or 'none shown'})")


class ContainerHost:
    """A fabric host in its container: what `aifabric.lab.traffic` needs (``name``, ``popen``, ``cmd``)."""

    def __init__(self, name: str, exec_argv: list[str]) -> None:
        self.name, self._argv = name, exec_argv

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen([*self._argv, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs)

    def cmd(self, line: str) -> str:
        out, _ = self.popen(["bash", "-c", line]).communicate(timeout=120)
        return out.decode()


@dataclass
class SwarmFabric:
    fabric: Fabric
    stack: str = STACK
    made_swarm: bool = False            # deploy made the swarm: remove leaves it
    gwbridge_before: bool = True        # docker_gwbridge was there before the swarm
    workers: list[str] = field(default_factory=list)     # containers running a worker's engine
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def deploy(cls, fabric: Fabric, out: Path, *, stack: str = STACK, nodes: int = 1,
               converge_timeout: float = CONVERGE_TIMEOUT_S,
               progress: Callable[[str], None] = lambda _: None) -> SwarmFabric:
        """Write the compose project into ``out``, deploy it on ``nodes`` Swarm nodes and wait until
        the first host reaches the last; ValueError for two or more nodes on a swarm this
        machine was in already (workers are added only to a swarm of its own)."""
        made = swarm_state() != "active"
        if nodes > 1 and not made:
            raise ValueError("this machine is in a swarm already; workers are added only to a swarm of its own")
        fab = cls(fabric, stack, made, network_exists("docker_gwbridge"))
        if made:
            command("docker", "swarm", "init", "--advertise-addr", manager_address())
        else:
            fab.remove()            # an earlier deployment's leftovers
        try:
            t0 = time.monotonic()
            pods = sorted({sw.pod for sw in fabric.switches if sw.pod is not None})
            for n in range(1, nodes):
                worker = f"aifabric-swarm-worker{n}"
                progress(f"worker {worker}: a Docker engine in a container, joining the swarm")
                fab.workers.append(worker)
                fab._label(fab._start_worker(worker), [f"aifabric.pod{p}" for p in pods[n::nodes]])
            if nodes > 1:
                fab._label(command("docker", "info", "--format", "{{.Swarm.NodeID}}").strip(),
                           ["aifabric.top", *(f"aifabric.pod{p}" for p in pods[0::nodes])])
            if nodes > 1:
                fab.timings["workers_s"] = time.monotonic() - t0
            ComposeProject(fabric, place_pods=nodes > 1).write(out)
            t1 = time.monotonic()
            progress(f"docker stack deploy {stack}: {len(fabric.switches)} switches, {len(fabric.hosts)} hosts")
            command("docker", "stack", "deploy", "-c", str(out / "stack.yml"), stack, cwd=out, timeout=300)
            fab._wait_for_first_ping(converge_timeout)
            fab.timings["deploy_to_first_ping_s"] = time.monotonic() - t1
        except BaseException:
            fab.remove()
            raise
        return fab

    # --- reaching the containers ------------------------------------------------------------

    def engines(self) -> list[list[str]]:
        """The docker command of every node: this machine's, then each worker's."""
        return [["docker"], *(["docker", "exec", "-i", w, "docker"] for w in self.workers)]

    def exec_argv(self, service: str) -> list[str]:
        """``docker exec`` into the container of ``service``, on whichever node it runs."""
        label = f"label=com.docker.swarm.service.name={self.stack}_{service}"
        for engine in self.engines():
            cid = command(*engine, "ps", "-q", "--filter", label).split()
            if len(cid) == 1:
                return [*engine, "exec", cid[0]]
        raise DockerError(f"service {service}: no running container (or more than one) on any node")

    def host(self, name: str) -> ContainerHost:
        return ContainerHost(name, self.exec_argv(name))

    def container_stats(self) -> dict[str, tuple[float, float]]:
        """Service name -> (CPU %, memory MiB) of its container, as ``docker stats`` shows them."""
        stats = {}
        prefix = f"{self.stack}_"
        for engine in self.engines():
            out = command(*engine, "stats", "--no-stream", "--format", "{{json .}}", timeout=120)
            for line in out.splitlines():
                row = json.loads(line)
                name = row["Name"]
                if name.startswith(prefix):
                    used = row["MemUsage"].split("/")[0].strip()
                    stats[name[len(prefix):].split(".")[0]] = (float(row["CPUPerc"].rstrip("%")), _mib(used))
        return stats

    # --- taking it away ------------------------------------------------------------------------

    def leftovers(self) -> dict[str, list[str]]:
        """What of the stack Docker still has: services and configs (the swarm's), containers and
        networks on every node (a worker whose engine is gone holds nothing)."""
        label = f"label=com.docker.stack.namespace={self.stack}"
        swarm = swarm_state() == "active"
        left = {"services": command("docker", "service", "ls", "-q", "--filter", label).split() if swarm else [],
                "configs": command("docker", "config", "ls", "-q", "--filter", label).split() if swarm else [],
                "containers": [], "networks": []}
        for engine in self.engines():
            left["containers"] += command(*engine, "ps", "-aq", "--filter", label, check=False).split()
            left["networks"] += command(*engine, "network", "ls", "-q", "--filter", label, check=False).split()
        return left

    def remove(self) -> dict[str, list[str]]:
        """Remove the stack, wait until Docker has removed all of it, then the workers (each leaves
        the swarm, its container goes with its volume), and leave the swarm (and remove its
        gateway bridge) when ``deploy`` made it; what is left, by kind.

        The services go first and the networks only once their containers are gone: Docker
        20.10's ``docker stack rm`` removes both at once, and a network removed while a task still
        holds it can stay behind on the node, out of reach of any command until dockerd restarts."""
        deadline = time.monotonic() + REMOVE_TIMEOUT_S
        left = self.leftovers()
        if left["services"]:
            command("docker", "service", "rm", *left["services"], check=False)
        while left["containers"] and time.monotonic() < deadline:
            time.sleep(1)
            left = self.leftovers()
        command("docker", "stack", "rm", self.stack, check=False)      # the networks and the config
        while any(left.values()) and time.monotonic() < deadline:
            time.sleep(1)
            left = self.leftovers()
        for worker in self.workers:
            node = command("docker", "exec", worker, "docker", "info", "--format", "{{.Swarm.NodeID}}",
                           check=False).strip()
            command("docker", "exec", worker, "docker", "swarm", "leave", "--force", check=False)
            command("docker", "rm", "-f", "-v", worker, check=False)
            if node:
                command("docker", "node", "rm", "--force", node, check=False)
        gone = list(self.workers)
        self.workers.clear()
        if self.made_swarm and swarm_state() == "active":
            command("docker", "swarm", "leave", "--force")
            if not self.gwbridge_before and network_exists("docker_gwbridge"):
                command("docker", "network", "rm", "docker_gwbridge")
        left = self.leftovers()
        left["workers"] = [w for w in gone if subprocess.run(["docker", "container", "inspect", w],
                                                             capture_output=True, check=False).returncode == 0]
        return {kind: ids for kind, ids in left.items() if ids}

    # --- inside deploy -------------------------------------------------------------------------

    def _start_worker(self, name: str) -> str:
        """A Docker engine in a container joined to this swarm as a worker, with the fabric
        image loaded; its swarm node id."""
        command("docker", "build", "-q", "-t", WORKER_IMAGE, "-f", "docker/swarm-node.Dockerfile", "docker",
                timeout=BUILD_TIMEOUT_S)
        command("docker", "rm", "-f", "-v", name, check=False)          # an earlier run's
        started = subprocess.run(["docker", "run", "-d", "--privileged", "--name", name, "--hostname", name,
                                  WORKER_IMAGE], capture_output=True, check=False)
        if started.returncode != 0:     # an engine that cannot grant every capability (a sandbox, some VMs)
            command("docker", "rm", "-f", "-v", name, check=False)
            command("docker", "run", "-d", *UNPRIVILEGED, "--name", name, "--hostname", name, WORKER_IMAGE)
        deadline = time.monotonic() + 60
        while subprocess.run(["docker", "exec", name, "docker", "info"], capture_output=True,
                             check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise DockerError(f"{name}: its dockerd did not answer within 60 s: "
                                  + command("docker", "logs", "--tail", "20", name, check=False))
            time.sleep(1)
        image = IMAGES["softswitch"]
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "exec", "-i", name, "docker", "load", "-q"], stdin=save.stdout,
                              capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
        if save.wait() != 0 or load.returncode != 0:
            raise DockerError(f"loading {image} into {name}: {load.stderr[-2000:]}")
        token = command("docker", "swarm", "join-token", "-q", "worker").strip()
        command("docker", "exec", name, "docker", "swarm", "join", "--token", token, f"{manager_address()}:2377",
                timeout=60)
        return command("docker", "exec", name, "docker", "info", "--format", "{{.Swarm.NodeID}}").strip()

    @staticmethod
    def _label(node: str, labels: list[str]) -> None:
        command("docker", "node", "update", *(a for name in labels for a in ("--label-add", f"{name}=true")), node)

    def _wait_for_first_ping(self, timeout: float) -> None:
        """Until the first host reaches every other host: every container up, the controller has
        programmed every switch on those ways, and every host's link carries (the last host alone
        left a pod whose switches were programmed later losing first echoes; one host behind each
        edge switch left the other hosts' links, overlay networks across two nodes, losing them)."""
        first = self.fabric.hosts[0]
        targets = " ".join(str(h.ip4.ip) for h in self.fabric.hosts[1:])
        script = f"for d in {targets}; do ping -c 1 -W 1 $d >/dev/null || echo unreached $d; done; echo done"
        deadline = time.monotonic() + timeout
        while True:
            try:
                said = self.host(first.name).cmd(script)
                if said.strip() == "done":
                    return
            except DockerError:         # its container is not up yet
                said = "its container is not up"
            if time.monotonic() > deadline:
                logs = command("docker", "service", "logs", "--tail", "20", f"{self.stack}_controller", check=False)
                raise DockerError(f"{first.name} did not reach every host within {timeout:g} s "
                                  f"({' '.join(said.split())}); the controller said: {logs}")
            time.sleep(2)


def _mib(text: str) -> float:
    """``docker stats``' 127.2MiB / 1.1GiB / 980KiB in MiB."""
    units = {"B": 1 / 2**20, "KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0}
    for unit in ("KiB", "MiB", "GiB", "B"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    raise ValueError(f"not a docker stats size: {text!r}")
