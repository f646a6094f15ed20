"""What static ECMP would do with the same flows, for comparison with placement.

At every switch with more than one equal-cost next hop towards the flow's destination switch,
the model picks next hop ``hash(5-tuple, switch seed) mod group size`` (next hops in port order).
The hash is keyed BLAKE2b over the packed 5-tuple with the switch's device id as key: a model of
per-switch seeded hashing (independent choices at every switch, as the fabric's seeds intend),
not the switch's exact hash, so it predicts how often ECMP collides, not which flows do.
"""
from __future__ import annotations

import hashlib
import ipaddress
import struct
from typing import Iterable

from controller.load_balance.te.flows import Flow
from controller.load_balance.te.nexthops import PathSpace


def flow_bytes(flow: Flow) -> bytes:
    """The 5-tuple as the hash input: source and destination address, protocol, ports."""
    k = flow.key
    return (ipaddress.ip_address(k.src_ip).packed + ipaddress.ip_address(k.dst_ip).packed
            + struct.pack("!BHH", k.protocol, k.src_port, k.dst_port))


def ecmp_choice(data: bytes, seed: int, members: int) -> int:
    """Which of ``members`` next hops a switch with ``seed`` sends the flow ``data`` to."""
    digest = hashlib.blake2b(data, digest_size=8, key=seed.to_bytes(8, "big")).digest()
    return int.from_bytes(digest, "big") % members


def ecmp_path(flow: Flow, space: PathSpace) -> tuple[int, ...]:
    """The directed links (host uplink first, host downlink last) ECMP sends ``flow`` over."""
    index = space.index
    src, dst = index.host(flow.src_host), index.host(flow.dst_host)
    data = flow_bytes(flow)
    path = [src.uplink]
    switch = src.switch
    while switch != dst.switch:
        hops = space.next_hops(switch, dst.switch)
        if not hops:
            raise ValueError(f"flow {flow}: no route from {index.names[switch]} to "
                             f"{index.names[dst.switch]}")
        link, switch = hops[0] if len(hops) == 1 else hops[ecmp_choice(data, index.device_ids[switch], len(hops))]
        path.append(link)
    path.append(dst.downlink)
    return tuple(path)


def ecmp_paths(flows: Iterable[Flow], space: PathSpace) -> dict[Flow, tuple[int, ...]]:
    return {flow: ecmp_path(flow, space) for flow in flows}
