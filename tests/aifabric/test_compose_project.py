"""`aifabric compose`'s files and the container side's link logic, without Docker (the real
deployment: tests/fabric/test_compose_swarm.py)."""
from __future__ import annotations

import ipaddress
from collections import Counter

import pytest
import yaml

from aifabric import cli
from aifabric.containers import container_node
from aifabric.containers.compose_project import (
    CONTROLLER,
    MGMT_NETWORK,
    MGMT_SUBNET,
    P4RUNTIME_PORT,
    ComposeProject,
    link_networks,
)
from aifabric.lab.description import load
from topologies.ai_fabrics import dual_plane
from topologies.fabric import fat_tree


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("compose")
    assert cli.main(["compose", "--topo", "fattree", "--k", "4", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("name", ["compose.yml", "stack.yml"])
def test_every_link_network_joins_exactly_its_two_ends(written, name: str) -> None:
    doc = yaml.safe_load((written / name).read_text())
    members: dict[str, set[str]] = {}
    for service, spec in doc["services"].items():
        for net in spec["networks"]:
            members.setdefault(net, set()).add(service)
    links = link_networks(fat_tree(4))
    assert len(links) == 48
    for ln in links:
        assert members[ln.name] == {ln.a, ln.b}, ln
    switches = {sw.name for sw in fat_tree(4).switches}
    assert members[MGMT_NETWORK] == switches | {CONTROLLER}
    assert set(doc["networks"]) == {MGMT_NETWORK, *(ln.name for ln in links)}


def test_swarm_and_single_machine_differ_only_where_docker_does(written) -> None:
    compose = yaml.safe_load((written / "compose.yml").read_text())
    stack = yaml.safe_load((written / "stack.yml").read_text())
    assert {n["driver"] for n in compose["networks"].values()} == {"bridge"}
    assert {n["driver"] for n in stack["networks"].values()} == {"overlay"}
    assert all(s["deploy"]["endpoint_mode"] == "dnsrr" for s in stack["services"].values())
    config = next(iter(stack["configs"]))
    assert all(s["configs"][0]["source"] == config for s in stack["services"].values())
    assert all("./fabric.json:" in s["volumes"][0] for s in compose["services"].values())


def test_link_subnets_are_distinct_and_outside_the_fabric_plan() -> None:
    fabric = fat_tree(4)
    subnets = [ln.subnet for ln in link_networks(fabric)]
    assert len(set(subnets)) == len(subnets)
    assert not any(a.overlaps(b) for i, a in enumerate(subnets) for b in subnets[i + 1:])
    plan = {ipaddress.ip_interface(h.ip4).network for h in fabric.hosts}
    mgmt = ipaddress.ip_network(MGMT_SUBNET)
    assert not any(s.overlaps(p) or s.overlaps(mgmt) for s in subnets for p in plan)


def test_description_points_the_controller_at_each_switch_container(written) -> None:
    desc = load(written / "fabric.json")
    assert {sw.p4runtime_address for sw in desc.switches} == {f"{sw.name}:{P4RUNTIME_PORT}" for sw in desc.switches}


def test_a_pool_too_small_is_refused_naming_it(tmp_path, capsys) -> None:
    assert cli.main(["compose", "--k", "4", "--out", str(tmp_path), "--link-pool", "10.250.0.0/24"]) == 2
    err = capsys.readouterr().err
    assert "--link-pool 10.250.0.0/24" in err and "holds 32 links" in err and "48" in err
    with pytest.raises(ValueError, match="IPv4 network"):
        link_networks(fat_tree(4), "fd00::/64")


def test_a_dual_plane_host_gets_a_network_per_nic() -> None:
    fabric = dual_plane(2, 1, 2)
    doc = ComposeProject(fabric).document(swarm=True)
    host = fabric.hosts[0]
    nets = doc["services"][host.name]["networks"]
    assert len(nets) == 2 == len(host.nics())


def test_announcements_go_to_every_docker_mac_of_the_link_but_the_gateway_and_self() -> None:
    at = container_node.Attachment(1, "eth0", ipaddress.IPv4Interface("10.250.0.3/29"), "peer")
    frames = container_node.announce_frames("02:00:00:00:00:05", at)
    dsts = [f[:6] for f in frames]
    assert dsts == [bytes([2, 0x42, 10, 250, 0, n]) for n in (2, 4, 5, 6)]
    assert all(f[6:12] == bytes.fromhex("020000000005") and f[12:14] == b"\x88\xb7" and len(f) >= 60
               for f in frames)


def test_interfaces_are_told_apart_by_their_link_subnet(monkeypatch) -> None:
    fabric = fat_tree(4)
    mine = [ln for ln in link_networks(fabric) if ln.end("p0e0")]
    shown = {"lo": [ipaddress.IPv4Interface("127.0.0.1/8")],
             "eth0": [ipaddress.IPv4Interface("10.251.0.9/16")]}            # management
    for n, ln in enumerate(reversed(mine), start=1):                     # Docker's order is its own
        shown[f"eth{n}"] = [ipaddress.IPv4Interface(f"{list(ln.subnet.hosts())[1]}/{ln.subnet.prefixlen}")]
    monkeypatch.setattr(container_node, "docker_addresses", lambda: shown)
    found = container_node.attachments(fabric, "p0e0", "10.250.0.0/16", wait_s=0)
    assert [(at.port, at.peer) for at in found] == sorted(ln.end("p0e0") for ln in mine)
    assert Counter(at.interface for at in found) == Counter(f"eth{n}" for n in range(1, 5))
    del shown["eth1"]
    with pytest.raises(RuntimeError, match="no interface in the subnet of link"):
        container_node.attachments(fabric, "p0e0", "10.250.0.0/16", wait_s=0)


def test_place_pods_holds_each_pod_to_its_nodes_and_the_cores_to_the_top() -> None:
    project = ComposeProject(fat_tree(4), place_pods=True)
    services = project.document(swarm=True)["services"]

    def constraint(name: str) -> list[str] | None:
        return services[name]["deploy"].get("placement", {}).get("constraints")

    assert constraint("p2e1") == constraint("p2e1h0") == constraint("p2a0") == ["node.labels.aifabric.pod2 == true"]
    assert constraint("c3") == ["node.labels.aifabric.top == true"]
    assert constraint("controller") == ["node.role == manager"]
    assert project.placement_labels() == [*(f"aifabric.pod{p}" for p in range(4)), "aifabric.top"]
    assert all("placement" not in s.get("deploy", {}) for s in ComposeProject(fat_tree(4)).document(True)["services"].values())
