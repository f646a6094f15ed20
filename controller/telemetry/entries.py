"""P4Runtime entities for the fabric's congestion signals: ECN marking and INT-MD.

The contract is p4src/README.md, "Congestion signals: ECN and INT"; the P4Info names come from
`controller.p4names` (generated from the build). For one switch:

* ``ecn_config``: every data port (not the CPU or telemetry port) -> ``set_thresholds(kmin,
  kmax, pmax)`` (pmax as a fraction of 65536), from `TelemetryConfig.ecn`, overridable per port;
* ``watchlist`` (switches with hosts only: the INT source is the first hop): one ternary/range
  entry per `WatchRule` -> ``mark_source(max_hop)``;
* ``int_config`` (keyless: its default action, written with MODIFY) -> ``configure(switch_id =
  device id, mtu)``;
* ``sink_ports``: the host-facing ports -> ``mark_sink``;
* ``report_config`` (keyless) -> ``configure_report(src_mac, dst_mac, src_ip, dst_ip, dst_port)``
  toward the collector on the telemetry bridge (topologies.addressing);
* clone session 500 -> the telemetry port.

Every switch's ECMP seed (``hash_config``) is forwarding's, in `controller.entries`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from controller import entries as E
from controller import p4names as P4
from controller.entries import default_entry
from controller.p4info import P4Info
from controller.p4names import Action, Counter, Table
from topologies import addressing as ap
from topologies.fabric import Fabric

ECN_CONFIG = Table.ECN_ECN_CONFIG
ECN_SET_THRESHOLDS = Action.ECN_SET_THRESHOLDS
ECN_MARKED = Counter.ECN_ECN_MARKED
INT_WATCHLIST = Table.INT_WATCHLIST_WATCHLIST
INT_MARK_SOURCE = Action.INT_WATCHLIST_MARK_SOURCE
INT_CONFIG = Table.INT_EGRESS_INT_CONFIG
INT_CONFIGURE = Action.INT_EGRESS_CONFIGURE
INT_SINK_PORTS = Table.INT_EGRESS_SINK_PORTS
INT_MARK_SINK = Action.INT_EGRESS_MARK_SINK
INT_REPORT_CONFIG = Table.INT_EGRESS_REPORT_CONFIG
INT_CONFIGURE_REPORT = Action.INT_EGRESS_CONFIGURE_REPORT
INT_REPORT_SESSION_ID = P4.INT_REPORT_SESSION

MAX_INT_HOPS = P4.MAX_INT_HOPS  # more than the longest fat-tree path (5 switches)
DEFAULT_MTU = P4.INT_DEFAULT_MTU
PMAX_SCALE = 1 << 16  # pmax is carried in 1/65536
WATCH_PRIORITY = 10


@dataclass(frozen=True)
class EcnThresholds:
    """DCQCN-style RED on the egress queue depth in packets: never mark at depth <= kmin,
    always above kmax, in between with probability pmax * (depth - kmin) / (kmax - kmin)."""

    kmin: int
    kmax: int
    pmax: float  # 0 < pmax <= 1

    def __post_init__(self) -> None:
        if not 0 <= self.kmin <= self.kmax < 1 << 19:
            raise ValueError(f"ECN thresholds kmin={self.kmin}, kmax={self.kmax}: need 0 <= kmin <= kmax < 2^19 packets")
        if not 0 < self.pmax <= 1:
            raise ValueError(f"ECN pmax={self.pmax}: must be a probability in (0, 1]")

    @property
    def pmax_fixed(self) -> int:
        """pmax in 1/65536, as the data plane takes it (16 bits: 1.0 becomes 65535)."""
        return min(PMAX_SCALE - 1, round(self.pmax * PMAX_SCALE))


# Marking starts well before the default queue depth (64 packets) fills: a few packets of
# standing queue already signal congestion, as DCQCN's Kmin of a few KB does.
DEFAULT_ECN = EcnThresholds(kmin=5, kmax=30, pmax=0.2)

Prefix = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class WatchRule:
    """Flows to monitor with INT; None fields are wildcards. Addresses are prefixes (a bare
    address means /32 or /128), ports are inclusive ranges."""

    src: str | None = None
    dst: str | None = None
    protocol: int | None = None
    src_ports: tuple[int, int] | None = None
    dst_ports: tuple[int, int] | None = None
    max_hop: int = MAX_INT_HOPS
    priority: int = WATCH_PRIORITY

    @classmethod
    def flow(cls, src: str, dst: str, protocol: int, src_port: int, dst_port: int, **kw: int) -> "WatchRule":
        """Exactly one 5-tuple."""
        return cls(str(src), str(dst), protocol, (src_port, src_port), (dst_port, dst_port), **kw)

    def __post_init__(self) -> None:
        for label, rng in (("src_ports", self.src_ports), ("dst_ports", self.dst_ports)):
            if rng is not None and not 0 <= rng[0] <= rng[1] <= 0xFFFF:
                raise ValueError(f"watch rule {label}={rng}: need 0 <= low <= high <= 65535")
        if not 1 <= self.max_hop <= 255:
            raise ValueError(f"watch rule max_hop={self.max_hop}: must be 1..255")
        if self.protocol is not None and not 0 <= self.protocol <= 255:
            raise ValueError(f"watch rule protocol={self.protocol}: must be 0..255")
        for label, value in (("src", self.src), ("dst", self.dst)):
            if value is not None:
                try:
                    ipaddress.ip_network(value, strict=False)
                except ValueError as e:
                    raise ValueError(f"watch rule {label}={value!r}: {e}") from None


@dataclass(frozen=True)
class TelemetryConfig:
    """What the controller installs for ECN and INT (see the module docstring)."""

    ecn: EcnThresholds | None = DEFAULT_ECN  # None: no ECN marking entries
    ecn_ports: dict[tuple[str, int], EcnThresholds] = field(default_factory=dict)  # (switch, port) overrides
    int_enabled: bool = True
    watchlist: tuple[WatchRule, ...] = ()
    collector_ip: str = str(ap.TELEMETRY_COLLECTOR_IP)
    collector_mac: str = ap.TELEMETRY_COLLECTOR_MAC
    collector_port: int = ap.TELEMETRY_COLLECTOR_PORT
    mtu: int = DEFAULT_MTU
    telemetry_port: int = ap.TELEMETRY_PORT


@dataclass(frozen=True)
class TelemetryEntities:
    """The entities of one switch: ``tables`` are inserted like forwarding entries,
    ``defaults`` are keyless tables' default actions (MODIFY), ``pre`` the clone session."""

    tables: list[p4runtime_pb2.Entity]
    defaults: list[p4runtime_pb2.Entity]
    pre: list[p4runtime_pb2.Entity]


def ip_ternary(prefix: str | Prefix) -> tuple[int, int]:
    """(value, mask) of a prefix over the watchlist's 128-bit address fields. IPv4 addresses
    are zero-extended to 128 bits, as the pipeline builds its lookup fields (p4src/README.md),
    so the upper 96 bits must be zero for an IPv4 rule to match."""
    net = ipaddress.ip_network(prefix, strict=False)
    all_ones = (1 << 128) - 1
    host_bits = net.max_prefixlen - net.prefixlen
    mask = all_ones & ~((1 << host_bits) - 1)
    return int(net.network_address), mask


def watch_entry(p4info: P4Info, rule: WatchRule) -> p4runtime_pb2.Entity:
    match: dict[str, object] = {}
    if rule.src is not None:
        match["ip_src"] = ip_ternary(rule.src)
    if rule.dst is not None:
        match["ip_dst"] = ip_ternary(rule.dst)
    if rule.protocol is not None:
        match["ip_proto"] = (rule.protocol, 0xFF)
    # P4Runtime: a range covering every value is a wildcard and must be left out.
    if rule.src_ports is not None and rule.src_ports != (0, 0xFFFF):
        match["l4_sport"] = rule.src_ports
    if rule.dst_ports is not None and rule.dst_ports != (0, 0xFFFF):
        match["l4_dport"] = rule.dst_ports
    return E.entity(
        p4info.table_entry(
            INT_WATCHLIST, match, action=INT_MARK_SOURCE, params={"max_hop": rule.max_hop}, priority=rule.priority  # type: ignore[arg-type]
        )
    )


def ecn_entry(p4info: P4Info, port: int, thresholds: EcnThresholds) -> p4runtime_pb2.Entity:
    return E.entity(
        p4info.table_entry(
            ECN_CONFIG,
            {"egress_port": port},
            action=ECN_SET_THRESHOLDS,
            params={"kmin": thresholds.kmin, "kmax": thresholds.kmax, "pmax": thresholds.pmax_fixed},
        )
    )


def telemetry_entities(p4info: P4Info, fabric: Fabric, switch: str, config: TelemetryConfig) -> TelemetryEntities:
    """ECN and INT entities of one switch of ``fabric``."""
    sw = fabric.switch(switch)
    data_ports = sorted(fabric.ports_of(switch))
    host_ports = fabric.host_ports(switch)
    tables: list[p4runtime_pb2.Entity] = []
    defaults: list[p4runtime_pb2.Entity] = []
    pre: list[p4runtime_pb2.Entity] = []
    for (name, port) in config.ecn_ports:
        if name == switch and port not in data_ports:
            raise ValueError(f"ECN override for {switch} port {port}: {switch} has no such data port ({data_ports})")
    for port in data_ports:
        thresholds = config.ecn_ports.get((switch, port), config.ecn)
        if thresholds is not None:
            tables.append(ecn_entry(p4info, port, thresholds))
    if config.int_enabled:
        if data_ports:
            ap.check_telemetry_port(data_ports[-1])
        if host_ports:
            tables += [watch_entry(p4info, rule) for rule in config.watchlist]
        tables += [E.entity(p4info.table_entry(INT_SINK_PORTS, {"egress_port": p}, action=INT_MARK_SINK)) for p in host_ports]
        defaults.append(default_entry(p4info, INT_CONFIG, INT_CONFIGURE, switch_id=sw.device_id, mtu=config.mtu))
        defaults.append(
            default_entry(
                p4info,
                INT_REPORT_CONFIG,
                INT_CONFIGURE_REPORT,
                src_mac=ap.telemetry_source_mac(sw.device_id),
                dst_mac=config.collector_mac,
                src_ip=str(ap.telemetry_source_ip(sw.device_id)),
                dst_ip=config.collector_ip,
                dst_port=config.collector_port,
            )
        )
        pre.append(E.clone_session(INT_REPORT_SESSION_ID, config.telemetry_port))
    return TelemetryEntities(tables, defaults, pre)


def owned_tables(config: TelemetryConfig) -> list[str]:
    """Tables whose entries the controller owns (reads back and reconciles) for ``config``."""
    tables = [ECN_CONFIG]
    if config.int_enabled:
        tables += [INT_WATCHLIST, INT_SINK_PORTS]
    return tables


def owned_defaults(config: TelemetryConfig) -> list[str]:
    """Keyless tables whose default action the controller owns for ``config``."""
    return [INT_CONFIG, INT_REPORT_CONFIG] if config.int_enabled else []
