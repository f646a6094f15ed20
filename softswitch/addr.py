"""``HOST:PORT`` addresses as the command lines take them (``--grpc-server-addr``,
``--runtime-addr``, ``softswitch-ctl --addr``, ``aifabric --metrics``), parsed strictly."""
from __future__ import annotations

import argparse


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
