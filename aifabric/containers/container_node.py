"""One node of a containerised fabric (`aifabric.containers.compose_project`): what runs in each switch and
host container.

    python3 -m aifabric.containers.container_node --fabric /etc/aifabric/fabric.json --link-pool CIDR --node NAME

Docker gives the container one interface per link network, in no order it promises; each is
recognised by its Docker address, inside the link's subnet (`link_networks`). Then:

- a switch: offloads off on its link interfaces, and its P4 target (softswitch or BMv2) started
  with them as the plan's ports and its P4Runtime server on 0.0.0.0:9559, for the controller;
- a host: each NIC takes the plan's MAC and addresses (/32 and /128: everything goes through the
  gateway, so no ARP or NDP crosses the link), a permanent neighbour entry for its gateway (the
  switch's router MAC), the default routes (first NIC) or its plane's routes (further NICs),
  offloads off (the P4 target sees raw frames; checksums must be real).

Frames on the links carry the plan's MACs, not Docker's. A bridge network floods a MAC it has
not learned to both ends, so one machine needs nothing more; an overlay network crossing machines
sends a frame only to a MAC it knows or has learned from frames that came over it. So every node
sends, now and every ``ANNOUNCE_INTERVAL_S``, one frame per link from its plan MAC to the MACs
Docker gives the addresses of the link's subnet (Docker derives a container's MAC from its
address: 02:42 and the four octets): Docker knows those, the far machine's VXLAN learns where
the plan MAC lives, and its answers learn the way back.

SIGTERM stops the switch's target and ends the node.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from aifabric.containers.compose_project import LINK_POOL, P4RUNTIME_PORT, RUNTIME_PORT, link_networks
from aifabric.lab.description import load
from topologies.fabric import Fabric, Host, Switch
from emulation.mininet_topo import OFFLOADS
from softswitch.signal_stop import SignalStop
from emulation.p4switch import (
    BMV2,
    SOFTSWITCH,
    prepare_switch_interface,
    target_command,
)

ANNOUNCE_INTERVAL_S = 30.0      # well inside the VXLAN and bridge ageing time (300 s)
# IEEE's OUI-extended ether type: no switch or host parses it. Not 0x88B5 or 0x88B6 (IEEE's local
# experimental ones): fabric.p4 punts 0x88B5 to the controller as a heartbeat, and hears 0x88B6 as
# a link heartbeat.
ANNOUNCE_ETHERTYPE = 0x88B7
INTERFACE_WAIT_S = 60.0
LOG_DIR = Path("/tmp/aifabric")


@dataclass(frozen=True)
class Attachment:
    """One link as seen from this node: its port, the interface Docker gave it, the peer."""

    port: int
    interface: str
    docker_address: ipaddress.IPv4Interface
    peer: str


def say(message: str) -> None:
    print(f"aifabric-node: {message}", flush=True)


def run(*argv: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {result.stderr.strip() or f'exit {result.returncode}'}")


def docker_addresses() -> dict[str, list[ipaddress.IPv4Interface]]:
    """Interface name -> its IPv4 addresses, as `ip -j addr` shows them."""
    shown = json.loads(subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    return {i["ifname"]: [ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}") for a in i.get("addr_info", [])]
            for i in shown}


def attachments(fabric: Fabric, node: str, pool: str, wait_s: float = INTERFACE_WAIT_S) -> list[Attachment]:
    """This node's links, each with the interface whose Docker address is in the link's subnet;
    waits up to ``wait_s`` for Docker to attach them all, then names the ones missing."""
    mine = [(ln, ln.end(node)) for ln in link_networks(fabric, pool) if ln.end(node)]
    deadline = time.monotonic() + wait_s
    while True:
        found, missing = [], []
        addresses = docker_addresses()
        for ln, (port, peer) in mine:
            match = next(((name, a) for name, addrs in addresses.items() for a in addrs if a.ip in ln.subnet), None)
            if match is None:
                missing.append(f"{ln.name} ({ln.subnet}, port {port} to {peer})")
            else:
                found.append(Attachment(port, match[0], match[1], peer))
        if not missing:
            return sorted(found, key=lambda at: at.port)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{node}: no interface in the subnet of " + ", ".join(missing))
        time.sleep(0.5)


def docker_mac(address: ipaddress.IPv4Address) -> bytes:
    return bytes([0x02, 0x42, *address.packed])


def announce_frames(plan_mac: str, at: Attachment) -> list[bytes]:
    """One frame from ``plan_mac`` to the Docker MAC of every other address of the link's subnet
    (its gateway, the network and broadcast addresses excepted)."""
    src = bytes.fromhex(plan_mac.replace(":", ""))
    gateway = next(at.docker_address.network.hosts())
    payload = f"aifabric link announce, port {at.port}".encode()
    return [docker_mac(a) + src + ANNOUNCE_ETHERTYPE.to_bytes(2, "big") + payload.ljust(46, b"\0")
            for a in at.docker_address.network.hosts() if a not in (gateway, at.docker_address.ip)]


def announce_forever(frames: dict[str, list[bytes]], stop: SignalStop) -> None:
    """Send every interface's frames now and every ANNOUNCE_INTERVAL_S until ``stop``."""
    sockets = {}
    for interface in frames:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        sock.bind((interface, 0))
        sockets[interface] = sock
    try:
        while True:
            for interface, batch in frames.items():
                for frame in batch:
                    sockets[interface].send(frame)
            if stop.wait(ANNOUNCE_INTERVAL_S):
                return
    finally:
        for sock in sockets.values():
            sock.close()


def configure_host(fabric: Fabric, host: Host, links: list[Attachment]) -> None:
    """Every NIC of ``host`` as the plan has it (see the module docstring)."""
    by_port = {at.port: at for at in links}
    for nic in host.nics():
        dev = by_port[nic.port].interface
        gateway_mac = fabric.switch(nic.switch).mac
        run("ip", "link", "set", dev, "down")
        run("ip", "link", "set", dev, "address", nic.mac)
        run("ip", "link", "set", dev, "up")
        subprocess.run(["ethtool", "-K", dev, *(w for o in OFFLOADS for w in (o, "off"))],   # as a Mininet host's
                       capture_output=True, check=False)
        run("ip", "addr", "add", f"{nic.ip4.ip}/32", "dev", dev)
        run("ip", "-6", "addr", "add", f"{nic.ip6.ip}/128", "dev", dev, "nodad")
        for gateway in (nic.gateway4, nic.gateway6):
            run("ip", "neigh", "replace", str(gateway), "lladdr", gateway_mac, "dev", dev, "nud", "permanent")
        first = nic.port == host.nics()[0].port
        for net in ("default",) if first else tuple(map(str, nic.routes4)):
            run("ip", "route", "replace", net, "via", str(nic.gateway4), "dev", dev, "onlink", "src", str(nic.ip4.ip))
        for net in ("default",) if first else tuple(map(str, nic.routes6)):
            run("ip", "-6", "route", "replace", net, "via", str(nic.gateway6), "dev", dev, "onlink")
        say(f"{host.name} NIC {nic.port}: {dev} is {nic.mac} {nic.ip4.ip} {nic.ip6.ip}, gateway {nic.switch}")


def switch_command(target: str, switch: Switch, links: list[Attachment]) -> list[str]:
    executable = BMV2 if target == "bmv2" else SOFTSWITCH
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    return target_command(target, executable, name=switch.name, device_id=switch.device_id,
                          ports=[(at.port, at.interface) for at in links], grpc_port=P4RUNTIME_PORT,
                          grpc_host="0.0.0.0", log_dir=LOG_DIR,
                          runtime_port=None if target == "bmv2" else RUNTIME_PORT)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="aifabric-node", description=__doc__.split("\n\n")[0])
    p.add_argument("--fabric", required=True, help="the fabric description")
    p.add_argument("--link-pool", default=LINK_POOL, help="the pool the link networks' subnets came from")
    p.add_argument("--node", required=True, help="this container's switch or host")
    args = p.parse_args(argv)
    stop = SignalStop((signal.SIGTERM, signal.SIGINT))
    try:
        desc = load(args.fabric)
        fabric = desc.to_fabric()
        links = attachments(fabric, args.node, args.link_pool)
        for at in links:
            say(f"{args.node} port {at.port}: {at.interface} ({at.docker_address}) to {at.peer}")
        names = {sw.name: sw for sw in fabric.switches}
        if args.node in names:
            switch = names[args.node]
            for at in links:        # as a Mininet switch's (its IPv6 the compose file's sysctls turn off)
                prepare_switch_interface(at.interface)
            process = subprocess.Popen(switch_command(desc.target or "softswitch", switch, links))
            plan_macs = {at.interface: switch.mac for at in links}
        else:
            host = fabric.host(args.node)
            configure_host(fabric, host, links)
            process = None
            nic_macs = {nic.port: nic.mac for nic in host.nics()}
            plan_macs = {at.interface: nic_macs[at.port] for at in links}
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        print(f"aifabric-node: error: {err}", file=sys.stderr)
        return 2
    frames = {at.interface: announce_frames(plan_macs[at.interface], at) for at in links}
    threading.Thread(target=announce_forever, args=(frames, stop), daemon=True).start()
    say(f"{args.node} ready")
    while not stop.wait(1.0):
        if process is not None and process.poll() is not None:
            print(f"aifabric-node: {args.node}'s target exited ({process.returncode})", file=sys.stderr)
            return 1
    if process is not None:
        process.terminate()
        process.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
