"""Which host path carries a process group's reliable transport, and why (as softswitch's
--native chooses its packet path).

    auto     the default: the native engine (hostagent/collectives/native: the protocol in C on a
             thread of its own) where the machine's C compiler builds it; else the Python
             reference, the reason said
    native   the native engine, or the transport refuses to start, saying why
    python   the Python reference (hostagent.collectives.reliable)

Chosen by TransportConfig(host_path=...), else the environment's AIFABRIC_HOST_PATH, else auto;
`open_transport(rank, peers, group, config)` makes the transport on the chosen path.
The library is built once per source text and compiler (cached in AIFABRIC_HOST_PATH_CACHE or
~/.cache/aifabric/hostpath; CC names the compiler) and loaded once per process. RoCEv2 framing
(TransportConfig(rocev2=True)) runs on either path; a process's groups on one address share its
port 4791, so they must all be on the same path (auto chooses the same for all).
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from hostagent.collectives.reliable import HOST_PATHS, ReliableTransport, TransportConfig

ENV = "AIFABRIC_HOST_PATH"


class HostPathUnavailable(RuntimeError):
    """host_path "native" and the native engine cannot run here; the message says why."""


@dataclass(frozen=True)
class Choice:
    path: str                           # "native" or "python"
    reason: str
    library: ctypes.CDLL | None = None  # the native engine's, when path is "native"


def requested(config) -> tuple[str, str]:
    """(mode, where it was asked for): the config's host_path, else AIFABRIC_HOST_PATH, else auto."""
    if config.host_path is not None:
        return config.host_path, "host_path"
    mode = os.environ.get(ENV, "").strip()
    if not mode:
        return "auto", "the default"
    if mode not in HOST_PATHS:
        raise ValueError(f"{ENV}={mode!r} is not one of {', '.join(HOST_PATHS)}")
    return mode, ENV


def choose(config) -> Choice:
    """The host path for a transport of `config`; HostPathUnavailable when "native" cannot be."""
    mode, where = requested(config)
    if mode == "python":
        return Choice("python", f"asked for ({where}=python)")
    for wanted, what in ((config.pause is not None, "honour PFC (pause)"), (config.repath, "move flows (repath)"),
                         (config.cc is not None, "run a congestion control (cc)"),
                         (config.qps > 1, "spread a peer over queue pairs (qps)")):
        if wanted:                        # the native engine does none of these
            if mode == "native":
                raise HostPathUnavailable(f"host path native ({where}) cannot {what}: the Python path does")
            return Choice("python", f"auto: the Python path alone can {what}")
    from hostagent.collectives.native import binding
    try:
        library, built = binding.library()
    except binding.BuildError as exc:
        why_not = f"the native engine did not build: {exc}"
    else:
        said = f"asked for ({where}=native)" if mode == "native" else "auto: the machine's C compiler built it"
        return Choice("native", f"{said}; {built}", library)
    if mode == "native":
        raise HostPathUnavailable(f"host path native ({where}) cannot run: {why_not}")
    return Choice("python", f"auto: {why_not}")


def open_transport(rank: int, peers: list[tuple[str, int]], group: int = 0,
                   config: TransportConfig = TransportConfig()) -> ReliableTransport:
    """A group's transport on the host path ``config`` chooses (`choose`): the native engine's
    NativeTransport or the Python reference, either saying which it is and why (host_path,
    host_path_reason); HostPathUnavailable when "native" was asked for and cannot run."""
    choice = choose(config)
    if choice.path == "native":
        from hostagent.collectives.native import NativeTransport
        transport: ReliableTransport = NativeTransport(rank, peers, group, config, library=choice.library)
    else:
        transport = ReliableTransport(rank, peers, group, config)
    transport.host_path, transport.host_path_reason = choice.path, choice.reason
    return transport
