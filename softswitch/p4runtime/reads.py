"""Read RPCs: copies taken under the lock, the answer built outside it.

A Read holds the switch's config lock only while it validates its entities and copies what they
name: table entries as `EntryView`s, counter, meter and register cells, members, groups, PRE
records. Each object is copied at most once per Read (`ReadScope.once`), however many of the
Read's entities name it. The entities are built from those copies after the lock is released,
lazily, serialized one by one into ReadResponses of at most `CHUNK_ENTITIES` entities and
`CHUNK_BYTES` bytes; building stops with DEADLINE_EXCEEDED or CANCELLED (`Stopped`) as soon as
the client's deadline passes or the client goes away, checked every `CHECK_EVERY` entries built
or skipped. So a Write waits for a Read's copying, never for its building or its client.

A Read of more than `PLAN_SLICE` distinct entities takes the lock once per slice of that many:
each slice sees a write batch whole or not at all, but two slices may see different batches
(the specification asks a server to lock the state for the whole batch; softswitch does for
any Read of up to `PLAN_SLICE` entities, and bounds how long any Read holds writes off).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol, TypeVar

from p4.v1 import p4runtime_pb2

from . import wire
from .errors import P4RTError, INTERNAL

CHUNK_ENTITIES = 1000         # entities per ReadResponse
CHUNK_BYTES = 1 << 20         # bytes per ReadResponse (clients accept 4 MiB by default)
CHECK_EVERY = 64              # entries built or skipped between two looks at the client
PLAN_SLICE = 1000             # distinct entities validated and copied per hold of the lock

T = TypeVar("T")
_ENTITIES = p4runtime_pb2.ReadResponse.DESCRIPTOR.fields_by_name["entities"].number


class Stopped(P4RTError):
    """The client's deadline passed or the client went away: the RPC ends with this status."""


class Watch(Protocol):
    """The client of an RPC as the device sees it (server.py adapts a gRPC context)."""

    def check(self) -> None:
        """Raise `Stopped` once the client is gone or its deadline has passed."""

    def remaining(self) -> float | None:
        """Seconds left until the client's deadline (None: no deadline)."""


class ReadScope:
    """One Read: its pipeline, the copies it has taken, and the client to watch."""

    def __init__(self, pipe: Any, watch: Watch | None = None):
        self.pipe = pipe
        self.watch = watch
        self._copies: dict[Any, Any] = {}
        self._ticks = 0

    def once(self, key: Any, take: Callable[[], T]) -> T:
        """``take()`` the first time ``key`` is asked for in this Read, the same copy after."""
        if key not in self._copies:
            self._copies[key] = take()
        return self._copies[key]

    def tick(self) -> None:
        """Count one entry built or skipped; every CHECK_EVERY, look at the client."""
        self._ticks += 1
        if self.watch is not None and self._ticks % CHECK_EVERY == 0:
            self.watch.check()

    def each(self, items: Iterable[T], build: Callable[[T], p4runtime_pb2.Entity | None]
             ) -> Iterator[p4runtime_pb2.Entity]:
        """The entities ``build`` makes of copied ``items`` (None: skipped), built lazily."""
        for item in items:
            self.tick()
            entity = build(item)
            if entity is not None:
                yield entity


@dataclass
class ReadPlan:
    """Per distinct entity of a Read: the lazy answer, or the error that replaces it."""

    answers: list[Iterator[p4runtime_pb2.Entity] | None] = field(default_factory=list)
    errors: list[P4RTError | None] = field(default_factory=list)

    def entities(self) -> Iterator[p4runtime_pb2.Entity]:
        """Every answer in order; an error while building one becomes that entity's error
        (`Stopped` ends the whole Read)."""
        for i, answer in enumerate(self.answers):
            if answer is None:
                continue
            try:
                yield from answer
            except Stopped:
                raise
            except P4RTError as e:
                self.errors[i] = e.detached()
            except Exception as e:        # a bug must not take the server down; report it
                self.errors[i] = P4RTError(INTERNAL, f"internal error: {type(e).__name__}: {e}")


def responses(entities: Iterable[p4runtime_pb2.Entity]) -> Iterator[bytes]:
    """Serialized ReadResponses holding ``entities`` (at least one response, maybe empty)."""
    chunk: list[bytes] = []
    size = 0
    for e in entities:
        piece = wire.length_delimited(_ENTITIES, e.SerializeToString())
        if chunk and (len(chunk) >= CHUNK_ENTITIES or size + len(piece) > CHUNK_BYTES):
            yield b"".join(chunk)
            chunk, size = [], 0
        chunk.append(piece)
        size += len(piece)
    yield b"".join(chunk)
