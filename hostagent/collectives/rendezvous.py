"""Rendezvous: how the ranks of a process group find each other (torch.distributed's TCPStore /
env:// idea). One store listens on HOST:PORT (rank 0 runs it, or a process of its own); every rank
connects, registers its rank, the world size it expects and its group address (ip, port), and waits
until world_size ranks have registered; then every rank gets the same peer list, in rank order.

    peers = rendezvous("10.0.0.1:29500", rank, world_size, port=47000)   # rank 0 also runs the store

The wire is one JSON line each way over TCP. The store answers every waiting rank with the peers
or with one error naming what was wrong, so all ranks fail alike: ranks that never came before the
deadline, a rank registered twice, world sizes that differ, a rank outside 0..world_size-1.
"""
from __future__ import annotations

import json
import select
import socket
import threading
import time

DEFAULT_TIMEOUT_S = 60.0
CONNECT_RETRY_S = 0.05  # between attempts to reach a store that is not listening yet


class RendezvousError(ConnectionError):
    """The rendezvous failed; the message names why (on every rank alike when the store said it)."""


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"rendezvous address {address!r} is not HOST:PORT")
    return host, int(port)


class Store:
    """The store: serves one rendezvous of `world_size` ranks (None: the first rank's figure)
    on (host, port), answering everyone once all came or at the first error; then stops."""

    def __init__(self, host: str, port: int, world_size: int | None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.world_size = world_size
        self.timeout_s = timeout_s
        self._listener = socket.create_server((host, port), reuse_port=False)
        self.address = self._listener.getsockname()[:2]
        self.error: str | None = None  # why the rendezvous failed, once it did
        self._thread = threading.Thread(target=self._serve, name="rendezvous-store", daemon=True)

    def start(self) -> Store:
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _serve(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        waiting: dict[int, tuple[socket.socket, list]] = {}  # rank -> (its connection, its address)
        pending: dict[socket.socket, bytes] = {}              # connections whose line is not complete
        try:
            # after a failure the store stays until its deadline, so late ranks hear why too
            while self.world_size is None or len(waiting) < self.world_size or self.error:
                left = deadline - time.monotonic()
                if left <= 0:
                    if not self.error:
                        missing = [r for r in range(self.world_size or 0) if r not in waiting]
                        self.error = (f"rendezvous timed out after {self.timeout_s:g} s: rank(s) {missing} never registered"
                                      if self.world_size else f"rendezvous timed out after {self.timeout_s:g} s: no rank registered")
                        self._fail(waiting)
                    break
                readable, _, _ = select.select([self._listener, *pending], [], [], min(left, 0.5))
                for s in readable:
                    if s is self._listener:
                        conn, _ = s.accept()
                        pending[conn] = b""
                        continue
                    chunk = s.recv(4096)
                    if not chunk:  # gone before saying anything
                        del pending[s]
                        s.close()
                        continue
                    pending[s] += chunk
                    if b"\n" in pending[s]:
                        self._register(s, pending.pop(s), waiting)
            if not self.error:
                reply = {"peers": [waiting[r][1] for r in range(len(waiting))]}
                for conn, _ in waiting.values():
                    _send_line(conn, reply)
        finally:
            for conn, _ in waiting.values():
                conn.close()
            for conn in pending:
                conn.close()
            self._listener.close()

    def _fail(self, waiting: dict) -> None:
        """Every rank that registered hears the error at once."""
        for conn, _ in waiting.values():
            _send_line(conn, {"error": self.error})
            conn.close()
        waiting.clear()

    def _register(self, conn: socket.socket, line: bytes, waiting: dict) -> None:
        try:
            msg = json.loads(line)
            rank, world, address = int(msg["rank"]), int(msg["world_size"]), [str(msg["address"][0]), int(msg["address"][1])]
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            _send_line(conn, {"error": f"rendezvous: a registration the store cannot read ({exc})"})
            conn.close()
            return
        if self.world_size is None:
            self.world_size = world
        if self.error:  # an earlier failure: a late rank hears it too
            pass
        elif world != self.world_size:
            others = sorted({r for r in waiting})
            self.error = (f"rendezvous: world sizes differ: rank {rank} says {world}, the store expects {self.world_size}"
                          + (f" (as rank(s) {others} said)" if others else ""))
        elif not 0 <= rank < world:
            self.error = f"rendezvous: rank {rank} is outside 0..{world - 1} (world size {world})"
        elif rank in waiting:
            self.error = (f"rendezvous: rank {rank} registered twice (from {waiting[rank][1][0]}:{waiting[rank][1][1]} "
                          f"and {address[0]}:{address[1]})")
        if self.error:
            self._fail(waiting)
            _send_line(conn, {"error": self.error})  # this rank is not in `waiting`: tell it now
            conn.close()
            return
        waiting[rank] = (conn, address)


def rendezvous(address: str, rank: int, world_size: int, *, ip: str | None = None, port: int,
               timeout_s: float = DEFAULT_TIMEOUT_S, run_store: bool | None = None) -> list[tuple[str, int]]:
    """This rank's registration at the store on `address` (HOST:PORT); returns every rank's
    (ip, port) in rank order. ip: this rank's group address (default: the local address this host
    reaches the store from). run_store: this rank runs the store (default: rank 0 does)."""
    host, store_port = parse_address(address)
    if run_store if run_store is not None else rank == 0:
        Store(host, store_port, world_size, timeout_s).start()
    deadline = time.monotonic() + timeout_s
    conn = _connect(host, store_port, deadline, address)
    try:
        ip = ip or conn.getsockname()[0]
        _send_line(conn, {"rank": rank, "world_size": world_size, "address": [ip, port]})
        reply = _read_line(conn, deadline + 1.0, address)  # the store answers by its own deadline
    finally:
        conn.close()
    if "error" in reply:
        raise RendezvousError(f"rank {rank}: {reply['error']}")
    return [(str(a[0]), int(a[1])) for a in reply["peers"]]


def _connect(host: str, port: int, deadline: float, address: str) -> socket.socket:
    while True:
        try:
            return socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic()))
        except OSError as exc:
            if time.monotonic() + CONNECT_RETRY_S >= deadline:
                raise RendezvousError(f"no rendezvous store reachable at {address} before the deadline ({exc})") from exc
            time.sleep(CONNECT_RETRY_S)


def _send_line(conn: socket.socket, msg: dict) -> None:
    try:
        conn.sendall(json.dumps(msg).encode() + b"\n")
    except OSError:
        pass  # that rank is gone; its own deadline tells it


def _read_line(conn: socket.socket, deadline: float, address: str) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise RendezvousError(f"the rendezvous store at {address} did not answer before the deadline")
        conn.settimeout(left)
        try:
            chunk = conn.recv(4096)
        except (TimeoutError, socket.timeout):
            continue
        except OSError as exc:
            raise RendezvousError(f"the rendezvous store at {address} dropped the connection ({exc})") from exc
        if not chunk:
            raise RendezvousError(f"the rendezvous store at {address} closed the connection without an answer")
        data += chunk
    return json.loads(data)
