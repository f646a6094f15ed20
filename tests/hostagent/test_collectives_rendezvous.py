"""The rendezvous (hostagent.collectives.rendezvous) on loopback, ranks as threads on their own
127.x.y.N addresses: a group made from it computes the numpy sum; a store that waits in vain, a
rank registered twice and world sizes that differ make every rank raise, naming the cause; the
rank programs' --rendezvous option gives the same peers as --peers would.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np
import pytest
from loopback_ranks import fresh_net, run_parallel

from hostagent.collectives.group import ProcessGroup
from hostagent.collectives.rank_program import add_group_args, peer_ips
from hostagent.collectives.rendezvous import RendezvousError, rendezvous

pytestmark = pytest.mark.usefixtures("host_path")  # every test once per host path (conftest.py)

STORE_PORT = 29500
GROUP_PORT = 47000


def test_a_group_made_at_the_store_sums_like_numpy() -> None:
    n, net = 5, fresh_net()
    store = f"{net}10:{STORE_PORT}"
    terms = [np.arange(1000, dtype=np.int32) * (r + 1) for r in range(n)]

    def rank(r: int) -> tuple[list, np.ndarray]:
        with ProcessGroup.from_rendezvous(store, r, n, ip=f"{net}{10 + r}", port=GROUP_PORT, timeout_s=10.0) as pg:
            return pg.transport.peers, pg.all_reduce(terms[r], algo="ring")

    # rank 0 (the store) first, then the others in reverse order: the list is in rank order all the same
    results = run_parallel([lambda r=r: (time.sleep(0.05 * (n - r) if r else 0), rank(r))[1] for r in range(n)])
    expected_peers = [(f"{net}{10 + r}", GROUP_PORT) for r in range(n)]
    for r, got in enumerate(results):
        assert not isinstance(got, BaseException), f"rank {r}: {got!r}"
        peers, total = got
        assert [tuple(p) for p in peers] == expected_peers, f"rank {r}: {peers}"
        assert np.array_equal(total, np.sum(terms, axis=0, dtype=np.int32)), f"rank {r}"


def meet(store: str, net: str, registrations: list[tuple[int, int]], timeout_s: float, gap_s: float = 0.0) -> list[object]:
    """Each (rank, world_size) registers from its own thread (rank 0 of the first runs the store)."""
    def one(i: int, rank: int, world: int) -> object:
        time.sleep(gap_s * i)
        return rendezvous(store, rank, world, ip=f"{net}{10 + i}", port=GROUP_PORT, timeout_s=timeout_s,
                          run_store=(i == 0))
    return run_parallel([lambda i=i, r=r, w=w: one(i, r, w) for i, (r, w) in enumerate(registrations)])


def test_ranks_that_never_come_are_named_on_every_rank_that_did() -> None:
    net = fresh_net()
    started = time.monotonic()
    results = meet(f"{net}10:{STORE_PORT}", net, [(0, 4), (2, 4)], timeout_s=0.5)
    for got in results:
        assert isinstance(got, RendezvousError), repr(got)
        assert "rank(s) [1, 3] never registered" in str(got), str(got)
    assert time.monotonic() - started < 3.0


def test_a_rank_registered_twice_fails_every_rank() -> None:
    net = fresh_net()
    results = meet(f"{net}10:{STORE_PORT}", net, [(0, 3), (1, 3), (1, 3)], timeout_s=5.0, gap_s=0.2)
    for got in results:
        assert isinstance(got, RendezvousError), repr(got)
        assert "rank 1 registered twice" in str(got) and f"{net}11" in str(got) and f"{net}12" in str(got), str(got)


def test_world_sizes_that_differ_fail_every_rank() -> None:
    net = fresh_net()
    results = meet(f"{net}10:{STORE_PORT}", net, [(0, 3), (1, 4), (2, 3)], timeout_s=5.0, gap_s=0.1)
    for got in results:
        assert isinstance(got, RendezvousError), repr(got)
        assert "world sizes differ: rank 1 says 4, the store expects 3" in str(got), str(got)


def test_no_store_is_named_by_its_address() -> None:
    net = fresh_net()
    with pytest.raises(RendezvousError, match=f"no rendezvous store reachable at {net}10:{STORE_PORT}"):
        rendezvous(f"{net}10:{STORE_PORT}", 1, 2, port=GROUP_PORT, timeout_s=0.3)


def test_rank_program_option_rendezvous_gives_the_peer_list() -> None:
    n, net = 3, fresh_net()

    def parse(r: int) -> argparse.Namespace:
        p = argparse.ArgumentParser()
        add_group_args(p, port=GROUP_PORT)
        return p.parse_args(["--rank", str(r), "--rendezvous", f"{net}10:{STORE_PORT}", "--world-size", str(n),
                             "--address", f"{net}{10 + r}", "--timeout", "5"])

    results = run_parallel([lambda r=r: peer_ips(parse(r)) for r in range(n)])
    assert results == [[f"{net}{10 + r}" for r in range(n)]] * n, results


def test_rank_program_names_a_failed_rendezvous_and_exits_1() -> None:
    """A whole rank program (the collectives runner) alone at its store: one error line, exit 1."""
    net = fresh_net()
    proc = subprocess.run([sys.executable, "-m", "hostagent.collectives.runner", "--rank", "0", "--rendezvous",
                           f"{net}10:{STORE_PORT}", "--world-size", "2", "--timeout", "0.5",
                           "--calls", "all_reduce:ring", "--elements", "4"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1, proc
    assert "rank(s) [1] never registered" in proc.stderr, proc.stderr
