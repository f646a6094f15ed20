"""Rate control of the UDP sender from outside: one datagram per change, on the host's loopback.

This is how a reaction point that lives outside the sender (the host agent's DCQCN,
`hostagent.agent`) sets a flow's sending rate. The kernels here have no fq qdisc (no EDT
pacing) and an HTB/TBF class shapes a whole interface, not a flow, so the sender paces each
flow itself and takes its rate from these messages: ``send --rate-control-port PORT`` listens
on 127.0.0.1:PORT of its network namespace (the host's), and the flow's rate becomes
min(its own rate_pps, the rate last received for it). Each message is 16 bytes, big-endian:
magic ``HARC``, flow id (u32, the BTH queue pair the flow's datagrams carry), rate in bits/s of
Ethernet frames (f64: the rate a NIC's limiter applies, headers included). Loopback datagrams
are neither lost nor reordered, and a message holds a whole rate, so a later one simply wins.
"""
from __future__ import annotations

import socket
import struct

RATE_CONTROL_PORT = 47910
_MAGIC = b"HARC"
_MSG = struct.Struct("!4sId")
ETHERNET_BYTES = 14
UDP_BYTES = 8
MAX_MESSAGES = 256          # read per poll at most


def pack_rate(flow_id: int, rate_bps: float) -> bytes:
    if not 0 <= flow_id < 1 << 32 or not rate_bps > 0:
        raise ValueError(f"rate control: flow {flow_id} rate {rate_bps} bits/s (a u32 id and a positive rate)")
    return _MSG.pack(_MAGIC, flow_id, rate_bps)


def unpack_rate(data: bytes) -> tuple[int, float] | None:
    """(flow id, bits/s), or None for anything that is not a rate message."""
    if len(data) != _MSG.size:
        return None
    magic, flow_id, rate = _MSG.unpack(data)
    if magic != _MAGIC or not rate > 0:
        return None
    return flow_id, rate


def frame_bytes(payload: int, ipv6: bool) -> int:
    """Ethernet frame bytes of one datagram with ``payload`` bytes of UDP payload."""
    return payload + UDP_BYTES + (40 if ipv6 else 20) + ETHERNET_BYTES


class RateListener:
    """The sender's end: a non-blocking UDP socket on 127.0.0.1:``port``."""

    def __init__(self, port: int):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.bind(("127.0.0.1", port))
        except OSError as err:
            self.sock.close()
            raise OSError(err.errno, f"rate control port 127.0.0.1:{port}: {err.strerror}") from None
        self.sock.setblocking(False)
        self.ignored = 0

    def poll(self) -> list[tuple[int, float]]:
        """The messages waiting, oldest first."""
        out = []
        for _ in range(MAX_MESSAGES):
            try:
                data = self.sock.recv(64)
            except BlockingIOError:
                break
            msg = unpack_rate(data)
            if msg is None:
                self.ignored += 1
            else:
                out.append(msg)
        return out

    def close(self) -> None:
        self.sock.close()


class RateClient:
    """The reaction point's end."""

    def __init__(self, port: int = RATE_CONTROL_PORT, sock: socket.socket | None = None):
        self.port = port
        self.sock = sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def set_rate(self, flow_id: int, rate_bps: float) -> None:
        try:
            self.sock.sendto(pack_rate(flow_id, rate_bps), ("127.0.0.1", self.port))
        except ConnectionRefusedError:      # no sender listening (yet): the next change tells it
            pass

    def close(self) -> None:
        self.sock.close()
