"""Start and end aggregation jobs on a running fabric.

`JobManager(controller)` registers itself as a state source of the `FabricController`: a job's
entries become part of every tree switch's desired state, so they are reconciled like routes
(also after a switch restarts). `start()` installs them before it returns the `Job`, whose
`worker_config()` is what each worker's `hostagent.collectives.aggregation` client needs.

A job chooses its frame_values, the values every one of its packets carries: whole blocks of
AGG_BLOCK_VALUES (64, SwitchML's packet, the default) up to AGG_MAX_BLOCKS (5: 320 values, the
most a 1500-byte MTU holds). A frame of B blocks takes B slots of the pool (each 64 values): a
window of `slots` frames takes slots x B, consecutive, and the switches refuse a packet of
another size than the job's.

A job whose slot request cannot be met (the pool is full) still runs: it gets no switch entries
and its packets are routed to its fallback aggregator, the parameter-server process on
``aggregator``; `Job.in_network` says which.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Sequence

from p4.v1 import p4runtime_pb2

from controller.aggregation import entries as AE
from controller.aggregation.pool import SlotPool
from controller.aggregation.tree import MAX_CHILDREN, AggregationTree, choose_tree
from controller.p4names import AGG_BLOCK_VALUES, AGG_MAX_BLOCKS

log = logging.getLogger(__name__)

MAX_JOBS = 256           # p4src: AGG_JOBS_TABLE_SIZE; job ids 0..255
DEFAULT_SLOTS = 32       # a job's window: chunks in flight per worker
EPOCH_BITS = 16
FRAME_VALUES = tuple(AGG_BLOCK_VALUES * b for b in range(1, AGG_MAX_BLOCKS + 1))   # 64, 128, ..., 320
DEFAULT_FRAME_VALUES = AGG_BLOCK_VALUES                                            # SwitchML's 64


class JobError(ValueError):
    """A job request that cannot be honoured; the message says what was wrong."""


@dataclass(frozen=True)
class Job:
    job_id: int
    epoch: int
    workers: tuple[str, ...]          # host names, rank order
    aggregator: str                   # host of the fallback aggregator (parameter server)
    aggregator_ip: str
    slots: int                        # the workers' window (frames in flight per worker)
    slot_base: int | None             # the first pool slot; None: not aggregated in the network
    tree: AggregationTree | None
    wire_ids: dict[str, int] = field(default_factory=dict)   # host -> worker_id on the wire
    frame_values: int = DEFAULT_FRAME_VALUES                  # values per packet

    @property
    def in_network(self) -> bool:
        return self.tree is not None

    @property
    def pool_slots(self) -> int:
        """The pool slots (64 values each) the job's window takes: slots x blocks per frame."""
        return pool_slots(self.slots, self.frame_values)

    def worker_config(self, host: str) -> dict[str, object]:
        """The parameters of ``host``'s allreduce client."""
        return {"job_id": self.job_id, "slots": self.slots, "frame_values": self.frame_values,
                "worker_id": self.wire_ids[host], "num_workers": len(self.workers),
                "rank": self.workers.index(host), "aggregator": self.aggregator_ip}


def pool_slots(slots: int, frame_values: int) -> int:
    """Pool slots of a window of ``slots`` frames of ``frame_values`` values."""
    return slots * (frame_values // AGG_BLOCK_VALUES)


class JobManager:
    """Jobs on the switches of one `FabricController` (thread-safe)."""

    def __init__(self, controller, pool: SlotPool | None = None) -> None:
        self.controller = controller
        self.pool = pool or SlotPool()
        self.jobs: dict[int, Job] = {}
        self._epoch = 0
        self._used_ids: set[int] = set()    # job ids ever given: their groups stay owned (deleted when ended)
        self._lock = threading.Lock()
        controller.add_state_source(self)

    # --- state source (FabricController) -------------------------------------------------
    def owned(self, switch: str) -> set[tuple]:
        p4info = self.controller.pipeline.p4info
        keys = {("table", p4info.table_id(AE.AGG_JOBS)), ("table", p4info.table_id(AE.AGG_RESULT_DST))}
        with self._lock:
            used = sorted(self._used_ids)
        return keys | {AE.multicast_owner_key(j) for j in used}

    def entities(self, switch: str) -> list[p4runtime_pb2.Entity]:
        p4info, fabric = self.controller.pipeline.p4info, self.controller.fabric
        groups, tables = [], []
        with self._lock:             # jobs may start in other threads meanwhile
            jobs = list(self.jobs.values())
        for job in jobs:
            node = job.tree.nodes.get(switch) if job.tree else None
            if node is None:
                continue
            groups.append(AE.job_group(node, job.job_id))
            tables.append(AE.job_entry(p4info, fabric, node, job_id=job.job_id, epoch=job.epoch,
                                       slot_base=job.slot_base, slot_count=job.slots,
                                       frame_values=job.frame_values))
        if tables:
            tables += AE.result_destinations(p4info, fabric, switch)
        return [*groups, *tables]

    # --- jobs ----------------------------------------------------------------------------
    def start(self, workers: Sequence[str], aggregator: str, *, slots: int = DEFAULT_SLOTS,
              frame_values: int = DEFAULT_FRAME_VALUES, in_network: bool = True,
              job_id: int | None = None) -> Job:
        """Put a job on the fabric; returns once every tree switch has its entries. ``slots``:
        the workers' window in frames; ``frame_values``: the values a frame carries (FRAME_VALUES)."""
        fabric = self.controller.fabric
        hosts = self._check(workers, aggregator, slots, frame_values)
        needed = pool_slots(slots, frame_values)
        with self._lock:
            job_id = self._job_id(job_id)
            self._epoch = self._epoch % ((1 << EPOCH_BITS) - 1) + 1     # 1 .. 65535, never 0
            base = self.pool.allocate(needed) if in_network else None
            if in_network and base is None:
                log.warning("job %d: the slot pool is full (%d free, %d wanted); it runs on the aggregator %s",
                            job_id, self.pool.free_slots, needed, aggregator)
            tree = choose_tree(self.controller.model, hosts, salt=job_id) if base is not None else None
            wire_ids = dict(tree.worker_ids) if tree else {h: i for i, h in enumerate(workers)}
            job = Job(job_id, self._epoch, tuple(workers), aggregator, str(fabric.host(aggregator).ip4.ip),
                      slots, base, tree, wire_ids, frame_values)
            self.jobs[job_id] = job
            self._used_ids.add(job_id)
        if tree is not None:
            log.info("job %d: %d workers, %d-value frames, pool slots %d..%d, tree %s", job_id, len(workers),
                     frame_values, base, base + needed - 1, tree.describe())
            self.controller.apply_now(tree.nodes)
        return job

    def end(self, job: Job) -> None:
        """Remove the job's entries and give its slots back."""
        with self._lock:
            if self.jobs.pop(job.job_id, None) is None:
                raise JobError(f"job {job.job_id} is not running")
            if job.slot_base is not None:
                self.pool.free(job.slot_base)
        if job.tree is not None:
            self.controller.apply_now(job.tree.nodes)

    def running(self) -> list[Job]:
        """The jobs on the fabric now, by job id."""
        with self._lock:
            return sorted(self.jobs.values(), key=lambda j: j.job_id)

    def _job_id(self, wanted: int | None) -> int:
        if wanted is not None:
            if not 0 <= wanted < MAX_JOBS:
                raise JobError(f"job id {wanted}: must be in 0..{MAX_JOBS - 1}")
            if wanted in self.jobs:
                raise JobError(f"job id {wanted} is already running")
            return wanted
        free = [j for j in range(MAX_JOBS) if j not in self.jobs]
        if not free:
            raise JobError(f"{MAX_JOBS} jobs are running already; end one first")
        return free[0]

    def _check(self, workers: Sequence[str], aggregator: str, slots: int, frame_values: int):
        fabric = self.controller.fabric
        known = {h.name for h in fabric.hosts}
        unknown = [w for w in [*workers, aggregator] if w not in known]
        if unknown:
            raise JobError(f"unknown host(s) {', '.join(unknown)}; {fabric.describe()} has "
                           f"{', '.join(sorted(known)[:4])}, ...")
        if len(set(workers)) != len(workers):
            raise JobError(f"a worker is named twice in {', '.join(workers)}")
        if len(workers) < 2:
            raise JobError(f"a job needs at least 2 workers, got {len(workers)}")
        if len(workers) > MAX_CHILDREN:
            raise JobError(f"{len(workers)} workers: a job holds at most {MAX_CHILDREN} "
                           f"(the width of the aggregators' contributor bitmap)")
        if aggregator in workers:
            raise JobError(f"the fallback aggregator {aggregator} cannot also be a worker")
        if isinstance(frame_values, bool) or not isinstance(frame_values, int) or frame_values not in FRAME_VALUES:
            raise JobError(f"frame_values={frame_values!r}: must be a multiple of {AGG_BLOCK_VALUES} in "
                           f"{FRAME_VALUES[0]}..{FRAME_VALUES[-1]} ({', '.join(map(str, FRAME_VALUES))})")
        most = self.pool.size // (frame_values // AGG_BLOCK_VALUES)
        if not 1 <= slots <= most:
            raise JobError(f"slots={slots}: must be in 1..{most} ({self.pool.size} pool slots, "
                           f"{frame_values // AGG_BLOCK_VALUES} a {frame_values}-value frame)")
        return [fabric.host(w) for w in workers]
