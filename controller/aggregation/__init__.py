"""In-network aggregation jobs (SwitchML's protocol, ATP's jobs and trees) on the fabric.

* `tree`: the aggregation tree of a job on the topology model (which switches add, who their
  children are, where partial sums go);
* `pool`: the switches' slot pool, handed out in disjoint ranges;
* `entries`: the P4Runtime entities that put a job on a switch;
* `manager`: `JobManager`, which starts and ends jobs on a running `FabricController`.

The data plane is p4src/include/control/aggregation.p4; the hosts' side is hostagent.collectives.aggregation.
"""
from controller.aggregation.manager import Job, JobError, JobManager
from controller.aggregation.pool import SlotPool
from controller.aggregation.tree import AggregationTree, TreeNode, choose_tree

__all__ = ["AggregationTree", "Job", "JobError", "JobManager", "SlotPool", "TreeNode", "choose_tree"]
