"""``aifabric compose``: a fabric as containers, one per switch and per host, and a Docker network
per link that joins exactly its two ends.

    aifabric compose --topo fattree --k 4 --out DIR [--target softswitch|bmv2] [--link-pool CIDR]

writes into DIR:

- ``compose.yml``: for ``docker compose up`` (or docker-compose) on one machine; links are bridge
  networks;
- ``stack.yml``: for ``docker stack deploy -c stack.yml NAME`` on a Swarm of one or more machines;
  links are overlay networks, every service ``endpoint_mode: dnsrr`` (no virtual IP to spend an
  address on);
- ``fabric.json``: the fabric description (`aifabric.lab.description`) with every switch's P4Runtime
  server at ``<switch>:9559``, given to every container as a config.

Every link network gets its own small subnet from ``--link-pool`` (`link_networks`, the same
function the containers call, so both sides agree without another file). Those addresses are
Docker's, only used to tell which interface is which link: the fabric's own addresses (the plan
in topologies/README.md) are set by `aifabric.containers.container_node` inside each container. The
controller service joins the management network with every switch and runs ``aifabric controller
--fabric`` on the description, as in the single-container stack (docker-compose.yml).

The images are the ones docker-compose.yml builds (``docker-compose build fabric controller``):
switches and hosts run the fabric image (softswitch, or BMv2 with ``--target bmv2``), the
controller runs the controller image.
"""
from __future__ import annotations

import hashlib
import ipaddress
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from aifabric.lab.description import FabricDescription
from topologies.fabric import Fabric

LINK_POOL = "10.250.0.0/16"     # outside every topology's plan (topologies/README.md)
LINK_PREFIX = 29                # two ends, Docker's gateway, room for a restarted task
MGMT_SUBNET = "10.251.0.0/16"   # the controller and every switch
P4RUNTIME_PORT = 9559           # P4Runtime's registered port; one switch per container
RUNTIME_PORT = 9090             # a softswitch's run-time control, on the container's loopback (softswitch-ctl's default)
DESCRIPTION_PATH = "/etc/aifabric/fabric.json"
MGMT_NETWORK = "mgmt"
CONTROLLER = "controller"
IMAGES = {
    "softswitch": "aifabric/fabric-softswitch:dev",
    "bmv2": "aifabric/fabric-bmv2:dev",
    "controller": "aifabric/controller:dev",
}
COMPOSE_VERSION = "3.8"         # configs, cap_add and sysctls for both compose and stack deploy


@dataclass(frozen=True)
class LinkNetwork:
    """The Docker network of one fabric link: its name, subnet and two ends (node, port)."""

    name: str
    subnet: ipaddress.IPv4Network
    a: str
    a_port: int
    b: str
    b_port: int

    def end(self, node: str) -> tuple[int, str] | None:
        """(this node's port, the peer) when ``node`` is an end of the link, else None."""
        if node == self.a:
            return self.a_port, self.b
        if node == self.b:
            return self.b_port, self.a
        return None


def link_networks(fabric: Fabric, pool: str = LINK_POOL) -> list[LinkNetwork]:
    """One network per link of ``fabric``, in link order, the n-th taking the n-th /29 of ``pool``;
    ValueError when the pool is too small."""
    net = ipaddress.ip_network(pool)
    if not isinstance(net, ipaddress.IPv4Network) or net.prefixlen > LINK_PREFIX:
        raise ValueError(f"--link-pool {pool}: must be an IPv4 network of /{LINK_PREFIX} or larger")
    available = 2 ** (LINK_PREFIX - net.prefixlen)
    if len(fabric.links) > available:
        raise ValueError(f"--link-pool {pool}: holds {available} links of /{LINK_PREFIX}, "
                         f"the fabric has {len(fabric.links)}")
    subnets = net.subnets(new_prefix=LINK_PREFIX)
    return [LinkNetwork(f"link{n}", next(subnets), ln.a, ln.a_port, ln.b, ln.b_port)
            for n, ln in enumerate(fabric.links)]


def containerised(fabric: Fabric) -> Fabric:
    """``fabric`` with every switch's P4Runtime server at ``<name>:9559`` (its own container)."""
    return replace(fabric, switches=[replace(sw, grpc_host=sw.name, grpc_port=P4RUNTIME_PORT)
                                     for sw in fabric.switches])


@dataclass(frozen=True)
class ComposeProject:
    fabric: Fabric
    target: str = "softswitch"
    link_pool: str = LINK_POOL
    place_pods: bool = False        # stack.yml: each pod on the nodes labelled for it (`placement_labels`)

    def placement_label(self, node: str) -> str | None:
        """The Swarm node label that ``node``'s container is held to with ``place_pods``: a pod's
        switches and their hosts ``aifabric.pod<p>``, the switches of no pod (cores, spines)
        ``aifabric.top``; the controller none (it runs on a manager)."""
        if node == CONTROLLER:
            return None
        names = {sw.name: sw for sw in self.fabric.switches}
        switch = names.get(node) or names[self.fabric.host(node).switch]
        return "aifabric.top" if switch.pod is None else f"aifabric.pod{switch.pod}"

    def placement_labels(self) -> list[str]:
        """Every label ``place_pods`` asks nodes to carry (``docker node update --label-add L=true``)."""
        return sorted({self.placement_label(sw.name) for sw in self.fabric.switches})

    def description(self) -> FabricDescription:
        return FabricDescription.from_fabric(containerised(self.fabric), target=self.target)

    def services(self, swarm: bool) -> dict[str, Any]:
        links = link_networks(self.fabric, self.link_pool)
        # The description: a Swarm config on a Swarm (on every node without copying files);
        # docker-compose does not mount configs, so a read-only bind mount there.
        # (a new dict for every service: the YAML stays free of anchors)
        config = self._config_name()

        def description_file() -> dict[str, Any]:
            return ({"configs": [{"source": config, "target": DESCRIPTION_PATH}]} if swarm
                    else {"volumes": [f"./fabric.json:{DESCRIPTION_PATH}:ro"]})

        def node(name: str, ipv6: bool, networks: list[str]) -> dict[str, Any]:
            return {
                "image": IMAGES[self.target],
                "hostname": name,
                "entrypoint": ["python3", "-m", "aifabric.containers.container_node"],
                "command": ["--fabric", DESCRIPTION_PATH, "--link-pool", self.link_pool, "--node", name],
                # a switch: offloads off; a host: the plan's MAC, addresses, routes, neighbours
                "cap_add": ["NET_ADMIN"],
                # IPv6 for the hosts; a switch's own kernel stays quiet on its links (no solicitations)
                "sysctls": {f"net.ipv6.conf.{c}.disable_ipv6": int(not ipv6) for c in ("all", "default")},
                **description_file(),
                "networks": networks,
            }

        services: dict[str, Any] = {}
        for sw in self.fabric.switches:
            services[sw.name] = node(sw.name, False, [MGMT_NETWORK, *(ln.name for ln in links if ln.end(sw.name))])
        for h in self.fabric.hosts:
            services[h.name] = node(h.name, True, [ln.name for ln in links if ln.end(h.name)])
        services[CONTROLLER] = {
            "image": IMAGES["controller"],
            "command": ["--fabric", DESCRIPTION_PATH],
            **description_file(),
            "networks": [MGMT_NETWORK],
        }
        for name, service in services.items():
            if swarm:
                service["deploy"] = {"endpoint_mode": "dnsrr", "restart_policy": {"condition": "on-failure"}}
                if self.place_pods:         # a pod's links stay on its machine; only its uplinks cross
                    label = self.placement_label(name)
                    rule = "node.role == manager" if label is None else f"node.labels.{label} == true"
                    service["deploy"]["placement"] = {"constraints": [rule]}
            else:
                service["restart"] = "on-failure"
        return services

    def networks(self, swarm: bool) -> dict[str, Any]:
        # An internal bridge network has iptables drop every IPv4 packet from or to outside its
        # Docker subnet, the fabric's included (Docker's isolation rules, seen by bridged frames),
        # so only the overlay networks are internal (no gateway out of them).
        kind = {"driver": "overlay", "internal": True} if swarm else {"driver": "bridge"}
        nets = {MGMT_NETWORK: {**kind, "ipam": {"config": [{"subnet": MGMT_SUBNET}]}}}
        for ln in link_networks(self.fabric, self.link_pool):
            nets[ln.name] = {**kind, "ipam": {"config": [{"subnet": str(ln.subnet)}]},
                             "labels": {"aifabric.link": f"{ln.a}:{ln.a_port}-{ln.b}:{ln.b_port}"}}
        return nets

    def document(self, swarm: bool) -> dict[str, Any]:
        document = {"version": COMPOSE_VERSION, "services": self.services(swarm), "networks": self.networks(swarm)}
        if swarm:
            document["configs"] = {self._config_name(): {"file": "./fabric.json"}}
        return document

    def write(self, out: str | Path) -> list[Path]:
        """Write fabric.json, compose.yml and stack.yml into ``out`` (made when missing)."""
        import yaml  # here only: the containers import this module for `link_networks`

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = [self.description().write(out / "fabric.json")]
        for name, swarm in (("compose.yml", False), ("stack.yml", True)):
            path = out / name
            header = (f"# {self.fabric.describe()} as containers, written by `aifabric compose`; "
                      f"{'docker stack deploy -c stack.yml NAME' if swarm else 'docker compose up -d'}\n")
            path.write_text(header + yaml.safe_dump(self.document(swarm), sort_keys=False, default_flow_style=None, width=110))
            written.append(path)
        return written

    def _config_name(self) -> str:
        """Named after the description's contents: a Swarm config cannot change under its name."""
        text = json.dumps(self.description().to_dict(), sort_keys=True)
        return "fabric_" + hashlib.sha256(text.encode()).hexdigest()[:12]
