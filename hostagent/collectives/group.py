"""`ProcessGroup`: the one entry point of the collectives library.

    pg = ProcessGroup(rank, peers=[("10.0.0.1", 47000), ...])
    pg = ProcessGroup.from_rendezvous("10.0.0.1:29500", rank, world_size)   # or the ranks meet at a store
    total = pg.all_reduce(x)                       # algo="auto": chosen by size and topology
    work = pg.all_gather(x, async_op=True); ...; parts = work.wait()

Calls run one at a time, in the order they were made, on the group's own thread (asynchronous
handles let the caller compute meanwhile); every rank must make the same calls in the same order,
as with MPI or NCCL. Each call first agrees on a small header with every rank (headers.agree), then
runs its algorithm over the reliable UDP transport. A call returns the right result or raises
CollectiveError on every rank within its deadline, naming the cause: Mismatch (sizes, dtypes or
roots differ), NonFinite (NaN/Inf for in-network float), PeerSilent (a rank that stopped: no
packet, heartbeats included, for silent_after_s), CallTimeout (a live rank that did not make the
call in time), Aborted (another rank's failure). After a failure the group is broken: later calls
raise at once.
"""

from __future__ import annotations

import enum
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hostagent.collectives import choice, in_network, rendezvous
from hostagent.collectives.algorithms import halving_doubling, hierarchical, pairwise, ring, tree
from hostagent.collectives.arrays import CODES, DTYPES, ReduceOp, dtype_name
from hostagent.collectives.headers import CallHeader, NonFinite, Refused, agree
from hostagent.collectives.links import SUBGROUP_BITS, Link, call_id, make_tag
from hostagent.collectives.host_path import open_transport
from hostagent.collectives.reliable import Aborted, CollectiveError, TransportConfig

P2P_CALL = 0  # send/recv tags live in call 0, which no collective uses
DEFAULT_TIMEOUT_S = 30.0


class Op(enum.IntEnum):
    ALL_REDUCE = 1
    REDUCE_SCATTER = 2
    ALL_GATHER = 3
    ALL_TO_ALL = 4
    BROADCAST = 5
    REDUCE = 6
    BARRIER = 7


# The algorithms each operation offers, besides "auto". reduce_scatter has no in_network: the
# aggregation program multicasts every result to all of the job's workers (a unicast to each
# block's owner would need a per-chunk owner and route in the switches), and even then each rank
# must send up the (n-1)/n of its buffer that others own - what the ring already sends, which is
# the least a host link can carry; only the upper tiers' load and the number of steps would fall.
ALGORITHMS: dict[Op, tuple[str, ...]] = {
    Op.ALL_REDUCE: ("ring", "tree", "halving_doubling", "hierarchical", "in_network"),
    Op.REDUCE_SCATTER: ("ring", "halving_doubling"),
    Op.ALL_GATHER: ("ring", "halving_doubling"),
    Op.ALL_TO_ALL: ("pairwise",),
    Op.BROADCAST: ("ring", "tree"),
    Op.REDUCE: ("ring", "tree"),
    Op.BARRIER: ("dissemination",),
}
_FAMILY = {"ring": ring, "tree": tree, "halving_doubling": halving_doubling}


class Work:
    """An asynchronous call: `wait()` returns its result or raises its error."""

    def __init__(self, operation: Op, algo: str) -> None:
        self.operation = operation
        self.algo = algo  # the algorithm that ran (auto's choice once known)
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> Any:
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.operation.name.lower()} still running after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._result


@dataclass
class _Call:
    number: int
    work: Work
    run: Callable[[Link], Any]
    timeout_s: float
    dtype: np.dtype  # of the elements the call's messages carry


class ProcessGroup:
    """Rank `rank` of len(peers) ranks; peers[r] is rank r's UDP (ip, port).

    groups: the topology's groups of ranks (e.g. per edge switch) for hierarchical algorithms;
    default: ranks whose addresses share a /24. aggregation: this rank's in-network aggregation
    job (aggregation.worker.JobConfig) if the switches run one for the group. transport: the
    reliable transport's settings (window, retransmission timeout, silence, test drops)."""

    def __init__(
        self,
        rank: int,
        peers: list[tuple[str, int]],
        *,
        group_id: int = 1,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        groups: list[list[int]] | None = None,
        aggregation: Any = None,
        transport: TransportConfig = TransportConfig(),
    ) -> None:
        self.transport = open_transport(rank, peers, group_id, transport)
        self._start(list(range(len(peers))), 0, timeout_s, groups if groups is not None else choice.groups_by_subnet(peers),
                    aggregation)

    @classmethod
    def from_rendezvous(cls, address: str, rank: int, world_size: int, *, ip: str | None = None, port: int = 47000,
                        rendezvous_timeout_s: float = rendezvous.DEFAULT_TIMEOUT_S, **kwargs: Any) -> ProcessGroup:
        """The group of the ranks that meet at the store on `address` (HOST:PORT; rank 0 runs it),
        each registering (ip, port) as its group address (rendezvous.rendezvous); kwargs as ProcessGroup's."""
        peers = rendezvous.rendezvous(address, rank, world_size, ip=ip, port=port, timeout_s=rendezvous_timeout_s)
        return cls(rank, peers, **kwargs)

    def _start(self, members: list[int], subgroup: int, timeout_s: float, groups: list[list[int]], aggregation: Any) -> None:
        """members: this group's ranks in the transport's numbering (the root group's ranks)."""
        self.members = members
        self.rank, self.world = members.index(self.transport.rank), len(members)
        self.subgroup = subgroup  # 0: the root group; its subgroups 1, 2, ... in the order they were made
        self.timeout_s = timeout_s
        self.groups = groups
        self.in_network = in_network.Backend(aggregation) if aggregation is not None else None
        self.choices: list[tuple[str, str, int]] = []  # (operation, algorithm, bytes) auto chose
        self._calls = 0
        self._subgroups: list[ProcessGroup] = []
        self._broken: str | None = None
        self._queue: queue.Queue[_Call | None] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name=f"pg{subgroup}-rank{self.rank}", daemon=True)
        self._thread.start()

    def new_group(self, ranks: list[int], *, aggregation: Any = None) -> ProcessGroup | None:
        """A group of some of this group's ranks (in this group's numbering; their order numbers
        them 0..len-1 in the new group) over the same transport, as torch.distributed.new_group:
        every rank calls it with the same ranks, in the same order of new_group calls, members or
        not; members get the new group, the others None. Its calls are numbered in a space of their
        own and run on a thread of their own, so they neither meet the parent's messages nor wait
        for its calls; a failure breaks it alone. Errors name ranks as the root group numbers them."""
        if self.subgroup:
            raise ValueError("new_group is made from the root group, which every rank is in")
        if len(set(ranks)) != len(ranks) or not ranks or not all(0 <= r < self.world for r in ranks):
            raise ValueError(f"new_group: ranks {ranks} must be distinct ranks of 0..{self.world - 1}")
        if len(self._subgroups) + 1 >= 1 << SUBGROUP_BITS:
            raise ValueError(f"new_group: at most {(1 << SUBGROUP_BITS) - 1} subgroups")
        number = len(self._subgroups) + 1
        self._subgroups.append(None)  # numbered on every rank alike, member or not
        if self.rank not in ranks:
            return None
        sub = ProcessGroup.__new__(ProcessGroup)
        sub.transport = self.transport
        inside = [[ranks.index(r) for r in g if r in ranks] for g in self.groups]
        sub._start([self.members[r] for r in ranks], number, self.timeout_s, [g for g in inside if g], aggregation)
        self._subgroups[-1] = sub
        return sub

    # --- operations ---------------------------------------------------------------------------

    def all_reduce(self, x: np.ndarray, op: str = "sum", algo: str = "auto", async_op: bool = False, timeout_s: float | None = None):
        x, rop = _flat(x), ReduceOp[op.upper()]
        algo = self._pick(Op.ALL_REDUCE, algo, x)
        nonfinite = algo == "in_network" and x.dtype.kind == "f" and not bool(np.isfinite(x).all())
        exponents = self.in_network.header_exponents(x) if algo == "in_network" and not nonfinite else b""
        header = CallHeader(Op.ALL_REDUCE, CODES[dtype_name(x)], x.size, -1, rop, nonfinite, exponents)

        def run(link: Link) -> np.ndarray:
            headers = agree(link, header)
            if algo == "in_network":
                bad = [link.members[i] for i, h in enumerate(headers) if h.nonfinite]
                if bad:
                    raise NonFinite(f"NaN or Inf in the buffers of rank(s) {bad}: in-network aggregation quantises floats and cannot carry them")
                return self.in_network.all_reduce(x, rop, [h.exponents for h in headers])
            if algo == "hierarchical":
                return hierarchical.all_reduce(link, x, rop, self.groups)
            return _FAMILY[algo].all_reduce(link, x, rop)

        return self._submit(Op.ALL_REDUCE, algo, run, async_op, timeout_s, x.dtype)

    def reduce_scatter(self, x: np.ndarray, op: str = "sum", algo: str = "auto", async_op: bool = False, timeout_s: float | None = None):
        """Rank i gets block i of the reduced vector (blocks: np.array_split into world parts)."""
        x, rop = _flat(x), ReduceOp[op.upper()]
        algo = self._pick(Op.REDUCE_SCATTER, algo, x)
        header = CallHeader(Op.REDUCE_SCATTER, CODES[dtype_name(x)], x.size, -1, rop)
        return self._submit(Op.REDUCE_SCATTER, algo, lambda link: (agree(link, header), _FAMILY[algo].reduce_scatter(link, x, rop))[1], async_op, timeout_s, x.dtype)

    def all_gather(self, x: np.ndarray, algo: str = "auto", async_op: bool = False, timeout_s: float | None = None):
        """Every rank's x (equal sizes) concatenated in rank order."""
        x = _flat(x)
        algo = self._pick(Op.ALL_GATHER, algo, x)
        header = CallHeader(Op.ALL_GATHER, CODES[dtype_name(x)], x.size)
        return self._submit(Op.ALL_GATHER, algo, lambda link: (agree(link, header), _FAMILY[algo].all_gather(link, x))[1], async_op, timeout_s, x.dtype)

    def all_to_all(self, inputs: list[np.ndarray], algo: str = "auto", async_op: bool = False, timeout_s: float | None = None):
        """inputs[j] goes to rank j, sizes may differ (uneven splits); returns what rank j sent us, for each j."""
        if len(inputs) != self.world:
            raise ValueError(f"all_to_all takes {self.world} arrays (one per rank), not {len(inputs)}")
        inputs = [_flat(a) for a in inputs]
        names = {dtype_name(a) for a in inputs}
        if len(names) != 1:
            raise ValueError(f"all_to_all's arrays have different dtypes: {sorted(names)}")
        algo = self._pick(Op.ALL_TO_ALL, algo, inputs[0])
        header = CallHeader(Op.ALL_TO_ALL, CODES[names.pop()], 0)
        return self._submit(Op.ALL_TO_ALL, algo, lambda link: (agree(link, header), pairwise.all_to_all(link, inputs))[1], async_op, timeout_s, inputs[0].dtype)

    def broadcast(self, x: np.ndarray, root: int = 0, algo: str = "auto", async_op: bool = False, timeout_s: float | None = None):
        """Root's x to everyone; the others pass a buffer of the same size and dtype."""
        x = _flat(x)
        algo = self._pick(Op.BROADCAST, algo, x)
        header = CallHeader(Op.BROADCAST, CODES[dtype_name(x)], x.size, root)
        return self._submit(Op.BROADCAST, algo, lambda link: (agree(link, header), _FAMILY[algo].broadcast(link, x, root))[1], async_op, timeout_s, x.dtype)

    def reduce(self, x: np.ndarray, root: int = 0, op: str = "sum", algo: str = "auto", async_op: bool = False, timeout_s: float | None = None):
        """The reduction on root; None on the other ranks."""
        x, rop = _flat(x), ReduceOp[op.upper()]
        algo = self._pick(Op.REDUCE, algo, x)
        header = CallHeader(Op.REDUCE, CODES[dtype_name(x)], x.size, root, rop)
        return self._submit(Op.REDUCE, algo, lambda link: (agree(link, header), _FAMILY[algo].reduce(link, x, rop, root))[1], async_op, timeout_s, x.dtype)

    def barrier(self, async_op: bool = False, timeout_s: float | None = None):
        return self._submit(Op.BARRIER, "dissemination", pairwise.barrier, async_op, timeout_s)

    def send(self, x: np.ndarray, dst: int, tag: int = 0, timeout_s: float | None = None) -> None:
        """Point to point, outside the call order: returns once the message is in flight."""
        x = _flat(x)
        data = bytes([CODES[dtype_name(x)]]) + x.tobytes()
        self.transport.send(self.members[dst], make_tag(call_id(self.subgroup, P2P_CALL), 0, tag), data,
                            time.monotonic() + (timeout_s or self.timeout_s))

    def recv(self, src: int, tag: int = 0, timeout_s: float | None = None) -> np.ndarray:
        data = self.transport.recv(self.members[src], make_tag(call_id(self.subgroup, P2P_CALL), 0, tag),
                                   time.monotonic() + (timeout_s or self.timeout_s))
        return np.frombuffer(data[1:], dtype=list(DTYPES.values())[data[0]]).copy()

    # --- bookkeeping --------------------------------------------------------------------------

    def stats(self) -> dict[str, float | str]:
        """The transport's counters (TransferStats), its send errors, the host path that runs it
        and why (host_path, host_path_reason), and the RoCEv2 framing's counters where it is on."""
        s: dict[str, float | str] = self.transport.stats.as_dict()
        s["send_errors"] = self.transport.send_errors
        s.update(self.transport.host_path_stats())
        return s

    def close(self) -> None:
        """Ends this group's calls (and its subgroups'); the root group also closes the transport."""
        for sub in self._subgroups:
            if sub is not None:
                sub.close()
        self._queue.put(None)
        self._thread.join(timeout=5.0)
        if self.in_network is not None:
            self.in_network.close()
        if self.subgroup:
            return
        try:
            self.transport.flush(time.monotonic() + 1.0)  # our last packets' acknowledgements
        except CollectiveError:
            pass  # a peer already gone; nothing left to deliver to it
        self.transport.close()

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pick(self, operation: Op, algo: str, x: np.ndarray) -> str:
        if algo == "auto":
            algo = choice.choose(operation.name.lower(), x, self.world, self.groups, self.in_network is not None)
            self.choices.append((operation.name.lower(), algo, x.nbytes))
        if algo not in ALGORITHMS[operation]:
            raise ValueError(f"{operation.name.lower()} has no algorithm {algo!r}; it has {ALGORITHMS[operation]} and 'auto'")
        if algo == "in_network" and self.in_network is None:
            raise ValueError("in_network needs the group's aggregation job (ProcessGroup(..., aggregation=JobConfig))")
        return algo

    def _submit(self, operation: Op, algo: str, run: Callable[[Link], Any], async_op: bool, timeout_s: float | None,
                dtype: np.dtype = DTYPES["float32"]):
        self._calls += 1
        work = Work(operation, algo)
        self._queue.put(_Call(self._calls, work, run, timeout_s or self.timeout_s, dtype))
        return work if async_op else work.wait()

    def _serve(self) -> None:
        while (call := self._queue.get()) is not None:
            work = call.work
            try:
                if self._broken:
                    raise CollectiveError(f"the group is broken by an earlier failure: {self._broken}")
                deadline = time.monotonic() + call.timeout_s
                link = Link(self.transport, self.members, call_id(self.subgroup, call.number), deadline, call.dtype)
                work._result = call.run(link)
            except BaseException as exc:  # every failure ends the call here and is handed to wait()
                work._error = exc
                if not self._broken:
                    self._broken = f"{work.operation.name.lower()} #{call.number}: {exc}"
                    if not isinstance(exc, (Aborted, Refused)):
                        self.transport.abort(call_id(self.subgroup, call.number), f"{work.operation.name.lower()}: {exc}")
            finally:
                work._done.set()


def _flat(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    dtype_name(x)
    return np.ascontiguousarray(x).reshape(-1)
