"""The telemetry network's address plan and Mininet wiring (nothing started), and the run-time
control port every target gets."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from topologies import addressing as ap
from topologies.fabric import fat_tree


def test_telemetry_addresses() -> None:
    assert ap.TELEMETRY_PORT == 250 and ap.TELEMETRY_PORT < ap.CPU_PORT
    assert ap.TELEMETRY_COLLECTOR_IP in ap.TELEMETRY_NETWORK
    sources = {ap.telemetry_source_ip(sw.device_id) for sw in fat_tree(16).switches}
    assert len(sources) == 5 * 16 * 16 // 4 and all(ip in ap.TELEMETRY_NETWORK for ip in sources)
    assert ap.TELEMETRY_COLLECTOR_IP not in sources
    assert ap.telemetry_source_ip(ap.MAX_DEVICE_ID) < ap.TELEMETRY_COLLECTOR_IP
    assert ap.telemetry_source_ip(300) == ipaddress.IPv4Address("172.31.1.44")
    with pytest.raises(ValueError, match="port 250 collides with the telemetry port 250"):
        ap.check_telemetry_port(250)


def test_telemetry_links_exist_only_with_int() -> None:
    from emulation.mininet_topo import FabricTopo
    from emulation.telemetry_net import TelemetryBridge

    fab = fat_tree(4)
    plain = FabricTopo(fab)
    assert ap.TELEMETRY_BRIDGE not in plain.switches()
    topo = FabricTopo(fab, telemetry=True)
    assert topo.nodeInfo(ap.TELEMETRY_BRIDGE)["cls"] is TelemetryBridge
    assert len(topo.links()) == len(fab.links) + len(fab.switches)
    for n, sw in enumerate(fab.switches, start=1):
        link = topo.linkInfo(sw.name, ap.TELEMETRY_BRIDGE)
        ports = {link["node1"]: link["port1"], link["node2"]: link["port2"]}
        assert ports == {sw.name: ap.TELEMETRY_PORT, ap.TELEMETRY_BRIDGE: n}
    assert all(ap.TELEMETRY_PORT not in fab.ports_of(sw.name) for sw in fab.switches)  # routing never sees it


def test_softswitch_gets_its_runtime_address() -> None:
    from emulation.p4switch import target_command

    soft = target_command("softswitch", "softswitch", name="p0e0", device_id=1, ports=[(1, "p0e0-eth1")],
                          grpc_port=50001, log_dir=Path("/tmp/aifabric/logs"), runtime_port=16001)
    assert soft[-2:] == ["--runtime-addr", "127.0.0.1:16001"]


def test_cleanup_knows_the_telemetry_bridge() -> None:
    from emulation.cleanup import _FABRIC_INTF, _is_fabric_host_shell

    assert _FABRIC_INTF.match("tnet-eth3") and _FABRIC_INTF.match("p0e0-eth250")
    assert _is_fabric_host_shell(["bash", "--norc", "-is", "mininet:tnet"])
