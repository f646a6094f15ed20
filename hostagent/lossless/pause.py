"""The pause state of a host's classes, as the eBPF programs keep it (bpf/pause.c): its layout,
and the reader a sender uses to hold a paused class (standard library only: the senders run
in the hosts with any Python)."""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from hostagent.agent.bpf.inventory import MapReader, map_fd

KEY = struct.Struct("=II")             # struct pause_key: host id, priority
VALUE = struct.Struct("=7Q")           # struct pause_val
CLASSES = 8


@dataclass(frozen=True)
class PauseCounters:
    """One class of one host: pauses and XONs received, time paused, frames sent and sent while
    paused (what a sender that honours pause keeps at zero)."""
    until_ns: int
    since_ns: int
    paused_ns: int
    pauses: int
    xons: int
    tx: int
    tx_paused: int

    def paused_total_ns(self, now_ns: int) -> int:
        """Time paused in all, the pause under way included (queues.EgressQueue's arithmetic)."""
        return self.paused_ns + max(0, min(now_ns, self.until_ns) - self.since_ns)

    @classmethod
    def unpack(cls, raw: bytes) -> "PauseCounters":
        return cls(*VALUE.unpack(raw[:VALUE.size]))


def parse_arg(text: str) -> tuple[int, int]:
    """A sender's ``--pause MAP_ID:HOST_ID``; ValueError naming the text."""
    map_id, sep, host = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(map_id), int(host)
    except ValueError:
        raise ValueError(f"--pause {text!r}: MAP_ID:HOST_ID (hostagent.lossless.HostPause.sender_arg)") from None


class PauseReader:
    """A sender's view of its host's pause state: until when each class is held."""

    def __init__(self, map_id: int, host: int):
        self.host = host
        self._map = MapReader(map_fd(map_id), VALUE.size)
        self._keys = [KEY.pack(host, c) for c in range(CLASSES)]

    @classmethod
    def from_arg(cls, text: str) -> "PauseReader":
        return cls(*parse_arg(text))

    def counters(self, priority: int) -> PauseCounters | None:
        raw = self._map.get(self._keys[priority])
        return None if raw is None else PauseCounters.unpack(raw)

    def held_ns(self, priority: int, now_ns: int | None = None) -> int:
        """How much longer class ``priority`` is paused (0: it may send)."""
        raw = self._map.get(self._keys[priority])
        if raw is None:
            return 0
        until = VALUE.unpack_from(raw)[0]
        now = time.monotonic_ns() if now_ns is None else now_ns
        return until - now if until > now else 0

    def close(self) -> None:
        self._map.close()
