"""Retransmission timeouts of the host's TCP connections, from the kernel's sock_diag (tcp_info).

Packets alone cannot tell an RTO from a fast retransmit, and a kprobe on the RTO path would
read kernel structures through headers of another kernel version, so the agent asks the
sockets: between two polls a connection had an RTO when it entered TCP_CA_Loss (the state an
RTO puts it in) or its count of unrecovered timeouts (tcpi_retransmits) grew. An RTO that
both fired and recovered between two polls (less than one PLB round) goes unseen.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass

from pyroute2.netlink.diag import NETLINK_SOCK_DIAG, DiagSocket, MarshalDiag
from pyroute2.netlink.nlsocket import NetlinkSocket

from hostagent.agent.flowkey import FlowKey

INET_DIAG_INFO_EXT = 1 << 1          # 1 << (INET_DIAG_INFO - 1)
TCP_CA_LOSS = 4
TCP_STATES = 0xFFF


@dataclass(frozen=True)
class TcpSample:
    ca_state: int
    retransmits: int     # tcpi_retransmits: timeouts not yet recovered
    backoff: int


class _NsDiagSocket(DiagSocket):
    """DiagSocket in a given network namespace (DiagSocket itself takes none)."""

    def __init__(self, netns: str | None):
        NetlinkSocket.__init__(self, NETLINK_SOCK_DIAG, netns=netns)
        self.set_marshal(MarshalDiag())


def _open(netns: str | None) -> DiagSocket:
    ds = DiagSocket() if netns is None else _NsDiagSocket(netns)
    ds.bind()
    return ds


class RtoWatch:
    """Polls the TCP sockets of one network namespace (default: this process's)."""

    def __init__(self, netns: str | None = None):
        self.diag = _open(netns)
        self.last: dict[FlowKey, TcpSample] = {}

    def sample(self) -> dict[FlowKey, TcpSample]:
        out: dict[FlowKey, TcpSample] = {}
        for family in (socket.AF_INET, socket.AF_INET6):
            for msg in self.diag.get_sock_stats(family=family, states=TCP_STATES, extensions=INET_DIAG_INFO_EXT):
                info = msg.get_attr("INET_DIAG_INFO")
                if not info or not msg["idiag_dport"]:
                    continue                          # listeners
                src, dst = _plain(msg["idiag_src"]), _plain(msg["idiag_dst"])
                try:
                    key = FlowKey(src, dst, "tcp", msg["idiag_sport"], msg["idiag_dport"])
                except ValueError:
                    continue
                out[key] = TcpSample(info["tcpi_ca_state"], info["tcpi_retransmits"], info["tcpi_backoff"])
        return out

    def poll(self) -> set[FlowKey]:
        """The connections that had an RTO since the last poll."""
        now = self.sample()
        rto = {k for k, s in now.items()
               if (s.ca_state == TCP_CA_LOSS and (k not in self.last or self.last[k].ca_state != TCP_CA_LOSS))
               or (k in self.last and s.retransmits > self.last[k].retransmits)}
        self.last = now
        return rto

    def close(self) -> None:
        self.diag.close()


def _plain(addr: str) -> str:
    return addr[7:] if addr.startswith("::ffff:") else addr
