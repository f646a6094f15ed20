"""The process group (hostagent.collectives.group) against numpy, each rank a thread with its own
UDP socket on its own loopback address (127.x.y.N, a fresh /24 per group so concurrent runs never
meet); the in-network algorithm runs through the parameter server, the switches' software twin.

The matrix runs twice: lossless, and with 1% of every rank's sent packets dropped (seeded, in the
reliable transport and in the in-network workers' sockets alike), where each test must also see
packets dropped and sent again. Every test runs once per host path of the transport (python,
native: conftest.py's host_path).

Bounds: int32 exact; broadcast, all_gather and all_to_all exact for every dtype; float sums
within gamma_(n-1) * sum|x_i| with the unit roundoff of the dtype (arrays.sum_error_bound), and for
in-network float32 within the quantisation bound (tensors.check_aggregated).
"""

from __future__ import annotations

import socket
import time
from typing import Callable

import numpy as np
import pytest
from loopback_ranks import fresh_net, run_parallel

from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT, AGG_VALUES
from hostagent.collectives.aggregation.worker import JobConfig
from hostagent.collectives.arrays import DTYPES, UNIT_ROUNDOFF, sum_error_bound
from hostagent.collectives.group import ALGORITHMS, Op, ProcessGroup, Work
from hostagent.collectives.headers import Mismatch, NonFinite
from hostagent.collectives.ps import JobSpec, ParameterServer
from hostagent.collectives.host_path import open_transport
from hostagent.collectives.reliable import CollectiveError, TransportConfig
from hostagent.collectives.tensors import check_aggregated
from hostagent.congestion import CcSettings

pytestmark = pytest.mark.usefixtures("host_path")  # every test once per host path (conftest.py)

WORLDS = (2, 3, 5, 8, 16)
LENGTHS = (1, 63, 64, 65, 1000, 4097)
PORT = 47000
JOIN_S = 60.0
LOSS = 0.01
LOSSY_JOB = 100  # the lossy groups' in-network jobs are LOSSY_JOB + n, apart from the lossless ones'
LOSSY_FRAME_VALUES = 320  # and carry the largest frames (the lossless ones SwitchML's 64)


def make_groups(n: int, net: str | None = None, ps: ParameterServer | None = None, job: int = 1, loss: float = 0.0,
                frame_values: int = AGG_VALUES, **kw) -> list[ProcessGroup]:
    """n ranks; loss: the share of every rank's sent packets dropped (seeded per rank), in the
    transport and in the in-network worker alike; frame_values: the in-network job's."""
    net = net or fresh_net()
    peers = [(net + str(10 + r), PORT) for r in range(n)]
    racks = [list(range(i, min(i + 2, n))) for i in range(0, n, 2)]  # two hosts per edge switch
    aggregation = (lambda r: JobConfig(job_id=job, worker_id=r, num_workers=n, aggregator=ps.address, slots=8,
                                       bind=(peers[r][0], AGG_UDP_PORT), timeout=0.05, max_retries=400,
                                       drop_outgoing=loss, drop_seed=r, frame_values=frame_values)) \
        if ps else (lambda r: None)
    if loss:
        return [ProcessGroup(r, peers, groups=racks, aggregation=aggregation(r),
                             transport=TransportConfig(drop_outgoing=loss, drop_seed=r), **kw) for r in range(n)]
    return [ProcessGroup(r, peers, groups=racks, aggregation=aggregation(r), **kw) for r in range(n)]


def tensor(dtype: str, rank: int, length: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng([seed, rank, length, list(DTYPES).index(dtype)])
    if dtype == "int32":
        return rng.integers(-1000, 1000, length, endpoint=True).astype(np.int32)
    return rng.standard_normal(length).astype(DTYPES[dtype])


def assert_sum(result: object, terms: list[np.ndarray], dtype: str, what: str) -> None:
    assert isinstance(result, np.ndarray), f"{what}: {result!r}"
    assert result.dtype == DTYPES[dtype] and result.shape == terms[0].shape, f"{what}: {result.dtype} {result.shape}"
    exact = np.sum([t.astype(np.float64) for t in terms], axis=0)
    error = np.abs(result.astype(np.float64) - exact)
    bound = sum_error_bound(terms, dtype)
    assert np.all(error <= bound), f"{what}: error {error.max()} > bound at {np.argmax(error - bound)}"


def assert_equal(result: object, expected: np.ndarray, what: str) -> None:
    assert isinstance(result, np.ndarray), f"{what}: {result!r}"
    assert result.dtype == expected.dtype and result.shape == expected.shape, f"{what}: {result.dtype} {result.shape}"
    assert np.array_equal(result.view(np.uint8), expected.view(np.uint8)), f"{what}: differs"


@pytest.fixture(scope="module")
def ps(host_path: str) -> ParameterServer:
    """The in-network algorithm's aggregator, one per host path (a job's second set of workers on
    one server would wait on the first set's state)."""
    jobs = [JobSpec(n, n, 8) for n in WORLDS] + [JobSpec(LOSSY_JOB + n, n, 8, LOSSY_FRAME_VALUES) for n in WORLDS]
    server = ParameterServer(jobs, (fresh_net() + "1", AGG_UDP_PORT)).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def worlds(ps: ParameterServer, host_path: str) -> dict[int, list[ProcessGroup]]:
    """One group per world size, shared by the matrix (job n on the parameter server for world n)."""
    groups = {n: make_groups(n, ps=ps, job=n, timeout_s=20.0) for n in WORLDS}
    yield groups
    for pgs in groups.values():
        for pg in pgs:
            pg.close()


@pytest.fixture(scope="module")
def lossy_worlds(ps: ParameterServer, host_path: str) -> dict[int, list[ProcessGroup]]:
    """As worlds, with LOSS of every rank's sent packets dropped and in-network frames of
    LOSSY_FRAME_VALUES."""
    groups = {n: make_groups(n, ps=ps, job=LOSSY_JOB + n, loss=LOSS, timeout_s=20.0, frame_values=LOSSY_FRAME_VALUES)
              for n in WORLDS}
    yield groups
    for pgs in groups.values():
        for pg in pgs:
            pg.close()


MATRIX = [(op, algo) for op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.ALL_GATHER, Op.BROADCAST, Op.REDUCE, Op.ALL_TO_ALL)
          for algo in ALGORITHMS[op]]


def lost_and_resent(pgs: list[ProcessGroup]) -> tuple[int, int]:
    """Packets the group's ranks dropped on purpose and packets they sent again, so far (the
    transport's and the in-network workers')."""
    dropped = resent = 0
    for pg in pgs:
        s = pg.stats()
        dropped, resent = dropped + s["dropped_on_purpose"], resent + s["retransmissions"]
        if pg.in_network is not None:
            w = pg.in_network.stats()
            dropped, resent = dropped + w["dropped_on_purpose"], resent + w["retransmissions"]
    return dropped, resent


# With loss, a sample of the matrix (the whole of it took 86 s here, over twice the lossless 36 s):
# every operation x algorithm x dtype x length at world size 5 (not a power of two: halving-doubling
# folds, blocks are uneven) and at one more world size, rotating through 8, 16, 3, 2 so each of them
# meets three or four operation-algorithm pairs (in_network at 8, the ring all_reduce at 8, all_to_all at 16).
LOSSY_MATRIX = [(op, algo, n) for i, (op, algo) in enumerate(MATRIX) for n in (5, (8, 16, 3, 2)[i % 4])]


@pytest.mark.parametrize("n", WORLDS)
@pytest.mark.parametrize("op,algo", MATRIX, ids=[f"{o.name.lower()}-{a}" for o, a in MATRIX])
def test_operation_matches_numpy(worlds, n: int, op: Op, algo: str) -> None:
    check_cell(worlds[n], n, op, algo)


@pytest.mark.parametrize("op,algo,n", LOSSY_MATRIX, ids=[f"{o.name.lower()}-{a}-{n}" for o, a, n in LOSSY_MATRIX])
def test_operation_matches_numpy_with_one_percent_loss(lossy_worlds, n: int, op: Op, algo: str) -> None:
    check_cell(lossy_worlds[n], n, op, algo)


def check_cell(pgs: list[ProcessGroup], n: int, op: Op, algo: str) -> None:
    """One operation and algorithm at world size n against numpy, for every dtype and length."""
    inputs = {(d, L): [tensor(d, r, L) for r in range(n)] for d in DTYPES for L in LENGTHS}
    root = n - 1 if op == Op.BROADCAST else 1 % n
    if op == Op.ALL_REDUCE:
        results = run_parallel([lambda pg=pg, r=r: submit_rank(pg, lambda d, L: pg.all_reduce(inputs[d, L][r], algo=algo, async_op=True))
                                for r, pg in enumerate(pgs)])
    elif op == Op.REDUCE_SCATTER:
        results = run_parallel([lambda pg=pg, r=r: submit_rank(pg, lambda d, L: pg.reduce_scatter(inputs[d, L][r], algo=algo, async_op=True))
                                for r, pg in enumerate(pgs)])
    elif op == Op.ALL_GATHER:
        results = run_parallel([lambda pg=pg, r=r: submit_rank(pg, lambda d, L: pg.all_gather(inputs[d, L][r], algo=algo, async_op=True))
                                for r, pg in enumerate(pgs)])
    elif op == Op.BROADCAST:
        results = run_parallel([lambda pg=pg, r=r: submit_rank(pg, lambda d, L: pg.broadcast(inputs[d, L][r], root=root, algo=algo, async_op=True))
                                for r, pg in enumerate(pgs)])
    elif op == Op.REDUCE:
        results = run_parallel([lambda pg=pg, r=r: submit_rank(pg, lambda d, L: pg.reduce(inputs[d, L][r], root=root, algo=algo, async_op=True))
                                for r, pg in enumerate(pgs)])
    else:  # uneven splits (some empty) where the length allows it, else equal ones of the length
        splits = lambda r, j, L: (L if L < 64 else (r + 3 * j) % 7)  # noqa: E731
        send = {(d, L): [[tensor(d, 100 * r + j, splits(r, j, L)) for j in range(n)] for r in range(n)] for d in DTYPES for L in LENGTHS}
        results = run_parallel([lambda pg=pg, r=r: submit_rank(pg, lambda d, L: pg.all_to_all(send[d, L][r], algo=algo, async_op=True))
                                for r, pg in enumerate(pgs)])
    for r, res in enumerate(results):
        assert isinstance(res, dict), f"rank {r}: {res!r}"
    frame_values = pgs[0].in_network.config.frame_values if pgs[0].in_network else AGG_VALUES
    for (d, L), terms in inputs.items():
        what = f"{op.name.lower()} {algo} n={n} {d} length {L}"
        exact_cut = np.array_split(np.arange(L), n)
        for r in range(n):
            got = results[r][d, L]
            if isinstance(got, BaseException):
                raise AssertionError(f"{what} rank {r}: {got!r}")
            if op == Op.ALL_REDUCE and algo == "in_network" and d == "float32":
                check = check_aggregated(got, terms, frame_values)
                assert check.ok, f"{what}: error {check.max_abs_error} > bound {check.bound}"
            elif op == Op.ALL_REDUCE and algo == "in_network" and d != "int32":  # widened to float32 and back
                exact = np.sum([t.astype(np.float64) for t in terms], axis=0)
                wide = check_aggregated(got.astype(np.float32), [t.astype(np.float32) for t in terms], frame_values)
                assert np.all(np.abs(got.astype(np.float64) - exact) <= wide.bound + 4 * UNIT_ROUNDOFF[d] * np.abs(exact)), what
            elif op == Op.ALL_REDUCE:
                assert_sum(got, terms, d, f"{what} rank {r}")
            elif op == Op.REDUCE_SCATTER:
                idx = exact_cut[r]
                assert_sum(got, [t[idx] for t in terms], d, f"{what} rank {r}")
            elif op == Op.ALL_GATHER:
                assert_equal(got, np.concatenate(terms), f"{what} rank {r}")
            elif op == Op.BROADCAST:
                assert_equal(got, terms[root], f"{what} rank {r}")
            elif op == Op.REDUCE:
                if r == root:
                    assert_sum(got, terms, d, f"{what} root")
                else:
                    assert got is None, f"{what} rank {r} got {got!r}"
            else:
                assert isinstance(got, list) and len(got) == n, what
                for j in range(n):
                    assert_equal(got[j], send[d, L][j][r], f"{what}: rank {r} from rank {j}")


@pytest.mark.parametrize("n", WORLDS)
def test_lossy_groups_dropped_and_sent_again(lossy_worlds, n: int) -> None:
    """The lossy matrix's groups (after the matrix, when it ran) lost packets and sent them again;
    one ring all_reduce of 64 Ki int32 first, so the figures never rest on the matrix alone (a
    small cell may see no drop at 1%)."""
    pgs = lossy_worlds[n]
    terms = [tensor("int32", r, 65536, seed=5) for r in range(n)]
    for r, got in enumerate(run_parallel([lambda pg=pg, t=t: pg.all_reduce(t, algo="ring") for pg, t in zip(pgs, terms)])):
        assert_equal(got, np.sum(terms, axis=0, dtype=np.int32), f"ring n={n} rank {r}")
    dropped, resent = lost_and_resent(pgs)
    assert dropped > 0 and resent > 0, f"n={n}: dropped {dropped}, sent again {resent}"


def submit_rank(pg: ProcessGroup, call: Callable[[str, int], Work]) -> dict:
    """One rank's calls for every dtype and length, all submitted before the first wait."""
    works = {(d, L): call(d, L) for d in DTYPES for L in LENGTHS}
    out: dict = {}
    for key, work in works.items():
        try:
            out[key] = work.wait(JOIN_S)
        except CollectiveError as exc:
            out[key] = exc
    return out


@pytest.mark.parametrize("algo", ("ring", "tree", "halving_doubling", "hierarchical"))
@pytest.mark.parametrize("op", ("max", "min"))
def test_max_and_min(worlds, algo: str, op: str) -> None:
    pgs = worlds[5]
    terms = [tensor("float32", r, 1000, seed=7) for r in range(5)]
    expected = getattr(np, "maximum" if op == "max" else "minimum").reduce(terms)
    for r, got in enumerate(run_parallel([lambda pg=pg, t=t: pg.all_reduce(t, op=op, algo=algo) for pg, t in zip(pgs, terms)])):
        assert_equal(got, expected, f"{op} {algo} rank {r}")


def close_all(pgs: list[ProcessGroup]) -> None:
    for pg in pgs:
        pg.close()


def test_one_percent_loss_is_recovered_and_counted() -> None:
    """Seeded 1% send loss in every rank's socket layer: every algorithm still right, and the
    drops show up as retransmissions."""
    n, L = 5, 4097
    pgs = make_groups(n, timeout_s=20.0, transport=TransportConfig(drop_outgoing=0.01, drop_seed=3))
    try:
        terms = [tensor("float32", r, L, seed=11) for r in range(n)]
        for algo in ("ring", "tree", "halving_doubling", "hierarchical"):
            for r, got in enumerate(run_parallel([lambda pg=pg, t=t: pg.all_reduce(t, algo=algo) for pg, t in zip(pgs, terms)])):
                assert_sum(got, terms, "float32", f"{algo} rank {r}")
        for algo in ("ring", "halving_doubling"):
            for r, got in enumerate(run_parallel([lambda pg=pg, t=t: pg.all_gather(t, algo=algo) for pg, t in zip(pgs, terms)])):
                assert_equal(got, np.concatenate(terms), f"all_gather {algo} rank {r}")
        sends = [[tensor("int32", 10 * r + j, (r + j) % 4) for j in range(n)] for r in range(n)]
        for r, got in enumerate(run_parallel([lambda pg=pg, s=s: pg.all_to_all(s) for pg, s in zip(pgs, sends)])):
            for j in range(n):
                assert_equal(got[j], sends[j][r], f"all_to_all rank {r} from {j}")
        stats = [pg.stats() for pg in pgs]
        dropped = sum(s["dropped_on_purpose"] for s in stats)
        assert dropped > 0
        assert sum(s["retransmissions"] for s in stats) >= dropped * 0.5, stats
    finally:
        close_all(pgs)


def test_delayed_acknowledgements_cover_every_packet_without_a_resend() -> None:
    """Lossless: 3 messages of 20 packets each are all acknowledged (cumulative + selective,
    delayed) before the first retransmission timeout could pass, so nothing is sent twice."""
    net = fresh_net()
    peers = [(net + "10", PORT), (net + "11", PORT)]
    a, b = (open_transport(r, peers, config=TransportConfig(rto_s=1.5)) for r in range(2))
    try:
        deadline = time.monotonic() + 5.0
        for tag in range(3):
            a.send(1, tag, bytes(range(256)) * 109, deadline)
        for tag in range(3):
            assert b.recv(0, tag, deadline) == bytes(range(256)) * 109
        a.flush(time.monotonic() + 1.2)  # ack delay 0.5 s; a resend could come only after 1.5 s
        assert a.stats.retransmissions == 0 and b.stats.duplicates == 0
    finally:
        a.close()
        b.close()


def test_two_groups_at_once_on_the_same_hosts() -> None:
    """Two groups on the same addresses (other ports, other group ids) running together."""
    net = fresh_net()
    a = make_groups(4, net=net, group_id=1)
    b = [ProcessGroup(r, [(net + str(10 + i), PORT + 1) for i in range(4)], group_id=2) for r in range(4)]
    try:
        ta = [tensor("int32", r, 4097, seed=1) for r in range(4)]
        tb = [tensor("int32", r, 4097, seed=2) for r in range(4)]
        results = run_parallel([lambda pg=pg, t=t: pg.all_reduce(t, algo="ring") for pg, t in zip(a, ta)]
                               + [lambda pg=pg, t=t: pg.all_reduce(t, algo="tree") for pg, t in zip(b, tb)])
        for r in range(4):
            assert_equal(results[r], np.sum(ta, axis=0, dtype=np.int32), f"group a rank {r}")
            assert_equal(results[4 + r], np.sum(tb, axis=0, dtype=np.int32), f"group b rank {r}")
    finally:
        close_all(a + b)


def test_a_rank_that_stops_mid_call_makes_every_other_raise_in_time() -> None:
    """Rank 3's socket closes 50 ms into a long all_reduce (its heartbeats stop with it); every
    other rank raises within the deadline naming rank 3, not the neighbour it was waiting on. (16 MB:
    the native host path moved 1.6 MB through four ranks in less than those 50 ms.)"""
    n, deadline = 4, 3.0
    pgs = make_groups(n, timeout_s=deadline, transport=TransportConfig(rto_s=0.05, silent_after_s=0.5))
    try:
        x = np.ones(4_000_000, np.float32)
        started = time.monotonic()
        works = [pg.all_reduce(x, algo="ring", async_op=True) for pg in pgs]
        time.sleep(0.05)
        pgs[3].transport.close()
        for r in range(3):
            with pytest.raises(CollectiveError, match="rank 3 is silent"):
                works[r].wait(deadline + 5.0)
            assert time.monotonic() - started < deadline + 1.5, f"rank {r} raised late"
        with pytest.raises(CollectiveError, match="broken"):  # and the group stays refused
            pgs[0].barrier()
    finally:
        close_all(pgs)


@pytest.mark.parametrize("field,second", [("element count", np.zeros(64, np.float32)), ("dtype", np.zeros(65, np.float16))])
def test_mismatched_calls_are_refused_by_every_rank(field: str, second: np.ndarray) -> None:
    pgs = make_groups(3, timeout_s=5.0)
    try:
        bufs = [np.zeros(65, np.float32), second, np.zeros(65, np.float32)]
        for r, got in enumerate(run_parallel([lambda pg=pg, b=b: pg.all_reduce(b, algo="ring") for pg, b in zip(pgs, bufs)])):
            assert isinstance(got, Mismatch), f"rank {r}: {got!r}"
            assert field in str(got) and "rank 1" in str(got), str(got)
    finally:
        close_all(pgs)


def test_in_network_float_calls_agree_their_first_exponents_in_the_header(worlds) -> None:
    """A float call through the group sends its chunks and nothing more (the header agreement
    brought the first chunks' exponents: no priming round); an int32 call likewise."""
    pgs = worlds[3]
    frame_values = pgs[0].in_network.config.frame_values
    length = 5 * frame_values + 1                        # 6 chunks, under the job's slots

    def sent() -> list[int]:
        return [pg.in_network.stats()["packets_sent"] - pg.in_network.stats()["retransmissions"] for pg in pgs]
    for dtype in ("float32", "int32"):
        bufs = [tensor(dtype, r, length, seed=11) for r in range(3)]
        before = sent()
        got = run_parallel([lambda pg=pg, b=b: pg.all_reduce(b, algo="in_network") for pg, b in zip(pgs, bufs)])
        assert all(isinstance(g, np.ndarray) for g in got), got
        assert [a - b for a, b in zip(sent(), before)] == [6] * 3, dtype


def test_nan_is_refused_for_in_network_float_by_every_rank(ps: ParameterServer) -> None:
    n = 3
    pgs = make_groups(n, ps=ps, job=n, timeout_s=5.0)  # job 3 is the worlds fixture's; a fresh epoch per client set
    try:
        bufs = [np.ones(100, np.float32) for _ in range(n)]
        bufs[2][17] = np.nan
        for r, got in enumerate(run_parallel([lambda pg=pg, b=b: pg.all_reduce(b, algo="in_network") for pg, b in zip(pgs, bufs)])):
            assert isinstance(got, NonFinite), f"rank {r}: {got!r}"
            assert "rank(s) [2]" in str(got)
        ring = make_groups(n, timeout_s=5.0)  # the software algorithms carry NaN as numpy does
        try:
            got = run_parallel([lambda pg=pg, b=b: pg.all_reduce(b, algo="ring") for pg, b in zip(ring, bufs)])
            assert all(np.isnan(g[17]) and g[16] == n for g in got)
        finally:
            close_all(ring)
    finally:
        close_all(pgs)


def test_async_handle_lets_a_rank_compute_while_the_others_are_late() -> None:
    pgs = make_groups(3, timeout_s=10.0)
    try:
        terms = [tensor("int32", r, 1000) for r in range(3)]
        early = pgs[0].all_reduce(terms[0], algo="tree", async_op=True)
        assert isinstance(early, Work)
        time.sleep(0.2)  # rank 0 "computes"; its call cannot finish without the others
        assert not early.done()
        late = run_parallel([lambda pg=pg, t=t: pg.all_reduce(t, algo="tree") for pg, t in zip(pgs[1:], terms[1:])])
        for got in [early.wait(10.0), *late]:
            assert_equal(got, np.sum(terms, axis=0, dtype=np.int32), "async all_reduce")
    finally:
        close_all(pgs)


def test_send_recv_and_auto_reports_its_choice() -> None:
    pgs = make_groups(4, timeout_s=5.0)
    try:
        x = tensor("bfloat16", 0, 65)
        pgs[0].send(x, 3, tag=5)
        assert_equal(pgs[3].recv(0, tag=5), x, "send/recv")
        small, large = np.ones(16, np.float32), np.ones(300_000, np.float32)
        works = [[pg.all_reduce(small, async_op=True), pg.all_reduce(large, async_op=True)] for pg in pgs]
        for w in works:
            assert w[0].wait(10.0)[0] == 4 and w[1].wait(20.0)[-1] == 4
        assert (works[0][0].algo, works[0][1].algo) == ("halving_doubling", "ring")
        assert pgs[0].choices == [("all_reduce", "halving_doubling", 64), ("all_reduce", "ring", 1_200_000)]
    finally:
        close_all(pgs)


class _ScriptedPause:
    """A host's PFC state as hostagent.lossless.PauseReader gives it: class ``priority`` paused
    until ``until`` (time.monotonic_ns()), every other class free."""

    def __init__(self, priority: int, seconds: float) -> None:
        self.priority, self.until = priority, time.monotonic_ns() + int(seconds * 1e9)

    def held_ns(self, priority: int, now_ns: int | None = None) -> int:
        now = time.monotonic_ns() if now_ns is None else now_ns
        return max(0, self.until - now) if priority == self.priority else 0


@pytest.mark.parametrize("priority, held", [(3, True), (0, False)])
def test_a_paused_class_holds_the_python_transport_and_no_other(monkeypatch, priority: int, held: bool) -> None:
    """With ``pause`` the transport reads its host's PFC state before every packet: while its own
    class (3) is paused nothing leaves, the message arriving only after the pause; a pause of
    another class holds nothing. ``pause`` chooses the Python host path (the native engine does
    not look at the state) and the DSCP marks the socket."""
    from hostagent.lossless import pause as pause_module
    pause_s = 0.4
    made: list[_ScriptedPause] = []
    monkeypatch.setattr(pause_module.PauseReader, "from_arg",
                        classmethod(lambda cls, text: made.append(_ScriptedPause(3, pause_s)) or made[-1]))
    net = fresh_net()
    peers = [(net + "10", PORT), (net + "11", PORT)]
    config = TransportConfig(dscp=26, priority=priority, pause="1:1", host_path="auto")
    a = open_transport(0, peers, config=config)
    b = open_transport(1, peers, config=TransportConfig())
    try:
        assert a.host_path == "python" and "PFC" in a.host_path_reason
        assert a.endpoint.sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS) == 26 << 2
        t0 = time.monotonic_ns()
        a.send(1, 7, b"x" * 3000, time.monotonic() + 5.0)
        assert b.recv(0, 7, time.monotonic() + 5.0) == b"x" * 3000
        arrived = time.monotonic_ns()
        left = max(0, made[0].until - t0) / 1e9           # of the pause when the send began
        if held:
            assert arrived >= made[0].until and a.paused_s >= 0.9 * left, (arrived - made[0].until, a.paused_s, left)
        else:
            assert a.paused_s == 0 and arrived < made[0].until, (a.paused_s, (made[0].until - arrived) / 1e9)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("asks, why", [({"pause": "1:1", "priority": 3}, "honour PFC"),
                                       ({"repath": True}, "move flows"),
                                       ({"cc": CcSettings("swift", 1e7, 0.01)}, "run a congestion control"),
                                       ({"qps": 4}, "spread a peer over queue pairs")],
                         ids=["pause", "repath", "cc", "qps"])
def test_what_only_python_does_is_refused_on_the_native_host_path_and_takes_python_on_auto(asks, why) -> None:
    from hostagent.collectives.host_path import HostPathUnavailable, choose
    net = fresh_net()
    with pytest.raises(HostPathUnavailable, match=f"cannot {why}"):
        open_transport(0, [(net + "10", PORT), (net + "11", PORT)], config=TransportConfig(host_path="native", **asks))
    chosen = choose(TransportConfig(host_path="auto", **asks))
    assert chosen.path == "python" and why in chosen.reason, chosen
