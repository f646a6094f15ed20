"""The out-of-band telemetry network: one plain Linux bridge in the root namespace.

When INT is on, `emulation.mininet_topo.FabricTopo(fabric, telemetry=True)` links every switch's
``TELEMETRY_PORT`` to `TelemetryBridge` (node ``tnet``). The bridge is made with ``ip link``
(no bridge-utils), carries the collector's address (``TELEMETRY_COLLECTOR_IP``/16) and a fixed
MAC (``TELEMETRY_COLLECTOR_MAC``: the reports' destination MAC, so the kernel delivers them
locally), has IPv6 off (no chatter into the switches' telemetry ports), and is deleted on stop.
The collector then binds ``TELEMETRY_COLLECTOR_IP:TELEMETRY_COLLECTOR_PORT`` in the root namespace.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterable

from mininet.node import Switch

from topologies import addressing as ap


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def _disable_ipv6(intf: str) -> None:
    try:
        Path(f"/proc/sys/net/ipv6/conf/{intf}/disable_ipv6").write_text("1")
    except OSError:
        pass


def link_exists(name: str) -> bool:
    return _ip("link", "show", "dev", name, check=False).returncode == 0


def delete_bridge(name: str = ap.TELEMETRY_BRIDGE) -> bool:
    """Delete the telemetry bridge if it exists (its ports stay, detached); True when deleted."""
    return link_exists(name) and _ip("link", "del", name, check=False).returncode == 0


class TelemetryBridge(Switch):
    """A Linux bridge node in the root namespace holding the collector's address."""

    def __init__(
        self,
        name: str = ap.TELEMETRY_BRIDGE,
        address: str = f"{ap.TELEMETRY_COLLECTOR_IP}/{ap.TELEMETRY_NETWORK.prefixlen}",
        mac: str = ap.TELEMETRY_COLLECTOR_MAC,
        **params: object,
    ) -> None:
        params["inNamespace"] = False
        params.setdefault("dpid", "ffff")  # no digits in the name for Mininet to derive one from
        self.address = address
        self.bridge_mac = mac
        Switch.__init__(self, name, **params)

    def bridge_ports(self) -> list[str]:
        return sorted(intf.name for port, intf in self.intfs.items() if port != 0 and intf.name != "lo")

    def start(self, controllers: Iterable[object] = ()) -> None:
        delete_bridge(self.name)  # a leftover of a crashed run
        _ip("link", "add", "name", self.name, "type", "bridge")
        _disable_ipv6(self.name)
        _ip("link", "set", "dev", self.name, "address", self.bridge_mac)
        for intf in self.bridge_ports():
            _disable_ipv6(intf)
            _ip("link", "set", "dev", intf, "master", self.name)
            _ip("link", "set", "dev", intf, "up")
        _ip("addr", "add", self.address, "dev", self.name)
        _ip("link", "set", "dev", self.name, "up")

    def connected(self) -> bool:
        return link_exists(self.name)

    def stop(self, deleteIntfs: bool = True) -> None:
        delete_bridge(self.name)
        super().stop(deleteIntfs)
