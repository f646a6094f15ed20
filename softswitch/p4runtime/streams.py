"""StreamChannel admission: how many streams a device keeps open, and how long one may stay silent.

The policy, so that idle or surplus streams can never lock a controller out:

- `MAX_JOINED_STREAMS` (8, arbitration.py): streams that have sent an arbitration update, all
  roles together. When all are taken, a newcomer whose election id would make it primary of its
  role takes the place of the oldest stream that is not a primary (that stream ends with
  RESOURCE_EXHAUSTED); any other newcomer is refused with RESOURCE_EXHAUSTED.
- `MAX_PENDING_STREAMS` (4): open streams that have not arbitrated yet. A new stream always
  opens; when that many are already waiting, the oldest of them ends with RESOURCE_EXHAUSTED.
- `ARBITRATION_TIMEOUT` (10 s): a stream that has not arbitrated by then ends with
  DEADLINE_EXCEEDED.

A stream's places are freed as soon as gRPC reports the call over (its client cancelled,
disconnected or let its deadline pass, or its host stopped answering pings: server.py),
whatever its own threads are doing.

So a controller that opens a stream and arbitrates with the highest election id of its role
always gets in. A client that opens new streams faster than a controller's first message
reaches the server can still delay it; P4Runtime's answer to such clients is TLS with client
authentication (specification section 3.1.1), which this laboratory target does not offer.
Every open stream holds a worker thread, so the server sizes its pool as
MAX_JOINED_STREAMS + MAX_PENDING_STREAMS + the workers kept for unary RPCs.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from .arbitration import MAX_JOINED_STREAMS, Connection, EndOfStream
from .errors import DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED

MAX_PENDING_STREAMS = 4
ARBITRATION_TIMEOUT = 10.0          # seconds

__all__ = ["StreamSlots", "MAX_JOINED_STREAMS", "MAX_PENDING_STREAMS", "ARBITRATION_TIMEOUT"]


class StreamSlots:
    """The streams of one device that have not arbitrated yet, oldest first."""

    def __init__(self, max_pending: int = MAX_PENDING_STREAMS, timeout: float = ARBITRATION_TIMEOUT):
        self.max_pending = max_pending
        self.timeout = timeout
        self._lock = threading.Lock()
        self._pending: OrderedDict[Connection, threading.Timer] = OrderedDict()
        self._closed: set[Connection] = set()

    def admit(self, conn: Connection) -> None:
        """A new stream: it waits for its arbitration, making room if too many already wait."""
        timer = threading.Timer(self.timeout, self._expire, (conn,))
        timer.daemon = True
        with self._lock:
            while len(self._pending) >= self.max_pending:
                oldest, old_timer = self._pending.popitem(last=False)
                old_timer.cancel()
                self._close(oldest, RESOURCE_EXHAUSTED, f"stream closed before it arbitrated: at most "
                                                        f"{self.max_pending} streams may wait for their first "
                                                        f"arbitration update, and a newer one opened")
            self._pending[conn] = timer
        timer.start()

    def arbitrating(self, conn: Connection) -> bool:
        """``conn`` sent an arbitration update: False if it was already closed for waiting."""
        with self._lock:
            timer = self._pending.pop(conn, None)
            if timer is not None:
                timer.cancel()
            return conn not in self._closed

    def leave(self, conn: Connection) -> None:
        with self._lock:
            timer = self._pending.pop(conn, None)
            if timer is not None:
                timer.cancel()
            self._closed.discard(conn)

    def _expire(self, conn: Connection) -> None:
        with self._lock:
            if self._pending.pop(conn, None) is None:
                return
            self._close(conn, DEADLINE_EXCEEDED, f"no arbitration update within {self.timeout:g} s of opening "
                                                 f"the stream")

    def _close(self, conn: Connection, code: int, message: str) -> None:
        self._closed.add(conn)
        conn.outbox.put(EndOfStream(code, message))
