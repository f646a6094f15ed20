"""Load-balancing and aggregation metrics of `controller.metrics.fabric_metrics`, from a real
`FabricController` and its real state sources (`LbModes`, `TeOverrides`, `JobManager`) that
writes to no switch: its ``apply_now`` recomputes the desired state (every source's entities
are built) without reconciling, and its counter reads return fixed ``agg_ops`` cells. The
exporter's registry is read back with prometheus_client's parser."""
from __future__ import annotations

from typing import Iterable

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller import entries as E
from controller.aggregation import JobManager
from controller.aggregation.entries import AGG_OPS, OUTCOMES
from controller.fabric_controller import FabricController, Pipeline, PortCounter
from controller.load_balance import LbModes, Pin, TeOverrides
from controller.load_balance.uplinks import switch_tiers, uplinks
from controller.metrics import FabricMetrics, fabric_metrics
from topologies.ai_fabrics import dragonfly, rail_optimised
from topologies.fabric import Fabric, fat_tree, leaf_spine

AGG_CELLS = {"p0e0": {0: 12, 2: 4, 5: 1}, "c1": {0: 8, 1: 4, 4: 2}}   # switch -> outcome index -> packets


class OfflineController(FabricController):
    """A fabric controller that installs nothing: the desired state is computed, not written."""

    def __init__(self, fabric: Fabric) -> None:
        super().__init__(fabric, PIPELINE)
        self.applied: list[list[str]] = []

    def apply_now(self, names: Iterable[str]) -> None:
        self.recompute()
        self.applied.append(sorted(names))

    def apply_source(self, source, names: Iterable[str]) -> None:
        self.apply_now(names)

    def read_port_counters(self, name: str, counter: str = E.EGRESS_PORT_COUNTER) -> dict[int, PortCounter]:
        cells = AGG_CELLS.get(name, {}) if counter == AGG_OPS else {}
        return {i: PortCounter(p, 0) for i, p in cells.items()}


PIPELINE = Pipeline.from_build_dir()


def samples(exporter: FabricMetrics) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(exporter.registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def series(values: dict, name: str) -> dict[tuple, float]:
    """label tuple (values in label-name order) -> value of one metric."""
    return {tuple(v for _, v in labels): value for (n, labels), value in values.items() if n == name}


@pytest.fixture
def ctl() -> Iterable[OfflineController]:
    controller = OfflineController(fat_tree(4))
    yield controller
    controller.close()


def test_every_switch_has_one_mode_the_pipeline_default_until_one_is_set(ctl: OfflineController) -> None:
    exporter = fabric_metrics(ctl)
    modes = series(samples(exporter), "aifabric_lb_mode")          # (mode, switch)
    assert modes == {("ecmp", sw.name): 1 for sw in ctl.fabric.switches}
    lb = LbModes(ctl)
    lb.set("spray", ["p0e0", "p1a1"])
    lb.set("flowlet", ["c3"])
    modes = series(samples(exporter), "aifabric_lb_mode")
    expected = {sw.name: "ecmp" for sw in ctl.fabric.switches} | {"p0e0": "spray", "p1a1": "spray", "c3": "flowlet"}
    assert modes == {(mode, name): 1 for name, mode in expected.items()}


def test_te_pins_are_counted_per_switch_and_named_with_their_neighbour(ctl: OfflineController) -> None:
    exporter = fabric_metrics(ctl)
    assert set(series(samples(exporter), "aifabric_te_pins").values()) == {0}
    ports = {peer: port for port, peer in ctl.fabric.ports_of("p0e0").items()}
    agg_ports = {peer: port for port, peer in ctl.fabric.ports_of("p0a1").items()}
    TeOverrides(ctl).replace([
        Pin("p0e0", "10.0.0.2", "10.3.1.2", 17, 4000, 5001, ports["p0a1"]),
        Pin("p0e0", "10.0.0.3", "10.3.1.2", 17, 4001, 5001, ports["p0a0"]),
        Pin("p0a1", "10.0.0.2", "10.3.1.2", 17, 4000, 5001, agg_ports["c3"]),
    ])
    values = samples(exporter)
    counts = series(values, "aifabric_te_pins")
    assert counts[("p0e0",)] == 2 and counts[("p0a1",)] == 1
    assert sum(counts.values()) == 3 and len(counts) == len(ctl.fabric.switches)
    pins = series(values, "aifabric_te_pin")            # (flow, neighbor, port, switch)
    assert pins == {("10.0.0.2:4000>10.3.1.2:5001/17", "p0a1", str(ports["p0a1"]), "p0e0"): 1,
                    ("10.0.0.3:4001>10.3.1.2:5001/17", "p0a0", str(ports["p0a0"]), "p0e0"): 1,
                    ("10.0.0.2:4000>10.3.1.2:5001/17", "c3", str(agg_ports["c3"]), "p0a1"): 1}


def test_uplinks_lead_one_tier_up_and_only_up() -> None:
    fab = fat_tree(4)
    tiers = switch_tiers(fab)
    assert {tiers[sw.name] for sw in fab.switches if sw.name.startswith("c")} == {2}
    up = uplinks(fab)
    assert sorted(up["p2e1"].values()) == ["p2a0", "p2a1"]
    assert all(peer.startswith("c") for name in up if "a" in name[2:] for peer in up[name].values())
    assert not any(name.startswith("c") for name in up)           # cores have nothing above them
    assert sum(len(p) for p in up.values()) == 32                  # 8 edges and 8 aggregation switches, 2 each
    for name, ports in up.items():                                 # the ports are the fabric's, towards those peers
        assert all(fab.ports_of(name)[port] == peer for port, peer in ports.items())
    ls = uplinks(leaf_spine(3, 2, 2))
    assert {n: sorted(p.values()) for n, p in ls.items()} == {f"l{i}": ["s0", "s1"] for i in range(3)}
    assert {n: sorted(p.values()) for n, p in uplinks(rail_optimised(2, 2, 2)).items()} == {
        "r0": ["s0", "s1"], "r1": ["s0", "s1"]}
    assert uplinks(dragonfly()) == {}                              # every router has hosts: no tier above


def test_uplinks_are_served_for_the_dashboards_join(ctl: OfflineController) -> None:
    served = series(samples(fabric_metrics(ctl)), "aifabric_port_uplink")    # (neighbor, port, switch)
    assert served == {(peer, str(port), name): 1 for name, ports in uplinks(ctl.fabric).items()
                      for port, peer in ports.items()}


def test_jobs_running_with_their_trees(ctl: OfflineController) -> None:
    exporter = fabric_metrics(ctl)
    assert samples(exporter)[("aifabric_allreduce_jobs_running", ())] == 0      # no manager yet
    manager = JobManager(ctl)
    spread = manager.start(["p0e0h0", "p1e0h0", "p2e1h1"], "p3e0h0", job_id=3)
    local = manager.start(["p0e1h0", "p0e1h1"], "p3e0h1", job_id=5, in_network=False)
    values = samples(exporter)
    assert values[("aifabric_allreduce_jobs_running", ())] == 2
    assert series(values, "aifabric_allreduce_job_workers") == {
        ("0", "5", ""): 2, ("1", "3", spread.tree.root): 3}       # (in_network, job_id, root)
    fan_in = series(values, "aifabric_allreduce_tree_fan_in")     # (job_id, parent, switch)
    assert fan_in == {("3", node.parent or "", name): node.fan_in for name, node in spread.tree.nodes.items()}
    assert fan_in[("3", "", spread.tree.root)] == 3                # three pods meet at the root
    manager.end(spread)
    values = samples(exporter)
    assert values[("aifabric_allreduce_jobs_running", ())] == 1
    assert not series(values, "aifabric_allreduce_tree_fan_in")
    manager.end(local)
    assert samples(exporter)[("aifabric_allreduce_jobs_running", ())] == 0


def test_agg_ops_by_switch_and_outcome_zeros_included(ctl: OfflineController) -> None:
    exporter = fabric_metrics(ctl)
    assert not series(samples(exporter), "aifabric_agg_ops_total")      # nothing polled yet
    exporter.poller.poll_once()
    ops = series(samples(exporter), "aifabric_agg_ops_total")           # (outcome, switch)
    assert len(ops) == len(OUTCOMES) * len(ctl.fabric.switches)
    assert ops[("consumed", "p0e0")] == 12 and ops[("partial_up", "p0e0")] == 4
    assert ops[("dup_resent_up", "p0e0")] == 1
    assert ops[("completed", "c1")] == 4 and ops[("dup_answered", "c1")] == 2
    assert sum(ops.values()) == sum(sum(c.values()) for c in AGG_CELLS.values())
    assert exporter.poller.errors == 0
