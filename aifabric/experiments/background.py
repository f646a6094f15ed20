"""Storage-like background traffic beside a training job (``aifabric train --background SHARE``):
from every host that runs no rank, one paced UDP flow of full frames in class 0 (no DSCP) to a
rank's host, at SHARE of the link rate, for as long as the job runs, stopped with it. The flows
come into the ranks' hosts over the same downlinks as the job's own traffic, as a checkpoint or a
dataset read would."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

from aifabric.lab.links import MTU_FRAME, LinkRate
from hostagent.traffic import drive
from hostagent.traffic.flows import FlowSpec

BACKGROUND_PORT = 4300          # below the workload's groups' ports (train_runner.BASE_PORT)
PAYLOAD = MTU_FRAME - 42        # a full frame's UDP payload
LONGEST_S = 3600.0              # a flow's planned length: it is stopped when the job ends


def background_flows(hosts: Sequence[str], rank_hosts: Sequence[str], rate: LinkRate, share: float) -> list[FlowSpec]:
    """A flow from each host that runs no rank to a rank's host (in order, round the ranks)."""
    if not 0 < share <= 1:
        raise ValueError(f"--background {share:g}: a share of the link rate, above 0 and at most 1")
    others = [h for h in hosts if h not in set(rank_hosts)]
    if not others:
        raise ValueError("--background: every host runs a rank; no host is left to send from")
    pps = rate.packets_per_s(MTU_FRAME) * share
    return [FlowSpec(src, rank_hosts[i % len(rank_hosts)], "udp", BACKGROUND_PORT + i, BACKGROUND_PORT,
                     max(1, round(pps * LONGEST_S)), payload=PAYLOAD, rate_pps=pps)
            for i, src in enumerate(others)]


@contextmanager
def running(lab, flows: list[FlowSpec]) -> Iterator[list[FlowSpec]]:
    """``flows`` sent while the block runs (receivers listening first), stopped after it."""
    nodes = {n: lab.host(n) for n in {f.src for f in flows} | {f.dst for f in flows}}
    receivers = drive.start_receivers(nodes, flows, quiet=LONGEST_S, deadline=LONGEST_S)
    try:
        senders = drive.start_senders(nodes, flows, start_delay=0.2)
    except BaseException:
        drive.stop(receivers)
        raise
    try:
        yield flows
    finally:
        drive.stop([*senders, *receivers])
