"""The P4Runtime entities of the traffic classes on one switch (p4src/include/control/
traffic_class.p4, ecn.p4): each class's DSCPs in ``dscp_class``, and a class's own ECN thresholds
on every data port of the switch in ``ecn_class_config``."""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from controller import entries as E
from controller.lossless.config import LosslessConfig
from controller.p4info import P4Info
from controller.p4names import Action, Table
from topologies.fabric import Fabric

DSCP_CLASS = Table.TRAFFIC_CLASS_DSCP_CLASS
SET_CLASS = Action.TRAFFIC_CLASS_SET_CLASS
ECN_CLASS_CONFIG = Table.ECN_ECN_CLASS_CONFIG
ECN_SET_THRESHOLDS = Action.ECN_SET_THRESHOLDS
OWNED_TABLES = (DSCP_CLASS, ECN_CLASS_CONFIG)


def class_entities(p4info: P4Info, fabric: Fabric, switch: str, config: LosslessConfig) -> list[p4runtime_pb2.Entity]:
    out = [E.entity(p4info.table_entry(DSCP_CLASS, {"dscp": dscp}, action=SET_CLASS, params={"tc": tc}))
           for dscp, tc in sorted(config.dscp_class().items())]
    for c in config.classes:
        if c.ecn is None:
            continue
        for port in sorted(fabric.ports_of(switch)):
            out.append(E.entity(p4info.table_entry(
                ECN_CLASS_CONFIG, {"egress_port": port, "priority": c.priority}, action=ECN_SET_THRESHOLDS,
                params={"kmin": c.ecn.kmin, "kmax": c.ecn.kmax, "pmax": c.ecn.pmax_fixed})))
    return out
