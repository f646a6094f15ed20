"""The aifabric address plan: names, device ids, MACs, IP addresses and port numbers.

Everything here is a pure function of the topology parameters, so the Mininet topology, the
controller and the tests all derive the same plan. Numbers are 0-based everywhere (pod 0, edge 0,
host 0, core 0, leaf 0, spine 0); device ids are 1-based.

Fat-tree(k), k even, 2 <= k <= 110
==================================

k pods, each with k/2 edge and k/2 aggregation switches; (k/2)^2 core switches; k/2 hosts per
edge switch (k^3/4 hosts).  k=4: 4 pods x (2 edge + 2 agg) + 4 core = 20 switches, 16 hosts.

=================  ===================================  =========================================
what               name                                 numbers
=================  ===================================  =========================================
edge switch        ``p{pod}e{i}``                       device id ``pod*k + i + 1``
aggregation        ``p{pod}a{i}``                       device id ``pod*k + k/2 + i + 1``
core switch        ``c{i}``                             device id ``k*k + i + 1``
host               ``p{pod}e{edge}h{h}``                IPv4 ``10.{pod}.{edge}.{h+2}/24``, gateway
                                                        ``10.{pod}.{edge}.1``; IPv6
                                                        ``fd00:0:{pod:x}:{edge:x}::{h+2:x}/64``,
                                                        gateway ``fd00:0:{pod:x}:{edge:x}::1``;
                                                        MAC ``00:00:0a:{pod:02x}:{edge:02x}:{h+2:02x}``
=================  ===================================  =========================================

Port plan (Mininet port numbers = P4 port numbers = the N in ``<switch>-ethN``):

* edge ``p{pod}e{i}``: port ``h+1`` -> host ``h`` (1..k/2); port ``k/2+a+1`` -> aggregation ``a``
  of the same pod (k/2+1..k).
* aggregation ``p{pod}a{a}``: port ``e+1`` -> edge ``e`` of the same pod (1..k/2); port
  ``k/2+m+1`` -> core ``a*k/2 + m`` (k/2+1..k).
* core ``c{j}``: port ``pod+1`` -> aggregation ``j // (k/2)`` of pod ``pod`` (1..k).
* hosts have one interface, ``eth0`` (Mininet port 0).

Leaf-spine(leaves, spines, hosts_per_leaf)
==========================================

=================  ===================================  =========================================
leaf switch        ``l{i}``                             device id ``i + 1``
spine switch       ``s{j}``                             device id ``leaves + j + 1``
host               ``l{i}h{h}``                         IPv4 ``10.200.{i}.{h+2}/24``, gateway
                                                        ``10.200.{i}.1``; IPv6
                                                        ``fd00:1:{i:x}::{h+2:x}/64``, gateway
                                                        ``fd00:1:{i:x}::1``;
                                                        MAC ``00:00:0a:c8:{i:02x}:{h+2:02x}``
=================  ===================================  =========================================

Port plan: leaf ``l{i}``: port ``h+1`` -> host ``h`` (1..hosts_per_leaf), port
``hosts_per_leaf+j+1`` -> spine ``j``; spine ``s{j}``: port ``i+1`` -> leaf ``i``.

Common to both
==============

* A host's MAC is ``00:00`` followed by the four bytes of its IPv4 address.
* Switch router MAC: ``02:00:00:00:{device_id >> 8:02x}:{device_id & 0xff:02x}`` (locally
  administered, unicast); the switch answers ARP/NDP for its hosts' subnets with it.
* P4Runtime gRPC server of a switch: ``127.0.0.1:{50000 + device_id}``.
* Ports are 9 bits in the P4 program; port 255 is the CPU port, so a switch has at most 254 ports.

Telemetry network (only when INT is enabled)
============================================

* Every switch gets one more port, ``TELEMETRY_PORT`` (250), linked to one plain Linux bridge in
  the root namespace (``TELEMETRY_BRIDGE``, ``tnet``; its ports are ``tnet-eth{n}``). The bridge
  carries ``TELEMETRY_COLLECTOR_IP`` 172.31.255.254/16 with MAC ``TELEMETRY_COLLECTOR_MAC``
  02:00:00:ff:ff:fe; the INT collector listens there on UDP ``TELEMETRY_COLLECTOR_PORT`` 32766.
* Reports of switch ``id`` leave from IP ``172.31.{id >> 8}.{id & 0xff}`` and from its router
  MAC. Clone session 500 sends them out of the telemetry port.
* The telemetry port is not part of the fabric description: routing never uses it, so it
  carries reports only. Data ports must stay below it (checked when telemetry is on).

The limits (k <= 110, leaves <= 254, ...) come from this plan: device ids must keep the gRPC port
<= 65535, subnets must fit one IPv4 octet, switch ports must stay below the CPU port 255.
Violations raise ``ValueError`` naming the bad value.
"""

from __future__ import annotations

import ipaddress

GRPC_HOST = "127.0.0.1"
GRPC_PORT_BASE = 50000
CPU_PORT = 255
MAX_SWITCH_PORT = CPU_PORT - 1
MAX_DEVICE_ID = 65535 - GRPC_PORT_BASE
MAX_FAT_TREE_K = 110

TELEMETRY_PORT = 250
TELEMETRY_BRIDGE = "tnet"
TELEMETRY_NETWORK = ipaddress.IPv4Network("172.31.0.0/16")
TELEMETRY_COLLECTOR_IP = ipaddress.IPv4Address("172.31.255.254")
TELEMETRY_COLLECTOR_MAC = "02:00:00:ff:ff:fe"
TELEMETRY_COLLECTOR_PORT = 32766

LEAF_SPINE_IPV4_OCTET = 200
LEAF_SPINE_IPV6_GROUP = 1


# --- switches -------------------------------------------------------------------------------


def switch_mac(device_id: int) -> str:
    """Router MAC of the switch with this device id (02:00:00:00:hi:lo)."""
    _check_device_id(device_id)
    return f"02:00:00:00:{device_id >> 8:02x}:{device_id & 0xFF:02x}"


def grpc_port(device_id: int) -> int:
    """TCP port of the switch's P4Runtime server (on GRPC_HOST)."""
    _check_device_id(device_id)
    return GRPC_PORT_BASE + device_id


def grpc_address(device_id: int) -> str:
    """``host:port`` of the switch's P4Runtime server."""
    return f"{GRPC_HOST}:{grpc_port(device_id)}"


def _check_device_id(device_id: int) -> None:
    if not 1 <= device_id <= MAX_DEVICE_ID:
        raise ValueError(f"device id {device_id} outside 1..{MAX_DEVICE_ID} (gRPC port 50000+id)")


def telemetry_source_ip(device_id: int) -> ipaddress.IPv4Address:
    """Source IP of the telemetry reports of the switch with this device id."""
    _check_device_id(device_id)
    return TELEMETRY_NETWORK.network_address + device_id


def telemetry_source_mac(device_id: int) -> str:
    """Source MAC of the switch's telemetry reports: its router MAC."""
    return switch_mac(device_id)


def check_telemetry_port(max_data_port: int) -> None:
    """Raise ValueError when data ports would reach the telemetry port."""
    if max_data_port >= TELEMETRY_PORT:
        raise ValueError(
            f"switch port {max_data_port} collides with the telemetry port {TELEMETRY_PORT}: with INT "
            f"telemetry on, data ports must stay below {TELEMETRY_PORT}"
        )


# --- fat-tree -------------------------------------------------------------------------------


def check_fat_tree_k(k: int) -> None:
    """Raise ValueError unless k is an even integer in 2..MAX_FAT_TREE_K."""
    if not isinstance(k, int) or isinstance(k, bool):
        raise ValueError(f"fat-tree k={k!r} must be an integer")
    if k < 2:
        raise ValueError(f"fat-tree k={k} is too small: k must be even and >= 2")
    if k % 2:
        raise ValueError(f"fat-tree k={k} is odd: k must be even")
    if k > MAX_FAT_TREE_K:
        raise ValueError(
            f"fat-tree k={k} is too large for the address plan: its {5 * k * k // 4} switches "
            f"need device ids up to {5 * k * k // 4} but gRPC ports 50000+id stop at "
            f"id {MAX_DEVICE_ID} (k <= {MAX_FAT_TREE_K})"
        )


def edge_name(pod: int, i: int) -> str:
    return f"p{pod}e{i}"


def agg_name(pod: int, i: int) -> str:
    return f"p{pod}a{i}"


def core_name(i: int) -> str:
    return f"c{i}"


def fat_tree_host_name(pod: int, edge: int, h: int) -> str:
    return f"p{pod}e{edge}h{h}"


def edge_device_id(k: int, pod: int, i: int) -> int:
    return pod * k + i + 1


def agg_device_id(k: int, pod: int, i: int) -> int:
    return pod * k + k // 2 + i + 1


def core_device_id(k: int, i: int) -> int:
    return k * k + i + 1


def fat_tree_host_ip4(pod: int, edge: int, h: int) -> ipaddress.IPv4Interface:
    """Host address with its /24 prefix."""
    _check_octets(pod=pod, edge=edge, h=h)
    return ipaddress.IPv4Interface((_fat_tree_ip4(pod, edge, h + 2), 24))


def fat_tree_gateway4(pod: int, edge: int) -> ipaddress.IPv4Address:
    _check_octets(pod=pod, edge=edge)
    return ipaddress.IPv4Address(_fat_tree_ip4(pod, edge, 1))


def fat_tree_host_ip6(pod: int, edge: int, h: int) -> ipaddress.IPv6Interface:
    """Host address with its /64 prefix (fd00:0:{pod}:{edge}::{h+2}, numbers in hex)."""
    _check_octets(pod=pod, edge=edge, h=h)
    return ipaddress.IPv6Interface((_fat_tree_ip6(pod, edge, h + 2), 64))


def fat_tree_gateway6(pod: int, edge: int) -> ipaddress.IPv6Address:
    _check_octets(pod=pod, edge=edge)
    return ipaddress.IPv6Address(_fat_tree_ip6(pod, edge, 1))


# addresses as integers: a k=110 fat-tree has 332,750 hosts, and parsing their text took most of its build
def _fat_tree_ip4(pod: int, edge: int, last: int) -> int:
    return 10 << 24 | pod << 16 | edge << 8 | last         # 10.{pod}.{edge}.{last}


def _fat_tree_ip6(pod: int, edge: int, last: int) -> int:
    return 0xFD00 << 112 | pod << 80 | edge << 64 | last   # fd00:0:{pod}:{edge}::{last}


def fat_tree_host_mac(pod: int, edge: int, h: int) -> str:
    _check_octets(pod=pod, edge=edge, h=h)
    return f"00:00:0a:{pod:02x}:{edge:02x}:{h + 2:02x}"


def edge_host_port(h: int) -> int:
    """Port of an edge switch that leads to its host h."""
    return h + 1


def edge_uplink_port(k: int, agg: int) -> int:
    """Port of an edge switch that leads to aggregation switch ``agg`` of its pod."""
    return k // 2 + agg + 1


def agg_downlink_port(edge: int) -> int:
    """Port of an aggregation switch that leads to edge switch ``edge`` of its pod."""
    return edge + 1


def agg_uplink_port(k: int, core: int) -> int:
    """Port of an aggregation switch that leads to core ``core`` (core // (k/2) == its index)."""
    return k // 2 + core % (k // 2) + 1


def core_port(pod: int) -> int:
    """Port of a core switch that leads to pod ``pod``."""
    return pod + 1


def core_agg_index(k: int, core: int) -> int:
    """Index of the aggregation switch (in every pod) that core ``core`` connects to."""
    return core // (k // 2)


# --- leaf-spine -----------------------------------------------------------------------------


def check_leaf_spine(leaves: int, spines: int, hosts_per_leaf: int) -> None:
    """Raise ValueError when the leaf-spine parameters do not fit the address/port plan."""
    for label, value in (("leaves", leaves), ("spines", spines), ("hosts_per_leaf", hosts_per_leaf)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"leaf-spine {label}={value!r} must be an integer >= 1")
    if leaves > 254:
        raise ValueError(f"leaf-spine leaves={leaves} is too many: leaf index is an IPv4 octet (<= 254)")
    if hosts_per_leaf > 252:
        raise ValueError(
            f"leaf-spine hosts_per_leaf={hosts_per_leaf} is too many: host h gets .{{h+2}} in a /24 (<= 252)"
        )
    if hosts_per_leaf + spines > MAX_SWITCH_PORT:
        raise ValueError(
            f"leaf-spine hosts_per_leaf+spines={hosts_per_leaf + spines} ports per leaf exceeds "
            f"{MAX_SWITCH_PORT} (port {CPU_PORT} is the CPU port)"
        )
    if leaves + spines > MAX_DEVICE_ID:
        raise ValueError(f"leaf-spine leaves+spines={leaves + spines} exceeds {MAX_DEVICE_ID} device ids")


def leaf_name(i: int) -> str:
    return f"l{i}"


def spine_name(j: int) -> str:
    return f"s{j}"


def leaf_spine_host_name(leaf: int, h: int) -> str:
    return f"l{leaf}h{h}"


def leaf_device_id(i: int) -> int:
    return i + 1


def spine_device_id(leaves: int, j: int) -> int:
    return leaves + j + 1


def leaf_spine_host_ip4(leaf: int, h: int) -> ipaddress.IPv4Interface:
    _check_octets(leaf=leaf, h=h)
    return ipaddress.IPv4Interface(f"10.{LEAF_SPINE_IPV4_OCTET}.{leaf}.{h + 2}/24")


def leaf_spine_gateway4(leaf: int) -> ipaddress.IPv4Address:
    _check_octets(leaf=leaf)
    return ipaddress.IPv4Address(f"10.{LEAF_SPINE_IPV4_OCTET}.{leaf}.1")


def leaf_spine_host_ip6(leaf: int, h: int) -> ipaddress.IPv6Interface:
    _check_octets(leaf=leaf, h=h)
    return ipaddress.IPv6Interface(f"fd00:{LEAF_SPINE_IPV6_GROUP:x}:{leaf:x}::{h + 2:x}/64")


def leaf_spine_gateway6(leaf: int) -> ipaddress.IPv6Address:
    _check_octets(leaf=leaf)
    return ipaddress.IPv6Address(f"fd00:{LEAF_SPINE_IPV6_GROUP:x}:{leaf:x}::1")


def leaf_spine_host_mac(leaf: int, h: int) -> str:
    _check_octets(leaf=leaf, h=h)
    return f"00:00:0a:{LEAF_SPINE_IPV4_OCTET:02x}:{leaf:02x}:{h + 2:02x}"


def leaf_host_port(h: int) -> int:
    return h + 1


def leaf_uplink_port(hosts_per_leaf: int, spine: int) -> int:
    return hosts_per_leaf + spine + 1


def spine_port(leaf: int) -> int:
    return leaf + 1


# --- helpers --------------------------------------------------------------------------------


def _check_octets(**values: int) -> None:
    for label, value in values.items():
        limit = 252 if label == "h" else 255
        if not 0 <= value <= limit:
            raise ValueError(f"{label}={value} does not fit the address plan (0..{limit})")


def mac_to_int(mac: str) -> int:
    """``aa:bb:cc:dd:ee:ff`` -> 48-bit integer."""
    parts = mac.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"MAC address {mac!r} is not of the form aa:bb:cc:dd:ee:ff")
    return int("".join(parts), 16)


def int_to_mac(value: int) -> str:
    if not 0 <= value < 1 << 48:
        raise ValueError(f"{value} does not fit a 48-bit MAC address")
    raw = f"{value:012x}"
    return ":".join(raw[i : i + 2] for i in range(0, 12, 2))
