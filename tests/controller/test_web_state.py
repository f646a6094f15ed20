"""The live page's state building (controller.web): the topology by tier, each link direction's
load from the right counter against the right rate, INT queues and paths on the right directions,
TE pins as ordered paths, failures, AllReduce jobs' trees and progress; all on the real
descriptions, trees, INT decoder and controller objects, without a fabric."""
from __future__ import annotations

import pytest

from controller.aggregation import Job, choose_tree
from controller.failover.localise import down_links, fabric_links, localise
from controller.fabric_controller import FabricController, Pipeline, PortCounter
from controller.load_balance import Pin
from controller.metrics import PortRates
from controller.telemetry.int_collector import IntCollector
from controller.telemetry.int_report import HopRecord, group_header, individual_report, int_md_stack
from controller.topology import TopologyModel
from controller.web.jobs import JobWatch
from controller.web.loads import LinkRates, direction_loads
from controller.web.state import FabricView, failures_json, flow_json, queues_json, te_paths_json
from controller.web.topology import directions, topology_json
from topologies.ai_fabrics import dual_plane, rail_optimised
from topologies.fabric import fat_tree


def test_every_switch_host_and_link_direction_is_drawn_by_tier():
    fab = fat_tree(4)
    topo = topology_json(fab)
    assert topo["tiers"] == ["core", "aggregation", "edge", "hosts"]
    nodes = {n["id"]: n for n in topo["nodes"]}
    assert set(nodes) == {s.name for s in fab.switches} | {h.name for h in fab.hosts}
    tier = {"core": 0, "aggregation": 1, "edge": 2}
    for sw in fab.switches:
        assert nodes[sw.name]["tier"] == tier[sw.role.value]
        assert nodes[sw.name]["group"] == (f"pod {sw.pod}" if sw.pod is not None else None)
    assert {(d["src"], d["dst"]) for d in topo["directions"]} == \
        {(ln.a, ln.b) for ln in fab.links} | {(ln.b, ln.a) for ln in fab.links}
    assert len(topo["directions"]) == 2 * len(fab.links) == 96
    # a tier is one row; nodes of a row do not overlap; a host sits under the half of the row its switch is in
    for t in range(4):
        xs = sorted(n["x"] for n in topo["nodes"] if n["tier"] == t)
        assert len({n["y"] for n in topo["nodes"] if n["tier"] == t}) == 1
        assert all(b - a >= 50 for a, b in zip(xs, xs[1:]))
    for h in fab.hosts:
        assert abs(nodes[h.name]["x"] - nodes[h.switch]["x"]) < 200


def test_ai_shapes_are_drawn_with_rails_and_planes():
    rail = {n["id"]: n for n in topology_json(rail_optimised(2, 2, 2))["nodes"]}
    assert rail["r1"]["group"] == "rail 1" and rail["s1g1"]["group"] == "rail 1"
    dual = topology_json(dual_plane(2, 1, 2))
    assert dual["tiers"] == ["spine", "leaf", "hosts"]
    groups = {n["id"]: n["group"] for n in dual["nodes"]}
    assert groups["p0l0"] == "plane 0" and groups["p1s0"] == "plane 1"


def _rates(pps: float, bps: float) -> PortRates:
    return PortRates(0, 0, 0, pps, bps)


def test_a_direction_is_measured_at_its_sending_port_against_that_ports_rate():
    fab = fat_tree(4)
    dirs = directions(fab)
    switches = {s.name for s in fab.switches}
    up = next(d for d in dirs if (d.src, d.dst) == ("p0e0", "p0a0"))
    from_host = next(d for d in dirs if (d.src, d.dst) == ("p0e0h0", "p0e0"))
    egress = {("p0e0", up.port): _rates(300.0, 30_000.0)}
    ingress = {("p0e0", from_host.dst_port): _rates(50.0, 125_000_000.0)}
    rates = LinkRates(queue_pps={("p0e0", up.port): 600.0})
    loads = direction_loads(dirs, switches, egress, ingress, rates)
    assert loads[up.id] == {"pps": 300.0, "bps": 240_000, "util": 0.5, "basis": "queue_rate"}
    assert loads[from_host.id]["util"] == 1.0 and loads[from_host.id]["basis"] == "nominal"   # 1 Gbit/s of 1 Gbit/s
    # directions no counter was read for are unknown, not idle
    assert set(loads) == {up.id, from_host.id}


def _report(sequence: int, queue_at_c0: int) -> bytes:
    """p0e0h0 -> p2e0h0 through p0e0 (device 1), p0a0 (3), c0 (17): one INT report from c0's sink."""
    path = [HopRecord(switch_id=1, ingress_port=1, egress_port=3, hop_latency_us=15, queue_id=0, queue_occupancy=0),
            HopRecord(switch_id=3, ingress_port=1, egress_port=3, hop_latency_us=40, queue_id=0, queue_occupancy=2),
            HopRecord(switch_id=17, ingress_port=1, egress_port=3, hop_latency_us=900, queue_id=0,
                      queue_occupancy=queue_at_c0)]
    inner = bytes.fromhex("4582") + (20 + 8 + 16 + 3 * 32).to_bytes(2, "big") + bytes(4) + bytes([64, 17, 0, 0])
    inner += bytes([10, 0, 0, 2, 10, 2, 0, 2]) + (40001).to_bytes(2, "big") + (4791).to_bytes(2, "big")
    inner += (8 + 16 + 3 * 32).to_bytes(2, "big") + bytes(2)
    return group_header(17, sequence) + individual_report(inner + int_md_stack(path))


def test_int_queues_and_the_watched_flows_path_land_on_the_right_hops():
    fab = fat_tree(4)
    names = {s.device_id: s.name for s in fab.switches}
    collector = IntCollector(port=0)
    for seq, q in enumerate([7, 30, 4], start=1):
        assert collector.ingest(_report(seq, q)) == 1
    snap = collector.snapshot()
    queues = queues_json(snap.ports, names, directions(fab))
    c0_out = f"c0>{fab.ports_of('c0')[3]}"
    assert queues[c0_out] == {"queue": 4, "queue_peak": 30, "latency_us": 900, "latency_peak_us": 900}
    assert queues[f"p0a0>{fab.ports_of('p0a0')[3]}"]["queue"] == 2
    flow = flow_json(next(iter(snap.flows.values())), names, snap.taken)
    assert flow["flow"] == "udp 10.0.0.2:40001 -> 10.2.0.2:4791" and flow["reports"] == 3
    assert [(h["switch"], h["egress_port"], h["latency_us"], h["queue"]) for h in flow["hops"]] == \
        [("p0e0", 3, 15, 0), ("p0a0", 3, 40, 2), ("c0", 3, 900, 4)]


def test_te_pins_are_drawn_as_one_path_per_flow_in_path_order():
    fab = fat_tree(4)
    port_to = {sw: {n: p for p, n in fab.ports_of(sw).items()} for sw in ("p0e0", "p0a1", "c2")}
    flow = ("10.0.0.2", "10.2.0.2", 17, 40000, 5001)
    pins = [Pin("c2", *flow, port_to["c2"]["p2a1"]), Pin("p0e0", *flow, port_to["p0e0"]["p0a1"]),
            Pin("p0a1", *flow, port_to["p0a1"]["c2"])]
    [path] = te_paths_json(fab, pins)
    assert path == {"flow": "udp 10.0.0.2:40000 -> 10.2.0.2:5001",
                    "hops": [["p0e0", "p0a1"], ["p0a1", "c2"], ["c2", "p2a1"]]}


def test_failures_are_shown_as_failure_handling_localised_them():
    fab = fat_tree(4)
    links = fabric_links(TopologyModel(fab))

    class Seen:       # what a running FailureHandler answers, from the real localisation
        dead = {("p0a0", 3), ("c0", 1)}

        def failures(self):
            return localise(links, down_links(links, self.dead))

        def dead_ports(self):
            return set(self.dead)

    shown = failures_json(Seen(), [("c0", "p0a0")], {"links": [["c0", "p0a0"]], "switches": []})
    assert shown["handling"] is True
    assert shown["detected"]["failures"] == [{"kind": "link", "name": "c0-p0a0", "links": ["c0-p0a0"]}]
    assert shown["detected"]["dead_ports"] == [["c0", 1], ["p0a0", 3]]
    assert shown["routed_around"] == [["c0", "p0a0"]]
    assert failures_json(None, [], None) == {"handling": False, "detected": None, "routed_around": [], "injected": None}


class RootCounters:
    """agg_ops of a root switch: ``completed`` grows as the test says; a switch can be made unreadable."""

    def __init__(self) -> None:
        self.completed: dict[str, int] = {}
        self.down: set[str] = set()

    def __call__(self, switch: str, counter: str) -> dict[int, PortCounter]:
        if switch in self.down:
            raise ConnectionError(f"{switch} does not answer")
        return {1: PortCounter(self.completed.get(switch, 0), 0), 0: PortCounter(999, 0)}


def _job(fab, job_id: int, workers: list[str]) -> Job:
    tree = choose_tree(TopologyModel(fab), [fab.host(w) for w in workers], salt=job_id)
    return Job(job_id, 1, tuple(workers), "p3e1h1", "10.3.1.3", 32, 0, tree, dict(tree.worker_ids))


def test_a_jobs_tree_and_the_chunks_its_root_completed_since_it_was_seen():
    fab = fat_tree(4)
    job = _job(fab, 0, ["p0e0h0", "p1e0h0", "p2e0h0"])
    counters, now = RootCounters(), [0.0]
    counters.completed[job.tree.root] = 500        # earlier jobs' chunks: not this one's
    watch = JobWatch(counters, clock=lambda: now[0], keep_ended_s=10)
    [first] = watch.update({0: job})
    assert first["state"] == "running" and first["chunks_completed"] == 0 and first["root"] == job.tree.root
    edges = {tuple(e) for e in first["tree_edges"]}
    assert {("p0e0h0", "p0e0"), ("p1e0h0", "p1e0"), ("p2e0h0", "p2e0")} <= edges
    assert all(parent in job.tree.nodes for _child, parent in edges)
    assert len(edges) == sum(n.fan_in for n in job.tree.nodes.values())
    counters.completed[job.tree.root] = 540
    now[0] = 1.0
    assert watch.update({0: job})[0]["chunks_completed"] == 40
    counters.completed[job.tree.root] = 564       # the last chunks, read once the job has ended
    now[0] = 2.0
    [ended] = watch.update({})
    assert ended["state"] == "ended" and ended["chunks_completed"] == 64 and ended["seconds"] == 2.0
    now[0] = 13.0
    assert watch.update({}) == []


def test_an_unreadable_root_is_counted_and_keeps_the_last_progress():
    fab = fat_tree(4)
    job = _job(fab, 1, ["p0e0h0", "p0e1h0"])
    counters = RootCounters()
    watch = JobWatch(counters)
    watch.update({1: job})
    counters.completed[job.tree.root] = 8
    assert watch.update({1: job})[0]["chunks_completed"] == 8
    counters.down.add(job.tree.root)
    assert watch.update({1: job})[0]["chunks_completed"] == 8
    assert watch.read_errors == {job.tree.root: 1} and "does not answer" in watch.last_error


@pytest.fixture
def controller():
    ctl = FabricController(fat_tree(4), Pipeline.from_build_dir(), connect_timeout=0.2)
    yield ctl
    ctl.close()


def test_the_view_reads_the_controllers_features(controller):
    from controller.aggregation import JobManager
    from controller.load_balance import LbModes, TeOverrides

    view = FabricView(controller)
    state = view.snapshot()
    assert set(state["switches"]) == {s.name for s in controller.fabric.switches}
    assert state["switches"]["c0"] == {"connected": False, "in_sync": False, "last_error": None,
                                       "lb_mode": "ecmp", "lb_mode_set": False}
    assert state["jobs"] is None and state["te_paths"] is None and state["flows"] is None
    assert state["failures"]["handling"] is False
    modes = LbModes(controller)
    modes._modes["p0a0"] = ("spray", 0)      # what set() records before it writes the switches
    TeOverrides(controller)
    JobManager(controller)
    controller.model.set_link_up("c0", "p0a0", False)
    state = view.snapshot()
    assert state["switches"]["p0a0"]["lb_mode"] == "spray" and state["switches"]["p0a0"]["lb_mode_set"]
    assert state["te_paths"] == [] and state["jobs"] == []
    assert state["failures"]["routed_around"] == [["c0", "p0a0"]]
    assert state["seq"] == 2


def test_a_port_read_unused_is_idle_and_a_switch_not_read_is_unknown():
    from controller.web.loads import LinkLoads

    fab = fat_tree(4)

    def read(switch: str, counter: str) -> dict[int, PortCounter]:
        if switch == "p1e0":
            raise ConnectionError("p1e0 does not answer")
        return {}                                     # nothing sent anywhere: no cell is non-zero

    loads = LinkLoads(read, {s.name: fab.ports_of(s.name) for s in fab.switches})
    for poller in (loads.egress, loads.ingress):
        poller.poll_once()
        poller.poll_once()
    shown = loads.loads(directions(fab), {s.name for s in fab.switches})
    assert shown["p0e0>p0a0"] == {"pps": 0.0, "bps": 0, "util": 0.0, "basis": "nominal"}
    assert shown["p0e0h0>p0e0"]["util"] == 0.0
    assert not [d for d in shown if d.startswith("p1e0>") or d.endswith(">p1e0") and d.startswith("p1e0h")]
    assert loads.errors["egress_port_counter"]["count"] == 2 and "does not answer" in loads.errors["egress_port_counter"]["last"]
