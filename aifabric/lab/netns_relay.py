"""What a named lab serves (``--web``, ``--metrics``) reached from the machine's namespace. The
lab listens inside its own network namespace (aifabric.lab.named_labs), where a browser or a
Prometheus on the machine cannot connect; the command outside relays: it listens on the same
address in the machine's namespace and, for each connection, connects to that address inside
the lab's namespace and copies the bytes both ways until either side closes. A connection made
before the lab serves is closed at once (a browser tries again)."""
from __future__ import annotations

import selectors
import socket
import threading
from pathlib import Path

from hostagent.netns import enter_netns

CONNECT_TIMEOUT_S = 5.0
CHUNK = 65536


class Relay:
    """``host:port`` of the machine's namespace relayed to ``host:port`` inside the namespace at
    ``netns_path`` (a wildcard host to the loopback there); bound at construction (OSError when
    the address is taken here), serving from `start` until `close`."""

    def __init__(self, host: str, port: int, netns_path: Path):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.create_server((host, port), family=family)
        self.address = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
        wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
        self.target = (wildcard.get(host, host), port)
        self.netns_path = netns_path
        self.relayed = 0                # connections carried to the lab
        self.refused = 0                # connections the lab did not take (not serving yet, or gone)
        self._count = threading.Lock()  # each connection's thread counts it
        self._thread = threading.Thread(target=self._serve, name=f"relay {self.address}", daemon=True)

    def start(self) -> "Relay":
        self._thread.start()
        return self

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)        # wakes the accept below
        except OSError:
            pass
        self.listener.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        enter_netns(self.netns_path)        # this thread's connections, and its helpers', are the lab's
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return                      # closed
            threading.Thread(target=self._carry, args=(client,), daemon=True).start()

    def _carry(self, client: socket.socket) -> None:
        with client:
            try:
                upstream = socket.create_connection(self.target, timeout=CONNECT_TIMEOUT_S)
            except OSError:
                with self._count:
                    self.refused += 1
                return
            with self._count:
                self.relayed += 1
            with upstream:
                upstream.settimeout(None)
                _copy_both_ways(client, upstream)


def _copy_both_ways(a: socket.socket, b: socket.socket) -> None:
    """Bytes from each socket to the other; a side that ends its sending has the other told
    (shutdown), and the copy ends when both have, or on an error."""
    peer = {a: b, b: a}
    with selectors.DefaultSelector() as sel:
        for s in peer:
            sel.register(s, selectors.EVENT_READ)
        while sel.get_map():
            for key, _ in sel.select():
                src = key.fileobj
                try:
                    data = src.recv(CHUNK)
                    if data:
                        peer[src].sendall(data)
                        continue
                    sel.unregister(src)
                    peer[src].shutdown(socket.SHUT_WR)
                except OSError:
                    return
