"""Address plan, fabric generation and the Mininet topology description (no network needed)."""

from __future__ import annotations

import ipaddress
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from topologies import addressing as ap
from topologies.fabric import HOST_PORT, Role, fat_tree, leaf_spine
from topologies.shapes import build

K_VALUES = [2, 4, 6, 8]


# --- address plan ---------------------------------------------------------------------------


def test_fat_tree_host_addresses_follow_the_documented_plan() -> None:
    assert str(ap.fat_tree_host_ip4(1, 0, 1)) == "10.1.0.3/24"
    assert str(ap.fat_tree_gateway4(1, 0)) == "10.1.0.1"
    assert str(ap.fat_tree_host_ip6(10, 11, 12)) == "fd00:0:a:b::e/64"
    assert str(ap.fat_tree_gateway6(10, 11)) == "fd00:0:a:b::1"
    assert ap.fat_tree_host_mac(10, 11, 0) == "00:00:0a:0a:0b:02"


def test_leaf_spine_addresses_follow_the_documented_plan() -> None:
    assert str(ap.leaf_spine_host_ip4(3, 0)) == "10.200.3.2/24"
    assert str(ap.leaf_spine_gateway4(3)) == "10.200.3.1"
    assert str(ap.leaf_spine_host_ip6(12, 1)) == "fd00:1:c::3/64"
    assert str(ap.leaf_spine_gateway6(12)) == "fd00:1:c::1"
    assert ap.leaf_spine_host_mac(12, 1) == "00:00:0a:c8:0c:03"


def test_host_mac_is_00_00_then_ipv4_bytes() -> None:
    for fab in (fat_tree(4), leaf_spine(3, 2, 2)):
        for h in fab.hosts:
            assert ap.mac_to_int(h.mac) == int(h.ip4.ip)


def test_switch_mac_and_grpc_port() -> None:
    assert ap.switch_mac(1) == "02:00:00:00:00:01"
    assert ap.switch_mac(0x1234) == "02:00:00:00:12:34"
    assert ap.grpc_port(7) == 50007
    assert ap.grpc_address(7) == "127.0.0.1:50007"
    with pytest.raises(ValueError, match="device id 0"):
        ap.switch_mac(0)
    with pytest.raises(ValueError, match="device id 15536"):
        ap.grpc_port(15536)


@pytest.mark.parametrize(
    "k, message",
    [(3, "k=3 is odd"), (0, "k=0 is too small"), (-2, "k=-2 is too small"), (112, "k=112 is too large"), ("4", "k='4'")],
)
def test_bad_fat_tree_k_is_rejected_by_name(k: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fat_tree(k)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 2, 2), "leaves=0"),
        ((2, 0, 2), "spines=0"),
        ((2, 2, 0), "hosts_per_leaf=0"),
        ((255, 2, 2), "leaves=255"),
        ((2, 2, 253), "hosts_per_leaf=253"),
        ((2, 100, 200), "hosts_per_leaf\\+spines=300"),
    ],
)
def test_bad_leaf_spine_is_rejected_by_name(args: tuple[int, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        leaf_spine(*args)


def test_mac_helpers_round_trip() -> None:
    assert ap.int_to_mac(ap.mac_to_int("02:00:00:00:12:34")) == "02:00:00:00:12:34"
    with pytest.raises(ValueError, match="'zz'"):
        ap.mac_to_int("zz")


# --- fat-tree generation --------------------------------------------------------------------


@pytest.mark.parametrize("k", K_VALUES)
def test_fat_tree_counts(k: int) -> None:
    fab = fat_tree(k)
    roles = Counter(sw.role for sw in fab.switches)
    assert roles[Role.EDGE] == k * k // 2
    assert roles[Role.AGGREGATION] == k * k // 2
    assert roles[Role.CORE] == (k // 2) ** 2
    assert len(fab.switches) == 5 * k * k // 4
    assert len(fab.hosts) == k**3 // 4
    # host links + edge-agg links + agg-core links
    assert len(fab.links) == k**3 // 4 + k * (k // 2) ** 2 + k * (k // 2) ** 2


def test_fat_tree_4_is_20_switches_and_16_hosts() -> None:
    fab = fat_tree(4)
    assert len(fab.switches) == 20 and len(fab.hosts) == 16
    assert [sw.name for sw in fab.switches[:4]] == ["p0e0", "p0e1", "p0a0", "p0a1"]
    assert [sw.name for sw in fab.switches[-4:]] == ["c0", "c1", "c2", "c3"]
    ports = fab.fabric_ports()       # where link heartbeats go: the ports facing a switch
    assert ports["p0e0"] == [3, 4] and ports["p0a0"] == [1, 2, 3, 4] and ports["c0"] == [1, 2, 3, 4]
    assert sum(map(len, ports.values())) == 2 * len(list(fab.switch_links())) == 64


@pytest.mark.parametrize("k", K_VALUES)
def test_fat_tree_ids_names_and_addresses_are_unique(k: int) -> None:
    fab = fat_tree(k)
    assert sorted(sw.device_id for sw in fab.switches) == list(range(1, len(fab.switches) + 1))
    for values in (
        [sw.name for sw in fab.switches] + [h.name for h in fab.hosts],
        [sw.mac for sw in fab.switches] + [h.mac for h in fab.hosts],
        [sw.grpc_port for sw in fab.switches],
        [h.ip4 for h in fab.hosts],
        [h.ip6 for h in fab.hosts],
    ):
        assert len(values) == len(set(values))
    for sw in fab.switches:
        assert sw.mac == ap.switch_mac(sw.device_id)
        assert sw.grpc_address == f"127.0.0.1:{50000 + sw.device_id}"


@pytest.mark.parametrize("k", K_VALUES)
def test_fat_tree_port_plan(k: int) -> None:
    half = k // 2
    fab = fat_tree(k)
    for sw in fab.switches:
        ports = fab.ports_of(sw.name)
        assert sorted(ports) == list(range(1, k + 1)), sw.name  # every switch uses ports 1..k
        if sw.role is Role.EDGE:
            edge = int(sw.name.split("e")[1])
            for h in range(half):
                assert ports[h + 1] == f"p{sw.pod}e{edge}h{h}"
            for a in range(half):
                assert ports[half + a + 1] == f"p{sw.pod}a{a}"
        elif sw.role is Role.AGGREGATION:
            agg = int(sw.name.split("a")[1])
            for e in range(half):
                assert ports[e + 1] == f"p{sw.pod}e{e}"
            for m in range(half):
                assert ports[half + m + 1] == f"c{agg * half + m}"
        else:
            core = int(sw.name[1:])
            for pod in range(k):
                assert ports[pod + 1] == f"p{pod}a{core // half}"


@pytest.mark.parametrize("k", K_VALUES)
def test_fat_tree_hosts_sit_on_their_subnet(k: int) -> None:
    fab = fat_tree(k)
    for h in fab.hosts:
        pod, edge = int(h.name[1:].split("e")[0]), int(h.name.split("e")[1].split("h")[0])
        assert h.switch == f"p{pod}e{edge}"
        assert h.gateway4 in h.ip4.network and h.gateway4 != h.ip4.ip
        assert h.gateway6 in h.ip6.network and h.gateway6 != h.ip6.ip
        assert h.ip4.network == ipaddress.ip_network(f"10.{pod}.{edge}.0/24")
        assert h.ip6.network.prefixlen == 64
        assert fab.ports_of(h.switch)[h.port] == h.name
        assert fab.ports_of(h.name) == {HOST_PORT: h.switch}


def test_interface_names_fit_linux_limit_at_the_largest_k() -> None:
    fab = fat_tree(ap.MAX_FAT_TREE_K)
    longest = max(len(f"{ln.a}-eth{ln.a_port}") for ln in fab.links)
    longest = max(longest, max(len(f"{ln.b}-eth{ln.b_port}") for ln in fab.links))
    assert longest <= 15
    assert max(sw.grpc_port for sw in fab.switches) <= 65535


@pytest.mark.parametrize("k", [4, 8])
def test_fat_tree_graph(k: int) -> None:
    g = fat_tree(k).to_graph()
    switches = [n for n, d in g.nodes(data=True) if d["kind"] == "switch"]
    hosts = [n for n, d in g.nodes(data=True) if d["kind"] == "host"]
    assert len(switches) == 5 * k * k // 4 and len(hosts) == k**3 // 4
    assert all(g.degree(s) == k for s in switches)
    assert all(g.degree(h) == 1 for h in hosts)
    assert g.edges["p0e0", "p0a0"]["ports"] == {"p0e0": k // 2 + 1, "p0a0": 1}


# --- leaf-spine -----------------------------------------------------------------------------


@pytest.mark.parametrize("leaves, spines, hpl", [(2, 1, 1), (4, 2, 2), (8, 4, 16)])
def test_leaf_spine_counts_and_ports(leaves: int, spines: int, hpl: int) -> None:
    fab = leaf_spine(leaves, spines, hpl)
    assert len(fab.switches) == leaves + spines
    assert len(fab.hosts) == leaves * hpl
    assert len(fab.links) == leaves * hpl + leaves * spines
    assert sorted(sw.device_id for sw in fab.switches) == list(range(1, leaves + spines + 1))
    for i in range(leaves):
        ports = fab.ports_of(f"l{i}")
        assert ports == {
            **{h + 1: f"l{i}h{h}" for h in range(hpl)},
            **{hpl + j + 1: f"s{j}" for j in range(spines)},
        }
    for j in range(spines):
        assert fab.ports_of(f"s{j}") == {i + 1: f"l{i}" for i in range(leaves)}
        assert fab.switch(f"s{j}").device_id == leaves + j + 1


def test_build_by_kind_and_unknown_names() -> None:
    assert build("fat_tree", k=4).describe() == "fat_tree(k=4)"
    assert build("leaf-spine", leaves=2, spines=1, hosts_per_leaf=1).kind == "leaf_spine"
    with pytest.raises(ValueError, match="'torus'"):
        build("torus", k=4)
    with pytest.raises(KeyError, match="'nope'"):
        fat_tree(4).switch("nope")


# --- Mininet topology and P4 switch command lines (nothing started) -------------------------


def test_mininet_topo_mirrors_the_fabric() -> None:
    from emulation.mininet_topo import FabricTopo, FatTreeTopo

    fab = fat_tree(4)
    topo = FabricTopo(fab)
    assert sorted(topo.switches()) == sorted(sw.name for sw in fab.switches)
    assert sorted(topo.hosts()) == sorted(h.name for h in fab.hosts)
    assert len(topo.links()) == len(fab.links)
    assert topo.nodeInfo("p1a0")["device_id"] == fab.switch("p1a0").device_id
    assert topo.nodeInfo("p1a0")["grpc_port"] == 50000 + fab.switch("p1a0").device_id
    h = fab.host("p3e1h1")
    info = topo.nodeInfo(h.name)
    assert (info["ip"], info["mac"], info["defaultRoute"]) == ("10.3.1.3/24", h.mac, "via 10.3.1.1")
    assert (info["ip6"], info["gateway6"]) == ("fd00:0:3:1::3/64", "fd00:0:3:1::1")
    link = topo.linkInfo("p0a1", "c3")
    ports = {link["node1"]: link["port1"], link["node2"]: link["port2"]}
    assert ports == {"p0a1": 4, "c3": 1}
    assert len(FatTreeTopo(k=2).switches()) == 5


def test_target_command_lines() -> None:
    from emulation.p4switch import target_command

    log_dir = Path("/tmp/aifabric/logs")
    ports = [(1, "p0e0-eth1"), (3, "p0e0-eth3")]
    bmv2 = target_command("bmv2", "simple_switch_grpc", name="p0e0", device_id=1, ports=ports, grpc_port=50001, log_dir=log_dir)
    assert bmv2 == [
        "simple_switch_grpc", "--device-id", "1", "-i", "1@p0e0-eth1", "-i", "3@p0e0-eth3", "--no-p4",
        "--thrift-port", "16001", "--notifications-addr", "ipc:///tmp/bmv2-thrift16001-notifications.ipc",
        "--log-file", "/tmp/aifabric/logs/p0e0", "--log-level", "info",
        "--", "--grpc-server-addr", "127.0.0.1:50001", "--cpu-port", "255", "--priority-queues", "8",
    ]  # fmt: skip
    soft = target_command("softswitch", "softswitch", name="p0e0", device_id=1, ports=ports, grpc_port=50001, log_dir=log_dir)
    assert soft == [
        "softswitch", "--device-id", "1", "-i", "1@p0e0-eth1", "-i", "3@p0e0-eth3", "--no-p4",
        "--grpc-server-addr", "127.0.0.1:50001", "--cpu-port", "255", "--priority-queues", "8",
        "--log-file", "/tmp/aifabric/logs/p0e0.log",
    ]  # fmt: skip


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("simple_switch_grpc") is None, reason="BMv2 simple_switch_grpc is not on PATH")
def test_bmv2_started_at_another_log_level_serves_p4runtime() -> None:
    """The benchmarks run BMv2 with no logging: its level is given once, in place of the
    fabric's (simple_switch refuses an option given twice and exits)."""
    from emulation.testbed import Testbed

    with Testbed(nports=1, prefix="lvl") as tb:
        target = tb.start_target("bmv2", bmv2_log_level="off")
        cmd = Path(f"/proc/{target.proc.pid}/cmdline").read_bytes().split(b"\0")
        assert target.proc.poll() is None
        assert cmd.count(b"--log-level") == 1 and cmd[cmd.index(b"--log-level") + 1] == b"off"


def _in_netns_with_one_ephemeral_port(code: str) -> str:
    """stdout of ``code`` run by Python in a new network namespace whose only ephemeral port
    is 40000 (nothing listens there)."""
    import subprocess
    import sys
    out = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up && "
         "echo '40000 40000' > /proc/sys/net/ipv4/ip_local_port_range && \"$0\" -c \"$1\"", sys.executable, code],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_probe_connected_to_itself_is_not_a_server_answering() -> None:
    # a connect to 127.0.0.1:40000 is handed port 40000 and meets itself ...
    assert _in_netns_with_one_ephemeral_port(
        "import socket; s = socket.create_connection(('127.0.0.1', 40000), timeout=1); "
        "print(s.getsockname() == s.getpeername())") == "True"
    # ... which the probe does not take for a server
    assert _in_netns_with_one_ephemeral_port(
        "from emulation.p4switch import port_accepts; print(port_accepts(40000))") == "False"


def test_unknown_target_is_named() -> None:
    from emulation.p4switch import P4SwitchError, resolve_target

    with pytest.raises(P4SwitchError, match="'tofino'"):
        resolve_target("tofino")


def test_cleanup_recognises_only_aifabric_processes_and_interfaces() -> None:
    from emulation.cleanup import _FABRIC_INTF, _is_aifabric_target, _is_fabric_host_shell

    run = Path("/tmp/aifabric")
    ours = ["/usr/local/bin/simple_switch_grpc", "--device-id", "1", "--log-file", "/tmp/aifabric/logs/p0e0"]
    theirs = ["/usr/local/bin/simple_switch_grpc", "--device-id", "1", "--log-file", "/tmp/other/s1"]
    soft = ["/work/main/.venv/bin/python", "/work/main/.venv/bin/softswitch", "--device-id", "2", "--log-file", "/tmp/aifabric/logs/c0.log"]
    assert _is_aifabric_target(ours, run) and _is_aifabric_target(soft, run)
    assert not _is_aifabric_target(theirs, run)
    assert not _is_aifabric_target(["vim", "--device-id", "--log-file", "/tmp/aifabric/x"], run)
    assert _is_fabric_host_shell(["bash", "--norc", "-is", "mininet:p0e1h1"])
    assert not _is_fabric_host_shell(["bash", "--norc", "-is", "mininet:h1"])
    for node in ("t0h1", "g2r1", "g2r1h0", "s1g0", "p1s0"):
        assert _is_fabric_host_shell(["bash", "--norc", "-is", f"mininet:{node}"]), node
    for name in ("p0e0-eth1", "p12a3-eth8", "c15-eth4", "l3-eth2", "s1-eth9", "p0e0h1-eth0", "l2h3-eth0",
                 "r3-eth1", "s1g3-eth0", "p1l0-eth3", "p0s1-eth2", "t2h1-eth1", "g3r1-eth4", "g3r1h0-eth0",
                 "p0a1-eth254"):      # a switch's link-heartbeat generator port
        assert _FABRIC_INTF.match(name), name
    for name in ("eth0", "veth1234", "h1-eth0", "p0e0x-eth1", "docker0"):
        assert not _FABRIC_INTF.match(name), name


def test_cleanup_kills_leftover_targets_and_deletes_leftover_interfaces(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from emulation.cleanup import cleanup

    if os.geteuid() != 0:
        pytest.skip("needs root (creates a veth pair)")
    fake = tmp_path / "bin" / "softswitch"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    fake.chmod(0o755)
    log = tmp_path / "logs" / "p99e9.log"
    leftover = subprocess.Popen([str(fake), "--device-id", "9", "--log-file", str(log)])
    bystander = subprocess.Popen([str(fake), "--device-id", "9", "--log-file", "/tmp/not-aifabric/p99e9.log"])
    intf, peer = "p99e9-eth1", "p99e9-eth2"
    subprocess.run(["ip", "link", "add", intf, "type", "veth", "peer", "name", peer], check=True)
    try:
        time.sleep(0.3)
        report = cleanup(tmp_path, nodes=["p99e9"], timeout=2)
        assert leftover.wait(timeout=5) is not None
        assert bystander.poll() is None, "a process not started under the run directory was killed"
        assert any(str(leftover.pid) in k for k in report.killed)
        assert intf in report.links_deleted or peer in report.links_deleted
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        assert intf not in links and peer not in links
        assert report.errors == []
    finally:
        bystander.kill()
        bystander.wait()
        if leftover.poll() is None:
            leftover.kill()
        subprocess.run(["ip", "link", "del", intf], capture_output=True)
