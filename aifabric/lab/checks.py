"""Measurements on a running fabric, shared by the demos and the end-to-end tests."""
from __future__ import annotations

import math
import time
from typing import Callable

from aifabric.lab import traffic
from aifabric.lab.lab import Lab, rss_mib
from aifabric.lab.report import Failed, Measured
from topologies.fabric import Role

Progress = Callable[[str], None]


def all_pairs(lab: Lab, family: str, progress: Progress | None = None, nic: int = 0,
              wait_s: int | None = None) -> traffic.Reachability:
    """Every host pings every other host over ``ipv4`` or ``ipv6``, at the address of its NIC
    number ``nic`` (1: a dual-plane host's NIC on the second plane), waiting ``wait_s`` for
    each answer (default: `echo_wait_s`)."""
    wait_s = echo_wait_s(lab) if wait_s is None else wait_s
    plan = {h.name: h.nics()[nic] for h in lab.fabric.hosts}
    hosts = [lab.host(h.name) for h in lab.fabric.hosts]
    attr = "ip4" if family == "ipv4" else "ip6"
    return traffic.all_pairs_ping(hosts, lambda h: str(getattr(plan[h.name], attr).ip), family, progress,
                                  wait_s=wait_s)


def echo_wait_s(lab: Lab) -> int:
    """How long an echo request is waited for: 2 s, or twice as long as the lab's failure handler
    measures heartbeats arriving late now, whichever is longer (the machine is that slow: first
    echoes between pods went unanswered within 2 s while heartbeats ran 4-5 s late)."""
    handler = lab.failure_handler
    late_s = handler.monitor.lateness if handler is not None else 0.0
    return max(2, math.ceil(2 * late_s))


def memory_mib(pids: dict[str, int]) -> dict[str, Measured[float]]:
    """Resident memory of processes (name -> pid), MiB: mean, max and total; failed, naming
    them, when some are gone."""
    rss = {name: rss_mib(pid) for name, pid in pids.items()}
    gone = sorted(name for name, mib in rss.items() if mib == 0)      # rss_mib: 0 when the process is gone
    if gone:
        failed = Failed(f"process gone: {', '.join(gone)}")
        return {"mean": failed, "max": failed, "total": failed}
    return {"mean": round(sum(rss.values()) / len(rss), 1), "max": round(max(rss.values()), 1),
            "total": round(sum(rss.values()))}


def forwarded(lab: Lab, switch: str) -> int:
    """Packets a switch sent out of all its ports (its egress port counter)."""
    return sum(c.packets for c in lab.controller.read_port_counters(switch).values())


def ecmp_over_cores(lab: Lab, flows: int = 64, count: int = 10,
                    settle_timeout: float = 15.0) -> tuple[dict[str, int], Measured[int]]:
    """UDP flows (RoCEv2 port, one source port per flow) from the first host to the last (first
    pod to last pod): packets each core switch forwarded meanwhile, and datagrams sent (or why
    the sender failed)."""
    cores = [s.name for s in lab.fabric.switches if s.role == Role.CORE]
    src, dst = lab.fabric.hosts[0], lab.fabric.hosts[-1]
    before = {c: forwarded(lab, c) for c in cores}
    sent = traffic.udp_flows(lab.host(src.name), str(dst.ip4.ip), flows=flows, count=count)
    # a slow target may still be working through its input buffers: read until the counters settle
    after, deadline = None, time.monotonic() + settle_timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = {c: forwarded(lab, c) for c in cores}
        if now == after:
            break
        after = now
    return {c: after[c] - before[c] for c in cores}, sent
