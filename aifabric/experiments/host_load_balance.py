"""Load balancing from the hosts in the load-balancing bench: the switches run ECMP and the hosts
choose their flows' source ports with the fabric's hash (`controller.load_balance.hash_paths`).

* ``disjoint``: every flow keeps its size and rate, on a source port that puts it on a path
  no other flow of the run shares where the fabric allows (`disjoint_ports`);
* ``qp-scaling``: every flow becomes ``qps`` flows (queue pairs) of the same peer pair, on
  source ports whose paths differ, each with its share of the packets at its share of the
  rate (messages round-robin over the QPs), as Meta's collective library spreads a peer pair.

`spread` returns the flows to run and, for each, the index of the flow it came from, so that
`merge_queue_pairs` can put a flow's figures back together (complete when all its QPs are, its
completion time the last QP's).
"""
from __future__ import annotations

import random
from dataclasses import replace

from controller.load_balance.disjoint import disjoint_ports, qp_ports
from controller.load_balance.hash_paths import FiveTuple, HashPaths
from hostagent.traffic.flows import FlowSpec

HOST_MODES = ("qp-scaling", "disjoint")
DEFAULT_QPS = 4         # queue pairs a peer pair (NCCL_IB_QPS_PER_CONNECTION; Meta's paper does not print its own)


def spread(controller, mode: str, flows: list[FlowSpec], seed: int,
           qps: int = DEFAULT_QPS) -> tuple[list[FlowSpec], list[int]]:
    """The flows ``mode`` runs in place of ``flows``, and each one's original's index."""
    if mode not in HOST_MODES:
        raise ValueError(f"host load-balancing mode {mode!r}: one of {', '.join(HOST_MODES)}")
    tuples = [FiveTuple(f.src, f.dst, f.sport, f.dport, f.protocol) for f in flows]
    with HashPaths.of(controller) as paths:
        if mode == "disjoint":
            chosen = disjoint_ports(paths, tuples, seed)
            return [replace(f, sport=t.sport) for f, t in zip(flows, chosen)], list(range(len(flows)))
        return _queue_pairs(paths, flows, tuples, seed, qps)


def _queue_pairs(paths: HashPaths, flows: list[FlowSpec], tuples: list[FiveTuple], seed: int,
                 qps: int) -> tuple[list[FlowSpec], list[int]]:
    rng = random.Random(seed)
    taken: dict[str, set[int]] = {}
    for f in flows:
        taken.setdefault(f.src, set()).add(f.sport)
    out, parents = [], []
    for i, (flow, five) in enumerate(zip(flows, tuples)):
        if flow.protocol != "udp" or flow.size < qps:
            raise ValueError(f"QP scaling: flow {flow.src}->{flow.dst} ({flow.protocol}, {flow.size} "
                             f"datagrams) cannot be split over {qps} queue pairs (UDP, at least one datagram each)")
        for k, qp in enumerate(qp_ports(paths, five, qps, rng, taken[flow.src])):
            size = flow.size // qps + (k < flow.size % qps)
            out.append(replace(flow, sport=qp.sport, size=size, rate_pps=flow.rate_pps / qps))
            parents.append(i)
    return out, parents


def merge_queue_pairs(summaries: list[dict], parents: list[int]) -> list[dict]:
    """Per original flow: the QPs' summaries (`FlowResult.summary`) put back together."""
    groups: dict[int, list[dict]] = {}
    for summary, parent in zip(summaries, parents):
        groups.setdefault(parent, []).append(summary)
    merged = []
    for parent, parts in sorted(groups.items()):
        first = parts[0]
        fcts = [p["fct_s"] for p in parts]
        ooo = [p["out_of_order"] for p in parts]
        merged.append({**first, "id": parent, "qps": len(parts),
                       "complete": all(p["complete"] for p in parts),
                       "delivered_bytes": sum(p["delivered_bytes"] for p in parts),
                       "fct_s": None if None in fcts else max(fcts),
                       "out_of_order": None if None in ooo else sum(ooo),
                       "lost": sum(p["lost"] for p in parts),
                       "sender_late_s": max(p["sender_late_s"] or 0 for p in parts),
                       "error": "; ".join(p["error"] for p in parts if p["error"])})
    return merged
