"""The fabric description file: where a running fabric's switches and hosts are, for any controller.

A controller written in any language reads it to find every switch (P4Runtime address, device
id, ports and what is at their other end), the links, the hosts (addresses, MACs, where they are
attached) and the pipeline files (P4Info and BMv2 JSON). ``aifabric up --describe FILE`` and the
pytest fixtures (`aifabric.testing`) write it; ``load(path)`` reads and checks it. The schema is
``aifabric/lab/fabric-description.schema.json`` (README: "The fabric description file")::

    from aifabric.lab import description
    desc = description.load("fabric.json")          # DescriptionError names the file and field
    for sw in desc.switches:
        print(sw.name, sw.device_id, sw.p4runtime_address)
    fabric = desc.to_fabric()                       # a topologies.fabric.Fabric for our controller

JSON always on write (written whole, then renamed, so a reader never sees half a file); on read,
``.yaml``/``.yml`` files are parsed with PyYAML when it is installed.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from topologies import addressing as ap
from topologies.fabric import Attachment, Fabric, Host, Link, Nic, Role, Switch

SCHEMA = "aifabric.fabric-description/1"
SCHEMA_FILE = Path(__file__).with_name("fabric-description.schema.json")
CONTROLLER_KINDS = ("aifabric", "none")

_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_PORT = 511                      # ports are 9 bits in v1model


class DescriptionError(ValueError):
    """A description that cannot be read or is not valid; one line naming the file and field."""


@dataclass(frozen=True)
class Port:
    """One data port of a switch: its P4 port number, its Linux interface, the node at the other end."""

    port: int
    interface: str
    peer: str
    peer_port: int


@dataclass(frozen=True)
class SwitchDescription:
    name: str
    device_id: int
    p4runtime_address: str          # host:port of the switch's P4Runtime gRPC server
    role: str                       # edge, aggregation, core, leaf, spine
    mac: str                        # the switch's router MAC (what the fabric program routes with)
    ports: tuple[Port, ...] = ()
    cpu_port: int = ap.CPU_PORT
    pod: int | None = None
    runtime_address: str | None = None   # BMv2 Thrift / softswitch --runtime-addr (queue rate, depth)
    pid: int | None = None               # the target process, while it runs

    @property
    def grpc_host(self) -> str:
        return self.p4runtime_address.rpartition(":")[0]

    @property
    def grpc_port(self) -> int:
        return int(self.p4runtime_address.rpartition(":")[2])


@dataclass(frozen=True)
class LinkDescription:
    a: str
    a_port: int
    b: str
    b_port: int
    weight: int = 1                 # routing cost (a dragonfly's global links weigh more)


@dataclass(frozen=True)
class AttachmentDescription:
    """A NIC's addresses (with prefix length: "10.0.0.2/24"), its gateways and its switch."""

    ipv4: str
    ipv6: str
    mac: str
    gateway4: str
    gateway6: str
    switch: str


@dataclass(frozen=True, kw_only=True)
class NicDescription(AttachmentDescription):
    """A host's NIC beyond its first (a dual-plane host's NIC on its second plane)."""

    port: int                       # the host's interface number: interface <host>-eth<port>
    switch_port: int
    interface: str
    routes4: tuple[str, ...] = ()   # networks the host reaches through this NIC
    routes6: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class HostDescription(AttachmentDescription):
    name: str
    port: int                       # the switch port the host is attached to
    interface: str                  # the host's interface (in its network namespace)
    pid: int | None = None          # a process in the host's network namespace: `nsenter -t PID -n CMD`
    extra_nics: tuple[NicDescription, ...] = ()


@dataclass(frozen=True)
class PipelineFiles:
    p4info: str                     # P4Info, protobuf text format
    device_config: str              # BMv2 JSON (what SetForwardingPipelineConfig sends as p4_device_config)


@dataclass(frozen=True)
class ControllerInfo:
    """Who controls the switches. ``aifabric``: our controller is primary of the default role
    ("") with ``election_id`` and reconciles ``owned_tables`` (entries there that it did not
    write are deleted); ``none``: no controller, no pipeline pushed."""

    kind: str = "none"
    election_id: tuple[int, int] | None = None
    role: str = ""
    owned_tables: tuple[str, ...] = ()


@dataclass
class FabricDescription:
    kind: str                                   # fat_tree, leaf_spine
    params: dict[str, int]
    switches: list[SwitchDescription] = field(default_factory=list)
    links: list[LinkDescription] = field(default_factory=list)
    hosts: list[HostDescription] = field(default_factory=list)
    target: str | None = None                   # bmv2 or softswitch, when known
    pipeline: PipelineFiles | None = None
    controller: ControllerInfo = field(default_factory=ControllerInfo)

    def switch(self, name: str) -> SwitchDescription:
        for sw in self.switches:
            if sw.name == name:
                return sw
        raise KeyError(f"no switch named {name!r} in the description")

    def host(self, name: str) -> HostDescription:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no host named {name!r} in the description")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        out: dict[str, Any] = {"schema": SCHEMA}
        out.update({k: v for k, v in data.items() if v is not None})
        ctl = out["controller"]
        ctl["election_id"] = list(ctl["election_id"]) if ctl["election_id"] is not None else None
        for sw in out["switches"]:
            for key in ("pod", "runtime_address", "pid"):
                if sw[key] is None:
                    del sw[key]
        for h in out["hosts"]:
            for key in ("pid", "extra_nics"):
                if not h[key]:
                    del h[key]
        if ctl["election_id"] is None:
            del ctl["election_id"]
        return out

    def write(self, path: str | Path) -> Path:
        """Write as JSON (whole, then renamed into place); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        os.replace(tmp, path)
        return path

    def to_fabric(self) -> Fabric:
        """The same fabric as `topologies.fabric.Fabric` (what `FabricController` takes)."""
        fab = Fabric(kind=self.kind, params=dict(self.params))
        for sw in self.switches:
            fab.switches.append(Switch(sw.name, sw.device_id, Role(sw.role), sw.mac, sw.grpc_port, sw.pod,
                                       grpc_host=sw.grpc_host))
        for h in self.hosts:
            nics = tuple(Nic(*_attachment(n), port=n.port, switch_port=n.switch_port,
                             routes4=tuple(ipaddress.IPv4Network(r) for r in n.routes4),
                             routes6=tuple(ipaddress.IPv6Network(r) for r in n.routes6)) for n in h.extra_nics)
            fab.hosts.append(Host(*_attachment(h), name=h.name, port=h.port, extra_nics=nics))
        fab.links = [Link(ln.a, ln.a_port, ln.b, ln.b_port, ln.weight) for ln in self.links]
        return fab

    @classmethod
    def from_fabric(cls, fabric: Fabric, *, target: str | None = None, pipeline: PipelineFiles | None = None,
                    controller: ControllerInfo | None = None, switch_pids: dict[str, int] | None = None,
                    host_pids: dict[str, int] | None = None,
                    runtime_addresses: dict[str, str] | None = None) -> "FabricDescription":
        """The description of ``fabric`` (interfaces named as Mininet names them, ``<node>-eth<port>``)."""
        switch_pids, host_pids, runtime_addresses = switch_pids or {}, host_pids or {}, runtime_addresses or {}
        switches = []
        for sw in fabric.switches:
            ports = tuple(Port(p, f"{sw.name}-eth{p}", peer, _link_port(fabric, peer, sw.name))
                          for p, peer in fabric.ports_of(sw.name).items())
            switches.append(SwitchDescription(sw.name, sw.device_id, sw.grpc_address, sw.role.value, sw.mac, ports,
                                              pod=sw.pod, runtime_address=runtime_addresses.get(sw.name),
                                              pid=switch_pids.get(sw.name)))
        hosts = [HostDescription(*_described(h), name=h.name, port=h.port, interface=f"{h.name}-eth0",
                                 pid=host_pids.get(h.name),
                                 extra_nics=tuple(NicDescription(*_described(n), port=n.port, switch_port=n.switch_port,
                                                                 interface=f"{h.name}-eth{n.port}",
                                                                 routes4=tuple(map(str, n.routes4)),
                                                                 routes6=tuple(map(str, n.routes6)))
                                                  for n in h.extra_nics))
                 for h in fabric.hosts]
        links = [LinkDescription(ln.a, ln.a_port, ln.b, ln.b_port, ln.weight) for ln in fabric.links]
        return cls(fabric.kind, dict(fabric.params), switches, links, hosts, target, pipeline,
                   controller or ControllerInfo())


def _described(a: Attachment) -> tuple[str, str, str, str, str, str]:
    """An attachment's fields as its description holds them."""
    return str(a.ip4), str(a.ip6), a.mac, str(a.gateway4), str(a.gateway6), a.switch


def _attachment(d: AttachmentDescription) -> tuple:
    """A description's attachment fields as `topologies.fabric.Attachment` holds them."""
    return (ipaddress.IPv4Interface(d.ipv4), ipaddress.IPv6Interface(d.ipv6), d.mac,
            ipaddress.IPv4Address(d.gateway4), ipaddress.IPv6Address(d.gateway6), d.switch)


def _link_port(fabric: Fabric, node: str, peer: str) -> int:
    for ln in fabric.links:
        if {ln.a, ln.b} == {node, peer}:
            return ln.port_of(node)
    raise KeyError(f"no link between {node} and {peer}")


def from_lab(lab: Any) -> FabricDescription:
    """The description of a running `aifabric.lab.lab.Lab` (with process ids, the target, the
    pipeline files and what its controller owns)."""
    from emulation.p4switch import P4Switch

    pipeline = None
    if lab.pipeline.p4info_path is not None and lab.pipeline.json_path is not None:
        pipeline = PipelineFiles(str(lab.pipeline.p4info_path), str(lab.pipeline.json_path))
    controller = ControllerInfo()
    if lab.controller is not None:
        agents = list(lab.controller.agents.values())
        info = lab.pipeline.p4info
        owned = sorted({info.name_of(key[1]) for a in agents for key in a.owns if key[0] == "table"})
        election = agents[0].election_id if agents else (0, 1)
        election = (0, election) if isinstance(election, int) else tuple(election)
        controller = ControllerInfo("aifabric", election, "", tuple(owned))
    switches = [sw for sw in (lab.net.switches if lab.net is not None else []) if isinstance(sw, P4Switch)]
    target = switches[0].target_kind if switches else None
    return FabricDescription.from_fabric(
        lab.fabric, target=target, pipeline=pipeline, controller=controller,
        switch_pids=lab.switch_pids() if lab.net is not None else {},
        host_pids={h.name: lab.host(h.name).pid for h in lab.fabric.hosts} if lab.net is not None else {},
        runtime_addresses={sw.name: sw.runtime_address for sw in switches})


# --- reading and checking -------------------------------------------------------------------

T = TypeVar("T")


class _Fields:
    """Typed field access that names the field (``switches[2].device_id``) in every error."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> DescriptionError:
        return DescriptionError(f"{self.source}: {where}: {problem}")

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {_show(value)}")
        return value

    def get(self, obj: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...],
            *, required: bool = True, default: Any = None) -> Any:
        path = f"{where}.{key}" if where else key
        if key not in obj or obj[key] is None:
            if required:
                raise self.fail(path, "missing")
            return default
        value = obj[key]
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.fail(path, f"expected an integer, got {_show(value)}")
        if not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(path, f"expected {_article(names)}, got {_show(value)}")
        return value

    def check(self, ok: bool, where: str, problem: str) -> None:
        if not ok:
            raise self.fail(where, problem)

    def parsed(self, parse: Callable[[str], T], value: str, where: str, what: str) -> T:
        try:
            return parse(value)
        except ValueError:
            raise self.fail(where, f"{_show(value)} is not {what}") from None


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _article(noun: str) -> str:
    names = {"str": "a string", "int": "an integer", "list": "a list", "dict": "an object"}
    return " or ".join(names.get(n, n) for n in noun.split(" or "))


def _address(f: _Fields, value: str, where: str) -> str:
    host, sep, port = value.rpartition(":")
    f.check(bool(sep and host) and port.isdigit() and 0 < int(port) < 65536, where,
            f"{_show(value)} is not HOST:PORT")
    return value


def _port(f: _Fields, obj: dict[str, Any], key: str, where: str, low: int = 0) -> int:
    value = f.get(obj, key, where, int)
    f.check(low <= value <= MAX_PORT, f"{where}.{key}", f"{value} is not a port number {low}..{MAX_PORT}")
    return value


def _mac(f: _Fields, obj: dict[str, Any], key: str, where: str) -> str:
    value = f.get(obj, key, where, str).lower()
    f.check(bool(_MAC.match(value)), f"{where}.{key}", f"{_show(value)} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    return value


def _name(f: _Fields, obj: dict[str, Any], key: str, where: str) -> str:
    value = f.get(obj, key, where, str)
    f.check(bool(_NAME.match(value)), f"{where}.{key}", f"{_show(value)} is not a node name")
    return value


def _switch(f: _Fields, raw: Any, where: str) -> SwitchDescription:
    obj = f.obj(raw, where)
    device_id = f.get(obj, "device_id", where, int)
    f.check(device_id >= 0, f"{where}.device_id", f"{device_id} is negative")
    role = f.get(obj, "role", where, str)
    f.check(role in {r.value for r in Role}, f"{where}.role",
            f"{_show(role)} is not one of {', '.join(r.value for r in Role)}")
    ports = []
    for i, rp in enumerate(f.get(obj, "ports", where, list, required=False, default=[])):
        pw = f"{where}.ports[{i}]"
        p = f.obj(rp, pw)
        ports.append(Port(_port(f, p, "port", pw, 1), f.get(p, "interface", pw, str), _name(f, p, "peer", pw),
                          _port(f, p, "peer_port", pw)))
    runtime = f.get(obj, "runtime_address", where, str, required=False)
    return SwitchDescription(
        name=_name(f, obj, "name", where), device_id=device_id,
        p4runtime_address=_address(f, f.get(obj, "p4runtime_address", where, str), f"{where}.p4runtime_address"),
        role=role, mac=_mac(f, obj, "mac", where), ports=tuple(ports),
        cpu_port=_port(f, obj, "cpu_port", where) if "cpu_port" in obj else ap.CPU_PORT,
        pod=f.get(obj, "pod", where, int, required=False),
        runtime_address=_address(f, runtime, f"{where}.runtime_address") if runtime is not None else None,
        pid=f.get(obj, "pid", where, int, required=False))


def _attachment_fields(f: _Fields, obj: dict[str, Any], where: str) -> tuple[str, str, str, str, str, str]:
    """ipv4, ipv6, mac, gateway4, gateway6 and switch of a host or NIC, checked."""
    ipv4 = f.parsed(ipaddress.IPv4Interface, f.get(obj, "ipv4", where, str), f"{where}.ipv4", "an IPv4 address/prefix")
    ipv6 = f.parsed(ipaddress.IPv6Interface, f.get(obj, "ipv6", where, str), f"{where}.ipv6", "an IPv6 address/prefix")
    mac = _mac(f, obj, "mac", where)
    gw4 = f.parsed(ipaddress.IPv4Address, f.get(obj, "gateway4", where, str), f"{where}.gateway4", "an IPv4 address")
    gw6 = f.parsed(ipaddress.IPv6Address, f.get(obj, "gateway6", where, str), f"{where}.gateway6", "an IPv6 address")
    return str(ipv4), str(ipv6), mac, str(gw4), str(gw6), _name(f, obj, "switch", where)


def _host(f: _Fields, raw: Any, where: str) -> HostDescription:
    obj = f.obj(raw, where)
    attachment = _attachment_fields(f, obj, where)
    name = _name(f, obj, "name", where)
    nics = tuple(_nic(f, n, name, f"{where}.extra_nics[{i}]")
                 for i, n in enumerate(f.get(obj, "extra_nics", where, list, required=False, default=[])))
    return HostDescription(*attachment, name=name, port=_port(f, obj, "port", where, 1),
                           interface=f.get(obj, "interface", where, str, required=False, default=f"{name}-eth0"),
                           pid=f.get(obj, "pid", where, int, required=False), extra_nics=nics)


def _nic(f: _Fields, raw: Any, host: str, where: str) -> NicDescription:
    obj = f.obj(raw, where)
    attachment = _attachment_fields(f, obj, where)
    port = _port(f, obj, "port", where, 1)
    routes = {}
    for key, kind, what in (("routes4", ipaddress.IPv4Network, "an IPv4 network"),
                            ("routes6", ipaddress.IPv6Network, "an IPv6 network")):
        values = f.get(obj, key, where, list, required=False, default=[])
        routes[key] = tuple(str(f.parsed(kind, v if isinstance(v, str) else "", f"{where}.{key}[{i}]", what))
                            for i, v in enumerate(values))
    return NicDescription(*attachment, port=port, switch_port=_port(f, obj, "switch_port", where, 1),
                          interface=f.get(obj, "interface", where, str, required=False, default=f"{host}-eth{port}"),
                          routes4=routes["routes4"], routes6=routes["routes6"])


def _link(f: _Fields, raw: Any, where: str) -> LinkDescription:
    obj = f.obj(raw, where)
    weight = f.get(obj, "weight", where, int, required=False, default=1)
    f.check(weight >= 1, f"{where}.weight", f"{_show(weight)} is not a routing cost >= 1")
    return LinkDescription(_name(f, obj, "a", where), _port(f, obj, "a_port", where), _name(f, obj, "b", where),
                           _port(f, obj, "b_port", where), weight)


def from_dict(data: Any, source: str = "<description>") -> FabricDescription:
    """Check and convert a parsed description; DescriptionError naming ``source`` and the field."""
    f = _Fields(source)
    top = f.obj(data, "(top level)")
    schema = f.get(top, "schema", "", str)
    f.check(schema == SCHEMA, "schema", f"{_show(schema)} is not {SCHEMA!r} (a file of another version or kind)")
    params = f.get(top, "params", "", dict)
    for key, value in params.items():
        f.check(isinstance(value, int) and not isinstance(value, bool), f"params.{key}",
                f"expected an integer, got {_show(value)}")
    switches = [_switch(f, s, f"switches[{i}]") for i, s in enumerate(f.get(top, "switches", "", list))]
    hosts = [_host(f, h, f"hosts[{i}]") for i, h in enumerate(f.get(top, "hosts", "", list))]
    links = [_link(f, ln, f"links[{i}]") for i, ln in enumerate(f.get(top, "links", "", list))]
    pipeline = None
    if top.get("pipeline") is not None:
        p = f.obj(top["pipeline"], "pipeline")
        pipeline = PipelineFiles(f.get(p, "p4info", "pipeline", str), f.get(p, "device_config", "pipeline", str))
    controller = ControllerInfo()
    if top.get("controller") is not None:
        c = f.obj(top["controller"], "controller")
        kind = f.get(c, "kind", "controller", str)
        f.check(kind in CONTROLLER_KINDS, "controller.kind", f"{_show(kind)} is not one of {', '.join(CONTROLLER_KINDS)}")
        election = f.get(c, "election_id", "controller", list, required=False)
        if election is not None:
            f.check(len(election) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                for x in election),
                    "controller.election_id", f"{_show(election)} is not [high, low] (two integers >= 0)")
            election = (election[0], election[1])
        tables = f.get(c, "owned_tables", "controller", list, required=False, default=[])
        f.check(all(isinstance(t, str) for t in tables), "controller.owned_tables", "expected a list of strings")
        controller = ControllerInfo(kind, election, f.get(c, "role", "controller", str, required=False, default=""),
                                    tuple(tables))
    target = f.get(top, "target", "", str, required=False)
    desc = FabricDescription(f.get(top, "kind", "", str), params, switches, links, hosts, target, pipeline, controller)
    _check_consistent(f, desc)
    return desc


def _check_consistent(f: _Fields, desc: FabricDescription) -> None:
    """Names, device ids and addresses unique; links and hosts refer to nodes and ports that exist."""
    names: dict[str, str] = {}
    for kind, nodes in (("switches", desc.switches), ("hosts", desc.hosts)):
        for i, node in enumerate(nodes):
            f.check(node.name not in names, f"{kind}[{i}].name", f"{node.name!r} is also {names.get(node.name)}")
            names[node.name] = f"{kind}[{i}]"
    for attr in ("device_id", "p4runtime_address"):
        seen: dict[Any, int] = {}
        for i, sw in enumerate(desc.switches):
            value = getattr(sw, attr)
            f.check(value not in seen, f"switches[{i}].{attr}", f"{value!r} is also switches[{seen.get(value)}]'s")
            seen[value] = i
    switch_names = {sw.name for sw in desc.switches}
    ends: set[tuple[str, int]] = set()     # (node, port) of every link end: each in one link only
    for i, ln in enumerate(desc.links):
        for end, port in (("a", ln.a_port), ("b", ln.b_port)):
            node = getattr(ln, end)
            f.check(node in names, f"links[{i}].{end}", f"{node!r} is neither a switch nor a host")
            f.check((node, port) not in ends, f"links[{i}].{end}_port", f"port {port} of {node} is in another link")
            ends.add((node, port))
    for i, h in enumerate(desc.hosts):
        attachments = [(f"hosts[{i}]", h.switch, "port", h.port),
                       *((f"hosts[{i}].extra_nics[{j}]", n.switch, "switch_port", n.switch_port)
                         for j, n in enumerate(h.extra_nics))]
        for where, switch, key, port in attachments:
            f.check(switch in switch_names, f"{where}.switch", f"{switch!r} is not a switch")
            joined = any((ln.a, ln.b, ln.b_port) == (h.name, switch, port)
                         or (ln.b, ln.a, ln.a_port) == (h.name, switch, port) for ln in desc.links)
            f.check(joined, f"{where}.{key}", f"no link joins {h.name} to port {port} of {switch}")


def load(path: str | Path) -> FabricDescription:
    """Read a description (JSON; YAML for ``.yaml``/``.yml`` when PyYAML is installed) and check
    it; DescriptionError, one line naming the file and the bad field, for bad input."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise DescriptionError(f"{path}: cannot read: {err.strerror or err}") from None
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise DescriptionError(f"{path}: a YAML description needs PyYAML (pip install pyyaml); "
                                   f"or give the JSON file") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise DescriptionError(f"{path}: not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise DescriptionError(f"{path}: not valid JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    return from_dict(data, str(path))
