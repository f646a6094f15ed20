"""The statuses the server ends RPCs with, bounded so that any gRPC client can read them.

A status travels in the response's trailers, and gRPC clients refuse trailers larger than their
``grpc.max_metadata_size`` (8 KiB by default): the client then sees RESOURCE_EXHAUSTED instead of
the server's answer. So every message is at most `MAX_STATUS_MESSAGE` characters, and the
``grpc-status-details-bin`` trailer of a batch (a google.rpc.Status with one p4.v1.Error per
update, specification section 12.2) at most `MAX_DETAILS_BYTES` bytes. A batch whose errors do
not all fit (the specification asks for one p4.v1.Error per update, in order, and advises clients
to raise their metadata limit instead) keeps the first details in order, as many as fit, and its
message says so and counts the failures of each code: the codes of the listed updates stay where
the specification puts them, and a client with the default limit still gets the answer.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from google.protobuf import any_pb2
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2

from .errors import ERROR_SPACE, OK, UNKNOWN, P4RTError, clip

MAX_STATUS_MESSAGE = 512          # characters of the status message (grpc-message)
MAX_DETAIL_MESSAGE = 256          # characters of each p4.v1.Error message
MAX_DETAILS_BYTES = 4096          # serialized google.rpc.Status in grpc-status-details-bin
FIRST_FAILURES = 3                # failures quoted in the status message


def status_message(message: str) -> str:
    return clip(message, MAX_STATUS_MESSAGE)


def _detail(e: P4RTError | None) -> any_pb2.Any:
    err = (p4runtime_pb2.Error(canonical_code=OK) if e is None else
           p4runtime_pb2.Error(canonical_code=e.code, message=clip(e.message, MAX_DETAIL_MESSAGE), space=ERROR_SPACE))
    out = any_pb2.Any()
    out.Pack(err)
    return out


def batch_status(errors: Sequence[P4RTError | None], what: str, plural: str) -> status_pb2.Status:
    """UNKNOWN with one p4.v1.Error per element of the batch (OK for the ones that worked), as
    many as `MAX_DETAILS_BYTES` holds, in order."""
    failed = [(i, e) for i, e in enumerate(errors) if e is not None]
    counts = Counter(e.code_name for _, e in failed)
    by_code = ", ".join(f"{n} {name}" for name, n in counts.most_common())
    first = "; ".join(f"{what} {i}: {e.code_name}: {clip(e.message, 120)}" for i, e in failed[:FIRST_FAILURES])
    more = f"; and {len(failed) - FIRST_FAILURES} more" if len(failed) > FIRST_FAILURES else ""
    status = status_pb2.Status(code=UNKNOWN)
    size = 0
    for e in errors:
        d = _detail(e)
        cost = d.ByteSize() + 3                     # the field's tag and length prefix
        if size + cost > MAX_DETAILS_BYTES:
            break
        status.details.append(d)
        size += cost
    kept = len(status.details)
    note = "" if kept == len(errors) else \
        f" [details list {plural} 0..{kept - 1} only, to keep the trailer under {MAX_DETAILS_BYTES} bytes]"
    head = f"{len(failed)} of {len(errors)} {plural} failed ({by_code})"
    # the note goes before the quoted failures so that clipping never cuts it off
    status.message = status_message(f"{head}{note}: {first}{more}")
    return status

