"""P4Runtime entities that put aggregation jobs on a switch (p4src/README.md, "In-network
aggregation"; the P4Info names from `controller.p4names`):

* ``agg_jobs``: job id -> ``aggregate_root`` / ``aggregate_child`` with the job's epoch, slot
  range (its first pool slot, its window in frames), frame size in values, the switch's fan-in,
  its multicast group and, below the root, the way up;
* a multicast group per job (``AGG_GROUP_BASE + job id``): one replica per child port;
* ``agg_result_dst``: every worker-facing port of the switch -> ``to_worker(switch MAC, host MAC,
  host IPv4)``, so results leave addressed to the worker.
"""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from controller.entries import entity
from controller.p4info import P4Info
from controller.p4names import Action, Counter, Table
from controller.aggregation.tree import TreeNode
from topologies.fabric import Fabric

AGG_JOBS = Table.AGGREGATION_AGG_JOBS
AGGREGATE_ROOT = Action.AGGREGATION_AGGREGATE_ROOT
AGGREGATE_CHILD = Action.AGGREGATION_AGGREGATE_CHILD
AGG_RESULT_DST = Table.AGGREGATION_AGG_RESULT_DST
TO_WORKER = Action.AGGREGATION_TO_WORKER
AGG_OPS = Counter.AGGREGATION_AGG_OPS
AGG_GROUP_BASE = 0x1000   # multicast group of job j: AGG_GROUP_BASE + j (clear of other groups)

# p4src/include/define.p4: AGG_OUTCOME_* (indices of the agg_ops counter)
OUTCOMES = ("consumed", "completed", "partial_up", "result_down", "dup_answered",
            "dup_resent_up", "dup_dropped", "refused")


def group_id(job_id: int) -> int:
    return AGG_GROUP_BASE + job_id


def job_entry(p4info: P4Info, fabric: Fabric, node: TreeNode, *, job_id: int, epoch: int,
              slot_base: int, slot_count: int, frame_values: int) -> p4runtime_pb2.Entity:
    params: dict[str, object] = {"epoch": epoch, "slot_base": slot_base, "slot_count": slot_count,
                                 "frame_values": frame_values, "fan_in": node.fan_in, "group": group_id(job_id)}
    if node.is_root:
        action = AGGREGATE_ROOT
    else:
        action = AGGREGATE_CHILD
        params.update(parent_port=node.parent_port, index_at_parent=node.index_at_parent,
                      own_mac=fabric.switch(node.switch).mac, parent_mac=fabric.switch(node.parent).mac)
    return entity(p4info.table_entry(AGG_JOBS, {"job_id": job_id}, action=action, params=params))


def job_group(node: TreeNode, job_id: int) -> p4runtime_pb2.Entity:
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    group = pre.multicast_group_entry
    group.multicast_group_id = group_id(job_id)
    for child in node.children:
        group.replicas.add(egress_port=child.port, instance=1)
    return entity(pre)


def result_destinations(p4info: P4Info, fabric: Fabric, switch: str) -> list[p4runtime_pb2.Entity]:
    """``agg_result_dst`` for every host port of ``switch`` (the same for every job)."""
    mac = fabric.switch(switch).mac
    return [entity(p4info.table_entry(AGG_RESULT_DST, {"egress_port": h.port}, action=TO_WORKER,
                                      params={"smac": mac, "dmac": h.mac, "ipv4": str(h.ip4.ip)}))
            for h in sorted(fabric.hosts_of(switch), key=lambda h: h.port)]


def multicast_owner_key(job_id: int) -> tuple:
    return ("packet_replication_engine_entry", "multicast", group_id(job_id))
