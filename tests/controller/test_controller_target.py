"""Integration: the controller and the P4 switch node against a real P4Runtime target.

Parametrised over targets: ``bmv2`` (``simple_switch_grpc`` on PATH) and ``softswitch`` (the
embedded target's console script). Each test skips with the reason when its target, root
privileges or the compiled pipeline (p4src/build/fabric.json + fabric.p4info.txtpb) is missing.

* one switch, two hosts in their own network namespaces (Mininet, `emulation.p4switch.P4Switch`):
  the controller installs the fabric's entries, scapy sends a UDP frame to the router MAC from
  one host and the other host must receive it with rewritten MACs and TTL 63; pings over IPv4
  and IPv6 go through the switch's ARP/NDP answers; egress counters count; after ``net.stop()``
  no process or interface is left behind.
* the controller re-installs a switch whose target was restarted.

The whole k=4 fat-tree (all pairs, ECMP over the cores) is in tests/fabric/test_load_balance_fabric.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.fabric_controller import FabricController, Pipeline
from topologies import addressing as ap
from topologies.fabric import HOST_PORT, Fabric, Host, Link, Role, Switch

BUILD = Path(__file__).resolve().parents[2] / "p4src" / "build"

TARGETS = [pytest.param("bmv2", marks=pytest.mark.bmv2), pytest.param("softswitch")]


def _softswitch_available() -> str | None:
    try:
        import softswitch.cli  # noqa: F401
    except ImportError as exc:
        return f"softswitch is not importable yet ({exc})"
    if not (shutil.which("softswitch") or (Path(sys.executable).parent / "softswitch").exists()):
        return "the softswitch console script is not installed"
    return None


def require(target: str) -> Pipeline:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, veths)")
    if target == "bmv2" and not shutil.which("simple_switch_grpc"):
        pytest.skip("simple_switch_grpc is not on PATH")
    if target == "softswitch":
        reason = _softswitch_available()
        if reason:
            pytest.skip(reason)
    if not shutil.which("mnexec"):
        pytest.skip("Mininet (mnexec) is not installed")
    for name in ("fabric.json", "fabric.p4info.txtpb"):
        if not (BUILD / name).exists():
            pytest.skip(f"{BUILD / name} does not exist yet (make p4)")
    return Pipeline.from_build_dir(BUILD)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_switch_fabric(name: str, hosts: int = 2) -> Fabric:
    """One leaf (device 1, gRPC on a free port) with ``hosts`` hosts, leaf 0 of the plan."""
    dev = 1
    sw = Switch(name, dev, Role.LEAF, ap.switch_mac(dev), free_port())
    fab = Fabric(kind="one_switch", params={"hosts": hosts}, switches=[sw])
    for h in range(hosts):
        host = Host(
            name=f"{name}h{h}",
            ip4=ap.leaf_spine_host_ip4(0, h),
            ip6=ap.leaf_spine_host_ip6(0, h),
            mac=ap.leaf_spine_host_mac(0, h),
            gateway4=ap.leaf_spine_gateway4(0),
            gateway6=ap.leaf_spine_gateway6(0),
            switch=name,
            port=h + 1,
        )
        fab.hosts.append(host)
        fab.links.append(Link(host.name, HOST_PORT, name, host.port))
    return fab


SNIFF = """
import json, sys
from scapy.all import Ether, IP, UDP, sniff
iface, dst, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
pkts = sniff(iface=iface, timeout=timeout, count=1,
             lfilter=lambda p: IP in p and UDP in p and p[IP].dst == dst and p[UDP].dport == 4321)
print(json.dumps([{"src": p[Ether].src, "dst": p[Ether].dst, "ttl": p[IP].ttl,
                   "payload": bytes(p[UDP].payload).decode(errors="replace")} for p in pkts]), flush=True)
"""

SEND = """
import sys, time
from scapy.all import Ether, IP, UDP, sendp
iface, smac, dmac, src, dst = sys.argv[1:6]
frame = Ether(src=smac, dst=dmac) / IP(src=src, dst=dst, ttl=64) / UDP(sport=1234, dport=4321) / b"aifabric"
for _ in range(120):
    sendp(frame, iface=iface, verbose=False)
    time.sleep(0.5)
"""


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_one_switch_routes_between_two_namespaces(target: str, tmp_path: Path) -> None:
    pipeline = require(target)
    from emulation.mininet_topo import make_net
    from emulation.p4switch import port_accepts

    name = f"t{os.getpid() % 10000}"
    fab = one_switch_fabric(name)
    net = make_net(fab, target=target, log_dir=tmp_path, start_timeout=120, thrift_port=free_port())
    sw_node = net.get(name)
    pid = None
    try:
        net.start()
        pid = sw_node.process.pid
        assert sw_node.connected()
        assert sw_node.target_kind == target
        with FabricController(fab, pipeline, rpc_timeout=30, connect_timeout=30) as ctl:
            plans = ctl.start()
            assert plans[name].inserts
            h0, h1 = (net.get(h.name) for h in fab.hosts)
            a, b = fab.hosts
            sniffer = h1.popen([sys.executable, "-c", SNIFF, h1.defaultIntf().name, str(b.ip4.ip), "90"])
            sender = h0.popen([sys.executable, "-c", SEND, h0.defaultIntf().name, a.mac, fab.switches[0].mac, str(a.ip4.ip), str(b.ip4.ip)])
            try:
                out, err = sniffer.communicate(timeout=150)
            finally:
                sender.kill()
                sender.wait()
            received = json.loads(out.decode().strip().splitlines()[-1]) if out.strip() else []
            assert received, f"nothing arrived at {b.name}; sniffer stderr: {err.decode()[-2000:]}"
            assert received[0] == {"src": fab.switches[0].mac, "dst": b.mac, "ttl": 63, "payload": "aifabric"}

            # the kernel's own path: ARP / NDP answered by the switch, routed both ways
            ping4 = h0.cmd(f"ping -c 3 -i 0.3 -W 5 {b.ip4.ip}")
            assert " 0% packet loss" in ping4, ping4
            ping6 = h0.cmd(f"ping -6 -c 3 -i 0.3 -W 5 {b.ip6.ip}")
            assert " 0% packet loss" in ping6, ping6

            counters = ctl.read_port_counters(name)
            assert counters[b.port].packets >= 4 and counters[a.port].packets >= 3, counters
    finally:
        intfs = [i.name for i in sw_node.intfList() if i.name != "lo"]
        net.stop()
    # nothing left behind
    if pid is not None:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert not [i for i in intfs if f" {i}@" in links or f" {i}:" in links]
    assert not port_accepts(fab.switches[0].grpc_port)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_controller_reinstalls_a_restarted_target(target: str, tmp_path: Path) -> None:
    pipeline = require(target)
    from emulation.mininet_topo import make_net

    name = f"r{os.getpid() % 10000}"
    fab = one_switch_fabric(name)
    net = make_net(fab, target=target, log_dir=tmp_path, start_timeout=120, thrift_port=free_port())
    try:
        net.start()
        sw_node = net.get(name)
        with FabricController(fab, pipeline, rpc_timeout=30, connect_timeout=30) as ctl:
            ctl.start()
            ctl.start_reconcile_loop(interval=0.5)
            sw_node.terminate_target()
            sw_node.start()
            sw_node.wait_ready()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and ctl.status()[name].pipeline_pushes < 2:
                time.sleep(0.2)
            assert ctl.wait_in_sync(timeout=60), ctl.status()[name]
            status = ctl.status()[name]
            assert status.pipeline_pushes == 2 and status.connects >= 2
            a, b = fab.hosts
            ping = net.get(a.name).cmd(f"ping -c 2 -i 0.3 -W 5 {b.ip4.ip}")
            assert " 0% packet loss" in ping, ping
    finally:
        net.stop()


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_te_pins_are_written_as_their_difference(target: str, tmp_path: Path) -> None:
    """A TE round (`TeOverrides.replace`) writes only the pins that changed, without reconciling
    the switch whole: the switch then holds exactly the pins in force, no other table touched;
    a round that keeps its pins writes nothing."""
    pipeline = require(target)
    from controller.load_balance.te.overrides import PIN, TE_OVERRIDE, Pin, TeOverrides
    from controller.p4info import decode
    from emulation.mininet_topo import make_net

    name = f"p{os.getpid() % 10000}"
    fab = one_switch_fabric(name)
    a, b = fab.hosts
    p4info = pipeline.p4info
    te_id = p4info.table_id(TE_OVERRIDE)

    def pin(sport: int, port: int) -> Pin:
        return Pin(name, str(a.ip4.ip), str(b.ip4.ip), 17, sport, 4791, port)

    def installed(conn) -> set[tuple[int, int]]:
        """(source port, egress port) of every pin the switch holds, as read from it."""
        out = set()
        for e in conn.read_table(te_id):
            match = {p4info.match_field_by_id(te_id, m.field_id).name: decode(m.exact.value) for m in e.match}
            params = {p.param_id: decode(p.value) for p in e.action.action.params}
            assert e.action.action.action_id == p4info.action_id(PIN), e
            out.add((match["l4_sport"], params[p4info.action_param(PIN, "port").id]))
        return out

    def others(conn) -> list[bytes]:
        return sorted(e.SerializeToString(deterministic=True) for e in conn.read_table() if e.table_id != te_id)

    net = make_net(fab, target=target, log_dir=tmp_path, start_timeout=120, thrift_port=free_port())
    try:
        net.start()
        with FabricController(fab, pipeline, rpc_timeout=30, connect_timeout=30) as ctl:
            overrides = TeOverrides(ctl)
            ctl.start()
            conn = ctl.agents[name].connection()
            rest, reconciles = others(conn), ctl.status()[name].reconciles
            rounds = [([pin(1000, 1), pin(1001, 2)], "2 inserts, 0 modifies, 0 deletes"),
                      ([pin(1000, 2), pin(1002, 1)], "1 inserts, 1 modifies, 1 deletes"),
                      ([pin(1002, 1), pin(1000, 2)], "1 inserts, 1 modifies, 1 deletes")]   # the same: no write
            for pins, written in rounds:
                overrides.replace(pins)
                status = ctl.status()[name]
                assert status.last_plan == written and status.in_sync, status
                assert installed(conn) == {(p.sport, p.port) for p in pins}
            assert ctl.status()[name].reconciles == reconciles, "a TE round reconciled the switch whole"
            assert others(conn) == rest, "a TE round touched another table"
    finally:
        net.stop()
