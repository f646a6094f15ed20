"""controller.lossless without a fabric: classes checked, their P4Runtime entities, the commands
each target gets (and BMv2 refused, saying why PFC needs softswitch), lossless classes chosen per
job, the Prometheus families and the live page's paused links from a poller's figures."""
from __future__ import annotations

import json

import pytest

from controller.fabric_controller import Pipeline
from controller.lossless import (CallableControl, ClassPoller, Lossless, LosslessCollector, LosslessConfig,
                                 PfcThresholds, TrafficClass, Unsupported, WatchdogConfig, paused_ports)
from controller.lossless.entries import class_entities
from controller.telemetry.entries import EcnThresholds
from controller.web.state import paused_json
from controller.web.topology import directions
from topologies.fabric import fat_tree

PFC = PfcThresholds(xoff=30_000, xon=15_000, headroom=20_000, quanta=8000)
RDMA = TrafficClass(3, (26,), "rdma", depth=512, ecn=EcnThresholds(5, 5, 1.0), pfc=PFC)
STORAGE = TrafficClass(1, (10, 12), "storage", weight=1, bitrate=5_000_000)
CONFIG = LosslessConfig((RDMA, STORAGE), watchdog=WatchdogConfig(200, 400, 20, "drop"))


@pytest.mark.parametrize("make, words", [
    (lambda: TrafficClass(7, (1,)), "priority 7 is not a data class"),
    (lambda: TrafficClass(2, (33,)), "DSCP [33] outside 0..31"),
    (lambda: PfcThresholds(1000, 1000, 0), "need 0 <= XON < XOFF"),
    (lambda: LosslessConfig((RDMA, TrafficClass(3, (4,)))), "a priority given twice"),
    (lambda: LosslessConfig((RDMA, TrafficClass(2, (26,)))), "a DSCP in two classes"),
    (lambda: LosslessConfig((RDMA, STORAGE), lossless=frozenset({1})), "class 1 (storage) cannot be lossless"),
    (lambda: WatchdogConfig(0, 10), "need detection and polling >= 1 ms"),
])
def test_bad_classes_are_named(make, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]").replace(".", r"\.")):
        make()


def test_the_entities_map_dscps_and_give_a_class_its_ecn_on_every_port():
    fabric = fat_tree(4)
    p4info = Pipeline.from_build_dir().p4info
    got = class_entities(p4info, fabric, "p0e0", CONFIG)
    dscps = [e for e in got if e.table_entry.table_id == p4info.table_id("FabricIngress.traffic_class.dscp_class")]
    ecn = [e for e in got if e.table_entry.table_id == p4info.table_id("FabricEgress.ecn.ecn_class_config")]
    assert len(dscps) == 3 and len(ecn) == len(fabric.ports_of("p0e0")) == 4


class FakeController:
    def __init__(self):
        self.fabric = fat_tree(4)
        self.pipeline = Pipeline.from_build_dir()
        self.sources, self.recomputed = [], 0

    def add_state_source(self, s):
        self.sources.append(s)

    def recompute(self):
        self.recomputed += 1


def test_every_switch_gets_its_queues_and_the_classes_jobs_chose_lossless():
    sent: dict[str, list[str]] = {}
    runtime = CallableControl(lambda sw, line: sent.setdefault(sw, []).append(line) or "ok", lambda sw: "softswitch")
    ctl = FakeController()
    lossless = Lossless(ctl, CONFIG, runtime)
    lossless.apply()
    assert ctl.sources == [lossless] and ctl.recomputed == 1 and len(sent) == 20
    edge = sent["p0e0"]
    assert "set_queue_depth 512 1 3" in edge and "set_queue_weight 1 4 1" in edge and "set_queue_bitrate 5000000 2 1" in edge
    assert edge[-3:] == ["clear_lossless 3", "clear_lossless 1", "set_pfc_watchdog 200 400 20 drop"]
    sent.clear()
    lossless.use("job-1", {3})
    lossless.use("job-2", {3})
    assert sent["c0"] == ["set_lossless 3 30000 15000 20000 8000", "clear_lossless 1", "set_pfc_watchdog 200 400 20 drop"]
    lossless.release("job-1")
    assert lossless.lossless == {3}                       # job-2 still wants it
    lossless.release("job-2")
    assert lossless.lossless == set() and sent["c0"][-3] == "clear_lossless 3"
    with pytest.raises(ValueError, match="class 1 .storage. cannot be lossless"):
        lossless.use("job-3", {1})


def test_bmv2_is_refused_pfc_saying_it_needs_softswitch():
    runtime = CallableControl(lambda sw, line: "", lambda sw: "bmv2")
    lossless = Lossless(FakeController(), LosslessConfig((RDMA,), lossless=frozenset({3})), runtime)
    with pytest.raises(Unsupported, match="PFC needs softswitch: BMv2's simple_switch has no priority flow control"):
        lossless.apply()
    weights = Lossless(FakeController(), LosslessConfig((STORAGE,)), runtime)
    with pytest.raises(Unsupported, match="class 1 .storage.: BMv2 serves its priority queues by strict priority"):
        weights.apply()


def _classes(paused=(), pausing=(), storm=False) -> dict:
    ports = {}
    for port in (1, 2, 3, 4):
        ports[str(port)] = {"classes": [{"priority": 3, "tx_packets": 10 * port, "tx_bytes": 1000 * port, "drops": 0,
                                         "lossless_drops": 0, "watchdog_drops": 0, "occupancy": 0,
                                         "pause_sent": port, "xon_sent": 1, "pause_received": 2, "xon_received": 0,
                                         "paused_us": 1500.0, "pausing_us": 500.0, "paused": port in paused,
                                         "pausing": port in pausing, "buffer_bytes": 0, "buffer_peak": 9000,
                                         "storms": int(storm), "restores": 0, "storm": storm}],
                            "malformed": {"short": 2} if port == 4 else {}}
    return {"ports": ports}


def test_the_poller_feeds_prometheus_and_the_pages_paused_links():
    fabric = fat_tree(4)
    views = {"p0e0": _classes(paused=(3,)), "p0a0": _classes(pausing=(1,), storm=True)}
    runtime = CallableControl(lambda sw, line: json.dumps(views[sw]), lambda sw: "softswitch" if sw in views else "bmv2")
    poller = ClassPoller(runtime, [sw.name for sw in fabric.switches])
    poller.poll_once()
    families = {f.name: f for f in LosslessCollector(poller).collect()}
    sent = {tuple(s.labels.values()): s.value for s in families["aifabric_pfc_pause_frames_sent"].samples
            if s.name.endswith("_total")}
    assert sent[("p0e0", "2", "3")] == 2
    paused_s = [s.value for s in families["aifabric_pfc_paused_seconds"].samples if s.name.endswith("_total")]
    assert paused_s and all(v == pytest.approx(0.0015) for v in paused_s)
    assert [s.labels for s in families["aifabric_mac_control_malformed"].samples if s.name.endswith("_total")] == \
        [{"switch": "p0a0", "port": "4", "reason": "short"}, {"switch": "p0e0", "port": "4", "reason": "short"}]
    ports = paused_ports(poller.snapshot())
    assert ports == {("p0e0", 3): {"paused": [3], "pausing": []}, ("p0a0", 1): {"paused": [], "pausing": [3]}}
    dirs = directions(fabric)
    held = paused_json(ports, dirs)
    # p0e0 may not send out of port 3; p0a0 holds the neighbour on its port 1 (p0e0) in class 3
    by_id = {d.id: d for d in dirs}
    assert {(by_id[i].src, by_id[i].dst) for i in held} == {("p0e0", fabric.ports_of("p0e0")[3]), ("p0e0", "p0a0")}
    assert set(map(tuple, held.values())) == {(3,)}
