"""Before a collective moves data, every rank learns every other rank's call header (operation,
dtype, element count, root, reduce op, whether the buffer holds NaN/Inf) by a dissemination
all-gather of a few bytes, and checks them against its own. All ranks see the same headers, so
all of them refuse a mismatch together, naming the ranks and the field, instead of exchanging
buffers that do not fit. An in-network float32 call's header also carries the rank's exponents of
its first chunks (one byte each), so the workers know the shared ones before the first packet and
send no priming round (aggregation.worker)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hostagent.collectives.arrays import DTYPES
from hostagent.collectives.links import Link, make_tag
from hostagent.collectives.reliable import CollectiveError

_ENTRY = struct.Struct("!HBBqiBBH")  # rank, operation, dtype, count, root, reduce op, nonfinite, exponents
STEP0 = (1 << 20) - 64  # header steps sit at the top of the call's step space


class Refused(CollectiveError):
    """A refusal every rank reaches by itself from the same headers: no abort message needed
    (one could overtake a slower rank's own, clearer verdict)."""


class Mismatch(Refused):
    """The ranks called different things (sizes, dtypes, roots, operations)."""


class NonFinite(Refused):
    """NaN or Inf in a buffer that in-network aggregation would have to quantise."""


@dataclass(frozen=True)
class CallHeader:
    operation: int
    dtype: int
    count: int
    root: int = -1
    reduce_op: int = 0
    nonfinite: bool = False
    exponents: bytes = b""      # in-network float32: biased exponents of the first chunks


FIELDS = ("operation", "dtype", "count", "root", "reduce_op")


def agree(link: Link, mine: CallHeader, compare: tuple[str, ...] = FIELDS) -> list[CallHeader]:
    """Every member's header, index by link index; raises Mismatch if a compared field differs."""
    n, me = link.size, link.me
    known = {me: mine}
    k = 0
    while (1 << k) < n:
        blob = b"".join(_pack(r, h) for r, h in known.items())
        link.transport.send(link.members[(me + (1 << k)) % n], _tag(link, k), blob, link.deadline, link.watch)
        got = link.transport.recv(link.members[(me - (1 << k)) % n], _tag(link, k), link.deadline, link.watch)
        off = 0
        while off < len(got):
            r, *fields, size = _ENTRY.unpack_from(got, off)
            off += _ENTRY.size + size
            known.setdefault(r, CallHeader(*fields[:5], nonfinite=bool(fields[5]), exponents=got[off - size:off]))
        k += 1
    headers = [known[r] for r in range(n)]
    for name in compare:
        values = {getattr(h, name) for h in headers}
        if len(values) > 1:
            raise Mismatch(f"{_field_name(name)} differs between ranks: {_describe(name, headers, link)}")
    return headers


def _pack(rank: int, h: CallHeader) -> bytes:
    return _ENTRY.pack(rank, h.operation, h.dtype, h.count, h.root, h.reduce_op, h.nonfinite, len(h.exponents)) + h.exponents


def _tag(link: Link, k: int) -> int:
    return make_tag(link.call, link.space, STEP0 + k)


def _field_name(name: str) -> str:
    return {"count": "element count (size)", "dtype": "dtype", "root": "root", "operation": "operation",
            "reduce_op": "reduce op"}[name]


def _describe(name: str, headers: list[CallHeader], link: Link) -> str:
    names = list(DTYPES)
    show = (lambda v: names[v]) if name == "dtype" else str
    return ", ".join(f"rank {link.members[i]}: {show(getattr(h, name))}" for i, h in enumerate(headers))
