"""Subgroups (ProcessGroup.new_group) against numpy: ranks as threads on loopback addresses, one
transport per rank shared by the root group and its subgroups. A subgroup numbers its members in
the order given, runs at the same time as its parent and its siblings without their messages
meeting, and fails alone."""
from __future__ import annotations

import numpy as np
import pytest
from loopback_ranks import fresh_net, run_parallel

from hostagent.collectives.group import ProcessGroup
from hostagent.collectives.headers import Mismatch

pytestmark = pytest.mark.usefixtures("host_path")  # every test once per host path (conftest.py)

PORT = 47300
N = 5


def ints(rank: int, length: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng([seed, rank, length]).integers(-1000, 1000, length).astype(np.int32)


@pytest.fixture
def roots():
    net = fresh_net()
    pgs = [ProcessGroup(r, [(net + str(10 + i), PORT) for i in range(N)], timeout_s=10.0) for r in range(N)]
    yield pgs
    for pg in pgs:
        pg.close()


def subgroups(roots, *rank_lists):
    """Every root rank calls new_group for each list, in the same order (members or not)."""
    return [[pg.new_group(ranks) for ranks in rank_lists] for pg in roots]


def test_members_get_a_group_numbered_in_the_order_given_and_others_none(roots) -> None:
    members = [4, 1, 3]
    subs = [s[0] for s in subgroups(roots, members)]
    assert [s is None for s in subs] == [r not in members for r in range(N)]
    assert [(subs[r].rank, subs[r].world) for r in members] == [(0, 3), (1, 3), (2, 3)]
    x = {r: ints(r, 4097) for r in members}
    got = run_parallel([lambda r=r: (subs[r].all_reduce(x[r], algo="ring"), subs[r].all_reduce(x[r], algo="tree"),
                                     subs[r].all_reduce(x[r], algo="halving_doubling"), subs[r].all_gather(x[r]))
                        for r in members])
    total = np.sum([x[r] for r in members], axis=0, dtype=np.int32)
    for r, results in zip(members, got):
        assert not isinstance(results, BaseException), f"rank {r}: {results!r}"
        for algo, y in zip(("ring", "tree", "halving_doubling"), results[:3]):
            assert np.array_equal(y, total), f"rank {r} {algo}"
        assert np.array_equal(results[3], np.concatenate([x[m] for m in members])), f"rank {r}: gather order"


def test_send_recv_in_a_subgroup_use_its_numbering(roots) -> None:
    subs = [s[0] for s in subgroups(roots, [3, 0])]
    msg = ints(7, 300)
    got = run_parallel([lambda: subs[3].send(msg, dst=1, tag=5), lambda: subs[0].recv(src=0, tag=5)])
    assert np.array_equal(got[1], msg)


def test_parent_and_two_subgroups_at_once_never_mix_messages(roots) -> None:
    """Call 1 of the root and call 1 of each subgroup run together between the same sockets."""
    per_rank = subgroups(roots, [0, 1, 2], [3, 4])
    x = [ints(r, 5000, seed=1) for r in range(N)]
    y = [ints(r, 5000, seed=2) for r in range(N)]

    def rank(r: int):
        sub = per_rank[r][0] if r < 3 else per_rank[r][1]
        a = roots[r].all_reduce(x[r], algo="ring", async_op=True)
        b = sub.all_reduce(y[r], algo="ring", async_op=True)
        return a.wait(), b.wait()

    got = run_parallel([lambda r=r: rank(r) for r in range(N)])
    whole = np.sum(x, axis=0, dtype=np.int32)
    for r, results in enumerate(got):
        assert not isinstance(results, BaseException), f"rank {r}: {results!r}"
        part = np.sum(y[:3] if r < 3 else y[3:], axis=0, dtype=np.int32)
        assert np.array_equal(results[0], whole), f"rank {r}: root group"
        assert np.array_equal(results[1], part), f"rank {r}: subgroup"


def test_a_failed_subgroup_call_breaks_it_alone(roots) -> None:
    subs = [s[0] for s in subgroups(roots, [1, 2])]
    got = run_parallel([lambda: subs[1].all_reduce(ints(1, 10)), lambda: subs[2].all_reduce(ints(2, 11))])
    assert all(isinstance(e, Mismatch) and "element count" in str(e) for e in got), got
    with pytest.raises(Exception, match="broken by an earlier failure"):
        subs[1].barrier()
    x = [ints(r, 100) for r in range(N)]
    got = run_parallel([lambda r=r: roots[r].all_reduce(x[r]) for r in range(N)])
    for r in range(N):
        assert np.array_equal(got[r], np.sum(x, axis=0, dtype=np.int32)), f"rank {r}: {got[r]!r}"


def test_bad_rank_lists_are_refused(roots) -> None:
    with pytest.raises(ValueError, match="distinct ranks"):
        roots[0].new_group([0, 0])
    with pytest.raises(ValueError, match="distinct ranks"):
        roots[0].new_group([0, N])


def test_an_aborted_root_call_leaves_subgroups_working(roots) -> None:
    """Ranks 0-3 give up on a root barrier that rank 4 never makes and send ABORT for it; a
    subgroup's calls (in another call space) are not aborted by it."""
    subs = [s[0] for s in subgroups(roots, [0, 1])]
    got = run_parallel([lambda r=r: roots[r].barrier(timeout_s=0.5) for r in range(4)])
    assert all(isinstance(e, Exception) for e in got), got
    x = [ints(r, 1000) for r in range(2)]
    got = run_parallel([lambda r=r: subs[r].all_reduce(x[r]) for r in range(2)])
    for r in range(2):
        assert np.array_equal(got[r], x[0] + x[1]), f"rank {r}: {got[r]!r}"
