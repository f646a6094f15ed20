"""Traffic patterns: pure functions from host names (and a seed) to a list of `FlowSpec`.

Everything random (who sends to whom, ring order, source ports) comes from ``random.Random(seed)``
alone, so the same seed gives the same flows, source ports included, whichever load-balancing
mode the fabric runs: the source port is the flow's entropy (RoCEv2 style: UDP destination
port 4791, ECMP hashes the 5-tuple), and comparing modes is fair only on the same ports.

Keyword arguments common to every pattern: ``protocol`` ("udp" or "tcp"), ``size`` (datagrams
for UDP, bytes for TCP), ``payload`` (UDP payload bytes per datagram), ``rate_pps`` (UDP pacing
per flow), ``dport`` (default 4791 for UDP, 5001 for TCP), ``start`` (offset of every flow).
"""
from __future__ import annotations

import random
import re
from typing import Callable, Sequence

from hostagent.traffic.flows import ENTROPY_PORTS, ROCEV2_PORT, TCP_PORT, FlowSpec

DEFAULT_UDP_PACKETS = 200
DEFAULT_TCP_BYTES = 256 * 1024
LONG_FLOW_FACTOR = 10         # a collective's flows are this many times a default flow

_POD_NAME = re.compile(r"^p(\d+)e\d+h\d+$")      # fat-tree host p{pod}e{edge}h{h}
_LEAF_NAME = re.compile(r"^l(\d+)h\d+$")          # leaf-spine host l{leaf}h{h}


def pod_of(host: str) -> str:
    """The group a host's traffic leaves when it goes "far": its pod in a fat-tree, its leaf in a
    leaf-spine (names of `topologies.addressing`), else the host itself."""
    m = _POD_NAME.match(host)
    if m:
        return f"p{m.group(1)}"
    m = _LEAF_NAME.match(host)
    if m:
        return f"l{m.group(1)}"
    return host


def permutation(hosts: Sequence[str], seed: int, **flow_args) -> list[FlowSpec]:
    """A uniformly random derangement: every host sends one flow to exactly one other host and
    receives exactly one."""
    names = _check_hosts(hosts, at_least=2)
    rng = random.Random(seed)
    targets = list(names)
    while True:                     # rejection sampling: a shuffle is a derangement ~1/e of the time
        rng.shuffle(targets)
        if all(a != b for a, b in zip(names, targets)):
            break
    return _flows(list(zip(names, targets)), rng, **flow_args)


def all_to_all(hosts: Sequence[str], seed: int = 0, **flow_args) -> list[FlowSpec]:
    """One flow from every host to every other host (n * (n - 1) flows)."""
    names = _check_hosts(hosts, at_least=2)
    pairs = [(a, b) for a in names for b in names if a != b]
    return _flows(pairs, random.Random(seed), **flow_args)


def incast(hosts: Sequence[str], receiver: str, senders: int | Sequence[str], seed: int = 0,
           **flow_args) -> list[FlowSpec]:
    """``senders`` (names, or how many to draw from the other hosts) each send one flow to
    ``receiver``, all at the same time."""
    names = _check_hosts(hosts, at_least=2)
    if receiver not in names:
        raise ValueError(f"incast receiver {receiver!r} is not one of the hosts")
    rng = random.Random(seed)
    others = [h for h in names if h != receiver]
    if isinstance(senders, int):
        if not 1 <= senders <= len(others):
            raise ValueError(f"incast of {senders} senders: 1..{len(others)} other hosts exist")
        chosen = rng.sample(others, senders)
    else:
        chosen = list(senders)
        unknown = [s for s in chosen if s not in names]
        if unknown or receiver in chosen or len(set(chosen)) != len(chosen) or not chosen:
            raise ValueError(f"incast senders {chosen!r}: they must be distinct hosts other than the "
                             f"receiver {receiver!r}" + (f" (unknown: {unknown})" if unknown else ""))
    return _flows([(s, receiver) for s in chosen], rng, **flow_args)


def ring_order(hosts: Sequence[str], seed: int, group_of: Callable[[str], str] = pod_of) -> list[str]:
    """The hosts in a seeded ring order in which neighbours (the last and the first too) are in
    different groups (pods) wherever the group sizes allow it (no group holds more than half)."""
    return _ring(_check_hosts(hosts, at_least=2), random.Random(seed), group_of)


def collective(hosts: Sequence[str], seed: int, group_of: Callable[[str], str] = pod_of,
               **flow_args) -> list[FlowSpec]:
    """One step of a ring AllReduce: host i of the seeded ring order (`ring_order`) sends one long
    flow to host i+1, the last to the first. A flow is ``LONG_FLOW_FACTOR`` times a default flow
    unless ``size`` says otherwise."""
    rng = random.Random(seed)
    order = _ring(_check_hosts(hosts, at_least=2), rng, group_of)
    protocol = flow_args.get("protocol", "udp")
    flow_args.setdefault("size", LONG_FLOW_FACTOR * (DEFAULT_UDP_PACKETS if protocol == "udp" else DEFAULT_TCP_BYTES))
    pairs = [(order[i], order[(i + 1) % len(order)]) for i in range(len(order))]
    return _flows(pairs, rng, **flow_args)


def _ring(names: list[str], rng: random.Random, group_of: Callable[[str], str]) -> list[str]:
    """Groups and the hosts within each are shuffled; then, one host at a time, the group with
    the most hosts left that is not the previous host's (ties: the first host's group, so it
    is used up early and the ring closes across groups, then the shuffled order)."""
    groups: dict[str, list[str]] = {}
    for h in names:
        groups.setdefault(group_of(h), []).append(h)
    members = list(groups.values())
    for m in members:
        rng.shuffle(m)
    rng.shuffle(members)
    order: list[str] = []
    prev = first = -1
    while len(order) < len(names):
        candidates = [i for i, m in enumerate(members) if m and i != prev] or [prev]
        pick = max(candidates, key=lambda i: (len(members[i]), i == first, -i))
        order.append(members[pick].pop())
        if first < 0:
            first = pick
        prev = pick
    return order


def _check_hosts(hosts: Sequence[str], at_least: int) -> list[str]:
    names = list(hosts)
    if len(set(names)) != len(names):
        dup = sorted({h for h in names if names.count(h) > 1})
        raise ValueError(f"host names repeat: {dup}")
    if len(names) < at_least:
        raise ValueError(f"{len(names)} host(s) given, the pattern needs at least {at_least}")
    return names


def _flows(pairs: list[tuple[str, str]], rng: random.Random, *, protocol: str = "udp", size: int | None = None,
           payload: int = 256, rate_pps: float = 100.0, dport: int | None = None,
           start: float = 0.0) -> list[FlowSpec]:
    """FlowSpecs for (src, dst) pairs, with source ports drawn from ``rng``, distinct per source
    host (a host binds each of its flows' source ports)."""
    if size is None:
        size = DEFAULT_UDP_PACKETS if protocol == "udp" else DEFAULT_TCP_BYTES
    if dport is None:
        dport = ROCEV2_PORT if protocol == "udp" else TCP_PORT
    lo, hi = ENTROPY_PORTS
    used: dict[str, set[int]] = {}
    flows = []
    for src, dst in pairs:
        taken = used.setdefault(src, set())
        if len(taken) > hi - lo:
            raise ValueError(f"host {src} has more flows than source ports {lo}..{hi}")
        while (sport := rng.randint(lo, hi)) in taken:
            pass
        taken.add(sport)
        flows.append(FlowSpec(src, dst, protocol, sport, dport, size, start, payload, rate_pps))
    return flows
