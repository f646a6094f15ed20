"""``HOST:PORT`` addresses as the command lines take them (``--grpc-server-addr``,
``--runtime-addr``, ``softswitch-ctl --addr``, ``aifabric --metrics``), parsed strictly."""
from __future__ import annotations

import argparse
import socket


def parse_host_port(text: str, *, allow_port_zero: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (an IPv6 host in brackets: ``[::1]:9559``) as (host, port), the brackets
    removed; ValueError naming ``text`` when the host is empty or the port is not 1..65535
    (0..65535 with ``allow_port_zero``: any free port)."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    least = 0 if allow_port_zero else 1
    if not sep or not host or ":" in host and not text.startswith("["):
        raise ValueError(f"'{text}' is not HOST:PORT (e.g. 127.0.0.1:9090, [::1]:9090)")
    if not port.isascii() or not port.isdigit() or not least <= int(port) <= 65535:
        raise ValueError(f"'{text}': port '{port}' is not a number in {least}..65535")
    return host, int(port)


def host_port_arg(text: str) -> str:
    """argparse ``type=`` for a HOST:PORT option: the text itself, checked."""
    try:
        parse_host_port(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def check_bindable(host: str, port: int) -> None:
    """OSError naming why a TCP server could not listen on HOST:PORT now (in use, not an address
    of this machine, a name that does not resolve); port 0 is always free. Checked before a gRPC
    server binds: gRPC's own failure also writes a log line of its own to stderr."""
    if port == 0:
        return
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                              flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as e:
        raise OSError(e.strerror) from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)    # as gRPC's listener: TIME_WAIT is free
        try:
            probe.bind(sockaddr)
        except OSError as e:
            raise OSError(e.strerror) from None
